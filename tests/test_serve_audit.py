"""The serving commands under inputs a demanding user sends: traces that start late or arrive at once, loads that
thrash the KV pool, requests too long for the model or for a runtime's slots, compressed or malformed traces,
layouts beyond a card's link domain, and plots of requests the model cannot hold. Each case states its rule."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from hostile import cli, ok, refused

from roofline.cards.store import CardStore
from roofline.perf.serving import simulator
from roofline.perf.serving.capacity import capacity
from roofline.perf.serving.workload import parse_lengths

SMALL = ("-m", "llama-3.1-8b", "--hw", "h100-sxm")


def _trace(path, arrivals, prompt=500, output=200):
    path.write_text("arrival_s,prompt_tokens,output_tokens\n" + "".join(f"{t:.6f},{prompt},{output}\n"
                                                                       for t in arrivals))
    return path


def _serve(capsys, *args) -> dict:
    return json.loads(ok(cli(capsys, "serve", *SMALL, *args, "--json")))


def test_overload_is_judged_over_the_trace_own_arrival_span(tmp_path, capsys):
    """A trace's overload verdict does not depend on when its clock starts: the same rows shifted by 1,000 s read
    the same (the span had been measured from t = 0, so the shifted copy read not overloaded)."""
    gaps = np.random.default_rng(0).exponential(0.01, 600)  # 100 req/s: beyond what one H100 serves of this
    early = _serve(capsys, "--trace", _trace(tmp_path / "a.csv", np.cumsum(gaps)))
    late = _serve(capsys, "--trace", _trace(tmp_path / "b.csv", np.cumsum(gaps) + 1000))
    assert early["overloaded"] is True and late["overloaded"] is True
    assert late["ttft_s"]["p90"] == pytest.approx(early["ttft_s"]["p90"])
    calm = _serve(capsys, "--trace", _trace(tmp_path / "c.csv", np.arange(200) * 0.5))
    assert calm["overloaded"] is False


def test_a_burst_faster_than_a_step_reads_overloaded_and_an_instant_has_no_rate(tmp_path, capsys):
    """Requests arriving faster than one engine step (1e6 req/s) fill the queue before any step ends: the queue is
    sampled as each joins it, so the run reads overloaded (it had read false above 10,000 req/s). A trace whose rows
    all arrive at one instant has no rate to be over: `overloaded` is null, not missing."""
    assert _serve(capsys, "--rate", "1e6", "--requests", "300")["overloaded"] is True
    assert _serve(capsys, "--rate", "2", "--requests", "60")["overloaded"] is False
    assert _serve(capsys, "--trace", _trace(tmp_path / "t.csv", [0.0] * 50))["overloaded"] is None


def test_a_thrashing_pool_is_refused_in_bounded_time(capsys, monkeypatch):
    """Outputs far longer than the pool holds preempt the same sequences thousands of times each; the run is
    refused once preemptions pass the thrash limit (it had run for minutes on 200 requests)."""
    monkeypatch.setattr(simulator, "MIN_THRASH_PREEMPTIONS", 500)
    refused(cli(capsys, "serve", *SMALL, "--rate", "100", "--requests", "50", "--prompt", "100", "--output",
                "uniform:50000,100000"), "thrashes", "preemptions", "--output")


def test_capacity_refuses_requests_beyond_the_context_before_searching(capsys):
    """`capacity` checks --prompt/--output against the model's context once, up front (it had answered 'one
    request alone misses the TTFT' for a request the model cannot hold, exit 0)."""
    refused(cli(capsys, "capacity", *SMALL, "--slo-ttft", "1", "--slo-itl", "0.05", "--prompt", "200000"),
            "--prompt", "131,072", "shorten")


def test_a_configuration_that_cannot_hold_the_request_is_left_out_not_fatal(monkeypatch):
    """Ollama's 32,768-token slots on an RTX 4090 cannot hold a 40,100-token request: that card's rows are left out
    with the reason and the other card is still searched (the error had ended the whole search)."""
    from roofline.perf.serving import capacity as cap

    monkeypatch.setattr(cap, "MIN_REQUESTS", 40)
    monkeypatch.setattr(cap, "MIN_ARRIVAL_S", 4.0)
    st = CardStore()
    rows = capacity(st.model("llama-3.1-8b"), [st.hardware("rtx-4090"), st.hardware("h100-sxm")],
                    st.runtime("ollama"), parse_lengths("p", "40000"), parse_lengths("o", "100"), 100.0, 1.0,
                    workers=1)
    small = [r for r in rows if r["hardware"] == "rtx-4090"]
    assert small and all(not r["fits"] and "tokens" in r["why"] for r in small)
    assert any(r["hardware"] == "h100-sxm" and r.get("max_rate_per_s") for r in rows)


def test_a_trace_row_too_long_is_named_by_its_line(tmp_path, capsys):
    """The row beyond the context is named by file and line, with the fix (it had said 'request 2')."""
    path = tmp_path / "t.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n0,10,10\n\n0.5,200000,10\n")
    refused(cli(capsys, "serve", *SMALL, "--trace", path), "line 4", "131,072", "drop the row")


@pytest.mark.parametrize("case, needles", [
    ("gzip", ("gzip-compressed", "gunzip")),
    ("long line", ("line 2", "65,536 characters")),
    ("prefix id alone", ("line 1", "prefix_id without prefix_tokens")),
    ("prefix id object", ("line 1", "prefix_id must be a name or a number")),
    ("nan arrival", ("line 1", "not a finite number")),
])
def test_malformed_traces_get_one_line_with_the_fix(case, needles, tmp_path, capsys):
    row = '{"arrival_s": 0, "prompt_tokens": 5, "output_tokens": 5'
    files = {
        "gzip": ("t.csv.gz", gzip.compress(b"arrival_s,prompt_tokens,output_tokens\n0,5,5\n")),
        "long line": ("t.csv", ("arrival_s,prompt_tokens,output_tokens\n0,5," + "5" * 70_000 + "\n").encode()),
        "prefix id alone": ("t.jsonl", (row + ', "prefix_id": "sys"}\n').encode()),
        "prefix id object": ("t.jsonl", (row + ', "prefix_id": {"a": 1}, "prefix_tokens": 2}\n').encode()),
        "nan arrival": ("t.jsonl", b'{"arrival_s": NaN, "prompt_tokens": 5, "output_tokens": 5}\n'),
    }
    name, data = files[case]
    (tmp_path / name).write_bytes(data)
    refused(cli(capsys, "serve", *SMALL, "--trace", tmp_path / name), *needles)


@pytest.mark.parametrize("args, needles", [
    (("--trace=",), ("--trace", "empty path")),
    (("--rate", "5", "--prompt", "normal:0.5,0"), ("--prompt", "at least 1")),
])
def test_empty_trace_path_and_sub_token_lengths_are_refused(args, needles, capsys):
    refused(cli(capsys, "serve", *SMALL, *args), *needles)


def test_tensor_parallel_stays_in_the_card_link_domain(capsys):
    """32 H100s as one tensor-parallel group would be modelled at NVLink speed across nodes: refused with the
    pipeline layout that spans nodes instead. A card that states no domain (a GeForce card on PCIe) still takes
    --gpus 2, as published multi-GPU rows of them run."""
    refused(cli(capsys, "predict", *SMALL, "--gpus", "16"), "link domain of 8", "--gpus 8 --pp 2")
    refused(cli(capsys, "serve", *SMALL, "--gpus", "32", "--rate", "1"), "--gpus 8 --pp 4")
    ok(cli(capsys, "predict", "-m", "llama-3.1-8b", "--hw", "rtx-4090", "--gpus", "2"))


def test_plots_hold_requests_to_the_context_as_the_commands_do(tmp_path, capsys):
    """`plot roofline` and `plot sweep` refuse a prompt beyond the model's context as predict and sweep do; `plot
    memory` draws it with the warning `fits` gives. No message suggests a flag the command lacks."""
    for kind in ("roofline", "sweep"):
        result = cli(capsys, "plot", kind, *SMALL, "--prompt", "200k", "-o", tmp_path / f"{kind}.png")
        refused(result, "131,072", "shorten")
        assert "pass --allow-beyond-context" not in result[2]
        assert not (tmp_path / f"{kind}.png").exists()
    refused(cli(capsys, "sweep", *SMALL, "--prompt", "200k"), "roofline predict --allow-beyond-context")
    out = json.loads(ok(cli(capsys, "plot", "memory", *SMALL, "--context", "1M", "-o", tmp_path / "m.png",
                            "--json")))
    assert out["warnings"] and "beyond" in out["warnings"][0]
