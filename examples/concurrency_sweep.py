"""Seed 000/001's concurrency tables on a DGX Spark (vLLM, max_tokens 512), predicted with the vectorised sweep.

Gemma 4 31B is NVIDIA's NVFP4 checkpoint: its name carries its layout (NVFP4 MLP, BF16 attention and embeddings)."""

import roofline

SEED = {  # model as the seed names it -> measured aggregate tok/s per concurrency
    "qwen2.5-3b": {1: 26.14, 4: 125.72, 8: 246.79, 16: 476.95, 32: 851.84, 64: 1462.30},
    "nvidia/Gemma-4-31B-IT-NVFP4": {1: 6.15, 4: 24.41, 8: 47.13, 16: 92.10, 32: 166.36},
}


def main() -> None:
    for model, measured in SEED.items():
        df = roofline.sweep([model], ["dgx-spark"], batches=list(measured), prompts=[128], output_tokens=512)
        print(f"{model} on dgx-spark")
        print(f"  {'N':>3} {'predicted agg':>13} {'measured':>9} {'error':>7} {'per-request':>11} {'ITL ms':>7}")
        for row in df.itertuples():
            got, want = row.decode_tok_s_aggregate, measured[row.batch]
            print(f"  {row.batch:>3} {got:>13.1f} {want:>9.2f} {100 * (got / want - 1):>+6.1f}% "
                  f"{row.decode_tok_s:>11.2f} {row.itl_s * 1e3:>7.1f}")


if __name__ == "__main__":
    main()
