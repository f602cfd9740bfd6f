"""Which device the engine runs on, and what it is called: the torch queries the CLI needs, kept in engine/."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

import torch
from roofline.engine.model.transformer import EngineError

M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4  # glibc mallopt() parameters (<malloc.h>)
KEPT_BYTES = 1 << 30  # free memory the heap keeps at its top: a step's buffers (tens to hundreds of MB) stay mapped


def resolve(choice: str) -> str:
    """'auto' -> cuda when torch sees a GPU, else cpu; refuse cuda without one."""
    if choice == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if choice not in ("cpu", "cuda"):
        raise EngineError(f"--device {choice}: use auto, cpu or cuda")
    if choice == "cuda" and not torch.cuda.is_available():
        raise EngineError("--device cuda: no CUDA device is visible to torch; use --device cpu")
    return choice


def check_world(world: int, device: str) -> None:
    """Refuse `world` ranks that `device` cannot hold, before any work: one per CUDA device, at most one per core."""
    if device == "cuda" and torch.cuda.device_count() < world:
        raise EngineError(f"--tp {world}: only {torch.cuda.device_count()} CUDA devices are visible")
    cores = os.cpu_count() or 1
    if device == "cpu" and world > max(cores, 2):  # two ranks run (slowly) on one core; thousands do not
        raise EngineError(f"--tp {world}: a CPU run spawns one process per rank; this host has {cores} cores")


def name(device: str) -> str:
    """'NVIDIA H100 80GB HBM3' (matches the hardware cards' aliases) or the CPU's model name."""
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    from roofline.cards.host import _cpuinfo

    return _cpuinfo()[0]


def versions() -> dict:
    return {"torch": str(torch.__version__), "driver": torch.version.cuda or "cpu"}


def keep_freed_memory() -> bool:
    """Make glibc serve large CPU tensors from its heap and keep up to KEPT_BYTES of what is freed, instead of
    mapping fresh pages for each one and returning them: a step's activations and gathered K/V are re-faulted
    page by page otherwise (3-8x slower gathers; docs/engine.md). Process-wide; returns False where it cannot
    apply."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(M_MMAP_MAX, 0)) and bool(libc.mallopt(M_TRIM_THRESHOLD, KEPT_BYTES))
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
