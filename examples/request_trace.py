"""Seed 000/001's request trace: a 500-token prompt and a 200-token answer, Llama 3.1 8B Q4 on a DGX Spark.

The seed measured TTFT ~66 ms, decode ~5.26 s (200 tokens at Ollama's 38 tok/s), total ~5.3 s.
"""

import roofline


def main() -> None:
    p = roofline.predict("llama-3.1-8b", "dgx-spark", quant="q4_k_m", prompt_tokens=500, output_tokens=200)
    print(f"{'phase':<10} {'expected':>12} {'ceiling':>12}")
    print(f"{'TTFT':<10} {p.ttft_s * 1e3:>10.0f} ms {p.ceiling.ttft_s * 1e3:>10.0f} ms")
    decode_s = p.e2e_s - p.ttft_s
    print(f"{'decode':<10} {decode_s:>11.2f} s {p.ceiling.e2e_s - p.ceiling.ttft_s:>11.2f} s")
    print(f"{'total':<10} {p.e2e_s:>11.2f} s {p.ceiling.e2e_s:>11.2f} s")
    print(f"decode {p.decode_tok_s:.1f} tok/s (seed: 38), prefill {p.prefill_tok_s:,.0f} tok/s (seed: 7,614); "
          f"prefill/decode = {p.prefill_tok_s / p.decode_tok_s:.0f}x (seed: ~200x)")


if __name__ == "__main__":
    main()
