"""roofline's micro-engine: real PyTorch runs of a model card's exact shapes.

Installed as `roofline.engine` (this folder is copied there in the wheel; a source checkout reaches it through the
shim in roofline/engine/). Subpackages: `core` (sequences, scheduler, block manager: torch-free, shared with the
serving simulation), `model` (the transformer and its kernels) and `measure` (step benchmarks, microbenchmarks).
Importing this package imports no torch; `roofline.engine.engine` (LLMEngine) does.
"""

if __name__ != "roofline.engine":  # a checkout's root on sys.path must not make a second, top-level `engine`
    raise ImportError("the micro-engine is `roofline.engine`; import it under that name")
