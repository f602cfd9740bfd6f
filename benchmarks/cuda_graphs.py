"""The issue's GPU targets, on one CUDA GPU (not run in CI; needs a GPU and ~20 GB free for llama-3.1-8b bf16):

    PYTHONPATH=. python benchmarks/cuda_graphs.py [--skip-calibrate]

1. whole-card llama-3.1-8b bf16 decode at batch 1: bytes streamed per step (weights + KV read) / step time, as a
   share of the microbenchmark's read bandwidth (target >= 75%), with CUDA graphs and eagerly;
2. the batch-32 decode step over the batch-1 step (target <= 1.3);
3. wall time of `roofline calibrate --device cuda --quick` (target <= 180 s).
Host and device (CUDA-event) seconds are printed side by side.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

CONTEXT = 512  # tokens cached per sequence when the decode steps are timed


def decode_steps(graphs: bool | None) -> dict:
    """Host and device seconds of decode steps at batch 1 and 32, and the bytes a batch-1 step streams."""
    import torch
    from roofline.engine.engine import LLMEngine
    from roofline.engine.measure.bench import measure_both

    from roofline.sizing.kv import kv_bytes
    from roofline.sizing.params import weight_bytes

    # the pool holds 32 sequences of CONTEXT + 22 tokens (measure_both's room): 2.3 GB of bf16 KV on this card
    eng = LLMEngine("llama-3.1-8b", dtype="bf16", device="cuda", max_num_seqs=32, graphs=graphs, max_kv_bytes=8e9)
    out = {"mode": eng.mode}
    for batch in (1, 32):
        out[batch] = measure_both(eng, "decode", batch, CONTEXT, 1, repeats=20)
    out["bytes"] = sum(weight_bytes(eng.card, "bf16").values()) + kv_bytes(eng.card, CONTEXT + 1, "bf16")
    del eng
    torch.cuda.empty_cache()
    return out


def main() -> None:
    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-calibrate", action="store_true")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("no CUDA device: this benchmark measures the issue's GPU targets and runs only on a GPU")
    from roofline.engine.measure import microbench

    read = microbench.bandwidth("cuda")["read_bytes_per_s"]
    print(f"{torch.cuda.get_device_name()}: microbenchmark read bandwidth {read / 1e9:,.0f} GB/s")
    for graphs in (None, False):
        r = decode_steps(graphs)
        (h1, d1, m1), (h32, d32, _) = r[1], r[32]
        print(f"[{r['mode']}] batch 1: host {h1 * 1e3:.2f} ms, device {d1 * 1e3:.2f} ms ({m1}); streams "
              f"{r['bytes'] / 1e9:.2f} GB -> {r['bytes'] / h1 / 1e9:,.0f} GB/s = {100 * r['bytes'] / h1 / read:.0f}% "
              f"of read (target >= 75%)")
        print(f"[{r['mode']}] batch 32: host {h32 * 1e3:.2f} ms, device {d32 * 1e3:.2f} ms; batch 32 / batch 1 = "
              f"{h32 / h1:.2f} (target <= 1.3)")
    if not args.skip_calibrate:
        env = {**os.environ, "ROOFLINE_HOME": tempfile.mkdtemp(prefix="roofline-cal-")}
        t = time.perf_counter()
        run = subprocess.run([sys.executable, "-m", "roofline", "calibrate", "--device", "cuda", "--quick", "--json"],
                             env=env, capture_output=True, text=True)
        print(f"calibrate --device cuda --quick: {time.perf_counter() - t:.0f} s (target <= 180 s), exit "
              f"{run.returncode}{'' if run.returncode == 0 else ': ' + run.stderr[-500:]}")


if __name__ == "__main__":
    main()
