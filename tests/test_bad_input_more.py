"""More careless and hostile input: traces, serving fleets, concurrency lists and engine runs. Every case is a
one-line error with exit 2 (no traceback, no hang, nothing written) or a clean answer."""

from __future__ import annotations

import json
import os

import pytest
from hostile import cli, files_under, ok, refused, time_limit

SERVE = ("serve", "-m", "llama-3.1-8b", "--hw", "h100", "--requests", "20")
HEADER = "arrival_s,prompt_tokens,output_tokens"
ROW = '{"arrival_s": 0, "prompt_tokens": 10, "output_tokens": 5}'

# ------------------------------------------------------------------------------------------ 1. trace files

BAD_TRACES = {
    "inf-prompt.csv": (f"{HEADER}\n0,1e400,5\n", "whole numbers"),
    "inf-word.csv": (f"{HEADER}\n0,inf,5\n", "line 2"),
    "inf-prefix.csv": (f"{HEADER},prefix_id,prefix_tokens\n0,10,5,a,1e400\n", "whole numbers"),
    "inf-prompt.jsonl": ('{"arrival_s": 0, "prompt_tokens": 1e400, "output_tokens": 5}\n', "whole numbers"),
    "infinity.jsonl": ('{"arrival_s": 0, "prompt_tokens": Infinity, "output_tokens": 5}\n', "line 1"),
    "many-digits.jsonl": ('{"arrival_s": 0, "prompt_tokens": ' + "9" * 5000 + ', "output_tokens": 5}\n', "line 1"),
    "deep.jsonl": ("[" * 100_000 + "]" * 100_000 + "\n", "line 1"),
    "not-utf8.csv": (f"{HEADER}\n0,10,5\n".encode() + b"\xff\xfe,1,1\n", "UTF-8"),
    # cut at the line, before the CSV reader reads the field
    "huge-field.csv": (f'{HEADER}\n0,10,5\n"{"x" * 200_000}",1,1\n', "line 3: longer than 65,536 characters"),
    "twice.csv": (f"{HEADER},arrival_s\n0,10,5,7\n", "names a column twice"),
    "jsonl-named.txt": (ROW + "\n", "name it .jsonl"),
    "fraction.jsonl": ('{"arrival_s": 0, "prompt_tokens": 10.7, "output_tokens": 5}\n', "whole numbers"),
    "boolean.jsonl": ('{"arrival_s": true, "prompt_tokens": 10, "output_tokens": 5}\n', "finite number"),
}


@pytest.mark.parametrize("name", sorted(BAD_TRACES))
def test_bad_trace_is_one_line(name, tmp_path, capsys):
    content, needle = BAD_TRACES[name]
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    refused(cli(capsys, *SERVE, "--trace", path), "--trace", needle)


def test_trace_directory_and_fifo(tmp_path, capsys):
    refused(cli(capsys, *SERVE, "--trace", tmp_path), "a directory")
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "pipe.csv")
        refused(cli(capsys, *SERVE, "--trace", tmp_path / "pipe.csv"), "not a regular file")


@pytest.mark.parametrize("name, text", [("bom.csv", f"{HEADER}\r\n0,10,5\r\n0.5,20,5\r\n"),
                                        ("bom.jsonl", f"{ROW}\n{ROW}\n")])
def test_trace_with_a_byte_order_mark_reads(name, text, tmp_path, capsys):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8-sig")
    assert json.loads(ok(cli(capsys, *SERVE, "--trace", path, "--json")))["requests"] == 2


# ------------------------------------------------------------------------------------------ 2. serving options


@pytest.mark.parametrize("extra, needle", [
    (["--rate", "inf"], "--rate"), (["--rate", "1e400"], "--rate"),
    (["--concurrency", "4", "--disagg", "1:1", "--network-gbps", "inf"], "--network-gbps"),
    (["--concurrency", "4", "--network-gbps", "100"], "--disagg"),
])
def test_serve_numbers_refused(extra, needle, capsys):
    refused(cli(capsys, *SERVE, *extra), needle)


@pytest.mark.parametrize("extra, needle", [(["--replicas", "100000000"], "--replicas"),
                                           (["--replicas", "5000"], "at most"),
                                           (["--disagg", "1000000:1"], "--disagg")])
def test_fleet_beyond_one_simulation_refused_at_once(extra, needle, capsys):
    with time_limit(5):  # refused before any replica is built
        refused(cli(capsys, *SERVE, "--concurrency", "4", *extra), needle, "replicas")


def test_a_modest_fleet_still_serves(capsys):
    d = json.loads(ok(cli(capsys, *SERVE, "--concurrency", "4", "--replicas", "8", "--json")))
    assert d["requests"] == 20


@pytest.mark.parametrize("hw", ["", ","])
def test_capacity_without_hardware_refused(hw, capsys):
    refused(cli(capsys, "capacity", "-m", "llama-3.1-8b", "--hw", hw, "--slo-ttft", "1", "--slo-itl", "0.05"), "--hw")


# ------------------------------------------------------------------------------------------ 3. concurrency is named


@pytest.mark.parametrize("args", [
    ("sweep", "-m", "llama-3.1-8b", "--hw", "h100", "--concurrency", "99999999999999999999"),
    ("sweep", "-m", "llama-3.1-8b", "--hw", "h100", "--static", "--concurrency", "1,200000000"),
    ("fits", "-m", "llama-3.1-8b", "--hw", "h100", "--concurrency", "999999999999"),
    ("fits", "-m", "llama-3.1-8b", "--hw", "h100", "--concurrency", "0"),
])
def test_concurrency_bounds_name_concurrency(args, capsys):
    err = cli(capsys, *args)
    refused(err, "--concurrency")
    assert "--batch" not in err[2]


@pytest.mark.parametrize("kind, value", [("sweep", "99999999999999999999"), ("memory", "0"),
                                         ("memory", "999999999999")])
def test_plot_concurrency_refused_and_nothing_written(kind, value, tmp_path, capsys):
    refused(cli(capsys, "plot", kind, "-m", "llama-3.1-8b", "--hw", "h100", "--concurrency", value,
                "-o", tmp_path / "p.png"), "--concurrency")
    assert files_under(tmp_path) == set()


@pytest.mark.parametrize("extra, needle", [(["--target-rate", "inf"], "--target-rate"),
                                           (["--usd-per-gpu-hour", "nan"], "must be between"),
                                           (["--usd-per-gpu-hour", "h100-sxm=3,h100-sxm=4"], "priced twice")])
def test_capacity_rates_and_prices_must_be_finite(extra, needle, capsys):
    with time_limit(5):  # refused before any configuration is searched
        refused(cli(capsys, "capacity", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--slo-ttft", "1", "--slo-itl",
                    "0.05", *extra), needle)


def test_an_empty_kv_format_is_refused(capsys):
    refused(cli(capsys, "predict", "-m", "llama-3.1-8b", "--hw", "h100", "--kv-quant", ""), "--kv-quant")


def test_validate_published_draws_its_scatter_and_refuses_one_it_cannot(tmp_path, capsys):
    from conftest import REPO

    rows = REPO / "benchmarks" / "data" / "published_train.csv"
    ok(cli(capsys, "validate", "--published", rows, "-o", tmp_path / "s.png"))
    assert (tmp_path / "s.png").stat().st_size > 0
    refused(cli(capsys, "validate", "--published", rows, "--by-source", "-o", tmp_path / "t.png"), "-o")
    assert not (tmp_path / "t.png").exists()


# ------------------------------------------------------------------------------------------ 4. engine run


@pytest.mark.parametrize("extra, needle", [(["--vocab", "99999999999"], "--vocab"), (["--vocab", "128257"], "--vocab"),
                                           (["--output", "1"], "--output"), (["--prompt", "1M"], "max context"),
                                           (["--batch", "1000000000"], "--batch")])
def test_engine_run_checks_before_it_runs(extra, needle, capsys):
    with time_limit(5):  # refused before torch loads or any memory is allocated
        refused(cli(capsys, "engine", "run", "-m", "llama-3.2-1b", "--layers", "1", *extra), needle)


# ------------------------------------------------------------------------------------------ 5. import destination


@pytest.mark.parametrize("to", ["", "  "])
def test_import_to_an_empty_path_writes_nothing(to, tmp_path, capsys, monkeypatch):
    from hostile import CONFIG

    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(CONFIG))
    monkeypatch.chdir(tmp_path)  # '' would be the current directory: a checkout's bundled models/ folder
    before = files_under(tmp_path)
    refused(cli(capsys, "models", "import", cfg, "--name", "toy", "--to", to), "--to")
    assert files_under(tmp_path) == before


# ------------------------------------------------------------------------------------------ 6. options and card fields


@pytest.mark.parametrize("quant", ["=mxfp4", "=", "experts=mxfp4,=q8_0"])
def test_a_format_with_no_component_before_the_equals_is_refused(quant, capsys):
    refused(cli(capsys, "predict", "-m", "llama-3.1-8b", "--hw", "h100", "--quant", quant), "--quant", "no component")


def test_an_empty_cards_path_is_refused_not_read_as_the_working_directory(tmp_path, capsys, monkeypatch):
    from hostile import MODEL, write_card

    write_card(tmp_path, "models", MODEL)  # '' would read this folder's models/
    monkeypatch.chdir(tmp_path)
    refused(cli(capsys, "predict", "-m", "toy", "--hw", "h100", "--cards", ""), "--cards", "empty path")
    ok(cli(capsys, "predict", "-m", "toy", "--hw", "h100", "--cards", "."))  # the folder named as '.' still reads


@pytest.mark.parametrize("kind, field", [("models", "architecture.vocab_size"), ("models", "architecture.num_layers"),
                                         ("models", "architecture.moe.num_shared_experts"),
                                         ("hardware", "interconnect.gpus_per_node")])
def test_a_count_written_true_is_refused_not_read_as_one(kind, field, tmp_path, capsys):
    from hostile import HW, MODEL, edited, write_card

    if field.endswith("num_shared_experts"):
        base = edited(MODEL, "architecture.moe", {"num_experts": 8, "experts_per_token": 2,
                                                          "expert_intermediate_size": 1024})
    else:
        base = MODEL if kind == "models" else HW
    write_card(tmp_path, kind, edited(base, field, True))
    names = ("-m", "toy", "--hw", "h100") if kind == "models" else ("-m", "llama-3.1-8b", "--hw", "box")
    refused(cli(capsys, "predict", *names, "--cards", tmp_path), field.rsplit(".", 1)[1], "expected a number")


@pytest.mark.parametrize("kind, show", [("models", "roofline models show"), ("hardware", "roofline hw show")])
def test_an_unknown_field_points_at_a_complete_card_of_its_own_kind(kind, show, tmp_path, capsys):
    from hostile import HW, MODEL, edited, write_card

    write_card(tmp_path, kind, edited(MODEL if kind == "models" else HW, "colour", "blue"))
    names = ("-m", "toy", "--hw", "h100") if kind == "models" else ("-m", "llama-3.1-8b", "--hw", "box")
    refused(cli(capsys, "predict", *names, "--cards", tmp_path), "colour", show)
