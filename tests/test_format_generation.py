"""What a runtime runs where: weight formats that need a newer NVIDIA generation under a runtime (TensorRT-LLM FP8
from Ada, NVFP4 from Blackwell; vLLM's Marlin paths from Turing or Ampere), runtimes matched to a card's vendor
*and* kind (a bare vendor names its GPUs, not its CPUs or Gaudi), and a refusal that names a way out."""

from __future__ import annotations

import json

import pytest
import yaml
from hostile import cli, ok, refused, write_card

from roofline.cards.formats import math_dtype, weight_format
from roofline.cards.store import bundled_dir

PREDICT = ("predict", "-m", "llama-3.1-8b", "--hw")


@pytest.mark.parametrize("hw, runtime, quant, need, arch", [
    ("a100-80g-sxm", "trtllm", "fp8", "8.9", "Ampere"),
    ("h100-sxm", "trtllm", "nvfp4", "10.0", "Hopper"),
    ("v100-sxm2-16g", "vllm", "fp8", "7.5", "Volta"),
    ("t4", "vllm", "nvfp4", "8.0", "Turing"),
])
def test_a_format_the_runtime_runs_only_on_newer_gpus_is_refused(hw, runtime, quant, need, arch, capsys):
    result = cli(capsys, *PREDICT, hw, "--runtime", runtime, "--quant", quant)
    refused(result, f"runs {quant} weights from compute capability {need}", arch, "--quant")
    suggested = result[2].split("pick --quant ")[1]
    assert quant not in suggested.split(" or ")


@pytest.mark.parametrize("hw, runtime, quant", [
    ("h100-sxm", "trtllm", "fp8"), ("b200", "trtllm", "nvfp4"), ("t4", "vllm", "fp8"), ("a100-80g-sxm", "vllm", "nvfp4"),
    ("a100-80g-sxm", "trtllm", "int4"),
])
def test_the_same_formats_run_where_the_generation_has_them(hw, runtime, quant, capsys):
    ok(cli(capsys, *PREDICT, hw, "--runtime", runtime, "--quant", quant))


def test_what_to_run_instead_leaves_out_what_the_generation_cannot_run(capsys):
    """Llama-3.3-70B does not fit one A100 in BF16 under TensorRT-LLM: the advice names int4/int8, never fp8."""
    out = json.loads(ok(cli(capsys, "predict", "-m", "llama-3.3-70b", "--hw", "a100-80g-sxm", "--runtime", "trtllm",
                            "--json")))
    values = [alt["value"] for alt in out["instead"] if alt["option"] == "--quant"]
    assert values and "fp8" not in values and "nvfp4" not in values


def _vllm_with(change) -> dict:
    profile = yaml.safe_load((bundled_dir() / "runtimes" / "vllm.yaml").read_text())
    change(profile)
    return profile


@pytest.mark.parametrize("change, needle", [
    (lambda d: d["format_min_compute_capability"].update(q4_k_m="8.0"), "format_min_compute_capability.q4_k_m"),
    (lambda d: d["sources"].pop("format_min_compute_capability.fp8"), "format_min_compute_capability.fp8"),
    (lambda d: d["format_min_compute_capability"].update(fp8="eight"), "format_min_compute_capability"),
    (lambda d: d["format_since"].update(q4_k_m="0.9.0"), "format_since.q4_k_m"),  # the first release of a format
    (lambda d: d["sources"].pop("format_since.mxfp4"), "format_since.mxfp4"),
    (lambda d: d["format_since"].update(mxfp4="soon"), "is not a version"),
])
def test_a_bad_format_minimum_is_refused_at_load(change, needle, tmp_path, capsys):
    write_card(tmp_path, "runtimes", _vllm_with(change))
    refused(cli(capsys, *PREDICT, "h100-sxm", "--runtime", "vllm", "--cards", tmp_path), needle)


@pytest.mark.parametrize("hw, runtime", [
    ("epyc-9654", "lmdeploy"), ("gaudi3", "llama.cpp"), ("gaudi3", "roofline-engine"), ("epyc-9654", "tgi"),
    ("epyc-9654", "sglang"),
])
def test_a_gpu_runtime_is_not_matched_to_the_vendors_cpus_or_accelerators(hw, runtime, capsys):
    refused(cli(capsys, *PREDICT, hw, "--runtime", runtime), "does not run on", hw)


@pytest.mark.parametrize("hw, runtime", [
    ("gaudi3", "vllm"), ("epyc-9654", "vllm"), ("epyc-9654", "llama.cpp"), ("mi300x", "sglang"),
    ("dgx-spark", "lmdeploy"), ("h100-sxm", "tgi"),
])
def test_runtimes_still_run_where_they_have_a_backend(hw, runtime, capsys):
    ok(cli(capsys, *PREDICT, hw, "--runtime", runtime))


def test_llama_cpp_runs_on_any_vendors_soc(tmp_path, capsys):
    """A Snapdragon laptop: llama.cpp's and Ollama's CPU backend runs on any SoC, whoever makes it."""
    card = {"name": "snap", "vendor": "qualcomm", "kind": "soc",
            "memory": {"capacity": "32 GiB", "bandwidth": "135 GB/s", "unified": True, "reserved": "4 GiB"},
            "peak_flops": {"fp32": "4.6 TFLOP/s", "fp16": "9.2 TFLOP/s", "int8": "45 TOPS"},
            "sources": {"memory.capacity": "a", "memory.bandwidth": "b", "peak_flops": "c"}}
    write_card(tmp_path, "hardware", card)
    for runtime in ("llama.cpp", "ollama"):
        ok(cli(capsys, *PREDICT, "snap", "--runtime", runtime, "--quant", "q4_k_m", "--cards", tmp_path))
    refused(cli(capsys, *PREDICT, "snap", "--runtime", "vllm", "--cards", tmp_path), "does not run on")


def test_a_generation_refusal_names_a_runtime_that_runs_there(capsys):
    refused(cli(capsys, *PREDICT, "tesla-p40", "--runtime", "sglang"), "--runtime llama.cpp", "leave --runtime out")


def test_a_gguf_block_on_a_card_without_fp16_runs_at_its_bf16_rate():
    """A card listing bf16 and fp32 only: a k-quant dequantizes to 16-bit, not to fp32."""
    assert math_dtype(weight_format("q4_k_m"), {"bf16", "fp32"}) == "bf16"
    assert math_dtype(weight_format("q4_k_m"), {"int8", "fp16", "bf16"}) == "int8"


def test_hw_list_marks_an_fp16_peak_shown_for_a_card_without_bf16(capsys):
    rows = {line.split("│")[1].strip(): line for line in ok(cli(capsys, "hw", "list", "t4")).splitlines()
            if line.count("│") > 5}
    assert "65.0 fp16" in rows["t4"]
