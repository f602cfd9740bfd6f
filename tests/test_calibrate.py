"""Calibration: the fit recovers known efficiencies, the card is written atomically, and a smoke run end to end."""

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace

import numpy as np
import pytest
import yaml
from conftest import run_cli
from roofline.engine.core.records import RequestTiming, StepRecord

from roofline.calibrate.calibration import (
    fit_records,
    is_held_out,
    predict_step,
    weights_bandwidth_fraction,
    write_card_atomic,
)
from roofline.cards.hardware import HardwareCard
from roofline.cards.store import CardStore
from roofline.perf.efficiency import expected_efficiency

STORE = CardStore()


def synthetic_records(hw, eff):
    """Step records 'measured' by the predictor itself at a known efficiency."""
    cache, records = {}, []
    for card in ("llama-3.1-8b", "qwen3-30b-a3b", "gpt-oss-20b"):
        for phase, batch, n in (("prefill", 1, 64), ("prefill", 4, 256), ("decode", 1, 1), ("decode", 16, 1)):
            for ctx in (64, 512, 2048):
                r = StepRecord(card=card, layers=1, vocab=4096, dtype="bf16", phase=phase, batch=batch,
                               context=ctx, new_tokens=n, seconds=0.0)
                records.append(replace(r, seconds=predict_step(r, hw, eff, STORE, cache)))
    return records


def test_fit_recovers_known_efficiencies():
    hw = STORE.hardware("h100-sxm")
    truth = replace(expected_efficiency(hw), memory=0.6, compute=0.35, kernel_overhead_s=20e-6)
    eff, summary = fit_records(synthetic_records(hw, truth), hw, STORE)
    assert summary["held_out"]["decode"]["median_ape_pct"] < 3
    assert summary["held_out"]["prefill"]["median_ape_pct"] < 3
    assert eff.memory == pytest.approx(0.6, rel=0.15)


def test_a_measured_weights_bandwidth_is_held_and_the_rest_fitted_around_it():
    hw = STORE.hardware("h100-sxm")
    truth = replace(expected_efficiency(hw), memory=0.6, memory_gemv=0.6, compute=0.35, kernel_overhead_s=20e-6)
    eff, summary = fit_records(synthetic_records(hw, truth), hw, STORE, weights_memory=0.6)
    assert eff.memory == eff.memory_gemv == 0.6  # never moved by the search
    assert summary["held_out"]["decode"]["median_ape_pct"] < 3
    assert eff.kernel_overhead_s == pytest.approx(20e-6, rel=0.25)


def test_weights_bandwidth_fraction_is_the_better_matrix_vector_read_at_most_one():
    hw = STORE.hardware("h100-sxm")
    bw = hw.memory.bandwidth_bytes_per_s
    measured = {"bandwidth": {"mv_read_bytes_per_s": 0.7 * bw}, "bandwidth_repeat": {"mv_read_bytes_per_s": 0.8 * bw}}
    assert weights_bandwidth_fraction(measured, hw) == pytest.approx(0.8)
    assert weights_bandwidth_fraction({"bandwidth": {"mv_read_bytes_per_s": 2 * bw}}, hw) == 1.0
    assert weights_bandwidth_fraction({"bandwidth": {"read_bytes_per_s": bw}}, hw) is None


def test_held_out_split_is_stable_and_partial():
    records = synthetic_records(STORE.hardware("h100-sxm"), expected_efficiency(STORE.hardware("h100-sxm")))
    held = [is_held_out(r) for r in records]
    assert 0.1 < sum(held) / len(held) < 0.5
    assert held == [is_held_out(r) for r in records]


def test_atomic_write_keeps_the_old_card_when_interrupted(tmp_path, monkeypatch):
    old = write_card_atomic(tmp_path, {"name": "box", "value": 1})
    before = old.read_text()

    def boom(*args, **kwargs):
        raise KeyboardInterrupt  # killed mid-write

    monkeypatch.setattr(yaml, "safe_dump", boom)
    with pytest.raises(KeyboardInterrupt):
        write_card_atomic(tmp_path, {"name": "box", "value": 2})
    assert old.read_text() == before
    assert [p.name for p in (tmp_path / "hardware").iterdir()] == ["box.yaml"]


def test_grid_runs_the_phases_each_model_names():
    from roofline.calibrate.grids import QUICK, grid_points

    points = grid_points(QUICK)
    two = [p for p in points if p["layers"] == 2]
    decode_only = [m for m in QUICK["models"] if len(m) == 3]
    assert two and {p["phase"] for p in two} == {"decode"} and {p["card"] for p in two} == {m[0] for m in decode_only}
    decode_points = len(QUICK["contexts"]) * len(QUICK["decode_batches"])
    per_model = len(QUICK["prefill_contexts"]) * len(QUICK["prefill"]) + decode_points
    assert 0 in QUICK["prefill_contexts"]  # fresh prompts run the fused causal kernel; cached ones the masked one
    one_layer = [m for m in QUICK["models"] if len(m) == 2]
    assert len(points) == len(one_layer) * per_model + len(decode_only) * decode_points


def test_a_gpu_quick_grid_adds_deeper_rows_and_a_cpu_one_does_not():
    from roofline.calibrate.grids import QUICK, grid_points, grid_spec

    assert grid_spec("quick", "cpu") == QUICK and grid_spec("smoke", "cuda")["models"] == grid_spec("smoke")["models"]
    cpu, gpu = (grid_points(grid_spec("quick", d)) for d in ("cpu", "cuda:0"))
    extra = [p for p in gpu if p not in cpu]
    cut = [p for p in extra if p["card"] == "llama-3.1-8b"]
    assert {(p["layers"], p["phase"]) for p in cut} == {(2, "prefill"), (4, "decode")}
    deep = [p for p in extra if p not in cut]  # a whole-depth card: both phases at every shape
    assert {(p["card"], p["layers"]) for p in deep} == {("llama-3.2-3b", 28)}
    assert STORE.model("llama-3.2-3b").architecture.num_layers == 28  # the card's whole depth
    prefill, decode = (len(QUICK["prefill_contexts"]) * len(QUICK["prefill"]),
                       len(QUICK["contexts"]) * len(QUICK["decode_batches"]))
    assert len(cut) == len(deep) == prefill + decode


def test_engine_dtype_follows_the_measured_gemm_peaks():
    from roofline.calibrate.device_run import engine_dtype as _engine_dtype

    def gemm(fp32, bf16):
        return {"gemm": {"fp32": {"peak_flop_per_s": fp32}, "bf16": {"peak_flop_per_s": bf16}}}

    assert _engine_dtype("cpu", gemm(155e9, 426e9)) == "bf16"  # AVX512-BF16 EPYC
    assert _engine_dtype("cpu", gemm(155e9, 90e9)) == "fp32"  # bf16 emulated
    assert _engine_dtype("cuda", gemm(50e12, 40e12)) == "bf16"


needs_torch = pytest.mark.skipif(__import__("importlib").util.find_spec("torch") is None,
                                 reason="runs the engine: pip install 'roofline[engine]'")


@needs_torch
def test_long_steps_are_timed_once_in_one_pass(monkeypatch):
    from roofline.engine.measure import bench

    calls = []

    def fake_measure(eng, phase, batch, context, new_tokens, repeats):  # host s, device s, mode
        calls.append(new_tokens)
        seconds = 2 * bench.LONG_STEP_S if new_tokens > 100 else 0.01
        return seconds, seconds, "eager"

    monkeypatch.setattr(bench, "measure_both", fake_measure)
    monkeypatch.setattr(bench, "LLMEngine", lambda *a, **k: object())
    points = [dict(card="x", layers=1, phase="prefill", batch=1, context=0, new_tokens=n) for n in (10, 200)]
    records = bench.run_grid(points, 64, "cpu", "fp32", passes=3)
    assert calls == [10, 200, 10, 10]  # the long point is not run again in passes 2 and 3
    assert [r.seconds for r in records] == [0.01, 2 * bench.LONG_STEP_S]


@needs_torch
def test_a_points_passes_are_a_whole_pass_apart(monkeypatch):
    """Each pass walks every model before the next begins, so a slow spell of the host shorter than a pass moves no
    point; each point keeps its faster pass, and an engine is built per model per pass."""
    from roofline.engine.measure import bench

    calls, built = [], []
    slow = {("a", 0): 0.05, ("b", 1): 0.04}  # (card, pass) -> seconds: a slow spell over a's first pass, b's second

    def fake_measure(eng, phase, batch, context, new_tokens, repeats):
        seconds = slow.get((eng, len([c for c in calls if c == eng])), 0.01 * (1 + new_tokens / 100))
        calls.append(eng)
        return seconds, seconds, "eager"

    def fake_engine(card, **kw):
        built.append(card)
        return card

    monkeypatch.setattr(bench, "measure_both", fake_measure)
    monkeypatch.setattr(bench, "LLMEngine", fake_engine)
    points = [dict(card=c, layers=1, phase="prefill", batch=1, context=0, new_tokens=8) for c in ("a", "b")]
    records = bench.run_grid(points, 64, "cpu", "fp32", passes=2)
    assert calls == built == ["a", "b", "a", "b"]
    assert [r.seconds for r in records] == [0.0108, 0.0108]


@needs_torch
def test_calibrate_smoke_writes_a_card_predict_uses(tmp_path):
    home = tmp_path / "home"
    # --force: this shared test machine is often busy, and the smoke grid is too small to judge contention by
    out = run_cli("calibrate", "--grid", "smoke", "--device", "cpu", "--json", "--force", env={"ROOFLINE_HOME": str(home)})
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    card = yaml.safe_load((home / "hardware" / "host-cpu.yaml").read_text())
    cal = card["calibration"]
    assert {"date", "device", "torch", "values", "residuals", "points", "microbench"} <= set(cal)
    assert cal["points"]["fit"] + cal["points"]["held_out"] == 8
    # the card keeps every measured step: refitting them offline gives back the stored values
    assert len(cal["measurements"]) == 8 and {m["split"] for m in cal["measurements"]} == {"fit", "held_out"}
    probe = HardwareCard.model_validate({k: v for k, v in card.items() if k != "calibration"})
    refit, _ = fit_records([StepRecord.from_dict(m) for m in cal["measurements"]], probe, STORE, gemv_max_tokens=cal["values"]["gemv_max_tokens"])
    assert refit.memory == pytest.approx(cal["values"]["memory"], rel=1e-9)
    assert refit.step_overhead_s == pytest.approx(cal["values"]["step_overhead_s"], rel=1e-9)
    assert result["measured"]["read_bytes_per_s"] > 1e9
    pred = run_cli("predict", "-m", "qwen2.5-3b", "--hw", "host", "--layers", "1", "--json",
                   env={"ROOFLINE_HOME": str(home)})
    assert json.loads(pred.stdout)["efficiency_source"].startswith("calibrated on ")


@needs_torch
def test_interrupted_calibration_leaves_previous_card(tmp_path):
    home = tmp_path / "home"
    previous = write_card_atomic(home, {"name": "host-cpu", "marker": "previous"})
    proc = subprocess.Popen([sys.executable, "-m", "roofline", "calibrate", "--grid", "smoke", "--device", "cpu"],
                            env={**os.environ, "ROOFLINE_HOME": str(home)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    time.sleep(4)  # inside the microbenchmarks or the engine grid
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert yaml.safe_load(previous.read_text()) == {"name": "host-cpu", "marker": "previous"}
    assert [p.name for p in (home / "hardware").iterdir()] == ["host-cpu.yaml"]


def test_kv_reads_run_at_their_own_bandwidth_fraction():
    """memory_kv scales exactly the attention core of a KV-bound decode step; the weight streams keep `memory`."""
    from roofline.calibrate.calibration import engine_quant
    from roofline.perf.ops import Step
    from roofline.perf.request import timed_step
    from roofline.perf.workload import Workload
    from roofline.sizing.reduce import reduce_card

    hw, card = STORE.hardware("h100-sxm"), reduce_card(STORE.model("llama-3.1-8b"), 1, 4096)
    wl = Workload(prompt_tokens=1, quant=engine_quant("bf16"), kv_quant="bf16")
    base = replace(expected_efficiency(hw), kernel_overhead_s=0.0)
    plain = timed_step(card, hw, Step("decode", 1, 32, 8192), wl, base)
    slow = timed_step(card, hw, Step("decode", 1, 32, 8192), wl, replace(base, memory_kv=base.memory / 4))
    assert float(slow.by_op["attention"]) == pytest.approx(4 * float(plain.by_op["attention"]), rel=1e-6)
    assert float(slow.by_op["ffn"]) == pytest.approx(float(plain.by_op["ffn"]), rel=1e-9)


def _one_layer(card_name: str):
    from roofline.calibrate.calibration import engine_quant
    from roofline.perf.workload import Workload
    from roofline.sizing.reduce import reduce_card

    return reduce_card(STORE.model(card_name), 1, 4096), Workload(prompt_tokens=1, quant=engine_quant("bf16"),
                                                                  kv_quant="bf16")


def test_activation_passes_run_at_their_own_bandwidth_fraction():
    """memory_act scales exactly the elementwise passes (MLP activation, norms and residual adds, MoE row passes);
    the weight matmuls keep `memory`; unset, the passes stream at `memory`."""
    from roofline.perf.ops import Step
    from roofline.perf.request import timed_step

    hw = STORE.hardware("h100-sxm")
    base = replace(expected_efficiency(hw), kernel_overhead_s=0.0, step_overhead_s=0.0)
    for card_name, act_op in (("llama-3.1-8b", "ffn_act"), ("qwen3-30b-a3b", "experts_act")):
        card, wl = _one_layer(card_name)
        step = Step("prefill", 512, 4, 0)
        plain = timed_step(card, hw, step, wl, base)
        same = timed_step(card, hw, step, wl, replace(base, memory_act=base.memory))
        slow = timed_step(card, hw, step, wl, replace(base, memory_act=base.memory / 4))
        assert float(same.total_s) == pytest.approx(float(plain.total_s), rel=1e-12)
        for name in (act_op, "norms"):
            assert float(slow.by_op[name]) == pytest.approx(4 * float(plain.by_op[name]), rel=1e-6)
        gemm = "ffn" if act_op == "ffn_act" else "experts"
        assert float(slow.by_op[gemm]) == pytest.approx(float(plain.by_op[gemm]), rel=1e-12)


def test_activation_cost_slows_only_that_functions_pass():
    """A measured activation_cost scales the pass of the card's activation (tanh-GELU on Gemma 3, SiLU on Llama,
    the experts' on an MoE) and nothing else."""
    from roofline.perf.ops import Step
    from roofline.perf.request import timed_step

    hw = STORE.hardware("h100-sxm")
    base = replace(expected_efficiency(hw), kernel_overhead_s=0.0, step_overhead_s=0.0, memory_act=0.2)
    costly = replace(base, activation_cost={"gelu_tanh": 3.0})
    step = Step("prefill", 512, 4, 0)
    for card_name, act_op, factor in (("gemma-3-1b", "ffn_act", 3.0), ("llama-3.1-8b", "ffn_act", 1.0),
                                      ("qwen3-30b-a3b", "experts_act", 1.0)):
        card, wl = _one_layer(card_name)
        plain, slow = (timed_step(card, hw, step, wl, eff) for eff in (base, costly))
        assert float(slow.by_op[act_op]) == pytest.approx(factor * float(plain.by_op[act_op]), rel=1e-9)
        assert float(slow.by_op["norms"]) == pytest.approx(float(plain.by_op["norms"]), rel=1e-12)


def test_bad_activation_cost_in_a_calibration_is_one_line(tmp_path):
    data = STORE.hardware("h100-sxm").model_dump(mode="json", by_alias=True, exclude_none=True)
    data["calibration"] = {"values": {"memory": 0.8}, "activation_cost": {"gelu_tanh": -2}}
    (tmp_path / "hardware").mkdir()
    (tmp_path / "hardware" / "h100-sxm.yaml").write_text(yaml.safe_dump(data))
    r = run_cli("predict", "--model", "llama-3.1-8b", "--hw", "h100-sxm", "--cards", str(tmp_path))
    assert r.returncode == 2 and "activation_cost" in r.stderr and "Traceback" not in r.stderr


def test_a_gpu_calibration_that_keeps_no_gemm_floor_loads(tmp_path):
    """A GPU fit starts gemm_floor at its default 0 (no floor) and writes it back when no trial beats it (as
    `calibrate --device cuda --quick` did on an H100); predict must read that card, and refuse a floor above 1."""
    data = STORE.hardware("h100-sxm").model_dump(mode="json", by_alias=True, exclude_none=True)
    (tmp_path / "hardware").mkdir()
    for floor, code in ((0.0, 0), (1.5, 2)):
        data["calibration"] = {"values": {"memory": 0.79, "gemm_floor": floor, "kernel_overhead_s": 2.4e-5}}
        (tmp_path / "hardware" / "h100-sxm.yaml").write_text(yaml.safe_dump(data))
        r = run_cli("predict", "--model", "llama-3.1-8b", "--hw", "h100-sxm", "--cards", str(tmp_path), "--json")
        assert r.returncode == code, r.stderr
        assert ("gemm_floor" in r.stderr) == bool(code) and "Traceback" not in r.stderr


def test_qk_norm_is_charged_and_splits_with_the_heads():
    from roofline.perf.ops import Step, step_ops
    from roofline.perf.parallel import shard_ops

    hw = STORE.hardware("h100-sxm")
    step = Step("prefill", 256, 2, 0)
    qwen = {o.name: o for o in step_ops(_one_layer("qwen3-8b")[0], hw, step)}
    assert "qk_norm" not in {o.name for o in step_ops(_one_layer("llama-3.1-8b")[0], hw, step)}
    att = STORE.model("qwen3-8b").architecture.attention
    assert qwen["qk_norm"].act_bytes == 512 * (att.num_heads + att.num_kv_heads) * att.head_dim * 2 * 2 * 2
    sharded = {o.name: o for o in shard_ops(list(qwen.values()), 4)}
    assert sharded["qk_norm"].act_bytes == qwen["qk_norm"].act_bytes / 4
    assert sharded["norms"].act_bytes == qwen["norms"].act_bytes


def test_scan_efficiency_times_the_recurrent_scan_only():
    from roofline.perf.ops import Step
    from roofline.perf.request import timed_step

    hw = STORE.hardware("h100-sxm")
    card, wl = _one_layer("granite-4.0-h-small")
    base = replace(expected_efficiency(hw), kernel_overhead_s=0.0, attention=0.5)
    step = Step("prefill", 1024, 8, 0)
    plain = timed_step(card, hw, step, wl, base)
    slow = timed_step(card, hw, step, wl, replace(base, scan=0.05))
    assert float(slow.by_op["ssm_scan"]) > 5 * float(plain.by_op["ssm_scan"])  # compute-bound at 1/10 the rate
    assert float(slow.by_op["norms"]) == pytest.approx(float(plain.by_op["norms"]), rel=1e-12)


def test_sequence_overhead_is_paid_per_scheduled_sequence():
    """Each sequence a step schedules adds `sequence_overhead_s`, in the predictor's step and in the serving
    simulator's step timer alike."""
    from roofline.perf.ops import Step
    from roofline.perf.request import timed_step
    from roofline.perf.serving.steptime import StepTimer

    hw = STORE.hardware("h100-sxm")
    card, wl = _one_layer("llama-3.1-8b")
    base = expected_efficiency(hw)
    extra = replace(base, sequence_overhead_s=1e-3)
    for batch in (1, 8, 32):
        step = Step("decode", 1, batch, 100)
        gap = float(timed_step(card, hw, step, wl, extra).total_s) - float(timed_step(card, hw, step, wl, base).total_s)
        assert gap == pytest.approx(batch * 1e-3, rel=1e-9)
    timers = [StepTimer(card, hw, wl, eff, 2048, 64, 4096) for eff in (base, extra)]
    plain, more = (t.step_seconds([100] * 8, [300], [0], 9) for t in timers)
    assert more - plain == pytest.approx(9 * 1e-3, rel=1e-6)
    plain, more = (t.decode_run_seconds(np.full(5, 100.0), 3) for t in timers)
    assert more - plain == pytest.approx(np.full(3, 5e-3), rel=1e-6)


def test_thin_gemms_up_to_gemv_max_tokens_stream_like_one_row():
    """Up to gemv_max_tokens rows a linear layer costs what one row costs (bandwidth-bound, no ramp); one row more
    and the GEMM ramp and `memory` apply."""
    from roofline.calibrate.calibration import engine_quant
    from roofline.perf.ops import Step
    from roofline.perf.request import timed_step
    from roofline.perf.workload import Workload
    from roofline.sizing.reduce import reduce_card

    hw, card = STORE.hardware("h100-sxm"), reduce_card(STORE.model("llama-3.1-8b"), 1, 4096)
    wl = Workload(prompt_tokens=1, quant=engine_quant("bf16"), kv_quant="bf16")
    eff = replace(expected_efficiency(hw), kernel_overhead_s=0.0, memory_gemv=0.9, memory=0.6, gemm_half_tokens=64,
                  gemm_floor=0.01, gemm_min_tokens=1, gemv_max_tokens=8)
    ffn = {b: float(timed_step(card, hw, Step("decode", 1, b, 64), wl, eff).by_op["ffn"]) for b in (1, 8, 9)}
    assert ffn[8] == pytest.approx(ffn[1], rel=0.01)  # only the 8 rows of activations differ
    assert ffn[9] > ffn[8] * 1.4


@pytest.mark.parametrize("tokens", [1, 2, 7, 64, 512])
def test_gemv_expert_share_is_the_binomial_share(tokens):
    """One row: E*T*p*(1-p)^(T-1) / touched (exactly one token); rows >= T: every touched expert."""
    from roofline.perf.routing import expected_experts_touched, gemv_expert_share

    e, k = 128, 8
    p = k / e
    one = e * tokens * p * (1 - p) ** (tokens - 1) / expected_experts_touched(e, k, tokens)
    assert float(gemv_expert_share(e, k, tokens, 1)) == pytest.approx(one, rel=1e-9)
    assert float(gemv_expert_share(e, k, tokens, tokens)) == pytest.approx(1.0, rel=1e-9)
    assert float(gemv_expert_share(e, k, tokens, 4)) >= float(gemv_expert_share(e, k, tokens, 1))


@needs_torch
def test_validate_engine_shapes_on_chosen_shapes(tmp_path):
    """`validate --engine-shapes` serves the shapes the user names and scores the prediction of exactly those."""
    env = {"ROOFLINE_HOME": str(tmp_path / "home")}
    plot = tmp_path / "scatter.png"
    out = run_cli("validate", "--engine-shapes", "--hw", "host", "-m", "qwen2.5-3b", "--batch", "2,1",
                  "--prompt", "16", "--output", "4", "--vocab", "512", "-o", str(plot), "--json", env=env)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert [(p["card"], p["batch"], p["prompt"]) for p in data["points"]] == [("qwen2.5-3b", 1, 16), ("qwen2.5-3b", 2, 16)]
    assert all(data["metrics"][k]["n"] == 2 for k in ("ttft", "itl", "prefill_tok_s", "decode_tok_s"))
    for p in data["points"]:
        assert p["measured_decode_tok_s"] == pytest.approx(1 / p["measured_itl"], rel=1e-9)
        assert 0 < p["measured_itl"] < p["measured_ttft"]
    assert plot.stat().st_size > 10_000
    bad = run_cli("validate", "--engine-shapes", "-m", "qwen2.5-3b,nope", env=env)
    assert bad.returncode == 2 and "unknown model 'nope'" in bad.stderr


def test_validate_keeps_each_phase_from_its_faster_pass():
    """validate times a request as calibrate times a step: the first pass drops a warm-up run, a long request runs
    once per pass, and each phase keeps the pass that ran it faster (so a slow spell must hit both passes)."""
    from roofline.calibrate.validation import faster as _faster
    from roofline.calibrate.validation import median_request as _median_request

    class Bench:
        LONG_STEP_S = 0.3

        def __init__(self, runs):
            self.runs, self.seeds = iter(runs), []

        def measure_request(self, eng, prompt, output, batch, seed):
            self.seeds.append(seed)
            ttft, itl = next(self.runs)
            return RequestTiming(ttft_s=ttft, itl_s=itl, prefill_tok_s=batch * prompt / ttft, decode_tok_s=1 / itl)

    short = Bench([(0.15, 0.04), (0.10, 0.020), (0.30, 0.010), (0.12, 0.030)])  # warm-up, then 3 repeats
    first = _median_request(short, None, 16, 4, 2, 3, 0)
    assert (first.ttft_s, first.itl_s) == (0.12, 0.020) and len(set(short.seeds)) == 4
    again = Bench([(0.11, 0.025), (0.20, 0.030), (0.05, 0.015)])  # a later pass: no warm-up
    second = _median_request(again, None, 16, 4, 2, 3, 1)
    assert (second.ttft_s, second.itl_s) == (0.11, 0.025) and not set(again.seeds) & set(short.seeds)
    kept = _faster(first, second)
    assert (kept.ttft_s, kept.itl_s) == (0.11, 0.020)
    assert kept.prefill_tok_s == second.prefill_tok_s and kept.decode_tok_s == first.decode_tok_s
    long = Bench([(2.0, 0.05), (1.9, 0.04)])  # steps average (2.0 + 3 x 0.05) / 4 = 0.54 s: one run after warm-up
    assert _median_request(long, None, 16, 4, 2, 3, 0).ttft_s == 1.9
    assert _median_request(Bench([(1.8, 0.06)]), None, 16, 4, 2, 3, 1).ttft_s == 1.8


def test_step_records_round_trip_through_a_card():
    r = StepRecord(card="llama-3.1-8b", layers=2, vocab=512, dtype="bf16", phase="decode", batch=4, context=64,
                   new_tokens=1, seconds=0.0123, device="cpu")
    stored = {**{k: v for k, v in r.to_dict().items() if k not in ("device", "device_name", "torch")},
              "split": "fit", "predicted_s": 0.0125}
    back = StepRecord.from_dict(stored)
    assert back.key == r.key and back.seconds == r.seconds and isinstance(back.batch, int)
