"""The capacity search: for each hardware card, GPUs per replica (tensor parallel), weight and KV format, the highest
request rate and the most concurrent clients whose requests meet the SLO (DistServe's goodput: the rate at which
at least `attainment` of requests meet both the TTFT and the ITL (TPOT) objective), the replicas a target rate
needs, and the cost per million output tokens."""

from __future__ import annotations

import math
from dataclasses import dataclass

from roofline.cards.hardware import HardwareCard
from roofline.cards.model import ModelCard
from roofline.errors import RooflineError
from roofline.cards.runtime import RuntimeChoice
from roofline.perf.efficiency import check_runtime_supports, expected_efficiency
from roofline.perf.serving.policy import policy_for
from roofline.perf.serving.run import build_fleet, serve
from roofline.perf.serving.workload import Lengths
from roofline.perf.workload import make_workload

ATTAINMENT = 0.9  # DistServe's evaluation goal: 90% of requests within both SLOs
RATE_STEPS = 6  # bisection steps on the rate (the bracket shrinks 64-fold)
TP_SIZES = (1, 2, 4, 8)
MAX_CLIENTS = 256


@dataclass
class Config:
    hw: HardwareCard
    tp: int
    quant: str
    kv_quant: str

    @property
    def label(self) -> str:
        return f"{self.hw.name} tp{self.tp} {self.quant}/kv {self.kv_quant}"


def candidates(card: ModelCard, hw: HardwareCard, runtime: RuntimeChoice | None = None) -> list[Config]:
    """TP sizes the node allows (dividing the heads) x weight formats the card's math supports x KV formats (those
    the runtime loads, when one is given)."""
    peaks = hw.peak_flops.as_dict()
    weights = ["bf16"] + (["fp8"] if "fp8" in peaks else []) + (["nvfp4"] if "fp4" in peaks else [])
    kvs = ["bf16"] + (["fp8"] if "fp8" in peaks else [])
    if runtime is not None:
        weights = [w for w in weights if w in runtime.profile.weight_formats]
        kvs = [k for k in kvs if k in runtime.profile.kv_formats]
    heads = card.architecture.attention.num_heads if card.architecture.attention else 1
    linked = hw.interconnect.bandwidth_bytes_per_s_per_direction > 0
    tps = [t for t in TP_SIZES if t <= max(hw.interconnect.gpus_per_node, 1) and heads % t == 0 and (t == 1 or linked)]
    return [Config(hw, t, w, k) for t in tps for w in weights for k in kvs]


def _meets(result, slo_ttft_s: float, slo_itl_s: float) -> bool:
    return result.metrics.good >= ATTAINMENT * result.metrics.finished


def search_config(card, cfg: Config, runtime: RuntimeChoice | None, prompt: Lengths, output: Lengths, slo_ttft_s: float,
                  slo_itl_s: float, requests: int, seed: int = 0) -> dict:
    """Max sustainable rate and clients meeting the SLO for one configuration (or why it cannot run)."""
    wl = make_workload(quant=cfg.quant, kv_quant=cfg.kv_quant, tp=cfg.tp)
    row = {"hardware": cfg.hw.name, "tp": cfg.tp, "quant": cfg.quant, "kv_quant": cfg.kv_quant}
    policy = policy_for(runtime)
    try:
        check_runtime_supports(runtime, card, cfg.hw, wl.quant, wl.kv_quant)
        fleet = build_fleet(card, cfg.hw, wl, policy, eff=expected_efficiency(cfg.hw, runtime))
    except RooflineError as err:
        return {**row, "fits": False, "why": str(err)}
    run = lambda **kw: serve(fleet, prompt, output, seed=seed, slo_ttft_s=slo_ttft_s, slo_itl_s=slo_itl_s, **kw)  # noqa: E731
    clients, best_clients, best = 1, 0, None
    while clients <= min(MAX_CLIENTS, policy.effective_max_seqs):  # doubling: the most clients that meet the SLO
        r = run(concurrency=clients, requests=max(requests // 4, 2 * clients))
        if not _meets(r, slo_ttft_s, slo_itl_s):
            break
        best_clients, best = clients, r
        clients *= 2
    if best is None:
        return {**row, "fits": True, "max_rate_per_s": 0.0, "max_clients": 0,
                "why": "one client alone misses the SLO"}
    lo, hi, good = 0.0, best.summary()["requests_per_s"] * 2, None  # above the closed loop's rate at the SLO
    for _ in range(RATE_STEPS):  # widen until a rate fails (the bracket's top), then bisect
        r = run(rate=hi, requests=requests)
        if not _meets(r, slo_ttft_s, slo_itl_s):
            break
        lo, good, hi = hi, r, hi * 2
    for _ in range(RATE_STEPS if good is None or lo < hi else 0):
        mid = (lo + hi) / 2
        r = run(rate=mid, requests=requests)
        if _meets(r, slo_ttft_s, slo_itl_s):
            lo, good = mid, r
        else:
            hi = mid
    good = good or best
    s = good.summary()
    rate = lo if lo else s["requests_per_s"]
    return {**row, "fits": True, "max_rate_per_s": rate, "max_clients": best_clients,
            "output_tok_s": s["output_tok_s"], "ttft_p90_s": s["ttft_s"]["p90"], "tpot_p90_s": s["tpot_s"]["p90"],
            "gpus_per_replica": cfg.tp}


def capacity(card: ModelCard, hws: list[HardwareCard], runtime: RuntimeChoice | None, prompt: Lengths, output: Lengths,
             slo_ttft_s: float, slo_itl_s: float, target_rate: float | None = None,
             usd_per_gpu_hour: float | None = None, requests: int = 200, seed: int = 0) -> list[dict]:
    for name, v in (("--slo-ttft", slo_ttft_s), ("--slo-itl", slo_itl_s)):
        if not v > 0:
            raise RooflineError(f"{name}: must be > 0 seconds, got {v}")
    if target_rate is not None and not target_rate > 0:
        raise RooflineError(f"--target-rate: must be > 0 requests/s, got {target_rate}")
    rows = []
    for hw in hws:
        for cfg in candidates(card, hw, runtime):
            row = search_config(card, cfg, runtime, prompt, output, slo_ttft_s, slo_itl_s, requests, seed)
            if row.get("max_rate_per_s"):
                if target_rate:
                    row["replicas"] = math.ceil(target_rate / row["max_rate_per_s"])
                    row["gpus"] = row["replicas"] * cfg.tp
                if usd_per_gpu_hour:
                    tok_per_hour = row["output_tok_s"] * 3600
                    row["usd_per_m_output_tokens"] = usd_per_gpu_hour * cfg.tp / tok_per_hour * 1e6
            rows.append(row)
    return rows
