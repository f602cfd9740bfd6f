"""`roofline engine run` as a user runs it: measured beside predicted, and clean refusals."""

import json

import pytest
from conftest import run_cli

pytest.importorskip("torch")


@pytest.mark.parametrize("model", ["qwen2.5-3b", "qwen3-30b-a3b", "gpt-oss-20b", "nemotron-3-nano"])
def test_engine_run_json(model):
    out = run_cli("engine", "run", "--model", model, "--layers", "1" if model != "nemotron-3-nano" else "6",
                  "--vocab", "256", "--prompt", "24", "--output", "3", "--batch", "2", "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    for side in ("measured", "predicted"):
        assert set(d[side]) == {"ttft_s", "itl_s", "prefill_tok_s", "decode_tok_s"}
        assert all(v > 0 for v in d[side].values())
    assert d["hardware"] == "host-cpu"


@pytest.mark.parametrize("args, message", [
    (("--model", "llama-3.1-70b"), "GB of weights and"),  # refused before torch loads, by roofline's formulas
    (("--model", "deepseek-v3", "--layers", "1", "--vocab", "64"), "MLA"),
    (("--model", "llama-3.1-8b", "--layers", "99"), "--layers: llama-3.1-8b has 32 layers"),
    (("--model", "llama-3.1-8b", "--layers", "1", "--weights", "int3"), "--weights int3"),
])
def test_engine_refusals(args, message):
    out = run_cli("engine", "run", *args)
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr
