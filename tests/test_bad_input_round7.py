"""Hostile inputs, round 7: cards and configs roofline accepted and then crashed on, or accepted as nonsense, and
messages that came as two lines. Each case states what had happened."""

from __future__ import annotations

import pytest
import yaml
from hostile import cli, ok, refused, write_card

from roofline.cards.store import bundled_dir


def _bundled(kind: str, source: str, name: str, **changes) -> dict:
    """A bundled card renamed (no aliases or checkpoints to collide) with `a__b` paths set."""
    card = yaml.safe_load((bundled_dir() / kind / f"{source}.yaml").read_text())
    card.update(name=name, aliases=[])
    card.pop("checkpoints", None)
    for path, value in changes.items():
        node = card
        *parents, last = path.split("__")
        for key in parents:
            node = node[key]
        node[last] = value
    return card


@pytest.mark.parametrize("command", [("serve", "--concurrency", "4", "--requests", "20"),
                                     ("sweep", "--concurrency", "1,4", "--requests-per-client", "1")])
def test_a_model_with_no_kv_layers_is_served(command, tmp_path, capsys):
    """Every layer an MLP ('-'): no KV cache, no context cost; serve and sweep had crashed in the decode fast path
    (IndexError, exit 1) where predict and fits ran."""
    write_card(tmp_path, "models", _bundled("models", "llama-3.1-8b", "mlp-only",
                                            architecture__layer_pattern="-*32"))
    ok(cli(capsys, command[0], "--cards", str(tmp_path), "-m", "mlp-only", "--hw", "h100-sxm", *command[1:]))


def test_a_moe_section_no_layer_uses_is_refused_and_skipped(tmp_path, capsys):
    """Qwen3-30B-A3B with all 48 layers dense: models show had crashed (KeyError 'experts'), and one such user card
    stopped models list for every card."""
    card = _bundled("models", "qwen3-30b-a3b", "moe-all-dense", architecture__moe__first_dense_layers=48)
    card["architecture"]["ffn"] = {"intermediate_size": 6144}
    write_card(tmp_path, "models", card)
    refused(cli(capsys, "models", "show", "moe-all-dense", "--cards", str(tmp_path)), "moe section but no layer uses it")
    code, out, err = cli(capsys, "models", "list", "--cards", str(tmp_path))
    assert code == 0 and "llama-3.1-8b" in out and "moe-all-dense" in err


@pytest.mark.parametrize("change, needle", [
    ({"architecture__layer_pattern": "X*32", "architecture__layer_types": {"X": {"mixer": "full", "num_kv_heads": 7}}},
     "num_kv_heads 7 must divide"),
    ({"stored_weight_bytes": {"embedding": 0, "attention": 0, "ffn": 0, "lm_head": 0, "norms": 0}}, "above 0"),
    ({"stored_weight_bytes": {"ffn": True}}, "stored_weight_bytes.ffn"),
])
def test_per_layer_heads_and_stored_bytes_are_checked(change, needle, tmp_path, capsys):
    """A layer type's num_kv_heads of 7 (or 4,096) over 32 heads had been taken, predicting 9.35 tok/s; stored bytes
    of 0 had made the weights free (266 tok/s for Llama-3.1-8B on an H100) and `true` had read as 1 byte."""
    write_card(tmp_path, "models", _bundled("models", "llama-3.1-8b", "bad", **change))
    refused(cli(capsys, "predict", "--cards", str(tmp_path), "-m", "bad", "--hw", "h100-sxm"), needle)


def test_a_cache_folder_with_a_binary_ref_reads_the_newest_snapshot(tmp_path, capsys):
    """refs/main of bytes that are not text: an internal UnicodeDecodeError (exit 1), read whole whatever its size;
    now at most 64 bytes, and a ref that names no snapshot falls back to the newest."""
    pytest.importorskip("safetensors")
    from checkpoint_files import llama_config, llama_tensors, write_checkpoint

    root = tmp_path / "models--acme--Tiny-Llama-1B"
    write_checkpoint(root / "snapshots" / ("a" * 40), llama_config(), llama_tensors(llama_config()))
    (root / "refs").mkdir()
    (root / "refs" / "main").write_bytes(b"\xff\xfe" * 1000)
    ok(cli(capsys, "predict", "-m", str(root), "--hw", "h100-sxm"))


@pytest.mark.parametrize("args", [
    ("predict", "-m", "mistral-7b", "--hw", "h100-sxm", "--runtime", "mlx"),
    ("predict", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--runtime", "vllm", "--batch", "512", "--quant", "q4_k_m"),
])
def test_a_refusal_is_one_line_whatever_was_warned_first(args, capsys):
    """A warning raised before the error (MLX keeps Mistral's windows whole; vLLM runs 256 sequences) had printed
    ahead of it: two lines where an error is one. Warnings now wait for success."""
    code, _, err = cli(capsys, *args)
    assert code == 2 and err.count("\n") == 1 and err.startswith("error:")


def test_an_empty_length_is_refused_not_defaulted(capsys):
    """serve --prompt '' had run the default 500-token prompts; predict refuses the same empty value."""
    refused(cli(capsys, "serve", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--rate", "5", "--requests", "10",
                "--prompt", ""), "--prompt ''")


def test_a_fitted_scope_names_a_version_of_the_profile(tmp_path, capsys):
    """fitted: {nvidia-gpu@banana: ...} had been accepted (and never applied)."""
    profile = yaml.safe_load((bundled_dir() / "runtimes" / "vllm.yaml").read_text())
    profile["fitted"] = {"nvidia-gpu@banana": {"memory": 0.9}}
    write_card(tmp_path, "runtimes", profile)
    refused(cli(capsys, "predict", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--runtime", "vllm", "--cards",
                str(tmp_path)), "nvidia-gpu@banana", "name a version")


@pytest.mark.parametrize("args", [("sweep", "--concurrency", "١"), ("serve", "--rate", "1", "--requests", "5",
                                                                     "--disagg", "١:١")])
def test_counts_take_ascii_digits_only(args, capsys):
    """int() reads Arabic-Indic digits ('١' is 1): --concurrency and --disagg had taken them, where --prompt, --batch
    and trace cells refuse them."""
    refused(cli(capsys, args[0], "-m", "llama-3.1-8b", "--hw", "h100-sxm", *args[1:]), "١")
