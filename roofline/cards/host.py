"""A hardware card for the machine roofline runs on (`--hw host`): CPU features from /proc/cpuinfo, memory from
/proc/meminfo, read bandwidth measured in well under a second. `roofline calibrate` replaces the estimated peaks
with measured ones."""

from __future__ import annotations

import os
import re
import time
from functools import lru_cache

import numpy as np

from roofline.cards.hardware import HardwareCard

# FLOP per cycle per core for fp32 FMA: 2 FMA units x (16 lanes AVX-512 | 8 lanes AVX2) x 2 (Intel/AMD optimisation
# manuals); AMX tiles: 1024 bf16 FLOP / 2048 int8 ops per cycle per core (Intel AMX, Sapphire Rapids).
FP32_FLOP_PER_CYCLE = {"avx512f": 64, "avx2": 32}
AMX_BF16_FLOP_PER_CYCLE, AMX_INT8_OP_PER_CYCLE = 1024, 2048


def _cpuinfo() -> tuple[str, set[str], float]:
    text = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    name = re.search(r"model name\s*:\s*(.+)", text)
    flags = re.search(r"flags\s*:\s*(.+)", text)
    mhz = re.search(r"cpu MHz\s*:\s*([\d.]+)", text)
    bogo = re.search(r"bogomips\s*:\s*([\d.]+)", text, re.I)
    ghz = float(mhz.group(1)) / 1e3 if mhz else (float(bogo.group(1)) / 2e3 if bogo else 2.0)
    return (name.group(1).strip() if name else "unknown CPU"), set(flags.group(1).split() if flags else ()), ghz


def _mem_total() -> float:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return float(line.split()[1]) * 1024
    return 8e9


# a container's memory limit and use (cgroup v2, then v1); MemAvailable counts the whole machine's
CGROUP_LIMITS = (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                 ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"))


def available_bytes() -> float:
    """Bytes a new allocation can take on this host: /proc/meminfo MemAvailable, capped by the container's cgroup
    limit less its use where one is set."""
    free = float("inf")
    try:
        with open("/proc/meminfo") as f:
            free = next((float(ln.split()[1]) * 1024 for ln in f if ln.startswith("MemAvailable:")), free)
    except OSError:
        pass
    for limit_path, used_path in CGROUP_LIMITS:
        try:
            with open(limit_path) as lim, open(used_path) as used:
                limit = lim.read().strip()
                if limit != "max":
                    free = min(free, float(limit) - float(used.read().strip()))
                break
        except (OSError, ValueError):
            continue
    return free if free != float("inf") else _mem_total()


def measure_read_bandwidth(nbytes: int = 256 * 2**20, repeats: int = 3) -> float:
    """Bytes/s of a streaming read (numpy sum over a buffer far beyond L2), best of `repeats`."""
    buf = np.ones(nbytes // 8, dtype=np.float64)
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        buf.sum()
        best = min(best, time.perf_counter() - t)
    return nbytes / best


@lru_cache(maxsize=1)
def host_card() -> HardwareCard:
    name, flags, ghz = _cpuinfo()
    cores = os.cpu_count() or 1
    simd = next((k for k in FP32_FLOP_PER_CYCLE if k in flags), None)
    fp32 = cores * ghz * 1e9 * FP32_FLOP_PER_CYCLE.get(simd, 8)
    peaks = {"fp32": fp32, "bf16": fp32, "fp16": fp32}
    if "amx_bf16" in flags:
        peaks["bf16"] = cores * ghz * 1e9 * AMX_BF16_FLOP_PER_CYCLE
    if "amx_int8" in flags:
        peaks["int8"] = cores * ghz * 1e9 * AMX_INT8_OP_PER_CYCLE
    bw = measure_read_bandwidth()
    return HardwareCard.model_validate({
        "name": "host-cpu", "aliases": ["host", name], "vendor": (re.match(r"[A-Za-z]+", name) or re.match(".*", "cpu")).group(0).lower(),
        "kind": "cpu", "description": f"this machine: {name}, {cores} cores @ {ghz:.2f} GHz, flags {simd or 'scalar'}"
        + (" + AMX" if "amx_bf16" in flags else ""),
        "memory": {"capacity": _mem_total(), "bandwidth": bw, "type": "system RAM"},
        "peak_flops": peaks,
        "sources": {"memory.capacity": "/proc/meminfo MemTotal",
                    "memory.bandwidth": "measured now: numpy sum over 256 MiB, best of 3",
                    "peak_flops": f"estimated: {cores} cores x {ghz:.2f} GHz x FLOP/cycle from the ISA "
                                  f"(fp32 {FP32_FLOP_PER_CYCLE.get(simd, 8)}, AMX bf16 1024, int8 2048)"},
        "uncertain": {"peak_flops": "ISA peaks at the nominal clock; run `roofline calibrate` to measure",
                      "memory.bandwidth": "a 0.3 s single-threaded measurement; calibrate measures it properly"},
    })
