"""CUDA compute capability: every NVIDIA card states its own (with a source), runtime profiles state the oldest one
their kernels build for, and a runtime on a GPU older than that is one line and exit 2."""

from __future__ import annotations

import pytest
import yaml
from hostile import cli, edited, ok, refused, write_card

from roofline.cards.store import CardStore, bundled_dir
from roofline.cards.versions import compute_capability_key

PREDICT = ("predict", "-m", "llama-3.1-8b", "--hw")


def _bundled(kind: str, name: str) -> dict:
    return yaml.safe_load((bundled_dir() / kind / f"{name}.yaml").read_text())


def test_every_bundled_nvidia_card_states_a_cited_compute_capability():
    store = CardStore()
    nvidia = [c for c in store.all("hardware")
              if c.vendor == "nvidia" and store.origin("hardware", c.name) == "bundled"]
    assert len(nvidia) >= 65
    for card in nvidia:
        assert card.compute_capability, card.name
        source = card.sources.get("compute_capability", "")
        assert "developer.nvidia.com/cuda-" in source and card.compute_capability in source, card.name


@pytest.mark.parametrize("name, value", [
    ("tesla-p40", "6.1"), ("tesla-p100-16g", "6.0"), ("v100-sxm2-32g", "7.0"), ("t4", "7.5"), ("a100-80g-sxm", "8.0"),
    ("rtx-3090", "8.6"), ("jetson-agx-orin-64g", "8.7"), ("rtx-4090", "8.9"), ("h100-sxm", "9.0"), ("gh200", "9.0"),
    ("b200", "10.0"), ("b300", "10.3"), ("jetson-agx-thor", "11.0"), ("rtx-5090", "12.0"), ("rtx-pro-6000", "12.0"),
    ("dgx-spark", "12.1"),
])
def test_compute_capability_per_architecture(name, value):
    assert CardStore().hardware(name).compute_capability == value


def test_compute_capabilities_compare_as_numbers_not_text():
    assert compute_capability_key("12.1") > compute_capability_key("9.0") > compute_capability_key("8.9")
    assert compute_capability_key("10.0") > compute_capability_key("9.0")  # as text "10.0" < "9.0"
    assert compute_capability_key("7.5") > compute_capability_key("7.0")


@pytest.mark.parametrize("runtime", ["vllm", "sglang", "trtllm"])
def test_a_runtime_on_a_gpu_older_than_it_builds_for_is_refused(runtime, capsys):
    refused(cli(capsys, *PREDICT, "tesla-p40", "--runtime", runtime), "compute capability", "tesla-p40 is 6.1",
            "Pascal")


def test_the_refusal_names_the_runtime_and_its_minimum(capsys):
    refused(cli(capsys, *PREDICT, "tesla-p40", "--runtime", "vllm"),
            "vLLM needs an NVIDIA GPU of compute capability 7.0 or newer; tesla-p40 is 6.1 (Pascal)")


def test_llama_cpp_still_runs_on_pascal(capsys):
    ok(cli(capsys, *PREDICT, "tesla-p40", "--runtime", "llama.cpp"))


@pytest.mark.parametrize("hw", ["rtx-2080-ti", "t4", "h100-sxm"])
def test_vllm_runs_on_turing_and_newer(hw, capsys):
    ok(cli(capsys, *PREDICT, hw, "--runtime", "vllm", "--quant", "int4"))


def test_a_card_without_a_compute_capability_is_not_refused(tmp_path, capsys):
    card = _bundled("hardware", "tesla-p40")
    card.pop("compute_capability")
    card["sources"].pop("compute_capability")
    write_card(tmp_path, "hardware", card)
    ok(cli(capsys, *PREDICT, "tesla-p40", "--runtime", "vllm", "--cards", tmp_path))


@pytest.mark.parametrize("value", ["ten", "0.5", "99.0", "8", "8.9.1", 8.9, ""])
def test_a_malformed_compute_capability_is_refused_at_load(value, tmp_path, capsys):
    write_card(tmp_path, "hardware", edited(_bundled("hardware", "h100-sxm"), "compute_capability", value))
    refused(cli(capsys, *PREDICT, "h100-sxm", "--cards", tmp_path), "compute_capability")


def test_a_compute_capability_needs_a_source(tmp_path, capsys):
    card = _bundled("hardware", "h100-sxm")
    card["sources"].pop("compute_capability")
    write_card(tmp_path, "hardware", card)
    refused(cli(capsys, *PREDICT, "h100-sxm", "--cards", tmp_path), "compute_capability", "sources")


@pytest.mark.parametrize("change, needle", [
    (lambda d: d.update(min_compute_capability={"nvidia": "seven"}), "min_compute_capability.nvidia"),
    (lambda d: d.update(min_compute_capability={"apple": "7.0"}), "min_compute_capability.apple"),
    (lambda d: d["sources"].pop("min_compute_capability.nvidia"), "min_compute_capability.nvidia"),
])
def test_a_bad_profile_minimum_is_refused_at_load(change, needle, tmp_path, capsys):
    profile = _bundled("runtimes", "vllm")
    change(profile)
    write_card(tmp_path, "runtimes", profile)
    refused(cli(capsys, *PREDICT, "h100-sxm", "--runtime", "vllm", "--cards", tmp_path), needle)
