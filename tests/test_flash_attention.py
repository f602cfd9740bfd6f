"""Attention without flash attention (llama.cpp before -fa became its default): the fp32 scores are written out and
read back between kernels, a memory cost paid where one layer's scores outgrow the L2 cache."""

from dataclasses import replace

import numpy as np
import pytest

from roofline.calibrate.calibration import engine_quant
from roofline.calibrate.row_conditions import row_flags
from roofline.cards.store import CardStore
from roofline.perf.efficiency import expected_efficiency
from roofline.perf.ops import Step, step_ops
from roofline.perf.request import timed_step
from roofline.perf.serving.steptime import StepTimer
from roofline.perf.timing import SCORE_BYTES_PER_VALUE, SCORE_VALUE_BYTES, score_bytes
from roofline.perf.workload import Workload
from roofline.sizing.reduce import reduce_card

STORE = CardStore()


@pytest.mark.parametrize("engine,flash", [
    ("llama.cpp CUDA build 6918; -fa 1 -ub 2048", True),
    ("llama.cpp Metal (llama-bench, fa 1)", True),
    ("llama-cli -c 33000 --seed 1000 -fa)", True),
    ("llama-server; flash-attn on, -ngl 99", True),
    ("llama.cpp b4326; flash attention enabled)", True),
    ("llama.cpp Vulkan; -ngl 100, -fa 0", False),
    ("ROCm; -ngl 99 --mmap 0, fa off (-b 2048)", False),
    ("llama.cpp (May 2024), llama-bench defaults (no FA); CUDA 12.1.1", False),
    ("llama.cpp ROCm; default -b 2048 -ub 512, -fa not printed", None),  # the version's default
])
def test_a_rows_flash_attention_setting_is_read_from_its_engine_text(engine, flash):
    base = expected_efficiency(STORE.hardware("rtx-4090"), STORE.runtime("llama.cpp@b3216"))
    assert base.flash_attention is False
    assert row_flags({"engine": engine}, base).flash_attention is (False if flash is None else flash)
    newer = expected_efficiency(STORE.hardware("rtx-4090"), STORE.runtime("llama.cpp@b6918"))
    assert newer.flash_attention is True


def test_llama_cpp_runs_flash_attention_by_default_from_b6327_only():
    hw = STORE.hardware("rtx-a6000")
    assert [expected_efficiency(hw, STORE.runtime(f"llama.cpp@{v}")).flash_attention
            for v in ("b1786", "b3216", "b6327", "b6918")] == [False, False, True, True]
    assert expected_efficiency(hw).flash_attention  # generic: flash kernels


def _attention_core(card, hw, step):
    return next(op for op in step_ops(card, hw, step, "q4_k_m", "fp16") if op.name == "attention")


def test_scores_spill_only_beyond_the_l2_cache():
    """Llama 3.1 8B, one 512-token chunk: 32 heads x 512 x 512 fp32 scores (33.5 MB a layer) stay in an RTX 4090's
    72 MiB L2; behind 3,584 cached tokens (268 MB a layer) they spill, on an A6000's 6 MiB L2 almost entirely."""
    card = STORE.model("llama-3.1-8b")
    big, small = STORE.hardware("rtx-4090"), STORE.hardware("rtx-a6000")
    eff = replace(expected_efficiency(big, STORE.runtime("llama.cpp@b3216")), flash_attention=False)
    first, late = Step("prefill", 512, 1, 0), Step("prefill", 512, 1, 3584)
    core = _attention_core(card, big, first)
    assert core.scores == 32 * 512 * 512
    assert score_bytes(core, big, eff) == 0.0
    spilled = score_bytes(_attention_core(card, big, late), big, eff)
    scores = 32 * 512 * 4096
    assert spilled == pytest.approx(SCORE_BYTES_PER_VALUE * (scores - big.l2_cache_bytes / SCORE_VALUE_BYTES))
    assert score_bytes(_attention_core(card, small, late), small, eff) > 0.97 * SCORE_BYTES_PER_VALUE * scores
    assert score_bytes(core, big, replace(eff, flash_attention=True)) == 0.0
    no_l2 = big.model_copy(update={"l2_cache_bytes": None})
    assert score_bytes(_attention_core(card, no_l2, late), no_l2, eff) == 0.0  # unknown cache: kept on chip


def test_the_serving_step_timer_charges_spilled_scores_as_the_predictor_does():
    hw = STORE.hardware("rtx-a6000")
    card = reduce_card(STORE.model("llama-3.1-8b"), 1, 8192)
    wl = Workload(prompt_tokens=1, quant=engine_quant("bf16"), kv_quant="bf16")
    flash = replace(expected_efficiency(hw), prefill_chunk_tokens=0.0)
    eager = replace(flash, flash_attention=False)
    step = Step("prefill", 512, 1, 3584)
    direct = [float(timed_step(card, hw, step, wl, e).total_s) for e in (flash, eager)]
    timers = [StepTimer(card, hw, wl, e, 2048, 8, 8192) for e in (flash, eager)]
    simulated = [t.step_seconds([], [512], [3584], 1) for t in timers]
    assert direct[1] > direct[0] * 1.05  # the spilled scores cost something here
    assert simulated[1] - simulated[0] == pytest.approx(direct[1] - direct[0], rel=0.02)
    decode = [t.decode_run_seconds(np.full(4, 3000.0), 2) for t in timers]
    assert np.all(decode[1] >= decode[0])
