"""Predicted vs measured `--tp 2` decode step time on this CPU (gloo, two processes).

    PYTHONPATH=. python benchmarks/tp_cpu.py [--card llama-3.1-8b] [--layers 1] [--vocab 4096]

The two ranks share one CPU, so each rank's card is what a rank measures while the other runs the same
microbenchmark (read bandwidth, fp32 GEMM peak), with the link the all-reduce fit gives (link efficiency against
the memory copy bandwidth, per-hop latency). Efficiencies come from the host card's calibration where
`roofline calibrate` wrote one ($ROOFLINE_HOME), else the CPU defaults. The engine runs fp32.
"""

from __future__ import annotations

import argparse

from roofline.calibrate.calibration import engine_quant
from roofline.calibrate.collectives import fit_all_reduce, with_collectives
from roofline.cards.hardware import HardwareCard
from roofline.cards.store import CardStore
from roofline.perf.efficiency import expected_efficiency
from roofline.perf.ops import Step
from roofline.perf.request import timed_step
from roofline.perf.workload import Workload
from roofline.sizing.reduce import reduce_card

POINTS = [dict(phase="decode", batch=b, context=c, new_tokens=1) for b in (1, 8) for c in (64, 512)]


def rank_card(host: HardwareCard, share: dict, fit: dict, copy_bytes_per_s: float) -> HardwareCard:
    data = host.model_dump(mode="json", by_alias=True, exclude_none=True)
    data["memory"]["bandwidth"] = share["read_bytes_per_s"]
    data["peak_flops"] = {k: share["gemm_fp32_flop_per_s"] for k in ("fp32", "bf16", "fp16")}
    data.setdefault("calibration", {"device": "this CPU: CPU default efficiencies + the fitted link",
                                    "date": "now", "values": {}})
    return HardwareCard.model_validate(with_collectives(data, fit, copy_bytes_per_s, measured_link=True))


def main() -> None:
    from roofline.engine.measure import microbench
    from roofline.engine.parallel import check_tp, measure_steps, run_ranks

    ap = argparse.ArgumentParser()
    ap.add_argument("--card", default="llama-3.1-8b")
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--vocab", type=int, default=4096)
    args = ap.parse_args()
    store = CardStore()
    card = reduce_card(store.model(args.card), args.layers, args.vocab)
    check_tp(card, 2)
    load = microbench.Contention()
    copy = microbench.bandwidth("cpu", 1 << 28)["copy_bytes_per_s"]
    fit = fit_all_reduce(microbench.all_reduce("cpu", 2), 2, copy)
    share = microbench.rank_share("cpu", 2)
    hw = rank_card(store.hardware("host"), share, fit, copy)
    eff = expected_efficiency(hw)
    options = dict(dtype="fp32", max_num_seqs=8, max_step_tokens=512, num_blocks=512, graphs=False)
    measured = run_ranks(2, "cpu", measure_steps, card, options, POINTS, 5)
    wl = Workload(prompt_tokens=1, quant=engine_quant("fp32"), kv_quant="fp32", tp=2)
    print(f"{card.name}, {args.layers} layer(s), vocab {args.vocab}, fp32, --tp 2 over gloo")
    print(f"all-reduce fit: link {fit['link']:.3f} of {copy / 1e9:.1f} GB/s copy, latency {fit['latency_s'] * 1e6:.1f} "
          f"us/hop (median fit error {fit['median_ape_pct']:.0f}%); rank share: read "
          f"{share['read_bytes_per_s'] / 1e9:.1f} GB/s, fp32 GEMM {share['gemm_fp32_flop_per_s'] / 1e9:.0f} GFLOP/s")
    print(f"efficiency: {eff.source}")
    errors = []
    for p, (host_s, _, _) in zip(POINTS, measured):
        pred = timed_step(card, hw, Step("decode", 1, p["batch"], p["context"]), wl, eff)
        errors.append(100 * (pred.total_s - host_s) / host_s)
        print(f"decode batch {p['batch']:2d} context {p['context']:4d}: measured {host_s * 1e3:7.2f} ms, predicted "
              f"{pred.total_s * 1e3:7.2f} ms (all-reduce {pred.by_class.get('comm', 0) * 1e3:.2f} ms), "
              f"error {errors[-1]:+.1f}%")
    print(f"median |error| {sorted(abs(e) for e in errors)[len(errors) // 2]:.1f}%; {load.report()}")


if __name__ == "__main__":
    main()
