"""Measurements: engine steps timed as LLMEngine runs them (bench) and hardware microbenchmarks (microbench)."""
