"""Where one engine step's time goes: torch.profiler over the steps `roofline.engine.measure.bench.measure` times.

    python benchmarks/profile_step.py                                   # llama-3.1-8b, 1 layer, decode batch 1
    python benchmarks/profile_step.py --model mixtral-8x7b --phase prefill --batch 1 --tokens 160 --device cuda

Prints the operators that took the most host (CPU) time and, on CUDA, device time, and the step's wall time: a step
whose wall time far exceeds its device time is bound by the host (dispatch, syncs). On an H100 (torch 2.11), whole
32-layer llama-3.1-8b decode at batch 1 spent 54 ms of host time per step (1,200 kernel launches) for 8.4 ms of
device time: the eager engine is host-bound there.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from roofline.engine.engine import LLMEngine  # noqa: E402
from roofline.engine.measure.bench import measure  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--phase", default="decode", choices=["prefill", "decode"])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--tokens", type=int, default=128, help="new tokens per sequence (prefill)")
    ap.add_argument("--rows", type=int, default=15, help="operators listed")
    args = ap.parse_args()
    eng = LLMEngine(args.model, layers=args.layers, vocab=args.vocab, dtype=args.dtype, device=args.device,
                    max_num_seqs=max(args.batch, 1), max_step_tokens=max(2048, args.batch * args.tokens),
                    max_kv_bytes=2e9)
    shape = (args.phase, args.batch, args.context, args.tokens)
    measure(eng, *shape, repeats=3)  # warm: kernels for these shapes
    cuda = args.device.startswith("cuda")
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=acts) as prof:
        seconds = measure(eng, *shape, repeats=3)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))
    if cuda:
        print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=args.rows))
    # the tables' totals cover the 4 profiled steps (measure runs a warm-up step and 3 timed steps)
    print(f"step {seconds * 1e3:.2f} ms wall (median of 3, unprofiled would be faster); totals above / 4 per step")


if __name__ == "__main__":
    main()
