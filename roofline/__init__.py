"""roofline: how fast, does it fit, and why — LLM inference on any hardware, from cards and measurements.

    import roofline
    p = roofline.predict("llama-3.3-70b", "dgx-spark", quant="nvfp4", prompt_tokens=500, output_tokens=200)
    df = roofline.sweep(["llama-3.1-8b"], ["h100-sxm", "dgx-spark"], batches=[1, 8, 64], prompts=[512, 4096])
"""

__version__ = "0.1.0"

_LAZY = {"predict": "api", "sweep": "api", "Workload": "workload", "Prediction": "request", "CardStore": "cards",
         "HardwareCard": "hardware", "ModelCard": "modelcard", "RooflineError": "errors"}
__all__ = ["__version__", *_LAZY]


def __getattr__(name: str):
    """Import the API on first use, so `roofline --version` and the CLI start fast."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'roofline' has no attribute {name!r}")
