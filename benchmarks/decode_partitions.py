"""Decode steps replayed as CUDA graphs under the split decode kernel's partition policies (needs a CUDA GPU): the
default (`paged_kernel.partitions`: 4-8 blocks a partition) against fixed partitions of N blocks
(`paged_kernel.PARTITION_BLOCKS`). Whole qwen2.5-7b bf16 at `--context` cached tokens, at batches on and between the
graph buckets. Why: docs/calibration.md, "NVIDIA H200".

    PYTHONPATH=. python benchmarks/decode_partitions.py [--model qwen2.5-7b] [--blocks 4 8 16] [--context 512]
    # ~25 s on an H200

Prints one line per (policy, batch): host and device milliseconds (median of 20 steps) and the partitions used.
"""

from __future__ import annotations

import argparse
import sys

CONTEXT = 512  # tokens cached per sequence (default)
BATCHES = (1, 4, 5, 8, 9, 16, 32)


def main() -> None:
    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen2.5-7b")
    ap.add_argument("--blocks", type=int, nargs="*", default=[4, 8, 16], help="fixed partition sizes to try")
    ap.add_argument("--context", type=int, default=CONTEXT, help="tokens cached per sequence")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("no CUDA device: this benchmark times CUDA-graph decode steps")
    from roofline.engine.engine import LLMEngine
    from roofline.engine.measure.bench import measure_both
    from roofline.engine.model import paged_kernel

    from roofline.perf.graph_buckets import bucket_for

    eng = LLMEngine(args.model, dtype="bf16", device="cuda", max_num_seqs=max(BATCHES), max_kv_bytes=8e9)
    runner = eng.decode_runner
    kv_heads = eng.card.architecture.attention.num_kv_heads
    for fixed in [None, *args.blocks]:
        paged_kernel.PARTITION_BLOCKS = fixed
        runner.graphs.clear()  # recaptured at each bucket's first step under this policy
        runner.pool = None
        for batch in BATCHES:
            host, device, mode = measure_both(eng, "decode", batch, args.context, 1, repeats=20)
            bucket = bucket_for(batch, runner.buckets)
            parts, per_part = paged_kernel.partitions(bucket, kv_heads, runner.max_blocks)
            print(f"partitions {fixed or 'default':>7} batch {batch:2d}: host {host * 1e3:6.2f} ms, device "
                  f"{device * 1e3:6.2f} ms ({mode}; bucket {bucket}: {parts} partitions of {per_part} blocks)",
                  flush=True)


if __name__ == "__main__":
    main()
