"""Careless and hostile input found by fuzzing the CLI: card sections and profiles with numbers that are not numbers,
special files, option values that were silently ignored or misread. Every case is a one-line error with exit 2 (no
traceback, no hang, nothing written) or, where stated, the answer the documented rule gives."""

from __future__ import annotations

import json
import os

import pytest
import yaml
from conftest import PUBLISHED_CSV
from hostile import CONFIG, HW, MODEL, cli, edited, files_under, ok, refused, time_limit, write_card

from roofline.cards.store import bundled_dir

PREDICT = ("predict", "-m", "llama-3.1-8b", "--hw", "h100-sxm")
PUBLISHED = PUBLISHED_CSV


def _bundled(kind: str, name: str) -> dict:
    return yaml.safe_load((bundled_dir() / kind / f"{name}.yaml").read_text())


# ------------------------------------------------------------------------------------------ 1. card numbers


@pytest.mark.parametrize("section, needle", [
    ({"kernel_overhead_s": float("nan")}, "finite"), ({"step_overhead_s": float("inf")}, "finite"),
    ({"gemm_min_tokens": 1e300}, "outside"), ({"memory": True}, "fraction"),
    ({"values": [1, 2]}, "mapping"), ({"source": 5, "memory": 0.5}, "source"),
])
def test_a_hardware_cards_efficiency_section_must_hold_numbers(section, needle, tmp_path, capsys):
    write_card(tmp_path, "hardware", edited(_bundled("hardware", "h100-sxm"), "efficiency", section))
    refused(cli(capsys, *PREDICT, "--cards", tmp_path), "efficiency", needle)


@pytest.mark.parametrize("path, value, needle", [
    ("scheduler.max_num_seqs", 10**12, "max_num_seqs"), ("scheduler.parallel_slots", 10**9, "parallel_slots"),
    ("efficiency.default.kernel_overhead_s", 1e300, "kernel_overhead_s"),
    ("efficiency.default.prefill_chunk_tokens", 1e-9, "prefill_chunk_tokens"),
    ("efficiency.default.compute_by_format", {"fp8": True}, "compute_by_format"),
    ("efficiency.default.flash_attention", "yes", "flash_attention"),
    ("memory.gpu_memory_utilization", True, "gpu_memory_utilization"),
    ("runs_on", [], "runs_on"), ("kernels_from", "vllm", "itself"),
])
def test_a_runtime_profiles_fields_are_checked_when_it_loads(path, value, needle, tmp_path, capsys):
    write_card(tmp_path, "runtimes", edited(_bundled("runtimes", "vllm"), path, value))
    with time_limit(10):  # refused when the profile loads, before a step is simulated
        refused(cli(capsys, "sweep", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--runtime", "vllm",
                    "--concurrency", "1,2", "--cards", tmp_path), needle)


@pytest.mark.parametrize("kind, path", [("hardware", "price_usd"), ("models", "params.total")])
def test_a_number_field_written_true_is_refused(kind, path, tmp_path, capsys):
    write_card(tmp_path, kind, edited(HW if kind == "hardware" else MODEL, path, True))
    names = ("-m", "llama-3.1-8b", "--hw", "box") if kind == "hardware" else ("-m", "toy", "--hw", "h100")
    refused(cli(capsys, "predict", *names, "--cards", tmp_path), path.rsplit(".", 1)[-1], "number")


# ------------------------------------------------------------------------------------------ 2. special files


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_given_as_gguf_or_safetensors_is_refused_at_once(tmp_path, capsys):
    os.mkfifo(tmp_path / "model.gguf")
    with time_limit(5):
        refused(cli(capsys, "predict", "-m", tmp_path / "model.gguf", "--hw", "h100"), "not a regular file")
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(CONFIG))
    os.mkfifo(folder / "model.safetensors")
    with time_limit(5):
        refused(cli(capsys, "predict", "-m", folder, "--hw", "h100"), "not a regular file")


@pytest.mark.parametrize("field, value, needle", [("num_attention_heads", 0, "num_attention_heads"),
                                                  ("hidden_act", "banana", "activation")])
def test_a_config_value_roofline_cannot_model_names_its_field(field, value, needle, tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**CONFIG, field: value}))
    refused(cli(capsys, "predict", "-m", path, "--hw", "h100"), needle)


# ------------------------------------------------------------------------------------------ 3. engine and calibrate


def test_engine_run_refuses_a_batch_whose_kv_cannot_fit_before_torch(capsys):
    with time_limit(5):
        refused(cli(capsys, "engine", "run", "-m", "llama-3.1-8b", "--layers", "1", "--vocab", "100", "--prompt",
                    "8", "--output", "2", "--batch", "100000000"), "--batch", "KV cache")


@pytest.mark.parametrize("extra, needle", [(["--out", ""], "--out"), (["--dtype", "fp9"], "--dtype")])
def test_calibrate_refuses_before_measuring(extra, needle, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # --out '' would be this folder
    with time_limit(5):
        refused(cli(capsys, "calibrate", "--grid", "smoke", "--device", "cpu", *extra), needle)
    assert files_under(tmp_path) == set()


# ------------------------------------------------------------------------------------------ 4. options


@pytest.mark.parametrize("args, needle", [
    ((*PREDICT, "--vocab", "999999999"), "--vocab"),
    ((*PREDICT, "--runtime", ""), "--runtime"),
    ((*PREDICT, "--runtime", "vllm@-1"), "not a version"),
    ((*PREDICT, "--runtime", "vllm@0.11;rm"), "not a version"),
    (("plot", "serve", "-m", "llama-3.1-8b", "--hw", "h100", "--rate", "5", "--requests", "10", "--seed", "-1"),
     "--seed"),
    (("plot", "roofline", "-m", "llama-3.1-8b", "--hw", "h100", "-o", ""), "empty path"),
    (("sweep", "-m", "llama-3.1-8b", "--hw", "h100", "--concurrency", "1,,2"), "empty entry"),
    (("compare", "-m", "llama-3.1-8b,,mistral-7b", "--hw", "h100"), "empty entry"),
    (("fits", "-m", "llama-3.1-8b", "--hw", "h100", "--runtime-memory", "2"), "unit"),
    (("serve", "-m", "llama-3.1-8b", "--hw", "h100", "--rate", "5", "--requests", "10", "--disagg", "1:1",
      "--replicas", "3"), "--replicas"),
    (("capacity", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--slo-ttft", "1", "--slo-itl", "0.05",
      "--usd-per-gpu-hour", "b200=3"), "not one of the cards"),
    (("validate", "--published", PUBLISHED, "--hw", "nonexist"), "--hw"),
    (("validate", "--published", PUBLISHED, "--serving"), "one thing at a time"),
    (("validate", "--published", PUBLISHED, "-o", "v.jpg"), ".png"),
])
def test_option_values_that_were_misread_are_refused(args, needle, capsys):
    with time_limit(10):
        refused(cli(capsys, *args), needle)


def test_two_aliases_of_one_card_are_compared_once(capsys):
    rows = json.loads(ok(cli(capsys, "compare", "-m", "llama-3.1-8b", "--hw", "h100-sxm,h100", "--json")))
    assert len(rows) == 1


# ------------------------------------------------------------------------------------------ 5. names and aliases


def test_an_alias_is_settled_by_precedence_and_a_tie_is_an_error(tmp_path, capsys):
    a10 = _bundled("hardware", "a10")
    write_card(tmp_path, "hardware", {**a10, "name": "aaa", "aliases": ["h100"]})
    out = json.loads(ok(cli(capsys, "predict", "-m", "llama-3.1-8b", "--hw", "h100", "--cards", tmp_path, "--json")))
    assert out["hardware"] == "aaa"  # --cards over the bundled h100-sxm, whatever the names' order
    write_card(tmp_path, "hardware", {**a10, "name": "zzz", "aliases": ["h100"]})
    refused(cli(capsys, "predict", "-m", "llama-3.1-8b", "--hw", "h100", "--cards", tmp_path), "aaa", "zzz")


def test_importing_under_a_bundled_name_needs_force(tmp_path, capsys, isolated_home):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(CONFIG))
    refused(cli(capsys, "models", "import", path, "--name", "llama-3.1-8b"), "bundled card llama-3.1-8b", "--force")
    assert not any(p.is_file() for p in files_under(isolated_home))  # nothing written
    ok(cli(capsys, "models", "import", path, "--name", "llama-3.1-8b", "--force"))


# ------------------------------------------------------------------------------------------ 6. published rows, traces

HEADER = "id,source,hardware,engine,model,params_b,weight_quant,kv_dtype,isl,osl,batch,tp,metric,value,unit,notes," \
         "hw_card,model_card,gpus"
GOOD = "X1,src,H100,vLLM 0.8,llama,8,BF16,auto,500,200,1,1,ttft_ms,20,ms,,h100-sxm,llama-3.1-8b,1"


@pytest.mark.parametrize("row, why", [
    (GOOD.replace(",500,", ",5²,"), "whole number"), (GOOD.replace(",20,ms,", ",20,s,"), "unit"),
    (GOOD.replace(",1,1,ttft", ",0,1,ttft"), "batch"), (GOOD.replace(",20,ms,", ",1e-320,ms,"), "positive"),
    (GOOD.rsplit(",", 3)[0], "fewer fields"),
])
def test_a_published_row_misread_before_is_skipped_with_its_reason(row, why, tmp_path, capsys):
    path = tmp_path / "rows.csv"
    path.write_text(f"{HEADER}\n{row}\n")
    data = json.loads(ok(cli(capsys, "validate", "--published", path, "--json")))
    assert not data["rows"] and why in data["skipped"][0]["why"]


def test_a_published_header_naming_a_column_twice_is_refused(tmp_path, capsys):
    path = tmp_path / "rows.csv"
    path.write_text(f"{HEADER},value\n{GOOD},30\n")
    refused(cli(capsys, "validate", "--published", path), "'value' twice")


@pytest.mark.parametrize("name, text, needle", [
    ("t.csv", "arrival_s,prompt_tokens,output_tokens,prefix_idd\n0,100,10,a\n", "prefix_idd"),
    ("t.jsonl", '{"arrival_s": 0, "prompt_tokens": 100, "output_tokens": 10, "prefix_tokenz": 5}\n', "prefix_tokenz"),
    ("u.jsonl", '{"arrival_s": 0, "prompt_tokens": 100, "output_tokens": 10, "prefix_tokens": 5}\n', "prefix_id"),
])
def test_a_trace_with_a_field_roofline_does_not_read_is_refused(name, text, needle, tmp_path, capsys):
    path = tmp_path / name
    path.write_text(text)
    refused(cli(capsys, "serve", "-m", "llama-3.1-8b", "--hw", "h100", "--trace", path), needle)


def test_an_import_prints_what_it_could_not_model(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**CONFIG, "quantization_config": {"quant_method": "gptq", "bits": 3}}))
    out = ok(cli(capsys, "models", "import", path, "--name", "toy-gptq3", "--to", tmp_path / "cards"))
    assert "gptq with bits 3 not modelled" in out
    card = yaml.safe_load((tmp_path / "cards" / "models" / "toy-gptq3.yaml").read_text())
    assert card.get("weights", {"default": "bf16"}) == {"default": "bf16"}  # the checkpoint dtype, as the note says


def test_a_json_key_given_twice_is_refused_not_the_last_one_taken(tmp_path, capsys):
    path = tmp_path / "config.json"
    text = json.dumps(CONFIG)
    path.write_text(text[:-1] + ', "hidden_size": 4096}')  # the config's hidden_size again, another value
    refused(cli(capsys, "predict", "-m", path, "--hw", "h100"), "hidden_size", "twice")



def test_a_gguf_lacking_a_shape_names_its_metadata_key(tmp_path, capsys, monkeypatch):
    pytest.importorskip("gguf")
    import checkpoint_files

    write = checkpoint_files.write_gguf
    monkeypatch.setattr(checkpoint_files, "write_gguf", lambda path, arch, meta, tensors: write(
        path, arch, {k: v for k, v in meta.items() if k != "feed_forward_length"}, tensors))
    path = checkpoint_files.llama_gguf(tmp_path / "no-ffn.gguf")
    refused(cli(capsys, "predict", "-m", path, "--hw", "h100"), "intermediate_size", "llama.feed_forward_length")
