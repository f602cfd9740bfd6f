"""Seed 000/001's concurrency tables on a DGX Spark (vLLM, max_tokens 512), predicted with the vectorised sweep."""

import roofline

SEED = {  # model, --quant -> measured aggregate tok/s per concurrency
    ("qwen2.5-3b", "bf16"): {1: 26.14, 4: 125.72, 8: 246.79, 16: 476.95, 32: 851.84, 64: 1462.30},
    ("gemma-4-31b", "nvfp4"): {1: 6.15, 4: 24.41, 8: 47.13, 16: 92.10, 32: 166.36},
}


def main() -> None:
    for (model, quant), measured in SEED.items():
        df = roofline.sweep([model], ["dgx-spark"], batches=list(measured), prompts=[128], quant=quant,
                            output_tokens=512)
        print(f"{model} {quant} on dgx-spark")
        print(f"  {'N':>3} {'predicted agg':>13} {'measured':>9} {'per-request':>11} {'ITL ms':>7}")
        for row in df.itertuples():
            print(f"  {row.batch:>3} {row.decode_tok_s_aggregate:>13.1f} {measured[row.batch]:>9.2f} "
                  f"{row.decode_tok_s:>11.2f} {row.itl_s * 1e3:>7.1f}")


if __name__ == "__main__":
    main()
