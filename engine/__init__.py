"""roofline's micro-engine: real PyTorch runs of a model card's exact shapes.

Installed as `roofline.engine` (this folder is copied there in the wheel; a source checkout reaches it through the
shim in roofline/engine/). Subpackages: `core` (sequences, scheduler, block manager: torch-free, shared with the
serving simulation), `model` (the transformer and its kernels) and `measure` (step benchmarks, microbenchmarks).
Importing this package imports no torch; `roofline.engine.engine` (LLMEngine) does.
"""

DTYPE_NAMES = ("fp32", "bf16", "fp16", "fp64")  # the dtypes the engine runs (engine.DTYPES maps them to torch's)
# the ones a command offers: fp64 runs only in the engine's own precision tests (no KV format, kernel or
# calibration point of the predictor is in fp64)
COMMAND_DTYPES = ("fp32", "bf16", "fp16")


def check_dtype(name: str | None) -> None:
    """Refuse, before torch loads, a --dtype the engine does not run (None: the command's default)."""
    from roofline.errors import RooflineError

    if name is not None and name not in COMMAND_DTYPES:
        raise RooflineError(f"--dtype {name}: use one of {', '.join(COMMAND_DTYPES)}")


def load():
    """The engine's torch modules, imported on first use: `.engine` (LLMEngine), `.bench`, `.microbench`, `.device`,
    `.EngineError`, `.resolve_device(name)` and `.check_world(ranks, device)`. Without torch: one line naming the
    extra to install."""
    from types import SimpleNamespace

    from roofline.errors import RooflineError

    try:
        from roofline.engine.measure import bench, microbench
        from roofline.engine.model.transformer import EngineError

        from roofline.engine import device, engine
    except ImportError as err:
        raise RooflineError(f"this command runs the engine, which needs torch: pip install 'roofline[engine]' "
                            f"({err})") from None

    def resolve_device(name: str) -> str:
        try:
            return device.resolve(name)
        except EngineError as err:
            raise RooflineError(str(err)) from None

    def check_world(world: int, name: str) -> None:
        try:
            device.check_world(world, name)
        except EngineError as err:
            raise RooflineError(str(err)) from None

    return SimpleNamespace(engine=engine, bench=bench, microbench=microbench, device=device, EngineError=EngineError,
                           resolve_device=resolve_device, check_world=check_world)

if __name__ != "roofline.engine":  # a checkout's root on sys.path must not make a second, top-level `engine`
    raise ImportError("the micro-engine is `roofline.engine`; import it under that name")
