"""Each plot renders to a real, non-trivial image file."""

import json

import pytest
from conftest import run_cli

from roofline.cards.store import CardStore
from roofline.perf.request import predict
from roofline.perf.workload import make_workload
from roofline.report.plots import roofline_points


@pytest.mark.parametrize("args", [
    ("roofline", "--model", "llama-3.3-70b", "--hw", "dgx-spark", "--quant", "nvfp4"),
    ("sweep", "--model", "qwen2.5-3b", "--hw", "dgx-spark", "--concurrency", "1,4,16,64,256,1024,4096"),
    ("memory", "--model", "llama-3.3-70b", "--hw", "dgx-spark,h100-sxm,b200", "--quant", "fp8", "--context", "32k"),
    ("serve", "--model", "llama-3.1-8b", "--hw", "h100-sxm", "--rate", "30", "--requests", "200", "--runtime", "vllm"),
])
@pytest.mark.parametrize("suffix, magic", [(".png", b"\x89PNG"), (".svg", b"<?xml")])
def test_plot_renders(tmp_path, args, suffix, magic):
    path = tmp_path / f"{args[0]}{suffix}"
    out = run_cli("plot", *args, "-o", str(path), "--json")
    assert out.returncode == 0, out.stderr
    assert path.read_bytes()[:5].startswith(magic)
    assert path.stat().st_size > 15_000  # axes, roofs and points, not an empty canvas


def test_plot_rejects_unknown_suffix(tmp_path):
    out = run_cli("plot", "roofline", "--model", "llama-3.1-8b", "--hw", "h100", "-o", str(tmp_path / "x.gif"))
    assert out.returncode == 2 and "use a .png, .svg or .pdf" in out.stderr


@pytest.mark.parametrize("gpus", [1, 2])
@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_roofline_plot_points_are_predicts_steps(phase, gpus):
    """The plotted step is the step `predict` times, collectives included under tensor parallelism."""
    store = CardStore()
    card, hw = store.model("llama-3.3-70b"), store.hardware("h100-sxm")
    wl = make_workload(prompt_tokens=2048, output_tokens=64, batch=4, quant="fp8", tp=gpus)
    whole, ops = roofline_points(card, hw, wl, phase)
    report = predict(card, hw, wl).phases[phase]
    assert whole["time_s"] == pytest.approx(report.time_s, rel=1e-9)
    assert whole["intensity"] == pytest.approx(report.arithmetic_intensity, rel=1e-9)
    assert ops and all(op["time_s"] <= whole["time_s"] for op in ops)


def test_serve_plot_shows_the_run_it_simulated(tmp_path):
    """The pictured series is the run's: a closed loop of 10 clients never has more than 10 requests in the system,
    and a pool too small for them (7 fit) makes the queue and the KV use visible."""
    out = run_cli("plot", "serve", "-m", "llama-3.1-8b", "--hw", "rtx-4090", "--concurrency", "10", "--requests",
                  "20", "--prompt", "8k", "--output", "64", "-o", str(tmp_path / "s.svg"), "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["runtime"] == "generic" and d["points"] > 5
    # one runs whenever any waits, once the first step starts; at t = 0 all ten have joined the queue before it
    assert 0 < d["peak_running"] < 10 and 0 < d["peak_waiting"] <= 10
    assert 0.5 < d["peak_kv_use"] <= 1.0
