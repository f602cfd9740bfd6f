"""What a new user sees, point by point (issue 19's nine newcomer points)."""

from __future__ import annotations

import json
import math
import sys

import pytest
import yaml
from hostile import cli, ok, refused

from roofline.calibrate.quality import assess, should_write, versus_existing
from roofline.cli.output import json_safe


def first_line(out: str) -> str:
    return next(ln for ln in out.splitlines() if ln.strip())


# --------------------------------------------------------------------------- 1. a setup that does not fit says so first


@pytest.mark.parametrize("hw", ["dgx-spark", "h100"])
def test_predict_not_fitting_says_so_first_with_what_to_run(hw, capsys):
    out = ok(cli(capsys, "predict", "-m", "llama-3.3-70b", "--hw", hw))
    assert "does NOT fit" in first_line(out)
    head = out.split("┏")[0]
    assert "run instead" in head and "--quant fp8" in head and "tok/s" in head


def test_predict_json_fits_false_and_instead(capsys):
    d = json.loads(ok(cli(capsys, "predict", "-m", "llama-3.3-70b", "--hw", "h100", "--json")))
    assert d["fits_in_memory"] is False
    options = {a["option"] for a in d["instead"]}
    assert "--quant" in options and "--gpus" in options
    fp8 = next(a for a in d["instead"] if a["option"] == "--quant")
    assert fp8["prediction"]["decode_tok_s"] > d["decode_tok_s"]  # smaller weights stream faster
    check = json.loads(ok(cli(capsys, "predict", "-m", "llama-3.3-70b", "--hw", "h100", "--quant", fp8["value"],
                              "--json")))
    assert check["fits_in_memory"] and check["decode_tok_s"] == pytest.approx(fp8["prediction"]["decode_tok_s"])


def test_predict_fitting_has_no_instead(capsys):
    d = json.loads(ok(cli(capsys, "predict", "-m", "llama-3.1-8b", "--hw", "h100", "--json")))
    assert d["fits_in_memory"] and d["instead"] == []


def test_compare_flags_misfits(capsys):
    out = ok(cli(capsys, "compare", "-m", "llama-3.3-70b,llama-3.1-8b", "--hw", "dgx-spark"))
    assert "does NOT fit" in first_line(out) and "NO → --quant" in out
    data = json.loads(ok(cli(capsys, "compare", "-m", "llama-3.3-70b", "--hw", "dgx-spark", "--json")))
    assert data[0]["instead"] and not data[0]["fits_in_memory"]


# --------------------------------------------------------------------------- 2. plot works; one line if matplotlib is gone


def test_plot_writes_an_image(tmp_path, capsys):
    path = tmp_path / "m.png"
    ok(cli(capsys, "plot", "memory", "-m", "llama-3.1-8b", "--hw", "h100", "-o", path))
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_plot_without_matplotlib_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.delitem(sys.modules, "roofline.report.plots", raising=False)
    refused(cli(capsys, "plot", "memory", "-m", "llama-3.1-8b", "--hw", "h100", "-o", tmp_path / "m.png"),
            "pip install matplotlib")


# --------------------------------------------------------------------------- 3. --context means one thing


def test_cached_tokens_change_the_answer_and_the_header(capsys):
    base = json.loads(ok(cli(capsys, "predict", "-m", "llama-3.1-8b", "--hw", "h100", "--json")))
    cached = json.loads(ok(cli(capsys, "predict", "-m", "llama-3.1-8b", "--hw", "h100", "--cached-tokens", "32k",
                               "--json")))
    assert cached["ttft_s"] > base["ttft_s"] and cached["cached_tokens"] == 32768
    out = ok(cli(capsys, "predict", "-m", "llama-3.1-8b", "--hw", "h100", "--cached-tokens", "32k"))
    assert "32,768 tokens cached before the prompt" in " ".join(out.split())


def test_predict_context_is_a_deprecated_alias(capsys):
    code, out, err = cli(capsys, "predict", "-m", "llama-3.1-8b", "--hw", "h100", "--context", "32k", "--json")
    assert code == 0 and "deprecated" in err and "--cached-tokens" in err
    assert json.loads(out)["cached_tokens"] == 32768


def test_fits_context_is_tokens_held(capsys):
    out = ok(cli(capsys, "fits", "-m", "llama-3.1-8b", "--hw", "h100", "--context", "32k"))
    assert "32,768 tokens held" in " ".join(out.split())


def test_header_names_every_input(capsys):
    out = ok(cli(capsys, "predict", "-m", "llama-3.1-8b", "--hw", "h100", "--gpus", "2", "--spec-tokens", "3",
                 "--accept", "0.7", "--draft", "llama-3.2-1b", "--layers", "4", "--batch", "3"))
    head = " ".join(out.split())
    for part in ("batch 3", "2 GPUs", "draft llama-3.2-1b", "layers first 4", "k=3 a=0.7"):
        assert part in head, part


# --------------------------------------------------------------------------- 4. calibrate notices bad measurements

IDLE = {"held_out": {"prefill": {"median_ape_pct": 12.0}, "decode": {"median_ape_pct": 4.0}}}
LOADED = {"held_out": {"prefill": {"median_ape_pct": 401.0}, "decode": {"median_ape_pct": 83.0}}}


def test_idle_run_is_ok():
    q = assess(IDLE, [20e9, 20.4e9], {"a": [0.10, 0.101], "b": [0.2, 0.21]})
    assert q.verdict == "ok" and not q.reasons


def test_loaded_run_is_refused_with_the_numbers():
    q = assess(LOADED, [10e9, 20e9])
    assert q.verdict == "refuse"
    text = " ".join(q.reasons)
    assert "401%" in text and "10.0 vs 20.0 GB/s" in text


@pytest.mark.parametrize("reads, verdict", [([20e9, 23e9], "ok"), ([20e9, 25e9], "warn"), ([20e9, 30e9], "refuse")])
def test_bandwidth_repeat_thresholds(reads, verdict):
    assert assess(IDLE, reads).verdict == verdict


def test_pass_disagreement_warns():
    q = assess(IDLE, [20e9, 20e9], {str(i): [0.1, 0.15] for i in range(5)})
    assert q.verdict == "warn" and "passes" in q.reasons[0]


def test_never_overwrites_a_better_card_silently():
    new = assess({"held_out": {"decode": {"median_ape_pct": 20.0}}}, [20e9, 20e9])
    existing = {"calibration": {"date": "2026-01-01", "residuals": IDLE}}
    reason = versus_existing(new, existing)
    assert reason and "12.0%" in reason and "20.0%" in reason
    write, note = should_write(new, reason, force=False)
    assert not write and "--force" in note
    write, note = should_write(new, reason, force=True)
    assert write and "because of --force" in note
    assert versus_existing(assess(IDLE, []), existing) is None  # equal: the new run may replace it


def test_calibrate_quick_help_states_one_figure(capsys):
    out = ok(cli(capsys, "calibrate", "--help"))
    assert "about 2 minutes on a 2-core CPU" in " ".join(out.split())


# --------------------------------------------------------------------------- 5. names users type


@pytest.mark.parametrize("hw, card", [("DGX Spark", "dgx-spark"), ("dgx_spark", "dgx-spark"), ("H100 SXM", "h100-sxm"),
                                      ("NVIDIA DGX Spark", "dgx-spark")])
def test_hardware_names_resolve(hw, card, capsys):
    d = json.loads(ok(cli(capsys, "hw", "show", hw, "--json")))
    assert d["name"] == card


@pytest.mark.parametrize("model, card, quant", [("Llama 3.3 70B", "llama-3.3-70b", None),
                                                ("llama3.3:70b", "llama-3.3-70b", None),
                                                ("llama3.3:70b-instruct-q4_K_M", "llama-3.3-70b", "q4_k_m"),
                                                ("llama3.1:8b-instruct-q8_0", "llama-3.1-8b", "q8_0"),
                                                ("LLAMA-3.1-8B", "llama-3.1-8b", None)])
def test_model_names_and_ollama_tags(model, card, quant, capsys):
    d = json.loads(ok(cli(capsys, "predict", "-m", model, "--hw", "h100", "--json")))
    assert d["model"] == card
    if quant:
        assert d["quant"] == quant


@pytest.mark.parametrize("tag, card, quant, weights_gb", [
    ("qwen3:30b", "qwen3-30b-a3b", "q4_k_m", (17, 20)), ("llama3.1:8b", "llama-3.1-8b", "q4_k_m", (4.5, 5.2)),
    ("gpt-oss:20b", "gpt-oss-20b", "bf16+mxfp4", (12, 15))])
def test_a_bare_ollama_tag_is_the_library_build(tag, card, quant, weights_gb, capsys):
    """'ollama pull qwen3:30b' fetches the library's Q4_K_M GGUF (about 19 GB), not the BF16 checkpoint (61 GB), so
    the bare tag sizes Q4_K_M; gpt-oss ships MXFP4 experts of its own, which the library keeps. The card's own name
    keeps the checkpoint's formats."""
    fits = ("--hw", "rtx-4090", "--runtime", "ollama", "--json")
    d = json.loads(ok(cli(capsys, "fits", "-m", tag, *fits)))
    assert d["model"] == card and d["quant"] == quant and d["fits"]
    assert weights_gb[0] < d["budget"]["weights"] / 1e9 < weights_gb[1]
    named = json.loads(ok(cli(capsys, "fits", "-m", card, *fits)))
    assert named["native_formats"] and (named["quant"] == quant) == (card == "gpt-oss-20b")


def test_tag_format_conflicting_with_quant_refused(capsys):
    refused(cli(capsys, "predict", "-m", "llama3.3:70b-instruct-q4_K_M", "--hw", "h100", "--quant", "fp8"), "q4_k_m")


# --------------------------------------------------------------------------- 6. the bound label matches its numbers


@pytest.mark.parametrize("model, hw, extra", [("llama-3.3-70b", "dgx-spark", []), ("llama-3.1-8b", "h100", ["--prompt", "8k"]),
                                              ("gpt-oss-20b", "h100", ["--batch", "64"]),
                                              ("qwen3-30b-a3b", "dgx-spark", ["--prompt", "32k"])])
def test_bound_is_the_largest_time_share(model, hw, extra, capsys):
    d = json.loads(ok(cli(capsys, "predict", "-m", model, "--hw", hw, "--json", *extra)))
    for phase in d["phases"].values():
        shares = phase["limit_share"]
        assert phase["bound"] == max(shares, key=shares.get)
        assert math.isclose(sum(shares.values()), 1.0, rel_tol=1e-9)
    out = ok(cli(capsys, "predict", "-m", model, "--hw", hw, *extra))
    for phase in d["phases"].values():
        side = "above" if phase["arithmetic_intensity"] > phase["ridge_flop_per_byte"] else "below"
        assert f"{side} the datasheet ridge" in " ".join(out.split()) or "overhead-bound" in out


# --------------------------------------------------------------------------- 7. impossible requests


def test_prompt_beyond_context_refused_then_allowed(capsys):
    refused(cli(capsys, "predict", "-m", "llama-3.1-8b", "--hw", "h100", "--prompt", "200k"), "--allow-beyond-context")
    d = json.loads(ok(cli(capsys, "predict", "-m", "llama-3.1-8b", "--hw", "h100", "--prompt", "200k",
                          "--allow-beyond-context", "--json")))
    assert d["prompt_tokens"] == 204800


@pytest.mark.parametrize("option", ["--prompt", "--output", "--batch"])
def test_counts_bounded(option, capsys):
    refused(cli(capsys, "predict", "-m", "llama-3.1-8b", "--hw", "h100", option, "200000000"), option)


# --------------------------------------------------------------------------- 8. speculative decoding


def test_mtp_model_speculates_without_draft(capsys):
    d = json.loads(ok(cli(capsys, "predict", "-m", "deepseek-v3", "--hw", "b200", "--gpus", "8", "--spec-tokens", "2",
                          "--accept", "0.8", "--json")))
    assert d["draft"] is None and d["spec_tokens"] == 2


def test_draft_counts_in_memory_and_header(capsys):
    args = ("predict", "-m", "llama-3.1-8b", "--hw", "h100", "--json")
    plain = json.loads(ok(cli(capsys, *args)))
    spec = json.loads(ok(cli(capsys, *args, "--spec-tokens", "4", "--accept", "0.7", "--draft", "llama-3.2-1b")))
    assert spec["draft"] == "llama-3.2-1b"
    assert spec["weights_bytes"] > plain["weights_bytes"] + 2e9  # the 1B draft's ~2.5 GB of bf16 weights
    assert spec["kv_bytes"] > plain["kv_bytes"]


# --------------------------------------------------------------------------- 9. smaller points


def test_sweep_that_does_not_fit_exits_2_in_one_line(capsys):
    refused(cli(capsys, "sweep", "-m", "deepseek-v3", "--hw", "dgx-spark"), "does not fit")


def test_spark_capacity_as_its_datasheet_states(capsys):
    assert "128 GiB (137.4 GB)" in ok(cli(capsys, "hw", "list"))
    assert "128 GiB" in ok(cli(capsys, "hw", "show", "dgx-spark"))
    h100 = ok(cli(capsys, "hw", "show", "h100"))  # NVIDIA's '80GB' of HBM3 is 80 GiB; nvidia-smi shows 81559 MiB
    assert "80 GiB (85.9 GB)" in h100 and "79.65 GiB (85.5 GB): the driver keeps 361 MiB" in h100


def test_fits_column_unit_and_integer_bytes(capsys):
    out = ok(cli(capsys, "fits", "-m", "llama-3.1-8b", "--hw", "h100"))
    assert "┃ GB" in out.replace("  ", " ") or " GB ┃" in out
    d = json.loads(ok(cli(capsys, "fits", "-m", "llama-3.1-8b", "--hw", "h100", "--json")))
    for key in ("capacity_bytes", "total_bytes", "headroom_bytes"):
        assert isinstance(d[key], int), key
    assert all(isinstance(v, int) for v in d["budget"].values())
    p = json.loads(ok(cli(capsys, "predict", "-m", "llama-3.1-8b", "--hw", "h100", "--json")))
    assert isinstance(p["weights_bytes"], int) and isinstance(p["kv_bytes"], int)


def test_json_byte_rule():
    assert json_safe({"weights_bytes": 1.6, "budget_bytes": {"kv": 2.4}, "tok_s": 1.5}) == \
        {"weights_bytes": 2, "budget_bytes": {"kv": 2}, "tok_s": 1.5}


def test_models_list_kv_per_token_for_sliding_windows(capsys):
    out = ok(cli(capsys, "models", "list"))
    line = next(ln for ln in out.splitlines() if "mistral-7b " in ln)
    assert "128.0 KiB" in line and "0.0 KiB " not in line
    for row in json.loads(ok(cli(capsys, "models", "list", "--json"))):
        assert row["derived"]["kv_bytes_per_token_in_window_bf16"] > 0 or row["architecture"].get("attention") is None


def test_merged_roofs_and_label_offsets():
    from roofline.report.plots import label_offset, merged_roofs

    roofs = merged_roofs({"bf16": 989e12, "fp16": 989e12, "fp8": 1979e12, "int8": 1979e12, "fp32": 67e12})
    assert [d for _, d in roofs] == [["fp8", "int8"], ["bf16", "fp16"], ["fp32"]]
    placed: list = []
    offsets = [label_offset(placed, 10.0, 1e12) for _ in range(3)]
    assert len(set(offsets)) == 3  # three labels at one point never share a line


def test_sweep_plot_axis_spans_the_data(tmp_path, capsys, monkeypatch):
    from roofline.report import plots

    seen = {}
    real = plots._save

    def keep(fig, path, plt):
        seen["xlim"] = fig.axes[0].get_xlim()
        real(fig, path, plt)

    monkeypatch.setattr(plots, "_save", keep)
    ok(cli(capsys, "plot", "sweep", "-m", "llama-3.1-8b", "--hw", "h100", "--concurrency", "1,2,4",
           "-o", tmp_path / "s.png"))
    lo, hi = seen["xlim"]
    assert lo >= 0.5 and hi <= 8


def test_soc_attention_default_is_the_measured_figure():
    from roofline.perf.efficiency import DEFAULTS

    assert 0.13 <= DEFAULTS["soc"].attention <= 0.18  # llama.cpp depth-0 vs depth-32768 rows (efficiency.py)


def test_import_writes_a_loadable_card(tmp_path, capsys):
    from hostile import CONFIG

    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(CONFIG))
    ok(cli(capsys, "models", "import", cfg, "--name", "My Toy", "--to", tmp_path / "home"))
    card = yaml.safe_load((tmp_path / "home" / "models" / "my-toy.yaml").read_text())
    assert card["name"] == "my-toy"
