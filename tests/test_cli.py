"""The CLI as a new user meets it: counts and fields in --json, and one clear line (exit 2) for bad input."""

import json
import re

import pytest
from conftest import run_cli

REQUIRED_HW = ["dgx-spark", "h100-sxm", "h100-pcie", "h200", "b200", "gb200", "a100-80g-sxm", "a100-80g-pcie",
               "a100-40g", "l40s", "rtx-6000-ada", "rtx-pro-6000", "rtx-5090", "rtx-4090", "rtx-3090", "rtx-3070",
               "mi300x", "apple-m1-max", "apple-m2-ultra", "apple-m3-max", "apple-m3-ultra", "apple-m4-max"]
REQUIRED_MODELS = ["llama-3.1-8b", "llama-3.1-70b", "llama-3.3-70b", "llama-2-7b", "llama-2-13b", "llama-2-70b",
                   "mistral-7b", "mixtral-8x7b", "qwen2.5-3b", "qwen2.5-7b", "qwen2.5-14b", "qwen3-30b-a3b",
                   "qwen3-32b", "deepseek-r1-distill-qwen-14b", "deepseek-v3", "gpt-oss-20b", "gpt-oss-120b",
                   "gemma-3-27b", "gemma-4-31b", "nemotron-3-nano", "nemotron-3-super-120b-a12b"]


def test_version():
    out = run_cli("--version")
    assert out.returncode == 0 and out.stdout.startswith("roofline ")


def test_hw_list_json_has_every_required_card_with_si_fields():
    out = run_cli("hw", "list", "--json")
    assert out.returncode == 0, out.stderr
    cards = {c["name"]: c for c in json.loads(out.stdout)}
    assert set(REQUIRED_HW) <= set(cards)
    h100 = cards["h100-sxm"]
    assert h100["memory"]["bandwidth_bytes_per_s"] == 3.35e12
    assert h100["peak_flop_per_s"]["bf16"] == pytest.approx(989.4e12)
    assert h100["ridge_flop_per_byte"]["bf16"] == pytest.approx(989.4e12 / 3.35e12)
    for card in cards.values():
        assert {"name", "vendor", "kind", "memory", "peak_flop_per_s", "sources", "origin"} <= set(card)
        assert card["memory"]["capacity_bytes"] > 0 and card["memory"]["bandwidth_bytes_per_s"] > 0


def test_hw_list_narrows_to_a_query_a_vendor_and_a_kind():
    def names(*args):
        out = run_cli("hw", "list", "--json", *args)
        assert out.returncode == 0, out.stderr
        return {c["name"] for c in json.loads(out.stdout)}

    assert names("3090") == {"rtx-3090", "rtx-3090-ti"}  # words match names, aliases and descriptions
    assert names("nvidia gb10") == {"dgx-spark"}  # every word must match
    assert names("M1 Max") >= {"apple-m1-max"} and all(n.startswith("apple-m1-max") for n in names("M1 Max"))
    amd_gpus = names("--vendor", "AMD", "--kind", "gpu")
    assert "mi300x" in amd_gpus and "ryzen-ai-max-395" not in amd_gpus  # the Strix Halo card is a soc
    assert names("no-such-card-anywhere") == set()
    out = run_cli("hw", "list", "no-such-card-anywhere")
    assert out.returncode == 0 and "no hardware card matches" in out.stdout


def test_models_list_json_has_every_required_card_with_derived_counts():
    out = run_cli("models", "list", "--json")
    assert out.returncode == 0, out.stderr
    cards = {c["name"]: c for c in json.loads(out.stdout)}
    assert set(REQUIRED_MODELS) <= set(cards)
    llama = cards["llama-3.3-70b"]["derived"]
    assert llama["kv_bytes_per_token_bf16"] == 80 * 2 * 8 * 128 * 2
    assert llama["total_params"] == pytest.approx(70.55e9, rel=1e-3)


def test_show_commands_table_and_json():
    assert "ridge" in run_cli("hw", "show", "h100").stdout
    out = run_cli("models", "show", "llama3.1:8b", "--json")
    assert json.loads(out.stdout)["name"] == "llama-3.1-8b"
    assert "parameters by component" in run_cli("models", "show", "gpt-oss-20b").stdout


def test_hw_show_states_units_as_datasheets_do():
    """Integer peaks in TOPS, caches in the binary units device queries report (H100: 50 MiB, GTX 1080 Ti: 2,816 KiB)."""
    h100 = run_cli("hw", "show", "h100").stdout
    assert re.search(r"peak int8 +│ 1,978.9 TOPS dense · ridge [\d,]+ op/byte", h100)
    assert re.search(r"peak bf16 +│ [\d,.]+ TFLOP/s dense", h100)
    assert re.search(r"L2 cache +│ 50 MiB", h100)
    assert re.search(r"L2 cache +│ 2.75 MiB", run_cli("hw", "show", "gtx-1080-ti").stdout)


def test_formats_json():
    data = json.loads(run_cli("formats", "--json").stdout)
    assert {f["name"]: f["bits_per_value"] for f in data["weight"]}["q4_0"] == 4.5
    assert {f["name"] for f in data["kv"]} >= {"bf16", "fp16", "fp8", "q8_0", "q4_0"}


BAD_INPUT = [
    (("hw", "show", "h1000"), "unknown hardware 'h1000'; did you mean h100"),
    (("models", "show", "lama-3.3-70b"), "did you mean llama-3.3-70b"),
    (("hw", "show", "/nonexistent/card.yaml"), "/nonexistent/card.yaml: no such file"),
    (("models", "show", "missing.json"), "missing.json: no such file"),
    (("hw", "list", "--jsn"), "No such option"),
    (("hw", "list", "--vendor", "nvidiaa"), "--vendor: 'nvidiaa' is none of amd, apple"),
    (("hw", "list", "--kind", "tpu"), "--kind: 'tpu' is none of accelerator, cpu, gpu, soc"),
    (("models", "import", "/nonexistent/config.json"), "cannot read file"),
]


@pytest.mark.parametrize("args, message", BAD_INPUT)
def test_bad_input_is_one_clear_line_exit_2(args, message):
    out = run_cli(*args)
    assert out.returncode == 2, out
    assert message in out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""


def test_user_errors_are_a_single_line():
    out = run_cli("hw", "show", "h1000")
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("error: ")


def test_debug_shows_traceback():
    out = run_cli("hw", "show", "h1000", "--debug")
    assert out.returncode != 0 and "Traceback" in out.stderr


def test_bad_card_in_cards_dir(tmp_path):
    (tmp_path / "hardware").mkdir()
    (tmp_path / "hardware" / "box.yaml").write_text("name: box\nvendor: x\nkind: gpu\nmemory: {capacity: 8 GB, "
                                                     "bandwidth: fast}\npeak_flops: {fp32: 1 TFLOP/s}\nsources: {}\n")
    out = run_cli("hw", "show", "box", "--cards", str(tmp_path))
    assert out.returncode == 2
    assert "box.yaml: memory.bandwidth: 'fast' is not a number of bytes/s" in out.stderr


def test_models_import_writes_user_card(tmp_path, isolated_home):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({
        "model_type": "llama", "vocab_size": 32000, "hidden_size": 256, "intermediate_size": 688,
        "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
        "max_position_embeddings": 2048, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}))
    out = run_cli("models", "import", str(config), "--name", "tiny-llama", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["path"] == str(isolated_home / "models" / "tiny-llama.yaml")
    # 2 embeddings + 4 layers x (attention 256*(256+2*128)+256*256 + ffn 3*256*688 + 2 norms) + final norm
    assert data["total_params"] == 2 * 32000 * 256 + 4 * (256 * 512 + 256 * 256 + 3 * 256 * 688 + 512) + 256
    shown = run_cli("models", "show", "tiny-llama", "--json")
    assert json.loads(shown.stdout)["origin"] == "user"
    again = run_cli("models", "import", str(config), "--name", "tiny-llama")
    assert again.returncode == 2 and "already exists" in again.stderr


@pytest.mark.parametrize("args", [("formats",), ("hw", "show", "h100"), ("models", "show", "llama-3.1-8b")])
def test_a_reader_that_stops_early_is_no_error(args):
    """`roofline formats | head -1`: the reader closes the pipe after one line; the command exits 0 and says nothing
    (rich's console had exited 1, failing `set -o pipefail` scripts)."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "roofline", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.read(10)
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 0 and err == b""
