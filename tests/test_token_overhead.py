"""Host work per new token (`token_overhead_s`: the engine gathers each token's id and position into the step's
inputs): charged once per token by the predictor, the serving simulator and the plots' per-op split, and fitted by a
GPU calibration."""

from dataclasses import replace

import pytest
from roofline.engine.core.records import StepRecord

from roofline.calibrate.calibration import fit_records, predict_step
from roofline.cards.store import CardStore
from roofline.perf.efficiency import expected_efficiency
from roofline.perf.ops import Step
from roofline.perf.request import timed_step
from roofline.perf.serving.steptime import StepTimer
from roofline.perf.workload import Workload
from roofline.sizing.reduce import reduce_card

STORE = CardStore()
HW = STORE.hardware("h100-sxm")
TOKEN_S = 0.8e-6
BASE = replace(expected_efficiency(HW), kernel_overhead_s=40e-6, step_overhead_s=3e-4)
WITH = replace(BASE, token_overhead_s=TOKEN_S)
WL = Workload(prompt_tokens=1, quant="bf16", kv_quant="bf16")
CARD = reduce_card(STORE.model("llama-3.1-8b"), 2, 4096)


@pytest.mark.parametrize("step", [Step("prefill", 512, 2, 0), Step("prefill", 64, 4, 700), Step("decode", 1, 16, 300)])
def test_each_new_token_adds_its_host_work_once(step):
    extra = timed_step(CARD, HW, step, WL, WITH).total_s - timed_step(CARD, HW, step, WL, BASE).total_s
    assert float(extra) == pytest.approx(TOKEN_S * step.n * step.batch, rel=1e-9)


@pytest.mark.parametrize("decode, pre_n, pre_c", [([100] * 8, [], []), ([100] * 8, [200, 37], [0, 512]),
                                                  ([], [1024], [0])])
def test_the_simulator_charges_token_work_once_as_the_predictor_does(decode, pre_n, pre_c):
    """No table of the step timer (tokens, lm_head, context ops) counts the token work a second time."""
    samples = len(decode) + len(pre_n)
    with_s, base_s = (StepTimer(CARD, HW, WL, e, 2048, 64, 8192).step_seconds(decode, pre_n, pre_c, samples)
                      for e in (WITH, BASE))
    assert with_s - base_s == pytest.approx(TOKEN_S * (len(decode) + sum(pre_n)), rel=1e-9)
    if not pre_n:
        want = timed_step(CARD, HW, Step("decode", 1, len(decode), 100), WL, WITH, sequences=len(decode)).total_s
        assert with_s == pytest.approx(float(want), rel=1e-6)


def test_the_fit_finds_the_token_work():
    """Steps 'measured' by the predictor at a known token cost, one and two layers of two cards: the GPU fit finds
    it, and without the term the held-out prompts miss by more."""
    cache, records = {}, []
    for name, layers in (("llama-3.1-8b", 1), ("llama-3.1-8b", 2), ("llama-3.2-1b", 1), ("llama-3.2-1b", 2)):
        for phase, batch, n in (("prefill", 1, 64), ("prefill", 1, 1024), ("prefill", 8, 256), ("prefill", 4, 128),
                                ("decode", 1, 1), ("decode", 16, 1)):
            for ctx in (0, 512):
                r = StepRecord(card=name, layers=layers, vocab=4096, dtype="bf16", phase=phase, batch=batch,
                               context=ctx, new_tokens=n, seconds=0.0)
                records.append(replace(r, seconds=predict_step(r, HW, WITH, STORE, cache)))
    eff, summary = fit_records(records, HW, STORE, gemv_max_tokens=1)
    assert eff.token_overhead_s == pytest.approx(TOKEN_S, rel=0.3)
    assert summary["held_out"]["prefill"]["median_ape_pct"] < 3
