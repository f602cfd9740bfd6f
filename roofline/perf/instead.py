"""What to run instead of a setup that does not fit: each single change `what_would_fit` finds, as the option a
user passes, with that setup's prediction where the change is a format, a batch or a GPU count."""

from __future__ import annotations

from dataclasses import replace

from roofline.cards.hardware import HardwareCard
from roofline.cards.model import ModelCard
from roofline.errors import RooflineError
from roofline.perf.efficiency import Efficiency
from roofline.perf.request import predict
from roofline.perf.workload import Workload
from roofline.sizing.alternatives import Runs, what_would_fit
from roofline.sizing.memory import Deployment, memory_budget


def run_instead(card: ModelCard, hw: HardwareCard, wl: Workload, draft: ModelCard | None = None,
                eff: Efficiency | None = None, dep: Deployment | None = None, runs: Runs | None = None) -> list[dict]:
    """What to run instead when the setup does not fit: each single change `what_would_fit` finds (a smaller weight
    or KV format, fewer sequences, more GPUs), with the prediction where the change is a format or GPU count. `dep`:
    the runtime's sizing, as `predict` takes it; `runs`: the formats the runtime runs (`what_would_fit`)."""
    dep = Deployment(wl.tp, wl.pp) if dep is None else replace(dep, tp=wl.tp, pp=wl.pp)
    tokens_held = wl.tokens_held
    budget = memory_budget(card, hw, wl.quant, wl.kv_quant, tokens_held, wl.batch, dep)
    found = what_would_fit(card, hw, wl.quant, wl.kv_quant, tokens_held, wl.batch, dep, budget,
                           ("--quant", "--kv-quant", "--concurrency", "--gpus"), runs)
    if budget.fits:  # only the draft model pushes it over: no single change of the target's is proposed
        return []
    out = []
    for alt in found:
        item = {"option": alt.option, "value": alt.value, "flag": alt.flag, "detail": alt.detail}
        if alt.option == "--concurrency":
            item["flag"] = f"--batch {alt.value}"
        try:
            changed = wl.model_copy(update=alt.changes)
            q = predict(card, hw, changed, draft=draft, eff=eff, dep=replace(dep, tp=changed.tp, pp=changed.pp))
            item["prediction"] = {k: getattr(q, k) for k in ("ttft_s", "itl_s", "decode_tok_s", "prefill_tok_s")}
        except RooflineError:
            pass
        out.append(item)
    return out
