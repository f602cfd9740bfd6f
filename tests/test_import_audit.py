"""Model files as a user meets them: a header's infinite size, a GGUF part or a download missing shards, zero KV
heads, a period of zero layers, a path the OS will not open, and a tiny model on a big card, each refused in one
line or served in bounded memory. Each case states the rule it checks."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("gguf")

from checkpoint_files import llama_config, llama_gguf, llama_tensors, write_checkpoint, write_gguf  # noqa: E402
from hostile import cli, ok, refused  # noqa: E402

from roofline.cards.store import CardStore  # noqa: E402
from roofline.importers import open_store  # noqa: E402
from roofline.perf.serving.policy import ServingPolicy  # noqa: E402
from roofline.perf.serving.replica import UNBOUNDED_BLOCKS, kv_pool_blocks  # noqa: E402
from roofline.perf.workload import make_workload  # noqa: E402


def test_an_infinite_size_in_a_gguf_header_is_refused(tmp_path, capsys):
    path = write_gguf(tmp_path / "inf.gguf", "llama", {"block_count": float("inf"), "embedding_length": 256,
                                                        "attention.head_count": 4}, {})
    refused(cli(capsys, "fits", "--model", path, "--hw", "h100"), "llama.block_count", "must be an integer", "inf")


def test_zero_kv_heads_is_refused_not_taken_as_every_head(tmp_path, capsys):
    path = llama_gguf(tmp_path / "m.gguf")
    write_gguf(tmp_path / "zero.gguf", "llama", {"block_count": 2, "embedding_length": 256,
                                                 "attention.head_count": 4, "attention.head_count_kv": 0}, {})
    assert json.loads(ok(cli(capsys, "fits", "--model", path, "--hw", "h100", "--json")))["fits"]
    refused(cli(capsys, "fits", "--model", tmp_path / "zero.gguf", "--hw", "h100"), "head_count_kv", "is 0")


def test_one_part_of_a_split_gguf_is_refused(tmp_path, capsys):
    path = write_gguf(tmp_path / "m-00001-of-00002.gguf", "llama",
                      {"block_count": 2, "embedding_length": 256, "attention.head_count": 4, "split.count": 2}, {})
    refused(cli(capsys, "fits", "--model", path, "--hw", "h100"), "split in 2", "llama-gguf-split --merge")


def test_a_download_missing_shards_is_refused(tmp_path, capsys):
    cfg = llama_config()
    folder = write_checkpoint(tmp_path / "ckpt", cfg, llama_tensors(cfg), shards=3)
    (folder / "model.safetensors.index.json").unlink()
    assert ok(cli(capsys, "fits", "--model", folder, "--hw", "h100"))  # every shard there: read without the index
    (folder / "model-00002-of-00003.safetensors").unlink()
    refused(cli(capsys, "fits", "--model", folder, "--hw", "h100"), "1 of 3 shards", "00002-of-00003",
            "finish the download")


@pytest.mark.parametrize("key", ["sliding_window_pattern", "decoder_sparse_step"])
def test_a_period_of_zero_layers_is_refused_by_name(tmp_path, key, capsys):
    base = {"gemma3_text": {"model_type": "gemma3_text", "hidden_size": 256, "intermediate_size": 512,
                            "num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 2,
                            "head_dim": 64, "vocab_size": 512, "sliding_window": 512},
            "qwen3_moe": {"model_type": "qwen3_moe", "hidden_size": 256, "intermediate_size": 512,
                          "moe_intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
                          "num_key_value_heads": 2, "vocab_size": 512, "num_experts": 8, "num_experts_per_tok": 2}}
    config = {**base["gemma3_text" if key == "sliding_window_pattern" else "qwen3_moe"], key: 0}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    refused(cli(capsys, "models", "show", path), key, "at least 1")


def test_an_unreadable_model_path_is_a_user_error(monkeypatch, capsys):
    """The OS refusing a path (a folder the user cannot enter) is said in one line, exit 2, not an internal error."""
    def locked(self, kind, name):
        raise PermissionError(13, "Permission denied", "/srv/locked/config.json")

    monkeypatch.setattr(CardStore, "get", locked)
    refused(cli(capsys, "predict", "--model", "/srv/locked/config.json", "--hw", "h100"), "/srv/locked/config.json",
            "permission denied")


@pytest.mark.parametrize("path", ["/no/such/model.json", "./no-such-folder"])
def test_a_missing_path_says_no_such_file(path, capsys):
    refused(cli(capsys, "predict", "--model", path, "--hw", "h100"), "no such file")


def test_a_config_suffix_in_capitals_is_still_a_file(tmp_path, monkeypatch, capsys):
    (tmp_path / "L.JSON").write_text(json.dumps(llama_config()))
    monkeypatch.chdir(tmp_path)
    assert ok(cli(capsys, "fits", "--model", "L.JSON", "--hw", "h100"))


def test_a_tiny_model_on_a_big_card_gets_a_bounded_pool(tmp_path):
    """Free memory over a few bytes per block would be hundreds of millions of blocks; the pool stops at what
    every sequence at the model's whole context can use, and never beyond UNBOUNDED_BLOCKS."""
    config = {"model_type": "llama", "hidden_size": 2, "intermediate_size": 1, "num_hidden_layers": 1,
              "num_attention_heads": 1, "num_key_value_heads": 1, "vocab_size": 1,
              "max_position_embeddings": 1_000_000, "torch_dtype": "bfloat16"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    st = open_store([])
    card = st.model(str(tmp_path / "config.json"))
    policy = ServingPolicy.generic()
    wl = make_workload(prompt_tokens=128, output_tokens=16, batch=1)
    assert kv_pool_blocks(card, st.hardware("h100-sxm"), wl, policy) == UNBOUNDED_BLOCKS


def test_a_gguf_without_its_extension_is_read_by_its_magic(tmp_path, capsys):
    path = llama_gguf(tmp_path / "m.gguf").rename(tmp_path / "model-file")
    assert json.loads(ok(cli(capsys, "fits", "--model", path, "--hw", "h100", "--json")))["fits"]


def test_the_index_of_a_checkpoint_names_its_folder(tmp_path, capsys):
    cfg = llama_config()
    folder = write_checkpoint(tmp_path / "ckpt", cfg, llama_tensors(cfg), shards=2)
    by_index = json.loads(ok(cli(capsys, "fits", "--model", folder / "model.safetensors.index.json", "--hw", "h100",
                                 "--json")))
    by_folder = json.loads(ok(cli(capsys, "fits", "--model", folder, "--hw", "h100", "--json")))
    assert by_index["budget"]["weights"] == by_folder["budget"]["weights"] > 0


def test_a_shard_name_claiming_billions_of_parts_is_refused_at_once(tmp_path, capsys):
    cfg = llama_config()
    folder = write_checkpoint(tmp_path / "ckpt", cfg, llama_tensors(cfg))
    (folder / "model.safetensors").rename(folder / "model-00001-of-99999999999.safetensors")
    refused(cli(capsys, "fits", "--model", folder, "--hw", "h100"), "99,999,999,999 shards", "at most")
