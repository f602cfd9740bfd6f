"""Which device the engine runs on, and what it is called: the torch queries the CLI needs, kept in engine/."""

from __future__ import annotations

import torch

from .model import EngineError


def resolve(choice: str) -> str:
    """'auto' -> cuda when torch sees a GPU, else cpu; refuse cuda without one."""
    if choice == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if choice not in ("cpu", "cuda"):
        raise EngineError(f"--device {choice}: use auto, cpu or cuda")
    if choice == "cuda" and not torch.cuda.is_available():
        raise EngineError("--device cuda: no CUDA device is visible to torch; use --device cpu")
    return choice


def name(device: str) -> str:
    """'NVIDIA H100 80GB HBM3' (matches the hardware cards' aliases) or the CPU's model name."""
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    from roofline.host import _cpuinfo

    return _cpuinfo()[0]


def versions() -> dict:
    return {"torch": str(torch.__version__), "driver": torch.version.cuda or "cpu"}
