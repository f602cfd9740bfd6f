"""roofline: how fast, does it fit, and why — LLM inference on any hardware, from cards and measurements."""

__version__ = "0.1.0"
