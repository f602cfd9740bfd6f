"""Performance: the operator graph of a step, its roofline time, and request-level metrics (TTFT, ITL, tok/s)."""
