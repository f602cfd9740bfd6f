"""Weight-only int8 / int4 matmul vs the float matmul, per path, with the weight bandwidth achieved.

    python benchmarks/quant_matmul.py              # decode (1 row) and prefill (512 rows) shapes
    python benchmarks/quant_matmul.py --full       # also time the fp32 packed kernels at prefill (minutes)

For each shape and activation dtype (fp32, bf16) it times: the float ``F.linear`` (weight in that dtype),
then for int8 and int4 (group 128) the packed torch kernel (``kernel_policy="packed"``), the
dequantise-then-matmul fallback (``"dequant"``) and what ``"auto"`` picks.  GB/s = bytes of weight the
layer holds (``weight_bytes``: codes + scales/zeros; the float weight for the dense row) / time -- the
number that bounds decode.  Times are the best of --repeats after a warm-up.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
from roofline.engine.model.quant import QuantLinear, weight_bytes  # noqa: E402

SHAPES = [  # (label, rows, in, out)
    ("decode  up/gate", 1, 4096, 14336),
    ("decode  down", 1, 14336, 4096),
    ("decode  o_proj", 1, 4096, 4096),
    ("prefill up/gate", 512, 4096, 14336),
    ("prefill o_proj", 512, 4096, 4096),
]
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def _busy() -> tuple[float, float, float]:
    with open("/proc/stat") as f:
        fields = [float(x) for x in f.readline().split()[1:]]
    busy = (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")
    own = resource.getrusage(resource.RUSAGE_SELF)
    return busy, own.ru_utime + own.ru_stime, time.perf_counter()


def contention(start) -> str:
    busy, own, wall = (b - a for a, b in zip(start, _busy()))
    share = max(busy - own, 0.0) / (wall * (os.cpu_count() or 1))
    flag = "" if share < 0.05 else "  <- shared machine: times are pessimistic"
    return f"other processes used {share:.0%} of the CPUs during the run{flag}"


def best_ms(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--full", action="store_true", help="time fp32 packed kernels at prefill too (slow)")
    ap.add_argument("--group-size", type=int, default=128)
    ap.add_argument("--only", default="", help="run only shapes whose label contains this (e.g. decode)")
    args = ap.parse_args()
    torch.manual_seed(0)
    start = _busy()
    cap = torch.backends.cpu.get_cpu_capability()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU capability {cap}")
    hdr = f"{'shape':16} {'x':>11} {'W':>12} {'dtype':5} {'path':14} {'kernel used':16} {'ms':>9} {'MB':>7} {'GB/s':>6} {'vs dense':>8}"
    print(hdr)
    print("-" * len(hdr))
    for label, rows, k, n in SHAPES:
        if args.only not in label:
            continue
        base = torch.nn.Linear(k, n, bias=False)
        for dname, dt in DTYPES.items():
            lin = base.to(dt)
            x = torch.randn(rows, k).to(dt)
            shape = (label, f"[{rows},{k}]", f"{k}->{n}", dname)

            def row(path, kernel, ms, nbytes, dense_ms, note=""):
                gbs = nbytes / ms / 1e6
                vs = f"{dense_ms / ms:.2f}x" if ms == ms else ""
                print(f"{shape[0]:16} {shape[1]:>11} {shape[2]:>12} {shape[3]:5} {path:14} {kernel:16} "
                      f"{ms:9.2f} {nbytes / 1e6:7.1f} {gbs:6.1f} {vs:>8}{note}", flush=True)

            with torch.no_grad():
                dense_ms = best_ms(lambda: lin(x), args.repeats)
                row("dense", "F.linear", dense_ms, weight_bytes(lin), dense_ms)
                for fmt in ("int8", "int4"):
                    q = QuantLinear(lin, fmt, args.group_size, kernel_policy="packed")
                    nb = weight_bytes(q)
                    for policy in ("packed", "dequant", "auto"):
                        q.kernel_policy = policy
                        if policy == "packed" and dt == torch.float32 and rows > 8 and not args.full:
                            # the fp32 CPU kernels are scalar and linear in rows: estimate from 4 rows
                            ms4 = best_ms(lambda: q(x[:4]), 1)
                            row(f"{fmt} {policy}", q.kernel, ms4 * rows / 4, nb, dense_ms, "  (estimated from 4 rows)")
                            continue
                        ms = best_ms(lambda: q(x), args.repeats if policy != "packed" or rows <= 64 else 2)
                        row(f"{fmt} {policy}", q.kernel, ms, nb, dense_ms)
                    del q
            del lin
    print(contention(start))


if __name__ == "__main__":
    main()
