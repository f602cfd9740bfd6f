"""A runtime without a windowed KV cache for a model's family keeps its sliding windows whole: llama.cpp's `llama`
and `phi3` architectures (Mistral-7B-v0.1, Phi-3) cache and attend every token, and every llama.cpp build before
PR #13194 (May 2025) did so for every architecture. `fits`, `predict` and the published rows size and time those
layers as full attention there; vLLM and the generic profile keep the window."""

from __future__ import annotations

import json

import pytest
from hostile import cli, ok

MIB = 2**20


def _fits(capsys, model: str, runtime: str | None, context: int) -> dict:
    hw = "apple-m2-ultra" if runtime == "mlx" else "rtx-4090"
    args = ("fits", "--model", model, "--hw", hw, "--context", context, "--json")
    return json.loads(ok(cli(capsys, *args, *(("--runtime", runtime) if runtime else ()))))


@pytest.mark.parametrize("model,runtime,context,kv_mib", [
    ("mistral-7b", "llama.cpp", 32768, 4096),   # 32 layers x 8 KV heads x 128 x 2 x 2 B = 128 KiB a token, all kept
    ("mistral-7b", "ollama", 32768, 4096),
    ("mistral-7b", "mlx", 32768, 4096),         # mlx-lm's llama.py: no layer_types in the config, no window
    ("mistral-7b", "vllm", 32768, 512),         # the 4,096-token window (vLLM's KV in bf16, 2 bytes as f16)
    ("mistral-7b", None, 32768, 512),
    ("phi-3-mini", "llama.cpp", 4096, 1536),    # 32 layers x 32 x 96 x 2 x 2 B = 384 KiB a token; window 2,047
    ("phi-3-mini", "vllm", 4096, 768),          # 2,047 tokens in vLLM blocks of 16: 2,048
    ("gemma-2-9b", "llama.cpp", 8192, 2016),    # the windowed cache: 21 full layers at 8,192, 21 at 4,096
    ("gemma-2-9b", "llama.cpp@b3216", 8192, 2688),  # before PR #13194: 42 layers x 8,192 tokens x 8 KiB
])
def test_kv_per_sequence_follows_the_runtimes_windows(capsys, model, runtime, context, kv_mib):
    assert _fits(capsys, model, runtime, context)["kv_bytes_per_sequence"] == pytest.approx(kv_mib * MIB, rel=1e-6)


@pytest.mark.parametrize("runtime,said", [("llama.cpp", True), ("vllm", False)])
def test_the_user_is_told_the_windows_are_kept_whole(capsys, runtime, said):
    _, _, err = cli(capsys, "fits", "-m", "mistral-7b", "--hw", "rtx-4090", "--runtime", runtime, "--json")
    assert ("keeps mistral-7b's sliding windows whole" in err) == said, err


def test_decode_reads_the_whole_context_where_the_window_is_kept_whole(capsys):
    def itl(runtime: str, prompt: str) -> float:
        return json.loads(ok(cli(capsys, "predict", "-m", "mistral-7b", "--hw", "rtx-4090", "--runtime", runtime,
                                 "--prompt", prompt, "--output", 16, "--json")))["itl_s"]
    assert itl("vllm", "16k") == pytest.approx(itl("vllm", "6k"), rel=1e-3)  # past the window: constant
    assert itl("llama.cpp", "16k") > itl("llama.cpp", "6k") * 1.03  # 10k more tokens of 128 KiB read each step
