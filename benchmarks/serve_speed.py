"""Speed of the serving simulator (issue 15's targets on the 2-core CI machine): 10,000 chat-like requests on
llama-3.3-70b in <= 5 s, and a `capacity` search over >= 20 configurations in <= 60 s."""

import time

from roofline.cards.store import CardStore
from roofline.perf.serving.capacity import capacity
from roofline.perf.serving.policy import policy_for
from roofline.perf.serving.run import build_fleet, serve
from roofline.perf.serving.workload import parse_lengths
from roofline.perf.workload import make_workload

# chat-like lengths: ShareGPT-style prompts and answers (lognormal, mean 600 / 250 tokens)
PROMPT, OUTPUT = parse_lengths("--prompt", "lognormal:600,400"), parse_lengths("--output", "lognormal:250,150")


def main() -> None:
    st = CardStore()
    card, hw = st.model("llama-3.3-70b"), st.hardware("h100-sxm")
    t0 = time.perf_counter()
    fleet = build_fleet(card, hw, make_workload(quant="fp8", kv_quant="fp8", tp=2), policy_for(st.runtime("vllm")))
    r = serve(fleet, PROMPT, OUTPUT, 10_000, rate=9.0, seed=0).summary()
    t1 = time.perf_counter()
    print(f"10,000 requests, llama-3.3-70b fp8 on 2x h100-sxm at 9 req/s (vLLM preset): {t1 - t0:.2f} s "
          f"({r['steps']:,} engine steps; {r['output_tok_s']:,.0f} output tok/s, TTFT p90 {r['ttft_s']['p90']:.3f} s)")
    hws = [st.hardware(h) for h in ("dgx-spark", "h100-sxm", "b200")]
    rows = capacity(card, hws, st.runtime("vllm"), parse_lengths("--prompt", "500"),
                    parse_lengths("--output", "200"), 2.0, 0.05, target_rate=40.0, usd_per_gpu_hour=3.0)
    t2 = time.perf_counter()
    print(f"capacity search: {len(rows)} configurations ({sum(1 for x in rows if x.get('max_rate_per_s'))} meeting "
          f"the SLO) in {t2 - t1:.1f} s")
    for x in sorted((x for x in rows if x.get("max_rate_per_s")), key=lambda x: x["usd_per_m_output_tokens"])[:8]:
        print(f"  {x['hardware']:>10} tp{x['tp']} {x['quant']:>5}/kv {x['kv_quant']:<4} {x['max_rate_per_s']:7.2f} req/s "
              f"{x['max_clients']:>4} clients  replicas {x['replicas']:>3}  ${x['usd_per_m_output_tokens']:.2f}/M out")


if __name__ == "__main__":
    main()
