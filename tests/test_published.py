"""The shipped default efficiencies against published measurements (regression guard for the fitted defaults)."""

import pytest

from roofline.cards import CardStore
from roofline.published import predict_row, summarize


@pytest.fixture(scope="module")
def predictions(published_rows):
    store = CardStore()
    return [predict_row(row, store) for row in published_rows]


def test_every_row_is_predicted_or_says_why(predictions):
    for p in predictions:
        assert (p.predicted is not None and p.predicted > 0) or p.skipped, p.row_id


def test_default_error_on_published_rows(predictions):
    s = summarize(predictions)
    # measured by benchmarks/fit_defaults.py when the defaults were fitted: decode 8.9%, max-load output 1.9%
    assert s["decode_tok_s"]["n"] >= 37 and s["decode_tok_s"]["median_ape_pct"] < 12
    assert s["agg_output_tok_s"]["median_ape_pct"] < 8
    assert s["agg_decode_tok_s"]["median_ape_pct"] < 15
    assert abs(s["decode_tok_s"]["bias_pct"]) < 5


def test_row_mapping(published_rows):
    """Conditions read from the rows: llama-bench depth in notes, GGUF MXFP4 = experts only, TRT FP8 KV."""
    from roofline.published import _depth, _kv, _quant

    rows = {r["id"]: r for r in published_rows}
    store = CardStore()
    assert _depth(rows["H002"]) == 32768 and _depth(rows["H001"]) == 0
    assert _quant(rows["H006"], store.model("gpt-oss-20b")) == "experts=mxfp4,default=q8_0"
    assert _kv(rows["H093"]) == "fp8" and _kv(rows["H033"]) == "fp16"
