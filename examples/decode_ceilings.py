"""Seed 000/001's table: theoretical decode maximum on a DGX Spark = 273 GB/s / bytes read per token."""

import roofline

ROWS = [  # model, --quant, the seed's ceiling
    ("llama-3.1-8b", "q4_k_m", 61),
    ("gpt-oss-20b", None, 75),  # native: MXFP4 experts, bf16 attention
    ("llama-3.3-70b", "nvfp4", 6.8),
    ("nemotron-3-super-120b-a12b", "default=nvfp4", 45),
]


def main() -> None:
    print(f"{'model':<28} {'resident GB':>11} {'read/token GB':>13} {'ceiling tok/s':>13} {'seed':>6}")
    for model, quant, seed in ROWS:
        p = roofline.predict(model, "dgx-spark", quant=quant, prompt_tokens=1, output_tokens=1)
        print(f"{model:<28} {p.weights_bytes / 1e9:>11.1f} {p.phases['decode'].bytes / 1e9:>13.2f} "
              f"{p.ceiling.decode_tok_s:>13.1f} {seed:>6}")


if __name__ == "__main__":
    main()
