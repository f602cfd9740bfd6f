"""Seed 000/001's vLLM concurrency tables on a DGX Spark (max_tokens 512) as closed-loop serving simulations:
N clients, each sending its next request when the last completes, through the vLLM preset's scheduler.
Prints simulated vs measured aggregate output tok/s per point (the issue's target: within 15%)."""

import roofline  # noqa: F401  (the package; the serving API below)
from roofline.cards.store import CardStore
from roofline.perf.serving.policy import policy_for
from roofline.perf.serving.run import build_fleet, serve
from roofline.perf.serving.workload import parse_lengths
from roofline.perf.workload import make_workload

SEED = {  # model, --quant -> measured aggregate tok/s per concurrency (seed 000 line 120, 001 line 298; 2026-05-21)
    ("qwen2.5-3b", "bf16"): {1: 26.14, 4: 125.72, 8: 246.79, 16: 476.95, 32: 851.84, 64: 1462.30},
    ("gemma-4-31b", "nvfp4"): {1: 6.15, 4: 24.41, 8: 47.13, 16: 92.10, 32: 166.36},
}
PROMPT_TOKENS = "128"  # the seed does not state its prompt ("same prompt"); a short chat prompt, as examples/concurrency_sweep.py
OUTPUT_TOKENS = "512"  # the seed's max_tokens
REQUESTS_PER_CLIENT = 3


def main() -> None:
    st = CardStore()
    hw = st.hardware("dgx-spark")
    worst = 0.0
    for (model, quant), measured in SEED.items():
        fleet = build_fleet(st.model(model), hw, make_workload(quant=quant), policy_for(st.runtime("vllm")))
        print(f"{model} {quant} on dgx-spark, vLLM preset, closed loop, {PROMPT_TOKENS} -> {OUTPUT_TOKENS} tokens")
        print(f"  {'N':>3} {'simulated tok/s':>15} {'seed tok/s':>10} {'error':>7} {'TPOT ms':>8}")
        for n, seed_tok_s in measured.items():
            r = serve(fleet, parse_lengths("--prompt", PROMPT_TOKENS), parse_lengths("--output", OUTPUT_TOKENS),
                      REQUESTS_PER_CLIENT * n, concurrency=n).summary()
            err = (r["output_tok_s"] - seed_tok_s) / seed_tok_s
            worst = max(worst, abs(err))
            print(f"  {n:>3} {r['output_tok_s']:>15.1f} {seed_tok_s:>10.2f} {err:>+7.1%} {r['tpot_s']['mean'] * 1e3:>8.1f}")
    print(f"largest |error|: {worst:.1%} (target 15%)")


if __name__ == "__main__":
    main()
