"""The micro-engine (the only code that imports torch). Placeholder until the engine issue lands."""
