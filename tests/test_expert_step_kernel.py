"""ggml runs all of a MoE matmul's experts with one kernel chosen on the step's tokens (ggml_cuda_mul_mat_id: the
matrix-vector kernel while the step holds at most 8 tokens, tiles for every expert above; Vulkan's only at one), not
per expert on the tokens each receives. Chosen per expert, a short MoE prompt ran its experts as matrix-vector
kernels (each sees a few tokens) and dodged the fixed cost per expert that a longer prompt pays: prefill tok/s fell
as the prompt grew (Qwen3-Next on an MI300X: 6,337 tok/s at 128 tokens, 997 at 512), where llama.cpp's own DeepSeek-V3
rows on MI300X rise with the prompt."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hostile import cli, ok

from roofline.calibrate.row_params import EXPERT_PARAM, copied_sequences, fit_rows
from roofline.cards.store import CardStore
from roofline.perf.efficiency import Efficiency
from roofline.perf.ops import Op
from roofline.perf.timing import expert_gemv_share

PROMPTS = (16, 32, 64, 96, 128, 192, 256, 384, 512)


def _prefill(capsys, runtime: str, model: str, hw: str, prompt: int) -> float:
    out = ok(cli(capsys, "predict", "--runtime", runtime, "--quant", "q4_k_m", "--json", "--model", model, "--hw", hw,
                 "--prompt", prompt, "--output", 1))
    return json.loads(out)["prefill_tok_s"]


@pytest.mark.parametrize("runtime", ["llama.cpp", "ollama"])
@pytest.mark.parametrize("model,hw", [("qwen3-next-80b-a3b", "mi300x"), ("qwen3-235b-a22b", "mi300x"),
                                      ("glm-4.5-air", "rtx-5090"), ("nemotron-3-nano", "ryzen-ai-max-395")])
def test_moe_prefill_rate_never_falls_as_the_prompt_grows_to_one_micro_batch(runtime, model, hw, capsys):
    rates = [_prefill(capsys, runtime, model, hw, n) for n in PROMPTS]
    assert all(later >= earlier * (1 - 1e-9) for earlier, later in zip(rates, rates[1:])), rates


def _moe_op() -> Op:
    return Op("experts", "moe", "bf16", flops=1e9, weight_bytes=1e8, routing=(128, 8), experts_touched=64.0)


def test_one_kernel_for_every_expert_follows_the_step_tokens():
    tokens = np.array([1, 8, 9, 64, 512])
    step = expert_gemv_share(_moe_op(), Efficiency(gemv_max_tokens=8, expert_gemv_max_tokens=8), tokens)
    assert step.tolist() == [1.0, 1.0, 0.0, 0.0, 0.0]
    per_expert = expert_gemv_share(_moe_op(), Efficiency(gemv_max_tokens=8), tokens)
    assert per_expert[3] > 0.9  # 64 tokens x 8 of 128 experts: ~4 tokens each, matrix-vector when chosen per expert


@pytest.mark.parametrize("runtime,most", [("llama.cpp", 8), ("ollama", 8), ("llama.cpp-vulkan", 1)])
def test_ggml_profiles_choose_the_moe_kernel_on_the_step(runtime, most):
    prof = CardStore().runtime(runtime).profile
    assert prof.efficiency["default"].expert_gemv_max_tokens == most
    assert "efficiency.default.expert_gemv_max_tokens" in prof.sources


def _row(engine: str, batch: str, metric: str = "agg_decode_tok_s") -> dict:
    return {"id": "T1", "source": "test", "engine": engine, "model_card": "gpt-oss-120b", "hw_card": "dgx-spark",
            "weight_quant": "MXFP4", "kv_dtype": "", "isl": "512", "osl": "32", "batch": batch, "tp": "1",
            "metric": metric, "value": "300", "unit": "tok/s", "notes": "", "gpus": "1"}


def test_llama_batched_bench_sequences_are_copies_and_fit_no_cost_per_expert():
    bench = "llama.cpp CUDA build 6918; llama-batched-bench -fa 1 -ub 2048"
    assert copied_sequences(_row(bench, "32"))
    assert not copied_sequences(_row(bench, "1"))
    assert not copied_sequences(_row(bench, "32", "prefill_tok_s"))
    assert not copied_sequences(_row("llama.cpp CUDA build 6918; llama-server -np 32", "32"))
    fitted = fit_rows([_row(bench, "32"), _row("llama.cpp CUDA build 6918; llama-server -np 32", "32")], CardStore())
    assert [f.fitted for f in fitted] == [False, True] and fitted[1].param == EXPERT_PARAM
