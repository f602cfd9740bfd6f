"""llama.cpp hands a matrix-vector kernel (MMVQ, up to 8 rows) over to its matrix-matrix kernel (MMQ) where the two
meet, so a step never gets faster as rows are added: not past 8 decoding sequences, not as a MoE prompt's experts
pass 8 tokens each. On HBM cards the fitted per-SM MMVQ cap sits far below the bus rate: 9 rows read at the bus
rate would make an H100's decode step 30% shorter at batch 9 than at 8."""

from __future__ import annotations

import json

import pytest
from hostile import cli, ok

BASE = ("predict", "--runtime", "llama.cpp", "--quant", "q4_k_m", "--json")


def _predict(capsys, model: str, hw: str, *args) -> dict:
    return json.loads(ok(cli(capsys, *BASE, "--model", model, "--hw", hw, *args)))


@pytest.mark.parametrize("hw", ["h100-sxm", "b200", "rtx-4090"])
def test_a_decode_step_never_shortens_as_sequences_are_added(hw, capsys):
    steps = [_predict(capsys, "llama-3.1-8b", hw, "--batch", b, "--prompt", 500, "--output", 200)["itl_s"]
             for b in range(1, 17)]
    assert all(later >= earlier * (1 - 1e-9) for earlier, later in zip(steps, steps[1:])), steps


@pytest.mark.parametrize("model", ["mixtral-8x7b", "llama-3.1-8b"])
def test_a_prompt_never_prefills_sooner_as_it_grows(model, capsys):
    ttft = [_predict(capsys, model, "h100-sxm", "--prompt", n, "--output", 1)["ttft_s"] for n in range(1, 65, 3)]
    assert all(later >= earlier * (1 - 1e-9) for earlier, later in zip(ttft, ttft[1:])), ttft


@pytest.mark.parametrize("runtime", ["llama.cpp", "ollama"])
def test_ggml_cpu_has_no_kernel_switch_to_jump_at(runtime, capsys):
    """ggml-cpu runs one dot product per weight row and token at any batch (no MMVQ/MMQ pair, no tile to fill): a
    decode step of 9 sequences costs about 9/8 of one of 8, not the several times a GPU-style GEMM ramp makes it."""
    base = ("predict", "--runtime", runtime, "--quant", "q4_k_m", "--json", "--model", "llama-3.1-8b",
            "--hw", "threadripper-pro-5995wx", "--prompt", 500, "--output", 200)
    itl = {b: json.loads(ok(cli(capsys, *base, "--batch", b)))["itl_s"] for b in (8, 9)}
    assert itl[8] <= itl[9] <= itl[8] * 1.3, itl
