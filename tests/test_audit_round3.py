"""A third pass over numbers users act on: small GEMMs padded to a tile, MoE experts split between matrix-vector and
GEMM kernels, one memory verdict per runtime across commands, alternatives a runtime can run, decimal commas, bounds
on token options, and what an importer assumed. Each case states the rule it checks."""

from __future__ import annotations

import json

import pytest
from hostile import CONFIG, cli, ok, refused

from roofline.cards.store import CardStore
from roofline.cards.units import QuantityError, parse_quantity, parse_tokens
from roofline.cli.common import fmt_margin
from roofline.perf.efficiency import Efficiency
from roofline.perf.ops import Op
from roofline.perf.timing import compute_seconds


def _json(capsys, *args) -> dict:
    return json.loads(ok(cli(capsys, *args, "--json")))


def test_a_gemm_padded_to_its_tile_costs_what_the_tile_costs():
    """9 rows padded to a 16-row tile run the tile: as long as 16 rows, never longer (the ramp was taken at 9 rows on
    top of the padding, so 9 tokens cost 1.57x what 16 did)."""
    hw = CardStore().hardware("rtx-3090")
    eff = Efficiency(compute=0.5, gemm_min_tokens=16, gemm_half_tokens=44)
    t9, t16, t32 = (float(compute_seconds(Op("ffn", "ffn", "bf16", flops=2e9 * m), hw, eff, m)) for m in (9, 16, 32))
    assert t9 == pytest.approx(t16, rel=1e-12)
    assert t16 < t32


def test_a_longer_prompt_never_has_a_shorter_ttft_below_the_tile(capsys):
    ttft = [_json(capsys, "predict", "-m", "llama-3.1-8b", "--hw", "rtx-3090", "--runtime", "llama.cpp", "--quant",
                  "q4_k_m", "--prompt", str(n), "--output", "1")["ttft_s"] for n in (9, 12, 16, 24)]
    assert ttft == sorted(ttft)


def test_moe_experts_split_compute_as_they_split_bandwidth(capsys):
    """At 64 sequences gpt-oss-20b's experts average just over 8 tokens (llama.cpp's matrix-vector limit): every
    expert had been charged a padded, ramped GEMM while 59% still ran matrix-vector kernels; the step read 3x the
    step at 60 sequences."""
    itl = {b: _json(capsys, "predict", "-m", "gpt-oss-20b", "--hw", "a10", "--runtime", "llama.cpp", "--batch",
                    str(b))["itl_s"] for b in (60, 64)}
    assert itl[64] < 1.2 * itl[60]


def test_predict_and_fits_give_one_verdict_under_a_preallocating_runtime(capsys):
    """vLLM takes 90% of the 22.5 GiB an L4 reports (24 GiB less inline ECC's share): a 32k-token request that
    `fits --runtime vllm` refuses is refused by `predict --runtime vllm` too (it had said 'fits' against the whole
    card)."""
    fits = _json(capsys, "fits", "-m", "llama-3.1-8b", "--hw", "l4", "--runtime", "vllm", "--context", "32k")
    pred = _json(capsys, "predict", "-m", "llama-3.1-8b", "--hw", "l4", "--runtime", "vllm", "--prompt", "31k",
                 "--output", "1k")
    assert not fits["fits"] and not pred["fits_in_memory"]
    assert pred["memory_capacity_bytes"] == pytest.approx(0.9 * 23034 * 2**20)
    out = cli(capsys, "predict", "-m", "llama-3.1-8b", "--hw", "l4", "--runtime", "vllm", "--prompt", "31k",
              "--output", "1k")[1]
    said = " ".join(out.split())
    assert "does NOT fit" in out.splitlines()[0] and "90% of 22.5 GiB, what the device reports of its 24 GiB" in said


def test_plots_size_memory_as_fits_does(tmp_path, capsys):
    args = ("-m", "llama-3.1-8b", "--hw", "l4", "--runtime", "vllm")
    fits = _json(capsys, "fits", *args, "--context", "8704")
    sweep = _json(capsys, "plot", "sweep", *args, "--prompt", "8k", "-o", tmp_path / "s.png")
    memory = _json(capsys, "plot", "memory", *args, "--context", "8704", "-o", tmp_path / "m.png")
    assert sweep["max_concurrency"] == fits["max_concurrency"]
    assert memory["hardware"]["l4"]["capacity"] == pytest.approx(0.9 * 23034 * 2**20)


def test_predict_at_fits_max_context_fits_under_a_per_token_runtime(capsys):
    """llama.cpp's KV is a ring of single-token cells: the max context `fits` reports fits in `predict` (which had
    rounded it up to 16-token blocks and found it 655 kB short)."""
    args = ("-m", "llama-3.1-8b", "--hw", "rtx-3060-12g", "--runtime", "llama.cpp", "--quant", "q4_k_m")
    longest = _json(capsys, "fits", *args)["max_context"]
    assert _json(capsys, "predict", *args, "--prompt", str(longest - 200), "--output", "200")["fits_in_memory"]
    assert not _json(capsys, "predict", *args, "--prompt", str(longest - 199), "--output", "200")["fits_in_memory"]


def test_what_would_fit_offers_only_formats_the_runtime_runs(capsys):
    args = ("-m", "llama-3.1-8b", "--hw", "rtx-3060-12g", "--runtime", "vllm")
    suggestions = _json(capsys, "fits", *args)["suggestions"]
    quants = [s.split()[1].rstrip(":") for s in suggestions if s.startswith("--quant")]
    assert quants and not {"q6_k", "q4_k_m", "q8_0"} & set(quants)
    for q in quants:
        assert _json(capsys, "fits", *args, "--quant", q)["fits"]


def test_the_margin_is_never_rounded_to_zero():
    assert fmt_margin(1.2e9) == "1.20 GB"
    assert fmt_margin(-85e3) == "85 kB"
    assert fmt_margin(3.4e6) == "3 MB"


@pytest.mark.parametrize("text, kind", [("24,5 GB", "bytes"), ("1,5 TB/s", "bytes_per_s"), ("1,00", "bytes"),
                                        ("1,0,0,0", "bytes"), (",1000", "bytes")])
def test_a_decimal_comma_is_refused_not_read_as_a_bigger_number(text, kind):
    with pytest.raises(QuantityError, match="decimals with '.'"):
        parse_quantity(text, kind)


def test_commas_grouping_thousands_still_read():
    assert parse_quantity("1,008 GB/s", "bytes_per_s") == 1.008e12
    assert parse_quantity("1,000.5 GB", "bytes") == 1.0005e12
    assert parse_tokens("2,048") == 2048
    assert parse_quantity("10 μs", "seconds") == parse_quantity("10 µs", "seconds")  # Greek mu, micro sign


@pytest.mark.parametrize("args, needle", [
    (("predict", "-m", "llama-3.1-8b", "--hw", "h100", "--prompt", "1,5k"), "decimals"),
    (("predict", "-m", "llama-3.1-8b", "--hw", "h100", "--cached-tokens", "-1"), ">= 0"),
    (("fits", "-m", "llama-3.1-8b", "--hw", "h100", "--context", "1e30"), "at most 100,000,000"),
    (("fits", "-m", "llama-3.1-8b", "--hw", "h100", "--max-step-tokens", "10000000000"), "--max-step-tokens"),
    (("fits", "-m", "llama-3.1-8b", "--hw", "h100", "--runtime-memory", "2,5 GB"), "decimals"),
    (("predict", "-m", "llama-3.1-8b", "--hw", "h100", "--quant", "ffn="), "no format after '='"),
    (("fits", "-m", "llama-3.1-8b", "--hw", "h100", "--runtime-memory", ""), "'2 GB'"),
])
def test_options_refuse_what_they_would_misread(args, needle, capsys):
    refused(cli(capsys, *args), needle)


def test_a_config_json_read_in_place_says_what_the_importer_assumed(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**CONFIG, "quantization_config": {"quant_method": "gptq", "bits": 3}}))
    code, out, err = cli(capsys, "predict", "-m", path, "--hw", "h100-sxm", "--json")
    assert code == 0 and json.loads(out)
    assert "warning:" in err and "gptq with bits 3 not modelled" in err
    path.write_text(json.dumps({**CONFIG, "quantization_config": "gptq"}))
    assert "not a mapping" in cli(capsys, "predict", "-m", path, "--hw", "h100-sxm")[2]


def test_a_header_without_rows_is_named_as_such(tmp_path, capsys):
    path = tmp_path / "h.csv"
    path.write_text("id,source,hardware,engine,model,params_b,weight_quant,kv_dtype,isl,osl,batch,tp,metric,value,"
                    "unit,notes,hw_card,model_card,gpus\n")
    refused(cli(capsys, "validate", "--published", path), "no rows")


def test_a_format_the_card_ships_is_labelled_as_shipped(capsys):
    """`--quant bf16` on DeepSeek-V3 sizes its FP8 checkpoint (the documented 'as shipped' rule): the label says so
    instead of 'bf16'."""
    p = _json(capsys, "predict", "-m", "deepseek-v3", "--hw", "h200", "--gpus", "8", "--quant", "bf16")
    assert p["quant"] == "fp8+bf16 (as shipped)"
    forced = _json(capsys, "predict", "-m", "deepseek-v3", "--hw", "h200", "--gpus", "8", "--quant", "default=bf16")
    assert forced["quant"] == "default=bf16" and forced["weights_bytes"] > 1.9 * p["weights_bytes"]


def test_serve_without_an_slo_claims_no_goodput(capsys):
    out = ok(cli(capsys, "serve", "-m", "qwen2.5-7b", "--hw", "h100", "--rate", "2", "--requests", "20"))
    assert "no SLO given" in out and "within the SLO" not in out


def test_a_huge_config_number_is_described_not_printed(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**CONFIG, "vocab_size": 10**400}))
    code, _, err = cli(capsys, "predict", "-m", path, "--hw", "h100-sxm")
    refused((code, "", err), "vocab_size", "401-digit number")
    assert len(err) < 300


def test_a_trace_plays_every_row_and_an_overloading_trace_is_flagged(tmp_path, capsys):
    """A trace was cut at 1,000 rows without a word, and one arriving at 200/s where the fleet serves 10/s was never
    flagged (only --rate was)."""
    path = tmp_path / "hot.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n" + "".join(f"{i / 200:.4f},2000,300\n"
                                                                       for i in range(1200)))
    args = ("serve", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--runtime", "vllm", "--trace", path)
    whole = _json(capsys, *args)
    assert whole["requests"] == 1200 and whole["overloaded"] and "trace_cut_at" not in whole
    assert whole["goodput_requests_per_s"] is None and whole["slo_attainment"] is None  # no SLO given
    cut = _json(capsys, *args, "--requests", "300")
    assert cut["requests"] == 300 and cut["trace_cut_at"] == 300


def test_a_checkpoint_name_carries_its_layout_into_serve_and_the_python_api(capsys):
    import roofline

    name = "nvidia/Gemma-4-31B-IT-NVFP4"
    served = _json(capsys, "serve", "-m", name, "--hw", "dgx-spark", "--runtime", "vllm", "--concurrency", "1",
                   "--requests", "3")
    predicted = _json(capsys, "predict", "-m", name, "--hw", "dgx-spark", "--runtime", "vllm")
    assert served["quant"] == predicted["quant"] == "ffn=nvfp4,default=bf16"
    assert roofline.predict(name, "dgx-spark").quant == "ffn=nvfp4,default=bf16"
    assert roofline.predict(name, "dgx-spark").itl_s < 0.6 * roofline.predict("gemma-4-31b", "dgx-spark").itl_s


def test_calibrate_refuses_more_ranks_than_the_host_holds_before_measuring(tmp_path, capsys):
    refused(cli(capsys, "calibrate", "--device", "cpu", "--tp", "10000", "--grid", "smoke", "--out", tmp_path),
            "--tp 10000", "cores")


def test_overload_is_read_off_the_whole_fleet(capsys):
    """Four replicas each loaded as one overloaded replica is: the flag had read one replica's queue against the
    fleet's arrivals and missed it."""
    base = ("serve", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--runtime", "vllm", "--prompt", "2000", "--output",
            "300")
    assert _json(capsys, *base, "--rate", "48", "--requests", "3000", "--replicas", "4")["overloaded"]
    assert not _json(capsys, *base, "--rate", "20", "--requests", "1000", "--replicas", "4")["overloaded"]


def test_kv_hand_offs_share_their_link(capsys):
    """Each prefill replica's transfers queue on its link: 2 Gbit/s carries at most ~1 request/s of 2,000-token
    prompts (262 MB of KV each) per replica, where every transfer had had the link to itself."""
    runs = [_json(capsys, "serve", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--runtime", "vllm", "--rate", "20",
                  "--prompt", "2000", "--output", "300", "--requests", "200", "--disagg", "2:2", "--network-gbps",
                  str(g)) for g in (1000, 2)]
    rates = [r["requests_per_s"] for r in runs]
    assert rates[1] < 0.2 * rates[0]
    assert rates[1] < 2 * 2 * 0.25e9 / 262e6
    # the hand-offs queued on the slow links are requests waiting: the run reads overloaded, the fast one does not
    assert runs[1]["overloaded"] and not runs[0]["overloaded"]


def test_kv_hand_offs_use_every_gpu_link_of_a_replica():
    """Under TP each GPU holds its KV heads and sends them over its own link: a TP-2 prefill replica hands a request
    over in half the time one GPU's link takes."""
    from roofline.perf.serving.policy import policy_for
    from roofline.perf.serving.run import build_fleet
    from roofline.perf.workload import make_workload

    st = CardStore()

    def transfer(gpus):
        wl = make_workload(tp=gpus)
        fleet = build_fleet(st.model("llama-3.1-8b"), st.hardware("h100-sxm"), wl, policy_for(st.runtime("vllm")),
                            disagg=(1, 1), network_bytes_per_s=100e9 / 8)
        return fleet.transfer_s(2000)

    assert transfer(1) == pytest.approx(262_144_000 / 12.5e9)
    assert transfer(2) == pytest.approx(transfer(1) / 2)
