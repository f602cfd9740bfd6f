"""The layer mixers the engine builds (torch-free, so validation can choose runnable cards without torch)."""

ENGINE_MIXERS = frozenset({"full", "sliding", "mamba2", "none"})  # cards with other mixers (or MLA) are refused
