"""Careless and hostile input from a fifth fuzzing pass: output the OS will not take (a full disk, a loop of links, a
terminal that cannot show the tables), a home folder that names no place, options that silently overrode others,
objectives that are not numbers, and setups drawn or warned about as if they fit. Each is one line with exit 2, or
where stated the answer the documented rule gives."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, run_cli
from hostile import cli, ok, refused

CONFIG = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
          "num_key_value_heads": 4, "intermediate_size": 128, "vocab_size": 1000, "max_position_embeddings": 2048}


def _one_line_exit_2(run, *needles: str) -> None:
    assert run.returncode == 2, (run.returncode, run.stderr[-600:])
    assert len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr, run.stderr
    assert all(n in run.stderr for n in needles), run.stderr


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("fmt", [(), ("--json",)])
def test_standard_output_on_a_full_disk_is_one_line(fmt):
    with open("/dev/full", "w") as full:
        run = subprocess.run([sys.executable, "-m", "roofline", "predict", "-m", "llama-3.1-8b", "--hw", "h100",
                              *fmt], stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    _one_line_exit_2(run, "cannot write the output")


def test_a_loop_of_links_in_an_output_path_is_one_line(tmp_path, capsys):
    (tmp_path / "d1").symlink_to(tmp_path / "d2")
    (tmp_path / "d2").symlink_to(tmp_path / "d1")
    refused(cli(capsys, "plot", "roofline", "-m", "llama-3.1-8b", "--hw", "h100", "-o", tmp_path / "d1" / "x.png"),
            "loop of symbolic links")


@pytest.mark.parametrize("home", ["", "/nonexistent-roofline-home"])
def test_a_home_that_names_no_folder_writes_nothing(home, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    run = run_cli("models", "import", str(tmp_path / "config.json"), env={"HOME": home, "ROOFLINE_HOME": ""},
                  cwd=tmp_path)
    _one_line_exit_2(run, "ROOFLINE_HOME", "--to")
    assert not Path("/.config/roofline").exists() and not Path(home or "/nonexistent").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]


def test_an_empty_grid_is_refused_before_measuring(capsys):
    refused(cli(capsys, "calibrate", "--grid", ""), "--grid", "empty")


def test_a_published_csv_without_its_formats_column_is_one_line(tmp_path, capsys):
    with open(REPO / "benchmarks" / "data" / "published_train.csv") as f:
        rows = list(csv.DictReader(f))[:3]
    keep = [k for k in rows[0] if k != "weight_quant"]
    with open(tmp_path / "p.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keep, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    refused(cli(capsys, "validate", "--published", tmp_path / "p.csv"), "weight_quant")


def test_a_terminal_that_cannot_show_the_tables_is_one_line():
    run = run_cli("predict", "-m", "llama-3.1-8b", "--hw", "h100", env={"PYTHONIOENCODING": "ascii", "LC_ALL": "C"})
    _one_line_exit_2(run, "PYTHONIOENCODING=utf-8", "--json")
    ok_json = run_cli("predict", "-m", "llama-3.1-8b", "--hw", "h100", "--json",
                      env={"PYTHONIOENCODING": "ascii", "LC_ALL": "C"})
    assert ok_json.returncode == 0 and json.loads(ok_json.stdout)["ttft_s"] > 0


@pytest.mark.parametrize("flag,value", [("-m", "llama-3.2-1b"), ("--batch", "2"), ("--prompt", "64")])
def test_random_shapes_refuse_the_shape_options_they_would_override(flag, value, capsys):
    refused(cli(capsys, "validate", "--engine-shapes", "--random", "1", flag, value), "--random")


def test_a_card_given_by_its_yaml_path_warns_nothing(capsys):
    _, _, err = cli(capsys, "predict", "-m", REPO / "models" / "llama-3.1-8b.yaml", "--hw", "h100", "--json")
    assert "warning" not in err, err


def test_an_imported_config_warns_what_it_assumed_only_when_the_command_succeeds(tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    _, _, err = cli(capsys, "predict", "-m", tmp_path / "config.json", "--hw", "h100", "--json")
    assert "assumed bf16" in err
    refused(cli(capsys, "predict", "-m", tmp_path / "config.json", "--hw", "h100", "--prompt", "200k"), "context")


@pytest.mark.parametrize("args,needle", [
    (("plot", "roofline", "-m", "llama-3.1-70b", "--hw", "rtx-4090"), "does not fit"),
    (("plot", "sweep", "-m", "llama-3.1-8b", "--hw", "rtx-4090"), "do not fit"),
    (("plot", "memory", "-m", "llama-3.1-70b", "--hw", "rtx-4090,h200"), "does not fit on rtx-4090"),
])
def test_a_plot_of_a_setup_that_does_not_fit_says_so(args, needle, tmp_path, capsys):
    out = ok(cli(capsys, *args, "-o", tmp_path / "p.png"))
    assert needle in out


@pytest.mark.parametrize("cmd", ["serve", "capacity"])
@pytest.mark.parametrize("slo", ["inf", "1e400", "nan", "-inf"])
def test_an_objective_is_a_finite_number_of_seconds(cmd, slo, capsys):
    load = ("--concurrency", "2", "--requests", "4", "--slo-itl", "0.05") if cmd == "serve" else ("--slo-itl", "0.05")
    refused(cli(capsys, cmd, "-m", "llama-3.1-8b", "--hw", "h100", *load, "--slo-ttft", slo), "--slo-ttft")


@pytest.mark.parametrize("args", [("engine", "run", "-m", "llama-3.2-1b"), ("calibrate",),
                                  ("validate", "--engine-shapes")])
def test_an_empty_hardware_name_is_not_this_machine(args, capsys):
    refused(cli(capsys, *args, "--hw", ""), "--hw", "empty")


@pytest.mark.parametrize("sep", ["\t", ";"])
def test_a_trace_with_another_separator_is_told_to_use_commas(sep, tmp_path, capsys):
    path = tmp_path / "t.csv"
    rows = [("arrival_s", "prompt_tokens", "output_tokens"), ("0", "100", "10")]
    path.write_text("".join(sep.join(row) + "\n" for row in rows))
    refused(cli(capsys, "serve", "-m", "llama-3.1-8b", "--hw", "h100", "--trace", path), "commas")
