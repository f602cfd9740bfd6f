"""Speed of the serving simulator (issue 15's targets on the 2-core CI machine): 10,000 chat-like requests on
llama-3.3-70b in <= 5 s, and a `capacity` search over >= 20 configurations in <= 60 s. Prints wall and CPU seconds
and the load average (the machine may be shared: CPU seconds are what the simulation itself costs)."""

import os
import resource
import time

from roofline.cards.store import CardStore
from roofline.perf.efficiency import expected_efficiency
from roofline.perf.serving.capacity import capacity
from roofline.perf.serving.policy import policy_for
from roofline.perf.serving.run import build_fleet, serve
from roofline.perf.serving.workload import parse_lengths
from roofline.perf.workload import make_workload

# chat-like lengths: ShareGPT-style prompts and answers (lognormal, mean 600 / 250 tokens)
PROMPT, OUTPUT = parse_lengths("--prompt", "lognormal:600,400"), parse_lengths("--output", "lognormal:250,150")


def cpu_s() -> float:
    """CPU seconds of this process and its finished children (the capacity search's worker processes)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    st = CardStore()
    card, hw, vllm = st.model("llama-3.3-70b"), st.hardware("h100-sxm"), st.runtime("vllm")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    t0, c0 = time.perf_counter(), cpu_s()
    wl = make_workload(quant="fp8", kv_quant="fp8", tp=2)
    fleet = build_fleet(card, hw, wl, policy_for(vllm), eff=expected_efficiency(hw, vllm))
    r = serve(fleet, PROMPT, OUTPUT, 10_000, rate=9.0, seed=0).summary()
    t1, c1 = time.perf_counter(), cpu_s()
    print(f"10,000 requests, llama-3.3-70b fp8 on 2x h100-sxm at 9 req/s ({r['runtime']}): {t1 - t0:.2f} s wall, "
          f"{c1 - c0:.2f} s CPU ({r['steps']:,} engine steps; {r['output_tok_s']:,.0f} output tok/s, "
          f"TTFT p90 {r['ttft_s']['p90']:.3f} s)")
    hws = [st.hardware(h) for h in ("dgx-spark", "h100-sxm", "b200")]
    rows = capacity(card, hws, vllm, parse_lengths("--prompt", "500"), parse_lengths("--output", "200"), 2.0, 0.05,
                    target_rate=40.0)
    t2, c2 = time.perf_counter(), cpu_s()
    searched = [x for x in rows if x.get("points")]
    print(f"capacity search: {len(rows)} configurations ({len(searched)} searched by simulation, "
          f"{sum(x['simulated_requests'] for x in searched):,} requests simulated; "
          f"{sum(1 for x in rows if x.get('max_rate_per_s'))} meet the SLO) in {t2 - t1:.1f} s wall, "
          f"{c2 - c1:.1f} s CPU over the worker processes")
    near = [x for x in searched if x.get("max_rate_per_s")
            and abs(x["saturation_estimate_per_s"] / x["max_rate_per_s"] - 1) <= 0.10]
    points = sorted(x["points"] for x in searched)
    print(f"load points per configuration: median {points[len(points) // 2]}, most {points[-1]}; the saturation "
          f"estimate within 10% of the answer for {len(near)} of {len(searched)}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
