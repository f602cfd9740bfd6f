"""llama-server's -c is its whole KV cache, split over the -np slots (n_ctx_seq = n_ctx / n_parallel); Ollama gives
each parallel request num_ctx of its own. `fits`, `predict` and `serve` size a llama.cpp server the same way."""

from __future__ import annotations

import json

import pytest
import yaml
from hostile import cli, ok, refused, write_card

from roofline.cards.store import bundled_dir

ARGS = ("-m", "llama-3.1-8b", "--hw", "rtx-4090", "--quant", "q4_k_m", "--json")


def _fits(capsys, runtime: str, *extra) -> dict:
    return json.loads(ok(cli(capsys, "fits", *ARGS, "--runtime", runtime, *extra)))


def test_llama_cpp_splits_its_default_context_over_the_slots(capsys):
    one, four = _fits(capsys, "llama.cpp"), _fits(capsys, "llama.cpp", "--concurrency", "4")
    assert one["context_tokens"] == 4096 and four["context_tokens"] == 1024
    assert four["memory_policy"]["server_context_tokens"] == 4096
    assert four["budget"]["kv"] == pytest.approx(one["budget"]["kv"], rel=1e-9)  # one -c, however it is split


def test_a_context_asked_for_is_each_sequences_and_the_server_needs_that_times_the_slots(capsys):
    d = _fits(capsys, "llama.cpp", "--concurrency", "4", "--context", "8192")
    assert d["context_tokens"] == 8192 and d["memory_policy"]["server_context_tokens"] == 4 * 8192


def test_ollama_gives_each_parallel_request_its_own_context(capsys):
    one, four = _fits(capsys, "ollama"), _fits(capsys, "ollama", "--concurrency", "4")
    assert four["context_tokens"] == one["context_tokens"] and not four["memory_policy"]["context_split"]
    assert four["budget"]["kv"] == pytest.approx(4 * one["budget"]["kv"], rel=1e-9)


def test_predict_sizes_a_llama_cpp_batch_as_fits_does(capsys):
    fits = _fits(capsys, "llama.cpp", "--concurrency", "4")
    p = json.loads(ok(cli(capsys, "predict", *ARGS, "--runtime", "llama.cpp", "--batch", "4")))
    assert p["memory_per_gpu_bytes"] == pytest.approx(fits["total_bytes"], rel=1e-6)


def _four_slots(tmp_path) -> None:
    profile = yaml.safe_load((bundled_dir() / "runtimes" / "llama.cpp.yaml").read_text())
    profile["name"], profile["aliases"] = "llama.cpp-np4", []
    profile["scheduler"]["parallel_slots"] = profile["scheduler"]["max_num_seqs"] = 4
    write_card(tmp_path, "runtimes", profile)


def test_serve_holds_a_four_slot_server_in_one_split_context(tmp_path, capsys):
    _four_slots(tmp_path)
    serve = ("serve", *ARGS, "--runtime", "llama.cpp-np4", "--cards", tmp_path, "--concurrency", "4",
             "--requests", "8")
    d = json.loads(ok(cli(capsys, *serve, "--prompt", "500", "--output", "200")))
    assert d["kv_pool_tokens_per_replica"] == 4096
    refused(cli(capsys, *serve, "--prompt", "3000", "--output", "500"), "1,024")
