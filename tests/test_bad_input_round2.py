"""Careless and hostile input from a second fuzzing pass over the CLI: card figures that overflow every division,
schema gaps that reached an internal error, options silently dropped. Every case is a one-line error with exit 2 (no
traceback, no hang) or, where stated, the answer the documented rule gives."""

from __future__ import annotations

import json

import pytest
import yaml
from hostile import cli, edited, ok, refused, write_card

from roofline.cards.store import bundled_dir

PREDICT = ("predict", "-m", "llama-3.1-8b", "--hw")


def _bundled(kind: str, name: str) -> dict:
    return yaml.safe_load((bundled_dir() / kind / f"{name}.yaml").read_text())


@pytest.mark.parametrize("path, value, needles", [
    ("memory.bandwidth", "1e-300 B/s", ("memory.bandwidth", "at least")),
    ("peak_flops.bf16", "1e-300 FLOP/s", ("peak_flops.bf16", "unit prefix")),
    ("interconnect.bandwidth_per_direction", "1e-300 B/s", ("bandwidth_per_direction", "0 for none")),
    ("interconnect.latency", "1e30 s", ("latency", "unit")),
    ("peak_flops", {"int8": "1000 TOPS"}, ("peak_flops", "floating-point")),
])
def test_a_hardware_figure_no_device_has_is_refused(path, value, needles, tmp_path, capsys):
    """A rate of 1e-300 B/s passed as positive and every time divided by it overflowed (TTFT inf, ITL of 300
    digits); a card of int8 peaks only timed bf16 GEMMs at its int8 rate."""
    write_card(tmp_path, "hardware", edited(_bundled("hardware", "h100-sxm"), path, value))
    refused(cli(capsys, *PREDICT, "h100-sxm", "--gpus", "2", "--cards", tmp_path), *needles)


@pytest.mark.parametrize("path, value, needle", [
    ("architecture.moe.first_dense_layers", 1, "needs an ffn section"),
    ("architecture.moe.first_dense_layers", 1000, "exceeds num_layers"),
    ("stored_weight_bytes", {"ffn": 10**400}, "401-digit"),
])
def test_a_model_card_gap_is_refused_not_an_internal_error(path, value, needle, tmp_path, capsys):
    card = _bundled("models", "mixtral-8x7b")
    card.pop("stored_weight_bytes", None)
    write_card(tmp_path, "models", edited(card, path, value))
    refused(cli(capsys, "predict", "-m", "mixtral-8x7b", "--hw", "h100-sxm", "--cards", tmp_path), needle)


@pytest.mark.parametrize("extra, needle", [
    (("--concurrency", "4", "--burstiness", "0.5"), "--burstiness"),
    (("--trace", "TRACE", "--prompt", "999"), "--prompt"),
    (("--trace", "TRACE", "--output", "7"), "--output"),
    (("--rate", "1e-14"), "at least 1e-06"),  # arrivals at 1e16 s swallowed millisecond latencies: TTFT 0 us
    (("--rate", "1", "--burstiness", "1e-9"), "--burstiness"),
    (("--concurrency", "2", "--disagg", "1:1", "--network-gbps", "1e-300"), "--network-gbps"),
    (("--trace", "EPOCH"), "not a timestamp"),  # Unix ns read as seconds: every latency 0 us
])
def test_serve_refuses_an_option_its_load_mode_ignores(extra, needle, tmp_path, capsys):
    trace = tmp_path / "trace.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,100,10\n0.5,200,20\n")
    epoch = tmp_path / "epoch.csv"
    epoch.write_text("arrival_s,prompt_tokens,output_tokens\n1732700000000000000,100,10\n")
    args = [{"TRACE": str(trace), "EPOCH": str(epoch)}.get(a, a) for a in extra]
    refused(cli(capsys, "serve", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--requests", "10", *args), needle)


HEADER = ("id,source,hardware,engine,model,params_b,weight_quant,kv_dtype,isl,osl,batch,tp,metric,value,unit,notes,"
          "hw_card,model_card,gpus")
ROW = ("X1,src,RTX 4090,llama.cpp b6918,llama,8,Q4_K_M,f16,512,,1,1,prefill_tok_s,9000,tok/s,NOTES,rtx-4090,"
       "llama-3.1-8b,1")


@pytest.mark.parametrize("row, why", [
    (ROW.replace("NOTES", "llama-bench pp512 @ d99999999999999999999999"), "depth"),  # predicted 1.8e-14 tok/s
    (ROW.replace(",512,,1,1,prefill_tok_s,9000", ",,,1,1,agg_output_tok_s,9000"), "needs the row's isl and osl"),
])
def test_a_published_row_beyond_reading_is_skipped_with_its_reason(row, why, tmp_path, capsys):
    path = tmp_path / "rows.csv"
    path.write_text(f"{HEADER}\n{row}\n")
    data = json.loads(ok(cli(capsys, "validate", "--published", path, "--json")))
    assert not data["rows"] and why in data["skipped"][0]["why"]


@pytest.mark.parametrize("args, needle", [
    (("sweep", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--concurrency", "1,4", "--static",
      "--requests-per-client", "99"), "--static"),
    (("sweep", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--concurrency", "1,4", "--static", "--seed", "5"), "--seed"),
    (("plot", "serve", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--concurrency", "2", "--requests", "20",
      "--burstiness", "0", "-o", "OUT"), "--burstiness"),
])
def test_closed_loop_and_open_loop_options_are_refused_where_they_do_nothing(args, needle, tmp_path, capsys):
    args = [str(tmp_path / "b.png") if a == "OUT" else a for a in args]
    refused(cli(capsys, *args), needle)
    assert not (tmp_path / "b.png").exists()


def test_a_published_file_of_more_rows_than_a_table_is_refused_before_predicting(tmp_path, capsys, monkeypatch):
    """836,241 rows of 20 MB took 190 s and 2 GB; a table of more than MAX_PUBLISHED_ROWS is refused on reading."""
    import roofline.calibrate.published as published

    monkeypatch.setattr(published, "MAX_PUBLISHED_ROWS", 50)
    path = tmp_path / "rows.csv"
    path.write_text(HEADER + "\n" + "\n".join(ROW.replace("X1", f"X{i}") for i in range(51)) + "\n")
    refused(cli(capsys, "validate", "--published", path), "more than 50 rows", "split")


@pytest.mark.parametrize("args, needle", [
    (("capacity", "--target-rate", "1e300"), "at most 1e+06"),  # printed 299-digit GPU counts after 150 s
    (("capacity", "--usd-per-gpu-hour", "1e-300"), "between 0.001"),
    (("fits", "--block-tokens", "100000000"), "at most 1024"),
    (("sweep", "--concurrency", "100000,90000,80000"), "give 1 to 3 at 270,000 clients"),  # each level alone passed
])
def test_fleet_and_memory_options_beyond_any_deployment_are_refused(args, needle, capsys):
    command, *extra = args
    slo = ("--slo-ttft", "1", "--slo-itl", "0.05") if command == "capacity" else ()
    refused(cli(capsys, command, "-m", "llama-3.1-8b", "--hw", "h100-sxm", *slo, *extra), needle)


def test_a_runtime_profiles_per_unit_bandwidth_needs_a_unit_prefix(tmp_path, capsys):
    """gemv_unit_bandwidth_bytes_per_s of 1e-300 decoded at 0.00 tok/s."""
    profile = edited(_bundled("runtimes", "vllm"), "efficiency.default.gemv_unit_bandwidth_bytes_per_s", 1e-300)
    write_card(tmp_path, "runtimes", profile)
    refused(cli(capsys, *PREDICT, "h100-sxm", "--runtime", "vllm", "--cards", tmp_path), "gemv_unit_bandwidth")
