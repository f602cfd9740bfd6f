"""Seed 000/001's vLLM concurrency tables on a DGX Spark (max_tokens 512) as closed-loop serving simulations:
N clients, each sending its next request when the last completes, through the vLLM runtime profile (its scheduler
limits and its efficiency on this hardware: runtimes/vllm.yaml fits vLLM's prompt efficiencies on NVIDIA SoCs but no
bandwidth, which stays the SoC default). The tables are a check: nothing here is fitted to them.
Prints simulated vs measured aggregate output tok/s per point as a markdown table (the issue's target: 15%)."""

import roofline  # noqa: F401  (the package; the serving API below)
from roofline.cards.store import CardStore
from roofline.perf.efficiency import expected_efficiency
from roofline.perf.serving.policy import policy_for
from roofline.perf.serving.run import build_fleet, serve
from roofline.perf.serving.workload import parse_lengths
from roofline.perf.workload import make_workload

# model -> measured aggregate tok/s per concurrency (seed 000 line 120, 001 line 298; 2026-05-21). The seed names
# "Gemma 4 31B IT in NVFP4" without its checkpoint; NVIDIA's is the published one (its attention stays BF16: the
# gemma-4-31b card's `checkpoints` entry), so the name carries its formats
SEED = {
    "qwen2.5-3b": {1: 26.14, 4: 125.72, 8: 246.79, 16: 476.95, 32: 851.84, 64: 1462.30},
    "nvidia/Gemma-4-31B-IT-NVFP4": {1: 6.15, 4: 24.41, 8: 47.13, 16: 92.10, 32: 166.36},
}
PROMPT_TOKENS = "128"  # the seed does not state its prompt ("same prompt"); a short chat prompt, as examples/concurrency_sweep.py
OUTPUT_TOKENS = "512"  # the seed's max_tokens
REQUESTS_PER_CLIENT = 3


def main() -> None:
    st = CardStore()
    hw, vllm = st.hardware("dgx-spark"), st.runtime("vllm")
    eff = expected_efficiency(hw, vllm)
    print(f"runtime {vllm.label} on dgx-spark: efficiency from {eff.source}; closed loop, {PROMPT_TOKENS} -> "
          f"{OUTPUT_TOKENS} tokens, {REQUESTS_PER_CLIENT} requests per client\n")
    print("| model | weights | clients | measured tok/s | simulated tok/s | error | static-batch tok/s | error | "
          "simulated TPOT ms |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    errors, static_errors = [], []
    for model, measured in SEED.items():
        card, quant = st.model_and_format(model)
        wl = make_workload(quant=quant)
        fleet = build_fleet(card, hw, wl, policy_for(vllm), eff=eff)
        for n, seed_tok_s in measured.items():
            r = serve(fleet, parse_lengths("--prompt", PROMPT_TOKENS), parse_lengths("--output", OUTPUT_TOKENS),
                      REQUESTS_PER_CLIENT * n, concurrency=n).summary()
            static = _static_tok_s(card, hw, quant, n, eff)
            err, static_err = (r["output_tok_s"] - seed_tok_s) / seed_tok_s, (static - seed_tok_s) / seed_tok_s
            errors.append(abs(err))
            static_errors.append(abs(static_err))
            print(f"| {card.name} | {quant or 'bf16'} | {n} | {seed_tok_s:,.2f} | {r['output_tok_s']:,.1f} | {err:+.1%} | "
                  f"{static:,.1f} | {static_err:+.1%} | {r['tpot_s']['mean'] * 1e3:.1f} |")
    within = sum(e <= 0.15 for e in errors)
    print(f"\n{within} of {len(errors)} points within 15% (simulated); largest |error| {max(errors):.1%} simulated, "
          f"{max(static_errors):.1%} static batch")


def _static_tok_s(card, hw, quant: str, n: int, eff) -> float:
    """`sweep --static`'s aggregate output tok/s: one batch of n requests (prefill + decode, start to finish)."""
    import numpy as np

    from roofline.perf.grid import sweep_arrays

    wl = make_workload(prompt_tokens=int(PROMPT_TOKENS), output_tokens=int(OUTPUT_TOKENS), quant=quant)
    b = np.array([n], float)
    return float(sweep_arrays(card, hw, wl, b, np.full_like(b, wl.prompt_tokens), eff=eff)["decode_tok_s_aggregate"][0])


if __name__ == "__main__":
    main()
