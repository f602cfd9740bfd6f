"""Vectorised sweep throughput: (model, hardware, batch, prompt) points per second (target >= 200,000).

    python benchmarks/sweep_speed.py
"""

import time

import numpy as np

import roofline

MODELS = ["llama-3.1-8b", "llama-3.3-70b", "gpt-oss-20b", "deepseek-v3", "nemotron-3-nano", "gemma-3-27b"]
HARDWARE = ["dgx-spark", "h100-sxm", "b200", "rtx-4090", "apple-m3-ultra"]


def main() -> None:
    batches, prompts = np.arange(1, 129), np.arange(128, 128 * 129, 128)
    roofline.sweep(MODELS[:1], HARDWARE[:1], batches[:2], prompts[:2])  # imports and card loads out of the timing
    t = time.perf_counter()
    df = roofline.sweep(MODELS, HARDWARE, batches, prompts)
    dt = time.perf_counter() - t
    print(f"{len(df):,} points ({len(MODELS)} models x {len(HARDWARE)} hardware x {len(batches)} batches x "
          f"{len(prompts)} prompts) in {dt:.2f} s = {len(df) / dt:,.0f} points/s (target >= 200,000), "
          f"each with TTFT, ITL averaged over 16 decode contexts, tok/s and memory")


if __name__ == "__main__":
    main()
