"""The shipped default efficiencies against published measurements (regression guard for the fitted defaults)."""

import json

import pytest

from roofline.calibrate.published import predict_row, summarize
from roofline.cards.store import CardStore


@pytest.fixture(scope="module")
def predictions(published_rows):
    store = CardStore()
    return [predict_row(row, store) for row in published_rows]


def test_every_row_is_predicted_or_says_why(predictions):
    for p in predictions:
        assert (p.predicted is not None and p.predicted > 0) or p.skipped, p.row_id


# median |error| ceilings per metric on published_train.csv: the figures benchmarks/fit_defaults.py printed for the
# shipped defaults (decode 7.4%, prefill 46.4%, batched decode 8.3%, max-load output 2.5%) with room for noise-free
# drift of a few points; a change to the predictor that moves any metric past its ceiling fails here. Prefill: 55
# since the soc attention efficiency was set from the depth-0 vs depth-32768 rows (efficiency.py) instead of fitted
# (median 51.6%: the Spark's depth-0 prefill errors, which the fitted value had partly absorbed, show again)
CEILINGS_PCT = {"decode_tok_s": 10, "prefill_tok_s": 55, "agg_decode_tok_s": 12, "agg_output_tok_s": 5}


def test_default_error_on_published_rows(predictions):
    s = summarize(predictions)
    assert s["decode_tok_s"]["n"] >= 37 and s["prefill_tok_s"]["n"] >= 15
    for metric, ceiling in CEILINGS_PCT.items():
        assert s[metric]["median_ape_pct"] < ceiling, (metric, s[metric])
    assert abs(s["decode_tok_s"]["bias_pct"]) < 5


def test_row_mapping(published_rows):
    """Conditions read from the rows: llama-bench depth in notes, GGUF MXFP4 = experts only, TRT FP8 KV."""
    from roofline.calibrate.published import row_depth, row_kv, row_quant

    rows = {r["id"]: r for r in published_rows}
    store = CardStore()
    assert row_depth(rows["H002"]) == 32768 and row_depth(rows["H001"]) == 0
    assert row_quant(rows["H006"], store.model("gpt-oss-20b")) == "experts=mxfp4,default=q8_0"
    assert row_kv(rows["H093"]) == "fp8" and row_kv(rows["H033"]) == "fp16"


def test_a_wider_format_of_a_mixed_card_names_every_weight_in_it():
    """gpt-oss holds MXFP4 experts and BF16 elsewhere: "MXFP4" is the card as shipped, "BF16" the all-BF16 checkpoint
    (lmsys/gpt-oss-120b-bf16, rows J002/J004), not the card's native mix."""
    from roofline.calibrate.published import row_quant

    card = CardStore().model("gpt-oss-120b")
    assert row_quant({"weight_quant": "MXFP4 (MoE experts; other layers BF16)", "engine": "SGLang"}, card) is None
    assert row_quant({"weight_quant": "BF16", "engine": "SGLang"}, card) == "bf16"


@pytest.mark.parametrize("text, kv", [("q8_0 (cache-type-k/v q8_0)", "q8_0"), ("bf16 (not stated)", "bf16"),
                                      ("fp8_e4m3", "fp8"), ("auto (engine default)", "bf16"), ("", "bf16"),
                                      ("not stated", "bf16")])
def test_row_kv_reads_the_first_word(text, kv):
    from roofline.calibrate.published import row_kv

    assert row_kv({"kv_dtype": text, "engine": "vLLM 0.11", "weight_quant": "BF16"}) == kv


def test_row_kv_that_names_no_format_is_skipped_with_the_reason(tmp_path):
    from roofline.calibrate.published import predict_row, read_rows

    path = tmp_path / "rows.csv"
    path.write_text(HEADER + "\nX1,src,H100,vLLM 0.11,Llama,8,BF16,toaster,512,128,1,1,decode_tok_s,100,tok/s,,"
                    "h100-sxm,llama-3.1-8b,1\n")
    pred = predict_row(read_rows(path)[0], CardStore())
    assert pred.predicted is None and "kv_dtype 'toaster'" in pred.skipped


HEADER = "id,source,hardware,engine,model,params_b,weight_quant,kv_dtype,isl,osl,batch,tp,metric,value,unit,notes," \
         "hw_card,model_card,gpus"
UNSEEN = [  # a CSV the project never saw: latency metrics, a per-GPU normalisation, and rows it must skip
    "U1,s,h,vLLM 0.9,m,8,BF16,,1024,128,1,1,ttft_ms,100,ms,,h100-sxm,llama-3.1-8b,1",
    "U2,s,h,vLLM 0.9,m,8,BF16,,1024,128,8,1,itl_ms,10,ms,,h100-sxm,llama-3.1-8b,1",
    "U3,s,h,TensorRT-LLM 1.0,m,8,FP8,,1000,1000,max,1,agg_output_tok_s,30000,tok/s,,h200,llama-3.1-8b,2",
    "U4,s,h,TensorRT-LLM 1.0,m,8,FP8,,1000,1000,max,1,agg_output_tok_s_per_gpu,15000,tok/s,,h200,llama-3.1-8b,2",
    "U5,s,h,TensorRT-LLM 1.0,m,8,FP8,,1000,1000,max,1,agg_output_tok_s_per_node,60000,tok/s,,h200,llama-3.1-8b,2",
    "U6,s,h,vLLM,m,8,BF16,,1024,128,1,1,decode_tok_s,100,tok/s,,h1000,llama-3.1-8b,1",
    "U7,s,h,vLLM,m,8,BF16,,1024,128,1,1,power_w,700,W,,h100-sxm,llama-3.1-8b,1",
    "U8,s,h,vLLM,m,8,BF16,,1024,128,1,1,decode_tok_s,n/a,tok/s,,h100-sxm,llama-3.1-8b,1",
]


@pytest.fixture
def unseen_csv(tmp_path):
    path = tmp_path / "unseen.csv"
    path.write_text("\n".join([HEADER, *UNSEEN]) + "\n")
    return path


def test_unseen_csv_latency_rows_are_the_request_prediction(unseen_csv):
    """ttft_ms / itl_ms rows are `roofline predict`'s TTFT / ITL for that request shape, in ms."""
    from roofline.calibrate.published import read_rows
    from roofline.perf.request import predict
    from roofline.perf.workload import make_workload

    store = CardStore()
    got = {p.row_id: p for p in (predict_row(r, store) for r in read_rows(unseen_csv))}
    card, hw = store.model("llama-3.1-8b"), store.hardware("h100-sxm")
    one = predict(card, hw, make_workload(prompt_tokens=1024, output_tokens=128, batch=1, quant="bf16"))
    eight = predict(card, hw, make_workload(prompt_tokens=1024, output_tokens=128, batch=8, quant="bf16"))
    assert got["U1"].predicted == pytest.approx(one.ttft_s * 1e3, rel=1e-9)
    assert got["U2"].predicted == pytest.approx(eight.itl_s * 1e3, rel=1e-9)
    assert got["U4"].predicted == pytest.approx(got["U3"].predicted / 2, rel=1e-12)
    node = store.hardware("h200").interconnect.gpus_per_node
    assert got["U5"].predicted == pytest.approx(got["U3"].predicted / 2 * node, rel=1e-12)
    assert "h1000" in got["U6"].skipped and "power_w" in got["U7"].skipped and "unreadable" in got["U8"].skipped


def test_validate_published_cli_reports_metrics_groups_and_skips(unseen_csv):
    from conftest import run_cli

    out = run_cli("validate", "--published", str(unseen_csv), "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert list(data["metrics"]) == ["agg_output_tok_s", "agg_output_tok_s_per_gpu", "agg_output_tok_s_per_node",
                                     "ttft_ms", "itl_ms"]
    assert {g["engine"] for g in data["by_engine_hardware"]} == {"vLLM", "TensorRT-LLM"}
    assert sorted(s["id"] for s in data["skipped"]) == ["U6", "U7", "U8"]
    bad = run_cli("validate", "--published", str(unseen_csv.with_name("missing.csv")))
    assert bad.returncode == 2 and bad.stderr.startswith("error: --published") and "Traceback" not in bad.stderr


def test_engine_family_names_the_runtime():
    from roofline.calibrate.published import engine_family

    assert engine_family("llama.cpp CUDA build 6918 (2f68ce7cf); -fa 1") == "llama.cpp"
    assert engine_family("llama.cpp Metal (May 2024, build not stated)") == "llama.cpp Metal"
    assert engine_family("TensorRT-LLM trtllm-bench throughput (PyTorch)") == "TensorRT-LLM"
    assert engine_family("") == "?"


def test_rows_without_card_columns_name_their_cards_in_text(published_rows):
    """A CSV without hw_card / model_card / gpus: the `hardware` and `model` texts of every training row resolve to
    the cards the training CSV names, and "4x" gives the GPU count."""
    from roofline.calibrate.published import cards_of

    store = CardStore()
    for row in published_rows:
        bare = {k: v for k, v in row.items() if k not in ("hw_card", "model_card", "gpus")}
        card, hw, gpus = cards_of(bare, store)
        assert (card.name, hw.name, gpus) == (row["model_card"], row["hw_card"], int(row["gpus"])), row["id"]


def test_card_match_refuses_text_that_names_no_card():
    from roofline.errors import UnknownNameError

    with pytest.raises(UnknownNameError, match="names no card"):
        CardStore().match("hardware", "Cerebras WSE-3 44GB")  # no card for wafer-scale parts


def test_rows_beyond_the_datasheet_ceiling_are_flagged(published_rows, unseen_csv):
    """The ceiling (peaks, no overhead) bounds every expected prediction; Ollama's llama3.1:70b prefill on Spark
    (H149, 1,911 tok/s) is beyond it: 2 x 70.6B FLOP per token at the dgx-spark card's peaks allow under 1,500."""
    from roofline.calibrate.published import read_rows

    store = CardStore()
    rows = [*published_rows, *read_rows(unseen_csv)]
    got = {p.row_id: p for p in (predict_row(r, store, ceiling=True) for r in rows)}
    for p in (p for p in got.values() if p.predicted is not None):
        faster = p.predicted / p.ceiling if p.metric.endswith("_ms") else p.ceiling / p.predicted
        assert faster >= 1 - 1e-9, p.row_id
    assert got["H149"].beyond_ceiling and got["H149"].measured > got["H149"].ceiling
    assert not got["H143"].beyond_ceiling and not got["H006"].beyond_ceiling
    assert got["U1"].ceiling < got["U1"].predicted and not got["U1"].beyond_ceiling  # ttft 100 ms: a latency above it
    assert predict_row(published_rows[0], store).ceiling is None  # only on request


def test_a_row_run_on_marlin_kernels_is_predicted_with_16_bit_math():
    """vLLM's `--linear-backend marlin` runs NVFP4 weights as W4A16: the same prompt on the DGX Spark is predicted at
    the bf16 peak (213 TFLOP/s) instead of the fp4 one (500), so a compute-bound prefill is slower; the generic
    prediction (no runtime) ignores the engine's flags."""
    from roofline.calibrate.published import runtime_of

    st = CardStore()
    row = {"id": "X1", "metric": "prefill_tok_s", "value": "1000", "isl": "8192", "osl": "0", "batch": "1", "tp": "1",
           "gpus": "1", "hw_card": "dgx-spark", "model_card": "llama-3.1-8b", "weight_quant": "NVFP4",
           "kv_dtype": "bf16", "engine": "vLLM 0.26.0 (FlashInfer CUTLASS)", "date": "2026-09"}
    marlin = {**row, "engine": "vLLM 0.26.0 (--linear-backend marlin)"}
    fp4, w4a16 = (predict_row(r, st, runtime=runtime_of(r, st)).predicted for r in (row, marlin))
    assert w4a16 < 0.7 * fp4
    assert predict_row(marlin, st).predicted == pytest.approx(predict_row(row, st).predicted)
    # an NVFP4 prompt efficiency fitted on FP4-kernel rows prices the FP4 row, not the Marlin one
    from roofline.calibrate.runtime_fit import _with
    slow = {"format:nvfp4": 0.01}
    assert predict_row(marlin, st, runtime=_with(runtime_of(marlin, st), "nvidia-soc", slow)).predicted \
        == pytest.approx(w4a16)
    assert predict_row(row, st, runtime=_with(runtime_of(row, st), "nvidia-soc", slow)).predicted < 0.5 * fp4
    # 8-bit weights on Marlin (W8A16, vLLM's RTN and gptq_marlin) run 16-bit math too, not W8A8's int8 kernels: a
    # compute-bound prompt then runs at the BF16 weights' rate
    int8 = {**row, "hw_card": "h100-sxm", "weight_quant": "INT8", "engine": "vLLM 0.10.0"}
    w8a8, w8a16, bf16 = (predict_row(r, st, runtime=runtime_of(r, st)).predicted
                         for r in (int8, {**int8, "engine": "vLLM 0.10.0 (Marlin kernels)"},
                                   {**int8, "weight_quant": "BF16"}))
    assert w8a16 == pytest.approx(bf16, rel=0.05) and abs(w8a8 / w8a16 - 1) > 0.1


@pytest.mark.parametrize("notes,batch,why", [("Poisson, QPS=16, 500 requests", "1", "16 req/s"),
                                             ("vllm bench serve, 150 requests at concurrency 8 (closed loop)", "8",
                                              "closed loop of 8 clients"),
                                             ("offline, 500 requests sent at once", "max", None),
                                             ("benchmark_latency.py batch of 8", "8", None)])
def test_a_row_under_a_request_stream_is_left_to_the_serving_simulator(notes, batch, why):
    """One static batch cannot give the TTFT of requests meeting a running batch: a rate or a closed loop is
    skipped with the reason (benchmarks/serving_published.py simulates it); a burst or a batch of N stays static."""
    row = {"id": "X2", "metric": "ttft_ms", "value": "30", "isl": "467", "osl": "256", "batch": batch, "tp": "1",
           "gpus": "1", "hw_card": "h100-sxm", "model_card": "llama-3.1-8b", "weight_quant": "BF16",
           "kv_dtype": "bf16", "engine": "vLLM 0.11.0", "notes": notes}
    p = predict_row(row, CardStore())
    assert (p.predicted is None and why in p.skipped) if why else p.predicted > 0
