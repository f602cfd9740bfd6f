"""The serving simulator: the engine's scheduler driven by the predictor's step times, over request streams."""

import json
import tracemalloc

import numpy as np
import pytest
from conftest import run_cli

from roofline.cards.store import CardStore
from roofline.errors import RooflineError
from roofline.perf.serving.policy import policy_for
from roofline.perf.serving.run import build_fleet, serve
from roofline.perf.serving.simulator import simulate
from roofline.perf.serving.workload import Request, parse_lengths, read_trace
from roofline.perf.workload import make_workload

STORE = CardStore()
CARD, HW = STORE.model("llama-3.1-8b"), STORE.hardware("h100-sxm")


def fleet(runtime="vllm", **kw):
    return build_fleet(CARD, HW, make_workload(), policy_for(STORE.runtime(runtime)), **kw)


def run(fl=None, prompt="lognormal:400,200", output="normal:100,30", requests=150, **kw):
    return serve(fl or fleet(), parse_lengths("--prompt", prompt), parse_lengths("--output", output), requests, **kw)


def test_same_seed_same_run_other_seed_other_run():
    a, b, c = (run(rate=20.0, seed=s).summary() for s in (1, 1, 2))
    assert a == b
    assert a["ttft_s"] != c["ttft_s"]


def test_bulk_decode_stretches_equal_step_by_step():
    from roofline.perf.serving.workload import open_loop

    fl = fleet()
    reqs = list(open_loop(30.0, 120, parse_lengths("p", "lognormal:300,200"), parse_lengths("o", "normal:80,30"), 3))
    fast, slow = (_flat(simulate(fl, reqs, fast_forward=f).summary()) for f in (True, False))
    assert fast == pytest.approx(slow, rel=1e-9)  # the same steps; only the order of float additions differs
    # 8,192-token prompts arriving while another decodes: the prompt's last chunk is 1 token, run in a stretch
    long = [Request(i * 0.02, 8192, 30) for i in range(4)]
    fast, slow = (_flat(simulate(fl, long, fast_forward=f).summary()) for f in (True, False))
    assert fast == pytest.approx(slow, rel=1e-9)


def _flat(d: dict) -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update({f"{k}.{q}": x for q, x in v.items() if isinstance(x, (int, float))})
        elif isinstance(v, (int, float)):
            out[k] = v
    return out


def test_closed_loop_never_exceeds_its_clients_and_obeys_littles_law():
    r = run(concurrency=12, requests=240)
    assert max(run_ + wait for _, run_, wait, _ in r.metrics.series) <= 12
    s = r.summary()
    # Little: clients in the system (12, all the time but the tail) = throughput x mean time in the system
    assert s["requests_per_s"] * s["e2e_s"]["mean"] == pytest.approx(12, rel=0.08)


def test_open_loop_littles_law_and_goodput_within_throughput():
    r = run(rate=15.0, requests=300, slo_ttft_s=0.05, slo_itl_s=0.01)
    s = r.summary()
    series = r.metrics.series
    busy = sum((t1 - t0) * (n0 + w0) for (t0, n0, w0, _), (t1, *_rest) in zip(series, series[1:]))
    mean_in_system = busy / (series[-1][0] - series[0][0])
    assert mean_in_system == pytest.approx(s["requests_per_s"] * s["e2e_s"]["mean"], rel=0.15)
    assert 0 < s["goodput_requests_per_s"] <= s["requests_per_s"]
    assert s["requests_per_s"] == pytest.approx(15.0, rel=0.25)


def test_a_tiny_pool_preempts_and_still_serves_everything():
    small = run(fleet(num_blocks=200), prompt="800", output="300", concurrency=8, requests=24).summary()
    big = run(fleet(), prompt="800", output="300", concurrency=8, requests=24).summary()
    assert small["preemptions"] > 0 and big["preemptions"] == 0
    assert small["requests"] == big["requests"] == 24
    assert small["e2e_s"]["mean"] > big["e2e_s"]["mean"]


def _trace(shared: bool) -> list[Request]:
    return [Request(i * 0.05, 2000, 20, "sys" if shared else None, 1800 if shared else 0) for i in range(40)]


def test_prefix_caching_cuts_prefill():
    fl = fleet()
    shared, alone = (simulate(fl, _trace(s)).summary() for s in (True, False))
    assert shared["ttft_s"]["mean"] < 0.5 * alone["ttft_s"]["mean"]
    off = simulate(fleet("llama.cpp"), [Request(r.arrival_s, 900, 20, r.prefix_id, 800) for r in _trace(True)]).summary()
    assert off["ttft_s"]["mean"] > 0  # llama.cpp preset: no block cache, still serves


def test_llama_cpp_slots_cap_the_running_batch():
    r = run(fleet("llama.cpp"), prompt="300", output="50", concurrency=10, requests=40)
    slots = STORE.runtime("llama.cpp").profile.serving_policy()["parallel_slots"]
    assert max(n for _, n, _, _ in r.metrics.series) <= slots < 10
    assert max(w for _, _, w, _ in r.metrics.series) > 0  # the rest wait for a slot


def test_replicas_and_disaggregation_serve():
    one = run(rate=40.0, requests=200).summary()
    two = run(fleet(replicas=2, router="least_tokens"), rate=40.0, requests=200).summary()
    assert two["ttft_s"]["p90"] < one["ttft_s"]["p90"] and two["gpus"] == 2
    dis = run(fleet(disagg=(1, 1)), rate=20.0, requests=100).summary()
    assert dis["requests"] == 100 and dis["gpus"] == 2


def test_serve_json_keys():
    out = run_cli("serve", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--concurrency", "4", "--requests", "20",
                  "--slo-ttft", "1", "--slo-itl", "0.05", "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    for k in ("ttft_s", "itl_s", "e2e_s"):
        assert set(d[k]) == {"mean", "p50", "p90", "p95", "p99"}
    for k in ("requests_per_s", "output_tok_s", "total_tok_s", "goodput_requests_per_s", "preemptions"):
        assert k in d
    assert d["goodput_requests_per_s"] <= d["requests_per_s"]


def test_serve_takes_the_runtime_profile_and_its_version():
    """--runtime NAME[@VERSION]: the scheduler limits come from the profile at that version, the step timer from
    its efficiency; both outputs name the runtime."""
    args = ("serve", "-m", "llama-3.1-8b", "--hw", "mi300x", "--quant", "fp8", "--concurrency", "8", "--requests",
            "24", "--prompt", "2000", "--output", "50", "--json")
    new, old, generic = (json.loads(run_cli(*args, *extra).stdout)
                         for extra in (("--runtime", "vllm"), ("--runtime", "vllm@0.6.0"), ()))
    assert new["runtime"].startswith("vllm@") and old["runtime"] == "vllm@0.6.0" and generic["runtime"] == "generic"
    assert new["scheduler"]["max_num_batched_tokens"] == 8192 and old["scheduler"]["max_num_batched_tokens"] == 512
    assert old["scheduler"]["chunked_prefill"]  # a 128K model: vLLM 0.6's server chunks prefill above 32K
    assert "runtime profile vllm" in new["efficiency_source"] and "runtime profile" not in generic["efficiency_source"]
    assert new["ttft_s"]["mean"] != generic["ttft_s"]["mean"]  # the profile's fitted efficiency times the steps
    table = run_cli(*args[:-1], "--runtime", "sglang")
    assert table.returncode == 0 and "sglang@" in table.stdout


def test_runtime_that_cannot_run_the_format_is_one_line():
    out = run_cli("serve", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--concurrency", "2", "--requests", "4",
                  "--runtime", "vllm", "--kv-quant", "q8_0")
    assert out.returncode == 2 and "vLLM" in out.stderr and out.stderr.count("\n") == 1


def test_sweep_is_the_closed_loop_with_the_static_batch_beside_it():
    args = ("sweep", "-m", "llama-3.1-8b", "--hw", "rtx-4090", "--concurrency", "1,2,10", "--prompt", "8k",
            "--output", "256", "--json")
    closed = json.loads(run_cli(*args, "--requests-per-client", "2").stdout)
    static = json.loads(run_cli(*args, "--static").stdout)
    assert closed["mode"] == "closed_loop" and static["mode"] == "static"
    one, two, ten = closed["rows"]
    assert one["static_ttft_s"] == static["rows"][0]["ttft_s"]  # the static batch, named as such
    assert one["peak_running"] == 1 and two["peak_running"] == 2
    # ten 8.4k-token requests do not fit 24 GiB beside 16 GB of weights (seven do): the closed loop queues them for
    # KV blocks (all 20 served, throughput at its plateau) where the static batch can only say "out of memory"
    assert not ten["fits_in_memory"] and ten["peak_running"] < 10 and ten["queue_wait_mean_s"] > 0
    assert ten["requests"] == 20 and ten["output_tok_s"] <= 1.05 * one["output_tok_s"] * ten["peak_running"]
    assert ten["ttft_p50_s"] > 3 * two["ttft_p50_s"]


BASE = ("serve", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--requests", "5")


@pytest.mark.parametrize("args, words", [
    (("--rate", "0"), "--rate"),
    (("--rate", "-3"), "--rate"),
    (("--concurrency", "0"), "--concurrency"),
    (("--concurrency", "2", "--slo-ttft", "-1"), "--slo-ttft"),
    (("--concurrency", "2", "--prompt", "200k"), "context"),
    (("--concurrency", "2", "--prompt", "lognormal:5"), "--prompt"),
    (("--concurrency", "2", "--rate", "3"), "exactly one"),
    (("--concurrency", "2", "--runtime", "nope"), "--runtime"),
    (("--rate", "3", "--burstiness", "inf"), "--burstiness"),
    (("--concurrency", "2", "--prompt", "lognormal:1e30,5"), "beyond any model's context"),
    (("--concurrency", "2", "--seed", "-1"), "--seed"),
    (("--concurrency", "2", "--requests", "100000000"), "--requests 100,000,000: give 1 to 1,000,000"),
    (("--concurrency", "200000"), "--concurrency 200,000: give 1 to 100,000"),
])
def test_bad_input_is_one_line_exit_2(args, words):
    out = run_cli(*BASE, *args)
    assert out.returncode == 2, out.stderr
    assert words in out.stderr and out.stderr.count("\n") == 1


@pytest.mark.parametrize("args, words", [
    (("--concurrency", "1,100000000"), "--concurrency 100,000,000"),
    (("--concurrency", "64", "--requests-per-client", "100000"), "give 1 to 15,625 at 64 clients"),
])
def test_sweep_refuses_a_closed_loop_too_big_to_simulate(args, words):
    out = run_cli("sweep", "-m", "llama-3.1-8b", "--hw", "h100-sxm", *args)
    assert out.returncode == 2 and words in out.stderr and out.stderr.count("\n") == 1, out.stderr


def test_serve_says_when_arrivals_outrun_the_fleet():
    """At 20 req/s an RTX 4090 serving Llama 3.1 8B (about 4 req/s at 500 -> 200 tokens) queues ever more; at 2
    req/s it keeps up."""
    runs = {rate: run_cli("serve", "-m", "llama-3.1-8b", "--hw", "rtx-4090", "--rate", rate, "--requests", "400",
                          "--json") for rate in ("20", "2")}
    over, fine = (json.loads(runs[r].stdout) for r in ("20", "2"))
    assert over["overloaded"] and over["requests_per_s"] < 10 and not fine["overloaded"]
    text = run_cli("serve", "-m", "llama-3.1-8b", "--hw", "rtx-4090", "--rate", "20", "--requests", "400")
    assert "overloaded: requests arrive at 20/s" in text.stdout


@pytest.mark.parametrize("text, line", [
    ("arrival_s,prompt_tokens,output_tokens\n0,10,5\n0.1,x,5\n", 3),
    ("arrival_s,prompt_tokens,output_tokens\n0,10,5\n0.1,10\n", 3),
    ("arrival_s,prompt_tokens,output_tokens\n1,10,5\n0.5,10,5\n", 3),
    ("arrival_s,prompt_tokens\n1,10\n", 2),
])
def test_malformed_trace_names_the_line(tmp_path, text, line):
    path = tmp_path / "t.csv"
    path.write_text(text)
    out = run_cli(*BASE, "--trace", str(path))
    assert out.returncode == 2 and f"line {line}" in out.stderr and out.stderr.count("\n") == 1


def test_empty_and_jsonl_traces(tmp_path):
    empty = tmp_path / "e.csv"
    empty.write_text("arrival_s,prompt_tokens,output_tokens\n")
    out = run_cli(*BASE, "--trace", str(empty))
    assert out.returncode == 2 and "no requests" in out.stderr
    bad = tmp_path / "b.jsonl"
    bad.write_text('{"arrival_s": 0, "prompt_tokens": 5, "output_tokens": 2}\n{oops\n')
    with pytest.raises(RooflineError, match="line 2"):
        list(read_trace(bad))


def test_a_million_line_trace_streams(tmp_path):
    path = tmp_path / "big.csv"
    with path.open("w") as f:
        f.write("arrival_s,prompt_tokens,output_tokens\n")
        f.writelines(f"{i * 0.01:.2f},100,20\n" for i in range(1_000_000))
        f.write("oops,1,1\n")
    tracemalloc.start()
    r = run(rate=None, trace=path, requests=300)  # reads 300 lines of 1,000,001
    run_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]  # what the finished run still holds
    rows = read_trace(path)
    for _ in zip(range(200_000), rows):  # a fifth of the file, one line at a time
        pass
    read_peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    assert r.summary()["requests"] == 300 and run_peak < 50e6  # the file is ~17 MB of text
    assert read_peak < 2e6  # 200,000 rows held would take ~30 MB: nothing keeps the lines read
    with pytest.raises(RooflineError, match="line 1000002"):
        for _ in rows:  # the rest, to the bad last line (tracemalloc off: it slows every allocation)
            pass


@pytest.fixture
def short_points(monkeypatch):
    """Capacity load points shortened for the test (the defaults: 500 requests / 60 s of arrivals)."""
    from roofline.perf.serving import capacity

    monkeypatch.setattr(capacity, "MIN_REQUESTS", 120)
    monkeypatch.setattr(capacity, "MIN_ARRIVAL_S", 8.0)
    return capacity


def test_capacity_finds_the_highest_rate_meeting_the_slo(short_points):
    cap = short_points
    p, o, rt = parse_lengths("p", "500"), parse_lengths("o", "100"), STORE.runtime("vllm")
    row = cap.search_config(CARD, cap.Config(HW, 1, "fp8", "fp8"), rt, p, o, cap.Slo(0.5, 0.03))
    assert row["fits"] and row["max_rate_per_s"] > 0 and row["bracket_top_per_s"] <= 1.06 * row["max_rate_per_s"]
    assert row["attainment"] >= cap.ATTAINMENT and row["concurrency"] > 1
    strict = cap.search_config(CARD, cap.Config(HW, 1, "fp8", "fp8"), rt, p, o, cap.Slo(0.5, 0.012))
    assert 0 < strict["max_rate_per_s"] < row["max_rate_per_s"]
    fleet = build_fleet(CARD, HW, make_workload(quant="fp8", kv_quant="fp8"), policy_for(rt))
    above = cap.load_point(fleet, row["bracket_top_per_s"] * 1.3, p, o, cap.Slo(0.5, 0.03))
    assert not above["meets"]
    alone = cap.search_config(CARD, cap.Config(HW, 1, "bf16", "bf16"), rt, p, o, cap.Slo(0.5, 0.001))
    assert alone["max_rate_per_s"] == 0 and "one request alone" in alone["why"] and alone["points"] == 0


def test_overload_is_detected_without_an_slo_to_miss(short_points):
    """Above the replica's saturation rate the queue grows for as long as requests arrive; below it, it does not."""
    cap = short_points
    p, o = parse_lengths("p", "500"), parse_lengths("o", "100")
    fleet = build_fleet(CARD, HW, make_workload(), policy_for(STORE.runtime("vllm")))
    top = cap.saturation_rate(fleet, p, o)
    loose = cap.Slo(1e6, 1e6)
    over, under = (cap.load_point(fleet, f * top, p, o, loose) for f in (2.0, 0.4))
    assert over["overloaded"] and not over["meets"] and over["queue_growth"] > 0
    assert not under["overloaded"] and under["meets"]


def test_capacity_cli_prices_and_replicas(short_points):
    from roofline.cli.serve_cmd import render_capacity

    cap = short_points
    cards = [STORE.hardware("rtx-4090"), STORE.hardware("a10")]
    rows = cap.capacity(CARD, cards, STORE.runtime("vllm"), parse_lengths("p", "300"), parse_lengths("o", "50"), 1.0,
                        0.05, target_rate=30.0, usd_per_gpu_hour=cap.parse_prices("rtx-4090=0.5", cards), workers=1)
    assert len(rows) == 8  # 4090: bf16/fp8/int4 weights x bf16/fp8 KV; A10: bf16/int4 x bf16
    priced = [r for r in rows if r.get("usd_per_m_output_tokens")]
    assert priced and all(r["hardware"] == "rtx-4090" for r in priced)
    for r in priced:
        assert r["replicas"] == -(-30.0 // r["max_rate_per_s"]) and r["gpus"] == r["replicas"] * r["tp"]
        assert r["usd_per_m_output_tokens"] == pytest.approx(0.5 * r["tp"] / (r["output_tok_s"] * 3600) * 1e6)
    with pytest.raises(RooflineError, match="usd-per-gpu-hour"):
        cap.parse_prices("b200=3", cards)
    data = {"model": CARD.name, "runtime": "vllm", "slo_ttft_s": 1.0, "slo_itl_s": 0.05, "attainment": 0.9,
            "prompt": "300", "output": "50", "target_rate_per_s": 30.0, "configurations": rows,
            "load_point": {"min_requests": 1, "min_arrival_s": 1, "warmup_share": 0.1, "overload_share": 0.05,
                           "rate_tolerance": 0.05, "confirm_span": 4, "pool_binds": 0.9}}
    parts = list(render_capacity(data, True, True))
    assert len(parts) == 2 + any(not r.get("max_rate_per_s") for r in rows)
    # without --usd-per-gpu-hour the cards' cited cloud rates price the rows, and the table says so
    assert cap.parse_prices(None, cards) == {"a10": 1.29} and "lambda.ai" in cards[1].sources["cloud_usd_per_gpu_hour"]
    data["prices"] = {"a10": {"usd_per_gpu_hour": 1.29, "source": cards[1].sources["cloud_usd_per_gpu_hour"]}}
    assert any("cited cloud rate per GPU-hour (a10 $1.29" in str(p) for p in render_capacity(data, True, True))


def test_validate_serving_smoke():
    """The engine serves a Poisson trace and a closed loop for real (a 1-layer Llama-3.2-1B cut, on the CPU) and the
    simulator predicts the same traces: every figure measured and predicted, the errors computed from them."""
    pytest.importorskip("torch")
    from roofline.calibrate.serving_validation import SPEC, serving_validation

    spec = {**SPEC, "model": "llama-3.2-1b", "layers": 1, "vocab": 512, "requests": 8, "clients": 3,
            "prompt": "uniform:16,48", "output": "uniform:4,8", "max_num_seqs": 4, "step_tokens": 64}
    rows = serving_validation(STORE.hardware("host"), STORE, "cpu", "fp32", spec)
    assert [r["trace"] for r in rows] == ["poisson", "closed_loop"]
    for r in rows:
        for k, measured in r["measured"].items():
            predicted = r["predicted"][k]
            assert measured > 0 and predicted > 0
            assert r["error_pct"][k] == pytest.approx(100 * (predicted - measured) / measured)


def test_validate_serving_serves_the_whole_model_on_a_gpu():
    """On CUDA the two-layer cut's steps are host-bound launches, nothing a served model looks like: the GPU spec is
    the whole model (every layer, its own vocabulary) with longer requests; every other device keeps the cut."""
    from roofline.calibrate.serving_validation import GPU_SPEC, SPEC, spec_for
    from roofline.sizing.reduce import reduce_card

    assert spec_for("cuda") is GPU_SPEC and spec_for("cuda:1") is GPU_SPEC and spec_for("cpu") is SPEC
    assert (GPU_SPEC["layers"], GPU_SPEC["vocab"]) == (None, None) and SPEC["layers"] == 2
    whole = reduce_card(STORE.model(GPU_SPEC["model"]), GPU_SPEC["layers"], GPU_SPEC["vocab"])
    assert whole == STORE.model(GPU_SPEC["model"])


def test_percentiles_beyond_the_histogram_read_the_largest_sample():
    """A latency past the histogram's range (an overloaded run's days of queueing) is reported as itself, not as the
    range's end (p99 was 1,004,120 s below a mean of 5e8 s)."""
    from roofline.perf.serving.metrics import HIGH_S, Histogram

    hist = Histogram()
    hist.add([3 * HIGH_S, 5 * HIGH_S, 1.0])
    summary = hist.summary()
    assert (summary["p50"], summary["p99"]) == (3 * HIGH_S, 5 * HIGH_S) and summary["mean"] == pytest.approx(8 * HIGH_S / 3)
    small = Histogram()
    small.add([0.010, 0.020, 0.030])
    assert small.percentile(99) <= 0.030 and small.percentile(50) == pytest.approx(0.020, rel=0.005)


def test_a_fractional_length_names_the_whole_number_and_a_zero_spread_is_a_fixed_length():
    with pytest.raises(RooflineError, match="whole number of tokens; use 11"):
        parse_lengths("--prompt", "10.7")
    rng = np.random.default_rng(0)
    for text in ("normal:500,0", "lognormal:500,0"):
        assert set(parse_lengths("--prompt", text).draw(rng, 50)) == {500}
    for bad in ("normal:500,-1", "uniform:0,10", "normal:0,5"):
        with pytest.raises(RooflineError, match="token counts of at least 1"):
            parse_lengths("--prompt", bad)
    assert parse_lengths("--prompt", "1.5k").mean == 1536
