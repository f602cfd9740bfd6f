"""Decode steps the micro-engine replays as CUDA graphs pay `graph_kernel_overhead_s` per kernel instead of
`kernel_overhead_s`: in the predictor's step, in the serving simulator's step timer, and in the calibration fit."""

from dataclasses import replace

import numpy as np
import pytest
from roofline.engine.core.records import StepRecord

from roofline.calibrate.calibration import fit_records, predict_step
from roofline.cards.store import CardStore
from roofline.perf.efficiency import expected_efficiency
from roofline.perf.ops import Step
from roofline.perf.request import launch_seconds, timed_step
from roofline.perf.serving.steptime import StepTimer
from roofline.perf.workload import Workload
from roofline.sizing.reduce import reduce_card

STORE = CardStore()
HW = STORE.hardware("h100-sxm")
EAGER_S, GRAPH_S = 40e-6, 4e-6
GRAPHS = replace(expected_efficiency(HW), kernel_overhead_s=EAGER_S, graph_kernel_overhead_s=GRAPH_S,
                 graph_max_batch=32, graph_max_context=4096)
WL = Workload(prompt_tokens=1, quant="bf16", kv_quant="bf16")


def _card(name, layers=1):
    return reduce_card(STORE.model(name), layers, 4096)


@pytest.mark.parametrize("name, step, expected", [
    ("llama-3.1-8b", Step("decode", 1, 1, 100), GRAPH_S),
    ("llama-3.1-8b", Step("decode", 1, 32, 4095), GRAPH_S),
    ("llama-3.1-8b", Step("decode", 1, 33, 100), EAGER_S),  # beyond the largest bucket
    ("llama-3.1-8b", Step("decode", 1, 8, 4096), EAGER_S),  # beyond the static block tables
    ("llama-3.1-8b", Step("decode", 2, 8, 100), EAGER_S),  # two tokens per sequence: not a decode graph
    ("llama-3.1-8b", Step("prefill", 64, 1, 0), EAGER_S),
    ("qwen3-30b-a3b", Step("decode", 1, 1, 100), EAGER_S),  # MoE: uncaptured
    ("granite-4.0-h-small", Step("decode", 1, 1, 100), EAGER_S),  # Mamba-2 layers: uncaptured
])
def test_which_steps_replay_a_graph(name, step, expected):
    assert float(launch_seconds(_card(name), step, GRAPHS)) == expected


@pytest.mark.parametrize("name", ["qwen3-30b-a3b", "granite-4.0-h-small", "llama-3.1-8b"])
def test_a_runtime_that_captures_every_decode_step_replays_moe_recurrent_and_verify_steps(name):
    everything = replace(GRAPHS, graph_every_decode=True)
    assert float(launch_seconds(_card(name), Step("decode", 1, 1, 100), everything)) == GRAPH_S
    assert float(launch_seconds(_card(name), Step("decode", 4, 2, 100), everything)) == GRAPH_S  # verify k=3
    assert float(launch_seconds(_card(name), Step("decode", 1, 33, 100), everything)) == EAGER_S
    assert float(launch_seconds(_card(name), Step("prefill", 64, 1, 0), everything)) == EAGER_S


def test_no_graph_cost_means_ordinary_launches_and_arrays_split_per_step():
    card = _card("llama-3.1-8b")
    assert launch_seconds(card, Step("decode", 1, 1, 100), replace(GRAPHS, graph_kernel_overhead_s=None)) == EAGER_S
    got = launch_seconds(card, Step("decode", 1, np.array([1.0, 16.0, 64.0]), 100), GRAPHS)
    assert got.tolist() == [GRAPH_S, GRAPH_S, EAGER_S]


def test_a_replayed_step_saves_its_launches_and_nothing_else():
    card = _card("llama-3.1-8b", 2)
    eager = replace(GRAPHS, graph_kernel_overhead_s=None)
    step = Step("decode", 1, 4, 100)
    fast, slow = (timed_step(card, HW, step, WL, e) for e in (GRAPHS, eager))
    assert float(slow.total_s - fast.total_s) == pytest.approx(float(slow.overhead_s - fast.overhead_s), rel=1e-9)
    assert float(slow.overhead_s - fast.overhead_s) > 0
    assert float(fast.memory_s) == pytest.approx(float(slow.memory_s), rel=1e-12)


def test_a_replayed_step_runs_its_bucket_s_rows_and_attends_its_own():
    """9 sequences replay the 16-row graph: every op but attention costs what 16 sequences cost, attention what 9
    cost; outside the graph limits (or without a graph cost) the step runs its own 9 rows."""
    card = _card("llama-3.1-8b", 2)
    nine, sixteen = (timed_step(card, HW, Step("decode", 1, b, 100), WL, GRAPHS) for b in (9, 16))
    assert {k: v for k, v in nine.by_op.items() if k != "attention"} == \
        pytest.approx({k: v for k, v in sixteen.by_op.items() if k != "attention"}, rel=1e-12)
    assert nine.by_op["attention"] < sixteen.by_op["attention"]
    eager = replace(GRAPHS, graph_kernel_overhead_s=None)
    for eff, ctx in ((eager, 100), (GRAPHS, 5000)):
        own, bucket = (timed_step(card, HW, Step("decode", 1, b, ctx), WL, eff) for b in (9, 16))
        assert float(own.flops) < float(bucket.flops)


@pytest.mark.parametrize("batch", [4, 5, 11, 32, 48])
def test_the_simulator_times_decode_steps_as_the_predictor_does(batch):
    """A pure-decode step in the serving simulator costs what timed_step says, graph or not; a step that also holds a
    prefill chunk never replays a graph."""
    card = _card("llama-3.1-8b", 2)
    timer = StepTimer(card, HW, WL, GRAPHS, 2048, 64, 8192)
    want = float(timed_step(card, HW, Step("decode", 1, batch, 100), WL, GRAPHS, sequences=batch).total_s)
    assert timer.step_seconds([100] * batch, [], [], batch) == pytest.approx(want, rel=1e-6)
    run = timer.decode_run_seconds(np.full(batch, 4094.0), 3)  # the third step passes the static tables' reach
    for i, ctx in enumerate((4094, 4095, 4096)):
        step = Step("decode", 1, batch, ctx)
        assert run[i] == pytest.approx(float(timed_step(card, HW, step, WL, GRAPHS, sequences=batch).total_s),
                                       rel=1e-6)
    eager = StepTimer(card, HW, WL, replace(GRAPHS, graph_kernel_overhead_s=None), 2048, 64, 8192)
    mixed = ([100] * batch, [64], [0], batch + 1)
    assert timer.step_seconds(*mixed) == pytest.approx(eager.step_seconds(*mixed), rel=1e-12)


@pytest.mark.parametrize("batch", [1, 5, 32, 40])
def test_the_simulator_times_a_captured_moe_decode_step_as_the_predictor_does(batch):
    card, eff = _card("qwen3-30b-a3b", 2), replace(GRAPHS, graph_every_decode=True)
    timer = StepTimer(card, HW, WL, eff, 2048, 64, 8192)
    want = float(timed_step(card, HW, Step("decode", 1, batch, 100), WL, eff, sequences=batch).total_s)
    assert timer.step_seconds([100] * batch, [], [], batch) == pytest.approx(want, rel=1e-6)


def test_a_replayed_verify_step_pads_its_rows_and_keeps_its_tokens_per_sequence():
    """3 sequences verifying 3 draft tokens each replay the 4-row bucket: 16 tokens through the GEMMs, not 4."""
    card, eff = _card("llama-3.1-8b", 2), replace(GRAPHS, graph_every_decode=True)
    three, four = (timed_step(card, HW, Step("decode", 4, b, 100), WL, eff) for b in (3, 4))
    assert float(three.by_op["qkv_proj"]) == pytest.approx(float(four.by_op["qkv_proj"]), rel=1e-12)
    one_token = timed_step(card, HW, Step("decode", 1, 4, 100), WL, eff)
    assert float(four.flops) > 3 * float(one_token.flops) / 2


def test_the_fit_recovers_the_graph_launch_cost():
    """Records 'measured' by the predictor at known launch costs, decode steps of up to 32 sequences replayed: the
    fit finds the two costs apart, where one launch cost for every step cannot fit both the replayed steps and the
    eager ones (prompts, 48-sequence decodes). One and two layers separate a per-layer cost from a per-step one."""
    cache, records = {}, []
    for name, layers in (("llama-3.1-8b", 1), ("llama-3.1-8b", 2), ("llama-3.2-1b", 1), ("llama-3.2-1b", 2)):
        card = _card(name, layers)
        for phase, batch, n in (("prefill", 1, 16), ("prefill", 1, 64), ("prefill", 4, 256), ("decode", 1, 1),
                                ("decode", 4, 1), ("decode", 16, 1), ("decode", 48, 1)):
            for ctx in (64, 2048):
                mode = "graphs" if phase == "decode" and launch_seconds(card, Step(phase, 1, batch, ctx), GRAPHS) \
                    == GRAPH_S else "eager"
                r = StepRecord(card=name, layers=layers, vocab=4096, dtype="bf16", phase=phase, batch=batch,
                               context=ctx, new_tokens=n, seconds=0.0, mode=mode)
                records.append(replace(r, seconds=predict_step(r, HW, GRAPHS, STORE, cache)))
    eff, summary = fit_records(records, HW, STORE, gemv_max_tokens=1,
                               graph_limits={"graph_max_batch": 32.0, "graph_max_context": 4096.0})
    _, one_cost = fit_records(records, HW, STORE, gemv_max_tokens=1)
    assert summary["held_out"]["decode"]["median_ape_pct"] < 5
    assert one_cost["held_out"]["decode"]["median_ape_pct"] > 2 * summary["held_out"]["decode"]["median_ape_pct"]
    assert eff.graph_kernel_overhead_s < eff.kernel_overhead_s / 3
    assert eff.kernel_overhead_s == pytest.approx(EAGER_S, rel=0.3)
    assert (eff.graph_max_batch, eff.graph_max_context) == (32.0, 4096.0)
