"""Hostile input from a sixth fuzzing pass: runtime cards whose efficiencies underflow a step's time, whose kernel
lender is unknown or themselves, versions and integers past what Python parses, and arguments so long that their
error line would be a page. Each is one line with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import REPO
from hostile import cli, refused


def _runtime_cards(tmp_path: Path, edit) -> Path:
    folder = tmp_path / "cards"
    (folder / "runtimes").mkdir(parents=True)
    text = (REPO / "runtimes/sglang.yaml").read_text()
    (folder / "runtimes/sglang.yaml").write_text(edit(text))
    return folder


@pytest.mark.parametrize("field", ["memory", "compute", "memory_kv"])
def test_an_efficiency_too_small_to_time_a_step_is_refused(tmp_path, capsys, field):
    """5e-324 of the peak overflowed a step's time to inf and crashed serve with an internal error."""
    cards = _runtime_cards(tmp_path, lambda t: t.replace("    allreduce_latency_hops: 1  #",
                                                         f"    {field}: 5e-324\n    allreduce_latency_hops: 1  #"))
    refused(cli(capsys, "serve", "-m", "qwen3-30b-a3b", "--hw", "h100-sxm", "--runtime", "sglang", "--cards", cards,
                "--requests", "20", "--rate", "1"), field, "0.001")


@pytest.mark.parametrize("lender, needle", [("nosuchrt", "no runtime profile"), ("sgl", "back to itself"),
                                            ("", "no runtime profile")])
def test_a_kernel_lender_must_be_another_known_runtime(tmp_path, capsys, lender, needle):
    cards = _runtime_cards(tmp_path, lambda t: t.replace("display_name: SGLang", f'display_name: SGLang\nkernels_from: '
                                                         f'"{lender}"').replace("sources:\n", 'sources:\n  kernels_from: '
                                                                                '"a test"\n', 1))
    refused(cli(capsys, "predict", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--runtime", "sglang", "--cards", cards),
            "kernels_from", needle)


@pytest.mark.parametrize("version", ["9" * 5000, "\u0660.\u0668", "0.\uff18", "1." * 3000 + "1", "0.8.rc1.rc1.rc1"])
def test_a_version_past_what_versions_look_like_is_one_short_line(capsys, version):
    result = cli(capsys, "predict", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--runtime", f"vllm@{version}")
    refused(result, "not a version")
    assert len(result[2]) < 800 and "set_int_max_str_digits" not in result[2]


def test_a_config_integer_of_thousands_of_digits_is_named(tmp_path, capsys):
    config = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 4,
              "intermediate_size": 128, "vocab_size": 1000, "max_position_embeddings": 2048}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config)[:-1] + ', "num_hidden_layers": ' + "9" * 5000 + "}")
    result = cli(capsys, "fits", "-m", path, "--hw", "h100-sxm")
    refused(result, "5,000-digit integer")
    assert "set_int_max_str_digits" not in result[2]


@pytest.mark.parametrize("args", [("predict", "--prompt"), ("serve", "--router"), ("sweep", "--concurrency")])
def test_an_argument_of_100000_characters_gives_a_line_not_a_page(capsys, args):
    command, option = args
    result = cli(capsys, command, "-m", "llama-3.1-8b", "--hw", "h100-sxm", option, "x" * 100_000)
    refused(result)
    assert len(result[2]) < 800 and "characters ...]" in result[2]


@pytest.mark.parametrize("value", ["1.5", "1.0e-9"])
def test_a_graph_holds_whole_sequences(tmp_path, capsys, value):
    cards = _runtime_cards(tmp_path, lambda t: t.replace("graph_max_batch: 160", f"graph_max_batch: {value}"))
    refused(cli(capsys, "predict", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--runtime", "sglang", "--cards", cards),
            "graph_max_batch", "whole number")


@pytest.mark.parametrize("name, text, needle", [
    ("t.csv", "arrival_s,prompt_tokens,output_tokens\n0,1_000,100\n", "whole numbers"),
    ("t.csv", "arrival_s,prompt_tokens,output_tokens\n0,\u0665\u0661\u0662,100\n", "whole numbers"),
    ("t.jsonl", '{"arrival_s": 0, "prompt_tokens": 512, "output_tokens": 100, "prompt_tokens": 9}\n', "appears twice")])
def test_a_trace_reads_plain_numbers_and_each_key_once(tmp_path, capsys, name, text, needle):
    """float() took '1_000' and Arabic-Indic digits; a JSONL row's second value of a key silently won."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    refused(cli(capsys, "serve", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--trace", path), "line", needle)


@pytest.mark.parametrize("quant", ["bf16,", "ffn=fp8,,default=bf16", ",fp8"])
def test_a_format_list_with_an_empty_entry_is_refused_as_a_card_list_is(capsys, quant):
    refused(cli(capsys, "predict", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--quant", quant), "empty entry")
