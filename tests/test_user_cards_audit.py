"""Cards a user writes or names that no bundled test had covered: a runtime's default slot context longer than the
model's, a list given where one card is asked for, a model shorter than fits' default context, and the units and
labels of the memory budget. Each case states its rule."""

from __future__ import annotations

import json

from hostile import cli, ok, refused


def _json(capsys, *args) -> dict:
    return json.loads(ok(cli(capsys, *args, "--json")))


def test_predict_cuts_a_per_slot_default_context_to_the_model_as_fits_does(capsys):
    """Ollama's default context on a card of 48 GiB or more is 262,144 tokens; Llama-3.1-8B holds 131,072. predict
    had sized every slot at 262,144 (34 GB of KV more than fits counts, and a false 'does NOT fit' on a 48 GiB
    card); it now counts what fits counts, to the byte."""
    setup = ("-m", "llama-3.1-8b", "--hw", "h100-sxm", "--runtime", "ollama")
    fits, pred = _json(capsys, "fits", *setup), _json(capsys, "predict", *setup)
    assert fits["context_tokens"] == 131_072
    assert pred["memory_per_gpu_bytes"] == fits["total_bytes"] and pred["fits_in_memory"] == fits["fits"]


def test_a_list_where_one_card_is_asked_for_is_refused(capsys):
    """`--hw h100,rtx-4090` to predict had silently run the RTX 4090 (the datasheet-name fallback matched one of
    the names); it is refused, pointing at the commands that take lists."""
    refused(cli(capsys, "predict", "-m", "llama-3.1-8b", "--hw", "h100,rtx-4090"), "one name here", "compare")
    refused(cli(capsys, "fits", "-m", "llama-3.1-8b,qwen2.5-7b", "--hw", "h100-sxm"), "one name here")
    assert len(_json(capsys, "compare", "-m", "llama-3.1-8b", "--hw", "h100,rtx-4090")) == 2


def test_fits_sizes_a_short_model_at_its_own_context_by_default(capsys):
    """Without --context, fits sizes 8,192 tokens, or the model's context where that is shorter (yi-34b: 4,096);
    it had sized 8,192 and then noted that it was beyond the model."""
    d = _json(capsys, "fits", "-m", "yi-34b", "--hw", "h100-sxm")
    assert d["context_tokens"] == 4096 and not d["warnings"]
    assert _json(capsys, "fits", "-m", "yi-34b", "--hw", "h100-sxm", "--context", "8k")["warnings"]


def test_budget_lines_carry_their_units_and_the_card_kind_own_runtime(capsys):
    """A sliding-window model's per-token KV names its unit on both sides of the window; the runtime line names
    the context of the card's kind (Metal on Apple, no CUDA on a CPU)."""
    out = ok(cli(capsys, "fits", "-m", "mistral-7b", "--hw", "apple-m2-ultra"))
    assert "0.0 KiB beyond" in out and "runtime (Metal context, framework)" in out and "CUDA" not in out
    assert "then 0.0 KiB" in ok(cli(capsys, "models", "show", "mistral-7b"))


def test_llama_cpp_and_ollama_split_layers_across_gpus(capsys):
    """llama.cpp's default --split-mode is layer (Ollama runs the same): --gpus 4 under them is four pipeline
    stages, as --gpus 1 --pp 4, where it had been predicted as tensor parallel, three times faster per token than
    the layer split a user gets; vLLM keeps tensor parallel."""
    base = ("-m", "llama-3.3-70b", "--hw", "h100-sxm", "--quant", "q4_k_m")
    layer = _json(capsys, "predict", *base, "--gpus", "4", "--runtime", "llama.cpp")
    stages = _json(capsys, "predict", *base, "--gpus", "1", "--pp", "4", "--runtime", "llama.cpp")
    assert (layer["tp"], layer["pp"]) == (1, 4) and layer["itl_s"] == stages["itl_s"]
    assert _json(capsys, "predict", *base, "--gpus", "4", "--runtime", "ollama")["pp"] == 4
    vllm = _json(capsys, "predict", "-m", "llama-3.3-70b", "--hw", "h100-sxm", "--gpus", "4", "--runtime", "vllm")
    assert (vllm["tp"], vllm["pp"]) == (4, 1)
    assert _json(capsys, "fits", *base, "--gpus", "4", "--runtime", "llama.cpp")["pp"] == 4
