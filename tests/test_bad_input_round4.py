"""Careless and hostile input from a fourth fuzzing pass: a path the OS refuses, numbers beyond what a reader or a
search can hold, a card that passed its schema and then failed, advice that was itself refused. Each case is a
one-line error with exit 2 or, where stated, the answer the documented rule gives."""

from __future__ import annotations

import json

import pytest
import yaml
from hostile import cli, edited, ok, refused, write_card

from roofline.cards.store import bundled_dir
from roofline.perf.serving.replica import WAITING_CAP

LONG = "a" * 300  # one path component over the 255 bytes a file name may hold


def _bundled(kind: str, name: str) -> dict:
    return yaml.safe_load((bundled_dir() / kind / f"{name}.yaml").read_text())


@pytest.mark.parametrize("args", [
    ("plot", "roofline", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "-o", "{tmp}/" + LONG + ".png"),
    ("predict", "-m", "{tmp}/" + LONG + ".gguf", "--hw", "h100-sxm"),
    ("validate", "--published", "{tmp}/" + LONG + ".csv"),
    ("serve", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--trace", "{tmp}/" + LONG + ".csv"),
])
def test_a_file_name_the_os_refuses_is_named(args, tmp_path, capsys):
    """OSError 'File name too long' had ended as an internal error (exit 1)."""
    refused(cli(capsys, *(a.format(tmp=tmp_path) for a in args)), "file name too long", "choose another path")


def test_a_number_too_long_to_read_in_a_card(tmp_path, capsys):
    """PyYAML reads a 100,000-digit integer into Python's int(), which refuses past 4,300 digits (ValueError)."""
    text = yaml.safe_dump(_bundled("hardware", "h100-sxm")).replace("power: 700 W", "power: " + "9" * 5000)
    path = write_card(tmp_path, "hardware", text, stem="h100-sxm")
    refused(cli(capsys, "hw", "show", str(path)), "4,300 digits", "exponent")


def test_an_mla_layer_needs_an_attention_section(tmp_path, capsys):
    """MLA layers take their head count from `attention`: a card without it passed and then failed in the ops."""
    card = edited(_bundled("models", "deepseek-v3"), "architecture.attention", ...)
    write_card(tmp_path, "models", card)
    refused(cli(capsys, "predict", "-m", "deepseek-v3", "--hw", "h100-sxm", "--gpus", "8", "--cards", tmp_path),
            "mla", "attention section")


def test_a_card_of_absurd_capacity_still_gets_its_limits(tmp_path, capsys):
    """1e30 B of memory (the schema allows it) set a concurrency search over 1e23 sequences that overflowed."""
    write_card(tmp_path, "hardware", edited(_bundled("hardware", "h100-sxm"), "memory.capacity", "1e30 B"))
    d = json.loads(ok(cli(capsys, "fits", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--cards", tmp_path, "--json")))
    assert d["fits"] and d["max_concurrency"] >= 10**6


@pytest.mark.parametrize("column, value, needle", [("batch", "9" * 5000, "beyond the bound"),
                                                   ("value", "1e308", "positive finite measurement in")])
def test_a_published_row_beyond_any_measurement_is_skipped_with_why(column, value, needle, tmp_path, capsys):
    """A 5,000-digit batch reached int() before its length was checked; a value of 1e308 printed inf% and nan%."""
    header = "id,source,hardware,engine,model,params_b,weight_quant,kv_dtype,isl,osl,batch,tp,metric,value,unit," \
             "notes,hw_card,model_card,gpus"
    row = {"id": "Z1", "source": "s", "hardware": "H100", "engine": "vLLM 0.10", "model": "m", "params_b": "8",
           "weight_quant": "BF16", "kv_dtype": "", "isl": "128", "osl": "128", "batch": "1", "tp": "1",
           "metric": "decode_tok_s", "value": "100", "unit": "tok/s", "notes": "", "hw_card": "h100-sxm",
           "model_card": "llama-3.1-8b", "gpus": "1"} | {column: value}
    path = tmp_path / "rows.csv"
    path.write_text(header + "\n" + ",".join(row[k] for k in header.split(",")) + "\n")
    d = json.loads(ok(cli(capsys, "validate", "--published", path, "--json")))
    assert not d["rows"] and needle in json.dumps(d["skipped"])


def test_sweep_levels_beyond_one_run_name_the_levels(capsys):
    levels = ",".join(str(n) for n in range(1, 2001))
    refused(cli(capsys, "sweep", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--concurrency", levels),
            "levels add up", "2,001,000 clients")


def test_the_split_named_for_tensor_parallel_beyond_a_node_runs(capsys):
    """--gpus 32 --pp 32 on 8-GPU nodes had been told '--gpus 8 --pp 128' for a 32-layer model."""
    code, _, err = cli(capsys, "predict", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--gpus", "32", "--pp", "32")
    assert code == 2 and "--pp 128" not in err and "at most --gpus 8" in err


def test_a_binary_token_count_over_the_bound_shows_its_value(capsys):
    refused(cli(capsys, "predict", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--prompt", "100M"),
            "104,857,600 tokens", "1M = 1,048,576")


def test_an_overloaded_replica_holds_bare_requests_beyond_its_waiting_cap(capsys, tmp_path):
    """A burst far beyond the replica's rate queues; past WAITING_CAP sequences the rest wait as bare requests
    (their prompt token ids not yet made), so a million-request trace holds ~0.6 GB, not ~3.5, and all are served."""
    from roofline.cards.store import CardStore
    from roofline.perf.serving.metrics import Collector
    from roofline.perf.serving.policy import policy_for
    from roofline.perf.serving.run import build_fleet
    from roofline.perf.serving.simulator import Simulation
    from roofline.perf.serving.workload import Request
    from roofline.perf.workload import make_workload

    st = CardStore()
    fleet = build_fleet(st.model("llama-3.2-1b"), st.hardware("h100-sxm"), make_workload(),
                        policy_for(st.runtime("vllm")))
    sim = Simulation(fleet, Collector(None, None))
    for _ in range(WAITING_CAP + 50):
        sim._arrive(Request(0.0, 100, 20), 0.0)
    replica = sim.decode[0]
    assert len(replica.scheduler.waiting) == WAITING_CAP and len(replica.backlog) == 50
    assert replica.queued == WAITING_CAP + 50
    sim.run(iter(()))
    assert sim.metrics.finished == WAITING_CAP + 50 and not replica.backlog
