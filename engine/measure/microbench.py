"""Micro-benchmarks of the device: sustained read/copy bandwidth, GEMM FLOP/s per dtype over shapes (thin to
square), attention at several context lengths, and the fixed cost of one kernel launch."""

from __future__ import annotations

import math
import os
import statistics
import time
from typing import Callable

import torch

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timeit(fn: Callable[[], object], device: str, repeats: int = 5, min_seconds: float = 0.05,
           best: bool = False) -> float:
    """Median (or with `best`, least) seconds per call after one warm-up, looping short calls until each sample
    lasts `min_seconds`."""
    fn()
    _sync(device)
    t = time.perf_counter()
    fn()
    _sync(device)
    once = max(time.perf_counter() - t, 1e-7)
    loops = max(1, int(min_seconds / once))
    samples = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(loops):
            fn()
        _sync(device)
        samples.append((time.perf_counter() - t) / loops)
    return min(samples) if best else statistics.median(samples)


def bandwidth(device: str, nbytes: int = 1 << 30) -> dict:
    """Read and copy bandwidth over a buffer far beyond the last-level cache, bytes/s, each the best of 5 samples
    (a bus ceiling is only ever under-measured). Read is the better of a sum and a matrix-vector product over the
    buffer (a sum's median varies by a third from run to run on a shared VM; docs/engine.md)."""
    x = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    y = torch.empty_like(x)
    w, v = x.view(-1, 4096), torch.ones(4096, device=device)
    sum_read = nbytes / timeit(lambda: x.sum(), device, best=True)
    mv_read = nbytes / timeit(lambda: torch.mv(w, v), device, best=True)
    copy = 2 * nbytes / timeit(lambda: y.copy_(x), device, best=True)
    return {"read_bytes_per_s": max(sum_read, mv_read), "sum_read_bytes_per_s": sum_read,
            "mv_read_bytes_per_s": mv_read, "copy_bytes_per_s": copy, "buffer_bytes": nbytes}


GEMM_SHAPES = ((1, 4096, 4096), (16, 4096, 4096), (128, 4096, 4096), (512, 4096, 4096), (2048, 4096, 4096))


def gemm(device: str, dtypes=("fp32", "bf16"), shapes=GEMM_SHAPES) -> dict:
    """FLOP/s of x[m, k] @ w[k, n] per dtype and shape; 'peak' = the best shape."""
    out = {}
    for name in dtypes:
        dt = DTYPES[name]
        rates = {}
        for m, k, n in shapes:
            a, b = torch.randn(m, k, device=device, dtype=dt), torch.randn(k, n, device=device, dtype=dt)
            rates[f"{m}x{k}x{n}"] = 2 * m * k * n / timeit(lambda: a @ b, device, repeats=3)
        out[name] = {"by_shape": rates, "peak_flop_per_s": max(rates.values())}
    return out


def attention(device: str, dtype: str = "fp32", contexts=(256, 1024, 4096), heads: int = 32, head_dim: int = 128) -> dict:
    """FLOP/s of causal SDPA over `contexts` (4 x heads x head_dim x L^2 / 2 FLOP)."""
    dt = DTYPES[dtype]
    rates = {}
    for length in contexts:
        q = torch.randn(1, heads, length, head_dim, device=device, dtype=dt)
        sec = timeit(lambda: torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True), device, 3)
        rates[str(length)] = 4 * heads * head_dim * length * length / 2 / sec
    return {"dtype": dtype, "by_context": rates}


ACTIVATION_SHAPE = (2048, 6912)  # [tokens, inner] of the probe: a 2,048-token prefill step through Gemma-3-1B's MLP
ACTIVATION_ROUNDS = 5  # best of this many interleaved rounds per function


def activations(device: str, dtype: str, shape=ACTIVATION_SHAPE) -> dict:
    """Seconds of the engine's gated activation pass (act(gate) * up, `modules.activate`) per activation function,
    over a fused [tokens, 2 inner] projection: elementwise kernels differ by function (tanh-GELU is compute-bound on
    CPUs), which the op graph's bytes alone cannot tell."""
    from roofline.engine.model.modules import ACTIVATIONS, activate

    h = torch.randn(shape[0], 2 * shape[1], device=device, dtype=DTYPES[dtype])
    best = {name: math.inf for name in ACTIVATIONS}
    for _ in range(ACTIVATION_ROUNDS):  # interleaved: a slow spell or the first call's warm-up hits every function
        for name, act in ACTIVATIONS.items():
            best[name] = min(best[name], timeit(lambda act=act: activate(act, h, True), device, repeats=1,
                                                min_seconds=0.02, best=True))
    return best


def launch_overhead(device: str) -> float:
    """Seconds for one tiny kernel (the fixed cost of a launch / an op dispatch)."""
    x = torch.ones(8, device=device)
    return timeit(lambda: x.add_(1.0), device, repeats=5, min_seconds=0.02)


class Contention:
    """CPU time other processes used while this one ran (from /proc/stat minus our own rusage): benchmarks on a
    shared machine are only meaningful when this stays near zero."""

    def __init__(self):
        self.start = self._sample()

    @staticmethod
    def _sample() -> tuple[float, float, float]:
        import resource

        with open("/proc/stat") as f:
            fields = [float(x) for x in f.readline().split()[1:]]
        ticks = os.sysconf("SC_CLK_TCK")
        busy = (sum(fields) - fields[3] - fields[4]) / ticks  # all but idle and iowait
        own = resource.getrusage(resource.RUSAGE_SELF)
        return busy, own.ru_utime + own.ru_stime, time.perf_counter()

    def _other(self) -> tuple[float, float, float]:
        """(CPU-seconds other processes used, wall seconds, their share of the machine) since the start."""
        busy, own, wall = (b - a for a, b in zip(self.start, self._sample()))
        other = max(busy - own, 0.0)
        return other, wall, other / (wall * (os.cpu_count() or 1))

    def share(self) -> float:
        return self._other()[2]

    def report(self) -> str:
        other, wall, share = self._other()
        return f"other processes used {other:.1f} CPU-s in {wall:.0f} s ({share:.0%} of the machine)"


def undisturbed(fn, want: int = 1, tries: int = 6, pause_s: float = 5.0) -> tuple[float, object, int]:
    """(seconds, result, discarded) of the fastest of `want` runs during which other processes used < 5% of the
    machine; a disturbed run is discarded and retried after a pause, `tries` runs at most (then the fastest)."""
    clean, dirty = [], []
    for _ in range(tries):
        load, t = Contention(), time.perf_counter()
        result = fn()
        run, disturbed = (time.perf_counter() - t, result), load.share() >= 0.05
        (dirty if disturbed else clean).append(run)
        if len(clean) >= want:
            break
        if disturbed:
            time.sleep(pause_s)
    seconds, result = min(clean or dirty, key=lambda r: r[0])
    return seconds, result, len(dirty)


# message sizes of the all-reduce sweep, bytes: a decode step's activations (1 token x 4096 hidden x 2-4 bytes = 8-16
# KB) up to a prefill chunk's (2048 x 4096 x 4 = 32 MiB)
ALL_REDUCE_BYTES = (1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 25)


def all_reduce(device: str, world: int = 2, sizes=ALL_REDUCE_BYTES, repeats: int = 20) -> list[dict]:
    """Seconds of an all-reduce (sum, fp32) of each message size over `world` processes (gloo on the CPU, NCCL on
    CUDA): [{"bytes", "seconds"}], each the median of `repeats` after two warm-ups, as rank 0 sees it."""
    from roofline.engine.parallel import run_ranks

    return run_ranks(world, device, _time_all_reduce, tuple(sizes), repeats)


def _time_all_reduce(rank: int, world: int, device: str, sizes: tuple, repeats: int) -> list[dict]:
    import torch.distributed as dist

    out = []
    for nbytes in sizes:
        x = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
        samples = []
        for i in range(repeats + 2):
            dist.barrier()  # every rank starts together: the time is the collective's, not a straggler's
            _sync(device)
            t = time.perf_counter()
            dist.all_reduce(x)
            _sync(device)
            if i >= 2:
                samples.append(time.perf_counter() - t)
        out.append({"bytes": nbytes, "seconds": statistics.median(samples)})
    return out


def rank_share(device: str, world: int = 2, nbytes: int = 1 << 28) -> dict:
    """What one of `world` ranks sharing this device measures while the others run the same benchmark (a CPU's
    ranks share its cores and memory bus): read bandwidth and the fp32 GEMM peak, rank 0's figures."""
    from roofline.engine.parallel import run_ranks

    return run_ranks(world, device, _rank_figures, nbytes)


def _rank_figures(rank: int, world: int, device: str, nbytes: int) -> dict:
    import torch.distributed as dist

    dist.barrier()
    read = bandwidth(device, nbytes)["read_bytes_per_s"]
    dist.barrier()
    return {"read_bytes_per_s": read, "gemm_fp32_flop_per_s": gemm(device, ("fp32",))["fp32"]["peak_flop_per_s"]}
