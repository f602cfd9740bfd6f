"""The listing commands and card loading as a user meets them: a name that is not a card is refused rather than
taken as a neighbour, a broken card the user wrote is named when it hides the one asked for, sizes need units, one
unit per row, readable profiles, and a card of the wrong kind says what it is. Each case states the rule it checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hostile import cli, ok, refused

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("ROOFLINE_HOME", str(tmp_path))
    for kind in ("hardware", "models", "runtimes"):
        (tmp_path / kind).mkdir()
    return tmp_path


def _card(home: Path, kind: str, name: str, text: str) -> Path:
    path = home / kind / f"{name}.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("name", ["rtx-3060-8g", "rtx-4090-ti", "rtx 5090 laptop", "h200-nvl", "4070 mobile"])
def test_a_part_that_is_not_a_card_is_refused_not_approximated(name, capsys):
    """Words naming another part (a variant, a memory size the card lacks) stop a longer name resolving to the
    card whose alias it contains: an 8 GB RTX 3060 is not the 12 GiB card."""
    refused(cli(capsys, "hw", "show", name), "unknown hardware", "did you mean")


@pytest.mark.parametrize("name, card", [("H100 SXM5 80GB", "h100-sxm"), ("NVIDIA H100", "h100-sxm"),
                                        ("Mac Studio M2 Ultra", "apple-m2-ultra"), ("rtx 3060 12gb", "rtx-3060-12g")])
def test_a_datasheet_name_still_resolves(name, card, capsys):
    assert json.loads(ok(cli(capsys, "hw", "show", name, "--json")))["name"] == card


def test_a_broken_user_card_is_named_even_when_others_are_close(home, capsys):
    """The broken h100-sxm.yaml hides the bundled card its aliases belong to: the error names that file, not only
    the cards whose names look alike."""
    bad = _card(home, "hardware", "h100-sxm", "name: h100-sxm\nvendor: [nvidia\n")
    refused(cli(capsys, "hw", "show", "h100"), "did you mean", str(bad), "not valid YAML")


def test_an_unknown_name_is_quoted_short(capsys):
    code, _, err = cli(capsys, "hw", "show", "x" * 100_000)
    assert code == 2 and len(err) < 400


@pytest.mark.parametrize("capacity", ["80", "0.5"])
def test_a_capacity_without_a_unit_is_refused(home, capacity, capsys):
    text = (REPO / "hardware" / "h100-sxm.yaml").read_text().replace("capacity: 80 GiB", f"capacity: {capacity}")
    text = text.replace("name: h100-sxm", "name: bare").replace("reserved: 361 MiB", "reserved: 0")
    _card(home, "hardware", "bare", text)
    refused(cli(capsys, "hw", "show", "bare"), "memory.capacity", "unit")


def test_vendor_is_compared_lowercase(home, capsys):
    text = (REPO / "hardware" / "h100-sxm.yaml").read_text().replace("vendor: nvidia", "vendor: NVIDIA")
    text = "\n".join("aliases: []" if ln.startswith("aliases:") else ln for ln in text.splitlines())
    _card(home, "hardware", "mine", text.replace("name: h100-sxm", "name: mine"))
    listed = json.loads(ok(cli(capsys, "hw", "list", "--vendor", "nvidia", "--json")))
    assert "mine" in {c["name"] for c in listed}


def test_runtimes_list_warns_of_a_profile_it_skips(home, capsys):
    _card(home, "runtimes", "broken", "name: broken\nruns_on: [nvidia\n")
    code, out, err = cli(capsys, "runtimes", "list")
    assert code == 0 and "skipped a runtime profile" in err and "broken.yaml" in err


def test_runtimes_show_reads_as_a_table_of_values(capsys):
    out = ok(cli(capsys, "runtimes", "show", "ollama"))
    assert "{'" not in out and "below_bytes': " not in out
    assert "24 GiB" in out and "serving_policy.memory_policy" in out


def test_generic_is_explained_not_unknown(capsys):
    refused(cli(capsys, "runtimes", "show", "generic"), "without --runtime")


@pytest.mark.parametrize("command, path, kind", [
    (("models", "show"), "hardware/h100-sxm.yaml", "hardware card"),
    (("hw", "show"), "models/llama-3.1-8b.yaml", "model card"),
    (("models", "show"), "runtimes/vllm.yaml", "runtime profile"),
])
def test_a_card_of_another_kind_says_what_it_is(command, path, kind, capsys):
    refused(cli(capsys, *command, str(REPO / path)), kind)


def test_roofline_home_that_is_a_file_is_refused(tmp_path, monkeypatch, capsys):
    home = tmp_path / "home"
    home.write_text("not a folder")
    monkeypatch.setenv("ROOFLINE_HOME", str(home))
    refused(cli(capsys, "hw", "show", "h100"), "ROOFLINE_HOME", "not a folder")


def test_hw_show_keeps_one_unit_per_row(capsys):
    spark = ok(cli(capsys, "hw", "show", "dgx-spark"))
    assert "OS/CPU keep 8.3 GiB, GPU can use 119.7 GiB" in spark
    h100 = ok(cli(capsys, "hw", "show", "h100"))
    assert "3.35 TB/s (3,350 GB/s)" in h100
    data = json.loads(ok(cli(capsys, "hw", "show", "h100", "--json")))
    assert data["peak_flop_per_s"]["bf16"] == pytest.approx(989.4e12) and "peak_flops" not in data


def test_a_misspelt_field_is_named_with_the_one_meant(home, capsys):
    """A required field missing beside an unknown one spelt like it: the unknown one is the typo to fix."""
    text = (REPO / "runtimes" / "sglang.yaml").read_text().replace("\nhomepage:", "\nhomepag:")
    _card(home, "runtimes", "sglang", text)
    refused(cli(capsys, "runtimes", "show", "sglang"), "homepag", "did you mean homepage")


@pytest.mark.parametrize("args, where", [(("hw", "list", "--kind"), "roofline hw list --help"),
                                         (("predict", "--model"), "roofline predict --help")])
def test_an_option_missing_its_value_points_at_its_command(args, where, capsys):
    refused(cli(capsys, *args), "requires an argument", where)
