"""Weight formats by runtime version: a release older than the one that first loaded a format is refused in one line
that names the first release and nearby formats (vLLM's gpt-oss MXFP4 from 0.10.1, llama.cpp's from b6096); with no
version the newest profile loads them all."""

from __future__ import annotations

import json

import pytest
from hostile import cli, ok, refused

from roofline.cards.formats import weight_format
from roofline.cards.store import CardStore, bundled_dir
from roofline.perf.serving.capacity import candidates

PREDICT = ("predict", "-m", "llama-3.1-8b", "--hw")


@pytest.mark.parametrize("hw, runtime, quant, first", [
    ("h100-sxm", "vllm@0.10.0", "mxfp4", "vllm@0.10.1"), ("b200", "vllm@0.6", "nvfp4", "vllm@0.8.0"),
    ("rtx-4090", "llama.cpp@b6095", "mxfp4", "llama.cpp@b6096"),
    ("rtx-4090", "llama.cpp@b1786", "iq4_xs", "llama.cpp@b2281"),
    ("rtx-4090", "ollama@0.10.1", "mxfp4", "ollama@0.11.0"), ("b200", "trtllm@0.14", "nvfp4", "trtllm@0.17"),
    ("b200", "sglang@0.4.5", "nvfp4", "sglang@0.4.5.post1"), ("h100-sxm", "lmdeploy@0.6.0", "fp8", "lmdeploy@0.7.0"),
])
def test_a_format_newer_than_the_version_asked_is_refused(hw, runtime, quant, first, capsys):
    result = cli(capsys, *PREDICT, hw, "--runtime", runtime, "--quant", quant)
    refused(result, f"loads {quant} weights from", f"--runtime {first} or newer")
    suggested = result[2].split("pick --quant ")[1].strip().split(" or ")
    assert quant not in suggested and len(suggested) == 3
    choice = CardStore().runtime(runtime)  # the nearest in size of what that release loads, not the smallest
    gap = {f: abs(weight_format(f).bits_per_value - weight_format(quant).bits_per_value)
           for f in choice.profile.formats_at(choice.version)}
    assert set(suggested) <= set(gap) and max(gap[f] for f in suggested) <= min(
        g for f, g in gap.items() if f not in suggested)
    ok(cli(capsys, *PREDICT, hw, "--runtime", first, "--quant", quant))
    ok(cli(capsys, *PREDICT, hw, "--runtime", first.split("@")[0], "--quant", quant))


def test_fits_and_capacity_keep_to_the_formats_of_the_version(capsys):
    """`fits` refuses as predict does, and capacity searches only the formats that release loads."""
    refused(cli(capsys, "fits", "-m", "llama-3.1-8b", "--hw", "b200", "--runtime", "vllm@0.6.0", "--quant", "nvfp4"),
            "from 0.8.0 on")
    store = CardStore()
    card, hw = store.model("llama-3.1-8b"), store.hardware("b200")
    old = {c.quant for c in candidates(card, hw, store.runtime("vllm@0.6.0"))}
    new = {c.quant for c in candidates(card, hw, store.runtime("vllm"))}
    assert "nvfp4" in new and "nvfp4" not in old and old < new


def test_every_bundled_format_since_names_a_format_it_loads_and_cites_it():
    for path in sorted((bundled_dir() / "runtimes").glob("*.yaml")):
        profile = CardStore().runtime(path.stem).profile
        for fmt in profile.format_since:
            assert fmt in profile.weight_formats and f"format_since.{fmt}" in profile.sources, (path.name, fmt)


def test_runtimes_list_states_the_first_release_of_each_format(capsys):
    rows = {r["name"]: r for r in json.loads(ok(cli(capsys, "runtimes", "list", "--json")))}
    assert rows["vllm"]["format_since"]["mxfp4"] == "0.10.1" and rows["llama.cpp"]["format_since"]["mxfp4"] == "b6096"

