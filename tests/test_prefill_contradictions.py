"""A prompt's prefill obeys the causal count and its bound, whatever way it is cut: each case below was a
contradiction found by sampling predictions over every bundled card (a TTFT under the datasheet ceiling, a TTFT
that fell as the prompt grew, `serve` at one client answering what `predict` does not)."""

from __future__ import annotations

import json

import pytest
from hostile import cli, ok

from roofline.cards.store import CardStore
from roofline.perf.ops import Step, step_ops


def _json(capsys, *args) -> dict:
    return json.loads(ok(cli(capsys, *args, "--json")))


def _attention_flops(card, step: Step) -> float:
    return sum(float(op.flops) * op.count for op in step_ops(card, CardStore().hardware("b200"), step, "nvfp4", "bf16")
               if op.name == "attention")


def test_compressed_attention_is_causal_however_the_prompt_is_cut():
    """DeepSeek-V4's pooled entries: a new token sees those before it, so 128 chunks of 8,192 tokens do the work of
    one 1,048,576-token step (each token had seen every entry of the whole prompt: chunked work 0.57x of it)."""
    card = CardStore().model("deepseek-v4")
    whole = _attention_flops(card, Step("prefill", 1_048_576, 1, 0))
    chunked = sum(_attention_flops(card, Step("prefill", 8192, 1, k * 8192)) for k in range(128))
    assert chunked == pytest.approx(whole, rel=0.01)


def test_deepseek_v4_expected_prefill_stays_above_its_ceiling(capsys):
    d = _json(capsys, "predict", "-m", "deepseek-v4", "--hw", "rtx-5070", "--runtime", "vllm", "--quant", "nvfp4",
              "--prompt", "1048000", "--output", "2")
    assert d["ttft_s"] >= d["ceiling"]["ttft_s"] and d["prefill_tok_s"] <= d["ceiling"]["prefill_tok_s"]


@pytest.mark.parametrize("model,hw,gpus", [("deepseek-v3", "h200", "8"), ("kimi-k2", "mi300x", "8")])
def test_an_mla_prompt_never_prefills_sooner_as_it_grows(model, hw, gpus, capsys):
    """MLA's latent decompression is a GEMM over every cached row: padded as if it had the step's few new tokens,
    a 2-token prompt over 32,000 cached tokens took 81 ms and an 8-token one 40 ms."""
    ttft = [_json(capsys, "predict", "-m", model, "--hw", hw, "--gpus", gpus, "--cached-tokens", "32000",
                  "--output", "2", "--prompt", str(n))["ttft_s"] for n in (1, 2, 4, 8, 16, 64)]
    assert all(later >= earlier * (1 - 1e-9) for earlier, later in zip(ttft, ttft[1:])), ttft


@pytest.mark.parametrize("model,runtime,prompt", [("mistral-small-3-24b", "vllm@0.6.0", "30000"),
                                                  ("llama-3.1-8b", "vllm@0.6.0", "120000"),
                                                  ("gpt-oss-20b", "llama.cpp", "3000")])
def test_serve_at_one_client_prefills_as_predict_does(model, runtime, prompt, capsys):
    """A whole 30,000-token prompt in one step (vLLM 0.6 runs a 32K model's prompts unchunked) is timed with its
    attention over every token, not extrapolated from a smaller step's table (serve had read 3.1 s under a 4.2 s
    ceiling); a 128K model's prompt runs in 512-token chunks in both; llama.cpp's 2,048-token step runs as 512-token
    micro-batches, each re-reading the weights (serve had read 26% short)."""
    hw = "rtx-4070-ti-super" if runtime == "llama.cpp" else "h100-sxm"
    setup = ("-m", model, "--hw", hw, "--runtime", runtime, "--prompt", prompt, "--output", "20")
    served = _json(capsys, "serve", *setup, "--concurrency", "1", "--requests", "2")
    predicted = _json(capsys, "predict", *setup)
    assert served["ttft_s"]["p50"] == pytest.approx(predicted["ttft_s"], rel=0.03)
    assert served["ttft_s"]["p50"] >= predicted["ceiling"]["ttft_s"]


def test_fits_suggests_no_fewer_slots_where_the_server_splits_its_context(capsys):
    """llama-server splits -c 4096 over its -np slots: fewer slots hold the same KV, so '--concurrency 7' was
    advice that did not fit either."""
    d = _json(capsys, "fits", "-m", "command-r-35b", "--hw", "rtx-a5000", "--runtime", "llama.cpp-vulkan",
              "--quant", "q4_k_m", "--concurrency", "16")
    assert not d["fits"] and d["suggestions"]
    assert not any(s.startswith("--concurrency") for s in d["suggestions"]), d["suggestions"]
