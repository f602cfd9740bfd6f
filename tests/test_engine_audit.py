"""The engine commands (engine run, calibrate, validate) under inputs a demanding user sends: each bad one gets one
line and exit 2 before torch loads or minutes of work, and none hangs, leaves processes or writes half a result.
Each case states its rule."""

from __future__ import annotations

import json
import os
import time

import pytest
from conftest import run_cli
from hostile import cli, refused

pytest.importorskip("torch")


def test_a_fifo_card_is_refused_not_waited_on(tmp_path, capsys):
    """A FIFO given as -m, or lying in a --cards folder, is refused (or skipped with a warning) without being
    opened for reading: the GGUF sniff had opened it blocking, and every command hung until killed."""
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    refused(cli(capsys, "predict", "-m", fifo, "--hw", "h100-sxm"), "not a regular file")
    (tmp_path / "cards" / "models").mkdir(parents=True)
    os.mkfifo(tmp_path / "cards" / "models" / "x.yaml")
    code, out, err = cli(capsys, "models", "list", "--cards", tmp_path / "cards")
    assert code == 0 and "not a regular file" in err


@pytest.mark.parametrize("args, needles", [
    (("--serving", "--device", "tpu"), ("--device tpu", "auto, cpu or cuda")),
    (("--serving", "--device", "cuda"), ("--device cuda", "--device cpu")),
    (("--serving", "--dtype", "int8"), ("--dtype int8", "fp32, bf16, fp16")),
    (("--engine-shapes", "-m", "mistral-7b", "--batch", "1", "--prompt", "8", "--device", "tpu"), ("--device tpu",)),
    (("--engine-shapes", "-m", "mistral-7b", "--prompt", "100000000"), ("32,768", "shorten")),
    (("--engine-shapes", "--dtype", "fp64"), ("--dtype fp64",)),
    (("--engine-shapes", "--random", "100000000"), ("--random",)),
    (("--engine-shapes", "--seed", "3"), ("--seed", "--random")),
    (("--serving", "--batch", "4"), ("--batch", "--engine-shapes")),
    (("--serving", "-m", "mistral-7b"), ("--model", "--serving")),
])
def test_validate_checks_its_engine_options_before_any_run(args, needles, capsys):
    """Every engine option of `validate` is checked up front, in one line (--device and --dtype had reached torch
    and ended as internal errors; --serving had ignored --batch, --model and the rest; a prompt beyond the card's
    context had run; --random 1e8 had never returned)."""
    if "cuda" in args and __import__("torch").cuda.is_available():
        pytest.skip("this host has a CUDA device")
    start = time.monotonic()
    refused(cli(capsys, "validate", *args), *needles)
    assert time.monotonic() - start < 10


@pytest.mark.parametrize("args, needles", [
    (("-m", "llama-3.1-405b", "--prompt", "8", "--output", "2"), ("GB of weights", "available", "--layers")),
    (("-m", "llama-3.2-1b", "--layers", "4", "--vocab", "100", "--prompt", "120k", "--output", "2"),
     ("minutes", "limit", "shorter --prompt")),
    (("-m", "llama-3.2-1b", "--layers", "1", "--dtype", "fp64"), ("--dtype fp64",)),
])
def test_engine_run_refuses_runs_this_host_cannot_finish(args, needles, capsys):
    """Weights beyond the host's memory, or a run the predictor puts past the time limit (a 120k-token prompt's
    attention over 4 layers on two cores: 18 minutes predicted on an AVX-512 host, where one layer's 4.5 were under
    the limit and the engine then ran 10.5 minutes), is refused before torch loads; fp64, which no predictor path
    runs, is not offered."""
    start = time.monotonic()
    refused(cli(capsys, "engine", "run", *args), *needles)
    assert time.monotonic() - start < 10


def test_engine_run_sizes_its_kv_pool_to_the_run():
    """A 10-token run of a tiny card asks for a pool of a few MB, not the 4 GB cap (which was allocated and zeroed
    whole); the cap still bounds a big run."""
    from roofline.cards.store import CardStore
    from roofline.cli.engine_cmd import KV_POOL_BYTES, pool_bytes
    from roofline.sizing.kv import kv_bytes

    st = CardStore()
    small = st.model("llama-3.2-1b")
    assert pool_bytes(small, 10, 1, "fp32") < 0.1e9
    assert pool_bytes(small, 10, 1, "fp32") >= 2 * kv_bytes(small, 10, "fp32")
    assert pool_bytes(st.model("llama-3.3-70b"), 100_000, 64, "bf16") == KV_POOL_BYTES


def test_int4_weights_take_a_group_size_every_layer_divides():
    """gpt-oss's 2,880-wide layers are not a multiple of the usual 128-wide int4 group: the engine takes 64 (a
    size its int4 kernels run) instead of failing inside torch. (A real engine run: in its own process, whose
    time limit allows a loaded two-core machine.)"""
    run = run_cli("engine", "run", "-m", "gpt-oss-20b", "--layers", "1", "--vocab", "100", "--weights", "int4",
                  "--dtype", "bf16", "--prompt", "8", "--output", "2", "--json")
    assert run.returncode == 0, run.stderr[-600:]
    assert json.loads(run.stdout)["measured"]["decode_tok_s"] > 0


def test_int4_group_size_names_the_layer_no_group_divides():
    import torch

    from roofline.engine.engine import int4_group_size
    from roofline.engine.model.transformer import EngineError

    model = torch.nn.Sequential(torch.nn.Linear(256, 8), torch.nn.Linear(2880, 8))
    assert int4_group_size(model, "int4") == 64
    assert int4_group_size(torch.nn.Sequential(torch.nn.Linear(100, 8)), "int8") == 128
    with pytest.raises(EngineError, match="layer 0 is 100 wide.*--weights int8"):
        int4_group_size(torch.nn.Sequential(torch.nn.Linear(100, 8)), "int4")


def test_calibrate_checks_both_card_folders_before_measuring(tmp_path, capsys):
    """calibrate writes a hardware card and a runtime profile: a runtimes/ that is a file, or a card path that is a
    directory, is refused before the minutes of measuring (one had been found after them, the other card already
    written). --quick with another --grid is a contradiction, said so."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "runtimes").write_text("")
    start = time.monotonic()
    refused(cli(capsys, "calibrate", "--grid", "smoke", "--out", tmp_path / "a"), "runtimes is a file")
    (tmp_path / "b" / "hardware" / "host-cpu.yaml").mkdir(parents=True)
    refused(cli(capsys, "calibrate", "--grid", "smoke", "--out", tmp_path / "b"), "host-cpu.yaml is not a file")
    refused(cli(capsys, "calibrate", "--grid", "smoke", "--quick", "--out", tmp_path / "c"), "--quick", "--grid")
    assert time.monotonic() - start < 10
    assert not (tmp_path / "a" / "hardware").exists() and not (tmp_path / "c").exists()


def test_ctrl_c_says_interrupted(capsys, monkeypatch):
    """Ctrl-C ends a command with exit 130 and one word on stderr (typer's exit code had come back silent)."""
    from roofline.perf.serving import run

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "serve", interrupted)
    code, _, err = cli(capsys, "serve", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--rate", "10")
    assert code == 130 and err.strip().splitlines()[-1] == "interrupted"
