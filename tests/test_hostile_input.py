"""Careless and hostile input, by kind: every case is a one-line error with exit 2 or a clean, correct answer; no
traceback, no hang (each case under 10 s), nothing written outside the named place, memory bounded."""

from __future__ import annotations

import csv
import json
import math
import os
import stat
import sys
import tracemalloc
from pathlib import Path

import pytest
import yaml
from hostile import CONFIG, HW, MODEL, cli, edited, files_under, ok, refused, time_limit, write_card
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roofline.cards.files import MAX_CARD_BYTES, parse_yaml, read_text
from roofline.cards.hardware import HardwareCard
from roofline.cards.model import ModelCard
from roofline.cards.card_file import validate_card
from roofline.errors import RooflineError
from roofline.importers.config_json import card_from_config

ROOT = os.geteuid() == 0


@pytest.fixture
def cards(tmp_path):
    """A --cards directory with a good hardware card (box) and model card (toy)."""
    root = tmp_path / "cards"
    write_card(root, "hardware", HW)
    write_card(root, "models", MODEL)
    return root


# ------------------------------------------------------------------------------------------ 1. YAML that crashes/hangs

BAD_YAML = {
    "deep-flow": "name: x\nv: " + "[" * 50_000 + "]" * 50_000 + "\n",
    "deep-block": "".join(" " * i + f"k{i}:\n" for i in range(200)) + " " * 200 + "v: 1\n",
    "alias-bomb": "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(9)),
    "duplicate-key": yaml.safe_dump(HW, sort_keys=False) + "vendor: other\n",
    "duplicate-nested": yaml.safe_dump(HW, sort_keys=False).replace("  bandwidth: 3 TB/s",
                                                                     "  bandwidth: 3 TB/s\n  bandwidth: 9 TB/s"),
    "not-utf8": b"name: box\ndescription: \xff\xfe caf\xe9\n",
    "binary-junk": bytes(range(256)) * 4,
    "too-large": "name: box\n" + "# padding\n" * (MAX_CARD_BYTES // 10 + 10),
    "top-level-list": "- name: box\n- vendor: x\n",
    "top-level-scalar": "just a string\n",
    "empty": "",
    "python-tag": "name: !!python/object/apply:os.system ['true']\n",
    "unclosed": "name: [unclosed\n",
    "tab-indent": "name: box\nmemory:\n\tcapacity: 1 GB\n",
    "unhashable-key": "? [a, b]\n: 1\n",
}


@pytest.mark.parametrize("kind", sorted(BAD_YAML))
def test_bad_yaml_named_is_one_line(kind, cards, capsys):
    write_card(cards, "hardware", BAD_YAML[kind], stem="bad")
    refused(cli(capsys, "hw", "show", "bad", "--cards", cards), "bad.yaml")


@pytest.mark.parametrize("kind", sorted(BAD_YAML))
def test_bad_yaml_does_not_break_other_commands(kind, cards, capsys):
    """One bad card in the directory: requests that do not name it still answer."""
    write_card(cards, "hardware", BAD_YAML[kind], stem="bad")
    out = ok(cli(capsys, "predict", "-m", "toy", "--hw", "box", "--cards", cards, "--json"))
    assert json.loads(out)["hardware"] == "box"


@pytest.mark.parametrize("kind", ["deep-flow", "alias-bomb", "duplicate-key", "not-utf8", "empty"])
def test_listing_shows_a_bad_card_as_a_warning(kind, cards, capsys):
    write_card(cards, "hardware", BAD_YAML[kind], stem="bad")
    code, out, err = cli(capsys, "hw", "list", "--cards", cards)
    assert code == 0 and "box" in out and "h100-sxm" in out
    assert "warning: skipped a hardware card" in err and "bad.yaml" in err and "Traceback" not in err


def test_alias_bomb_memory_bounded(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(BAD_YAML["alias-bomb"])
    tracemalloc.start()
    with pytest.raises(RooflineError, match="alias"):
        parse_yaml(path.read_text(), path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 20e6


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifo_named_yaml_never_blocks(cards, capsys):
    os.mkfifo(cards / "hardware" / "pipe.yaml")
    refused(cli(capsys, "hw", "show", "pipe", "--cards", cards), "not a regular file")
    out = ok(cli(capsys, "hw", "list", "--cards", cards))
    assert "box" in out


def test_directory_named_yaml(cards, capsys):
    (cards / "hardware" / "dir.yaml").mkdir()
    refused(cli(capsys, "hw", "show", str(cards / "hardware" / "dir.yaml")), "directory")


def test_symlink_to_device(cards, capsys):
    (cards / "hardware" / "zero.yaml").symlink_to("/dev/zero")
    refused(cli(capsys, "hw", "show", "zero", "--cards", cards), "not a regular file")


# ------------------------------------------------------------------------------------------ 2. hardware card numbers

HW_BAD = [
    ("memory.bandwidth", 0), ("memory.bandwidth", "0 GB/s"), ("memory.bandwidth", -1), ("memory.bandwidth", ".nan"),
    ("memory.bandwidth", "1e999 GB/s"), ("memory.capacity", 0), ("memory.capacity", "inf"),
    ("memory.capacity", [1, 2]), ("peak_flops.bf16", 0), ("peak_flops.bf16", "-5 TFLOP/s"),
    ("peak_flops.bf16", "1e400"), ("memory.reserved", "90 GB"), ("interconnect.latency", ".inf"),
    ("interconnect.gpus_per_node", 0), ("interconnect.bandwidth_per_direction", 0), ("compute_units", 0),
    ("price_usd", -1), ("power", "-3 W"), ("name", "Box With Spaces"), ("kind", "toaster"),
    ("peak_flops", {}), ("sources", ...),
]


@pytest.mark.parametrize("field, value", HW_BAD, ids=[f"{f}={v}" for f, v in HW_BAD])
def test_hardware_card_numbers_refused(field, value, tmp_path, capsys):
    data = edited(HW, field, value)
    text = yaml.safe_dump(data, sort_keys=False).replace("'.nan'", ".nan").replace("'.inf'", ".inf")
    path = write_card(tmp_path, "hardware", text, stem=str(data.get("name", "box")).lower().replace(" ", "-"))
    refused(cli(capsys, "hw", "show", path))


def test_nan_bandwidth_never_prints_a_number(tmp_path, capsys):
    path = write_card(tmp_path, "hardware", yaml.safe_dump(HW).replace("bandwidth: 3 TB/s", "bandwidth: .nan"))
    refused(cli(capsys, "predict", "-m", "llama-3.1-8b", "--hw", path), "bandwidth")


@pytest.mark.parametrize("key, value", [("memory", float("nan")), ("memory", 2.0), ("kernel_overhead_s", -1.0),
                                        ("step_overhead_s", "fast"), ("nonsense", 0.5)])
def test_efficiency_overrides_refused(key, value, tmp_path, capsys):
    path = write_card(tmp_path, "hardware", {**HW, "efficiency": {key: value}})
    refused(cli(capsys, "predict", "-m", "llama-3.1-8b", "--hw", path))


# ------------------------------------------------------------------------------------------ 3. model card counts

MODEL_BAD = [
    ("architecture.num_layers", 10**7), ("architecture.num_layers", 0), ("architecture.num_layers", 10**9),
    ("architecture.attention.num_heads", 0), ("architecture.attention.num_kv_heads", 32),
    ("architecture.attention.num_kv_heads", 3), ("architecture.attention.head_dim", -1),
    ("architecture.vocab_size", 10**12), ("architecture.max_context", 0), ("architecture.max_context", 10**12),
    ("architecture.hidden_size", ".nan"), ("architecture.ffn.intermediate_size", 10**12),
    ("architecture.layer_pattern", "(A)*999999999"), ("architecture.layer_pattern", "A*99999999999999999999"),
    ("architecture.rope", {"theta": 0}), ("params.total", ".inf"), ("params.total", 0),
    ("architecture.moe", {"num_experts": 10**9, "experts_per_token": 2, "expert_intermediate_size": 64}),
    ("architecture.moe", {"num_experts": 4, "experts_per_token": 8, "expert_intermediate_size": 64}),
    ("weights", {"default": "bf16", "toaster": "fp8"}), ("weights", {"default": "fp3"}),
    ("architecture.attention", [1, 2, 3]),
]


@pytest.mark.parametrize("field, value", MODEL_BAD, ids=[f"{f}={v}" for f, v in MODEL_BAD])
def test_model_card_counts_refused(field, value, tmp_path, capsys):
    text = yaml.safe_dump(edited(MODEL, field, value), sort_keys=False).replace("'.nan'", ".nan").replace("'.inf'", ".inf")
    path = write_card(tmp_path, "models", text, stem="toy")
    refused(cli(capsys, "predict", "-m", path, "--hw", "h100"))


def test_card_name_must_match_its_file_name_by_path_too(tmp_path, capsys):
    path = write_card(tmp_path, "models", MODEL, stem="other")
    refused(cli(capsys, "models", "show", path), "must match the file name")
    refused(cli(capsys, "models", "show", "other", "--cards", tmp_path), "must match the file name")


# ------------------------------------------------------------------------------------------ 4. config.json

CONFIG_BAD = [
    ("num_attention_heads", 0), ("num_key_value_heads", 32), ("num_key_value_heads", 5), ("hidden_size", [1, 2]),
    ("num_hidden_layers", "many"), ("num_hidden_layers", 10**8), ("num_hidden_layers", -4), ("vocab_size", None),
    ("model_type", ["llama"]), ("model_type", "toaster"), ("model_type", ...), ("intermediate_size", {"a": 1}),
    ("max_position_embeddings", 0), ("rope_theta", -1.0), ("head_dim", 0),
]


@pytest.mark.parametrize("field, value", CONFIG_BAD, ids=[f"{f}={v}" for f, v in CONFIG_BAD])
def test_config_json_refused(field, value, tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(edited(CONFIG, field, value)))
    refused(cli(capsys, "predict", "-m", path, "--hw", "h100"))


@pytest.mark.parametrize("text", ['{"model_type": "llama", "hidden_size": NaN}', '{"hidden_size": Infinity}',
                                  "[1, 2, 3]", "{" * 100_000, b"\xff\xfe{}", "", '{"a": 1,}'],
                         ids=["nan", "infinity", "list", "deep", "not-utf8", "empty", "trailing-comma"])
def test_config_json_unreadable(text, tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    refused(cli(capsys, "models", "import", path, "--to", tmp_path / "out"))
    assert not (tmp_path / "out" / "models").exists() or not any((tmp_path / "out" / "models").iterdir())


# ------------------------------------------------------------------------------------------ 5. CLI arguments

ARGS_BAD = [
    (["--prompt", "1e30"], "--prompt"), (["--prompt", "200k"], "max context"), (["--prompt", "abc"], "--prompt"),
    (["--prompt", "-5"], "--prompt"), (["--output", "0"], "--output"), (["--batch", "0"], "--batch"),
    (["--batch", "1000000000"], "--batch"), (["--quant", "fp8,q4_k_m"], "--quant"),
    (["--quant", "ffn=fp8,ffn=q4_k_m"], "twice"), (["--quant", "experts=mxfp4"], "no experts"),
    (["--quant", "toaster"], "weight format"), (["--kv-quant", "fp3"], "KV-cache format"),
    (["--draft", "llama-3.2-1b"], "--spec-tokens"), (["--accept", "0.7"], "--spec-tokens"),
    (["--spec-tokens", "3", "--accept", "0.7"], "--draft"),
    (["--spec-tokens", "3", "--accept", "0.7", "--draft", "qwen2.5-7b"], "vocabulary"),
    (["--spec-tokens", "3", "--accept", "1.5", "--draft", "llama-3.2-1b"], "accept"),
    (["--json", "--csv"], "--json and --csv"), (["--gpus", "0"], "--gpus"), (["--pp", "0"], "--pp"),
    (["--cached-tokens", "200k"], "max context"), (["--cached-tokens", "x"], "--cached-tokens"),
    (["--context", "1k", "--cached-tokens", "2k"], "--cached-tokens"), (["--layers", "0"], "layers"),
    (["--nonsense"], "no such option"),
]


@pytest.mark.parametrize("extra, needle", ARGS_BAD, ids=[" ".join(a) for a, _ in ARGS_BAD])
def test_predict_arguments_refused(extra, needle, capsys):
    refused(cli(capsys, "predict", "-m", "llama-3.1-8b", "--hw", "h100", *extra), needle)


@pytest.mark.parametrize("name", ["", "   ", "\x1b[31mred\x1b[0m", "[bold]x[/bold]", "[/oops]", "../../etc/passwd",
                                  "a" * 5000, "llama\x00x"])
def test_odd_model_names(name, capsys):
    result = cli(capsys, "predict", "-m", name, "--hw", "h100")
    refused(result)
    assert "\x1b" not in result[2]


def test_cards_option_pointing_at_nothing(tmp_path, capsys):
    refused(cli(capsys, "hw", "list", "--cards", tmp_path / "missing"), "--cards")
    (tmp_path / "file").write_text("x")
    refused(cli(capsys, "hw", "list", "--cards", tmp_path / "file"), "--cards")
    (tmp_path / "empty").mkdir()
    refused(cli(capsys, "hw", "list", "--cards", tmp_path / "empty"), "has none of the folders")


def test_sweep_and_compare_share_the_guards(capsys):
    refused(cli(capsys, "sweep", "-m", "llama-3.1-8b", "--hw", "h100", "--json", "--csv"), "--json and --csv")
    refused(cli(capsys, "compare", "-m", "llama-3.1-8b", "--hw", "h100", "--json", "--csv"), "--json and --csv")
    refused(cli(capsys, "sweep", "-m", "llama-3.1-8b", "--hw", "h100", "--prompt", "1M"), "max context")
    refused(cli(capsys, "fits", "-m", "llama-3.1-8b", "--hw", "h100", "--quant", "fp8,int4"), "--quant")
    refused(cli(capsys, "compare", "-m", ",", "--hw", "h100"), "at least one")


# ------------------------------------------------------------------------------------------ 6. output paths


@pytest.mark.parametrize("target", ["dir", "proc", "readonly", "suffix", "missing-parent-file"])
def test_plot_output_paths_refused_before_work(target, tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
    (tmp_path / "afile").write_text("x")
    path = {"dir": tmp_path, "proc": Path("/proc/self/x.png"), "readonly": ro / "x.png",
            "suffix": tmp_path / "x.exe", "missing-parent-file": tmp_path / "afile" / "x.png"}[target]
    if target == "readonly" and ROOT:
        pytest.skip("root writes anywhere")
    before = files_under(tmp_path)
    refused(cli(capsys, "plot", "memory", "-m", "llama-3.1-8b", "--hw", "h100", "-o", path))
    assert files_under(tmp_path) == before


@pytest.mark.parametrize("target", ["file", "proc", "readonly"])
def test_calibrate_out_checked_before_measuring(target, tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
    (tmp_path / "afile").write_text("x")
    if target == "readonly" and ROOT:
        pytest.skip("root writes anywhere")
    out = {"file": tmp_path / "afile", "proc": Path("/proc/self"), "readonly": ro}[target]
    with time_limit(5):  # refused at once: no engine is loaded, nothing measured
        refused(cli(capsys, "calibrate", "--grid", "smoke", "--device", "cpu", "--out", out), "--out")


@pytest.mark.parametrize("name", ["!!!", "../evil", "/abs", ".hidden", "-", "x.yaml", "a" * 200])
def test_import_name_validated_before_writing(name, tmp_path, capsys):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(CONFIG))
    before = files_under(tmp_path)
    refused(cli(capsys, "models", "import", cfg, "--name", name, "--to", tmp_path / "home"), "--name")
    assert files_under(tmp_path) == before


def test_import_never_follows_a_planted_symlink(tmp_path, capsys):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(CONFIG))
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    models = tmp_path / "home" / "models"
    models.mkdir(parents=True)
    for planted in ("toy.yaml.tmp", ".toy.yaml.tmp", "toy.tmp"):
        (models / planted).symlink_to(victim)
    ok(cli(capsys, "models", "import", cfg, "--name", "toy", "--to", tmp_path / "home"))
    assert victim.read_text() == "precious"
    assert yaml.safe_load((models / "toy.yaml").read_text())["name"] == "toy"
    assert {p.name for p in models.iterdir()} == {"toy.yaml", "toy.yaml.tmp", ".toy.yaml.tmp", "toy.tmp"}


def test_import_existing_needs_force(tmp_path, capsys):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(CONFIG))
    ok(cli(capsys, "models", "import", cfg, "--name", "toy", "--to", tmp_path))
    refused(cli(capsys, "models", "import", cfg, "--name", "toy", "--to", tmp_path), "--force")
    ok(cli(capsys, "models", "import", cfg, "--name", "toy", "--to", tmp_path, "--force"))


# ------------------------------------------------------------------------------------------ 7. terminal, spreadsheet

HOSTILE_TEXT = ["[/oops]", "[bold red]shout[/bold red]", "[link=file:///etc/passwd]x[/link]",
                "\x1b]0;pwned\x07title", "\x1b[2J\x1b[Hclear", "bell\x07", "back\x08space", "\x9b31mC1"]


@pytest.mark.parametrize("text", HOSTILE_TEXT)
def test_card_text_prints_literally(text, tmp_path, capsys):
    path = write_card(tmp_path, "hardware", {**HW, "description": text, "vendor": text})
    out = ok(cli(capsys, "hw", "show", path))
    assert "\x1b" not in out and "\x07" not in out and "\x08" not in out and "\x9b" not in out
    if text.startswith("["):
        assert text in out.replace("\n", "")  # markup shown as written, not interpreted


@pytest.mark.parametrize("name", ["=cmd|' /c calc'!a0", "+1+1", "-2+3", "@sum(a1)"])
def test_csv_cells_never_formulas(name, tmp_path, capsys):
    slug = {"=": "eq", "+": "plus", "-": "minus", "@": "at"}[name[0]]
    path = write_card(tmp_path, "hardware", {**HW, "name": slug, "vendor": name})
    data = edited(MODEL, "name", slug)
    data["aliases"] = [name]
    mpath = write_card(tmp_path, "models", data)
    out = ok(cli(capsys, "predict", "-m", mpath, "--hw", path, "--csv"))
    rows = list(csv.reader(out.splitlines()))
    for cell in rows[1]:
        assert not cell.startswith(("=", "+", "@")) or cell.lstrip("+-").replace(".", "").replace("e", "").isdigit()
    assert all(not c.startswith("=") for c in rows[1])


def test_csv_formula_escaping_of_text_cells():
    from roofline.cli.output import csv_cell

    assert csv_cell("=1+1") == "'=1+1" and csv_cell("@x") == "'@x" and csv_cell("-x") == "'-x"
    assert csv_cell(-2.5) == -2.5 and csv_cell(float("nan")) == "" and csv_cell("fine") == "fine"


# ------------------------------------------------------------------------------------------ 8. published CSVs

GOOD_ROW = {"id": "X1", "source": "test", "hardware": "H100", "engine": "test", "model": "llama-3.1-8b",
            "params_b": "8", "weight_quant": "BF16", "kv_dtype": "bf16", "isl": "128", "osl": "128", "batch": "1",
            "tp": "1", "metric": "decode_tok_s", "value": "100", "unit": "tok/s", "notes": "", "hw_card": "h100-sxm",
            "model_card": "llama-3.1-8b", "gpus": "1"}
CSV_BAD = [("value", "0"), ("value", "-3"), ("value", "nan"), ("value", "inf"), ("value", "fast"), ("gpus", "0"),
           ("tp", "0"), ("isl", "1000000000"), ("batch", "999999999999"), ("hw_card", "h1000"), ("isl", "9" * 5000),
           ("isl", "-5"), ("osl", "1.5"), ("isl", "4k"), ("batch", "some"), ("tp", "8"), ("tp", "3")]


@pytest.mark.parametrize("field, value", CSV_BAD, ids=[f"{f}={v[:12]}" for f, v in CSV_BAD])
def test_published_bad_rows_skipped_with_reason(field, value, tmp_path, capsys):
    path = tmp_path / "rows.csv"
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(GOOD_ROW))
        w.writeheader()
        w.writerow(GOOD_ROW)
        w.writerow({**GOOD_ROW, "id": "BAD", field: value})
    data = json.loads(ok(cli(capsys, "validate", "--published", path, "--json")))
    assert [r["id"] for r in data["rows"]] == ["X1"]
    assert [s["id"] for s in data["skipped"]] == ["BAD"] and data["skipped"][0]["why"]


def test_published_ids_must_be_unique(tmp_path, capsys):
    path = tmp_path / "rows.csv"
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(GOOD_ROW))
        w.writeheader()
        w.writerows([GOOD_ROW, GOOD_ROW])
    refused(cli(capsys, "validate", "--published", path), "names two rows")


@pytest.mark.parametrize("content", [b"\xff\xfe\x00junk", b"", b"a,b\n1,2\n"], ids=["not-utf8", "empty", "no-columns"])
def test_published_unreadable_files(content, tmp_path, capsys):
    path = tmp_path / "rows.csv"
    path.write_bytes(content)
    refused(cli(capsys, "validate", "--published", path))


def test_published_path_is_a_directory(tmp_path, capsys):
    refused(cli(capsys, "validate", "--published", tmp_path))


# ------------------------------------------------------------------------------------------ 9. fuzzing

yaml_text = st.text(alphabet=st.sampled_from(list("abc:-[]{}&*!|>'\"#\n \t0123.,?%@`~\\")), max_size=300)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(yaml_text)
def test_fuzz_yaml_loader_only_roofline_errors(text):
    try:
        data = parse_yaml(text, "fuzz.yaml")
    except RooflineError:
        return
    for schema in (HardwareCard, ModelCard):
        if isinstance(data, dict):
            try:
                validate_card(schema, data, "fuzz.yaml")
            except RooflineError:
                pass


scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12), st.floats(allow_nan=True),
                    st.text(max_size=8))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                               max_size=3), max_leaves=8)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(sorted(CONFIG)), values, max_size=4))
def test_fuzz_config_json_importer_only_roofline_errors(changes):
    config = {**CONFIG, **changes}
    try:
        card = card_from_config(config, source="fuzz.json")
    except RooflineError:
        return
    assert card.architecture.num_layers > 0


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["memory.capacity", "memory.bandwidth", "peak_flops.bf16", "interconnect.latency",
                        "memory.reserved", "compute_units", "interconnect.gpus_per_node"]), values)
def test_fuzz_hardware_fields_only_roofline_errors(field, value):
    try:
        card = validate_card(HardwareCard, edited(HW, field, value), "fuzz.yaml")
    except RooflineError:
        return
    assert math.isfinite(card.memory.bandwidth_bytes_per_s) and card.memory.bandwidth_bytes_per_s > 0


def test_read_text_refuses_devices():
    with pytest.raises(RooflineError, match="not a regular file"):
        read_text(Path("/dev/null"))
    assert sys.platform != "win32"
