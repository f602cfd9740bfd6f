"""`validate --engine-shapes --random`: reproducible draws over the cards the engine runs (never the quick grid's),
per-family grouping, the replayed engine schedule; the quick grid's layer kinds."""

import pytest

from roofline.calibrate.grids import QUICK, SMOKE, grid_points, layer_kinds
from roofline.calibrate.validation import (
    RANDOM_BATCHES,
    RANDOM_PROMPTS,
    STEP_TOKENS,
    candidate_cards,
    engine_runs,
    family,
    grid_cards,
    predict_served,
    random_shapes,
    served_steps,
    summarize_families,
)
from roofline.cards.host import host_card
from roofline.cards.store import CardStore
from roofline.perf.request import predict
from roofline.perf.workload import make_workload
from roofline.sizing.layers import resolve_layers
from roofline.sizing.reduce import reduce_card


@pytest.fixture(scope="module")
def store():
    return CardStore()


def test_random_shapes_are_reproducible_and_never_the_grids_cards(store):
    a = random_shapes(store, 40, seed=3, vocab=3000, dtype="bf16")
    assert a == random_shapes(store, 40, seed=3, vocab=3000, dtype="bf16")
    assert a != random_shapes(store, 40, seed=4, vocab=3000, dtype="bf16")
    many = a + random_shapes(store, 200, seed=11, vocab=3000, dtype="bf16")
    assert len({tuple(s.values()) for s in many[40:]}) == 200  # no shape twice
    assert not {s["card"] for s in many} & grid_cards()
    assert grid_cards() == {"llama-3.1-8b", "qwen3-30b-a3b", "gpt-oss-20b", "granite-4.0-h-small", "llama-3.2-1b"}
    assert all(RANDOM_BATCHES[0] <= s["batch"] <= RANDOM_BATCHES[1] for s in many)
    assert all(RANDOM_PROMPTS[0] <= s["prompt"] <= RANDOM_PROMPTS[1] for s in many)
    assert all(engine_runs(store.model(s["card"])) for s in many)
    fams = {family(reduce_card(store.model(s["card"]), s["layers"])) for s in many}
    assert fams == {"dense", "sliding", "moe-coarse", "moe-fine", "hybrid"}


def test_the_draw_leaves_out_what_the_engine_refuses(store):
    pool = [name for cards in candidate_cards(store, 3000, "bf16").values() for name, _ in cards]
    assert "deepseek-v3" not in pool  # MLA
    assert "qwen3-next-80b-a3b" not in pool and "jamba-1.5-mini" not in pool  # DeltaNet, Mamba-1
    assert "qwen3-coder-480b-a35b" not in pool  # one layer's experts alone exceed MAX_WEIGHT_BYTES
    assert "mistral-7b" in pool and "mixtral-8x7b" in pool


def test_a_hybrid_is_cut_to_the_layers_that_hold_every_kind(store):
    (name, layers), = candidate_cards(store, 3000, "bf16")["hybrid"]
    full = {(lay.mixer, lay.ffn) for lay in resolve_layers(store.model(name).architecture)}
    cut = [(lay.mixer, lay.ffn) for lay in resolve_layers(reduce_card(store.model(name), layers).architecture)]
    assert set(cut) == full and set(cut[:-1]) != full


def test_family_of_each_layer_mix(store):
    got = {n: family(reduce_card(store.model(n), 1)) for n in
           ("llama-3.2-3b", "mistral-7b", "gemma-3-4b", "mixtral-8x7b", "qwen3-235b-a22b", "gpt-oss-120b")}
    assert got == {"llama-3.2-3b": "dense", "mistral-7b": "sliding", "gemma-3-4b": "sliding",
                   "mixtral-8x7b": "moe-coarse", "qwen3-235b-a22b": "moe-fine", "gpt-oss-120b": "moe-fine"}
    assert family(store.model("nemotron-3-nano")) == "hybrid"


def test_errors_are_grouped_per_family():
    def point(fam, pred, meas):
        return {"family": fam, **{f"predicted_{k}": pred for k in ("ttft", "itl", "prefill_tok_s", "decode_tok_s")},
                **{f"measured_{k}": meas for k in ("ttft", "itl", "prefill_tok_s", "decode_tok_s")}}

    fams = summarize_families([point("dense", 1.1, 1.0), point("dense", 0.9, 1.0), point("hybrid", 2.0, 1.0)])
    assert set(fams) == {"dense", "hybrid"}
    assert fams["dense"]["ttft"]["n"] == 2 and fams["dense"]["ttft"]["median_ape_pct"] == pytest.approx(10.0)
    assert fams["hybrid"]["itl"]["bias_pct"] == pytest.approx(100.0)


def test_replayed_schedule_chunks_prefill_at_the_step_budget():
    steps = served_steps(24, 300, 8)
    prefill = [s for s in steps if any(ctx < 300 for _, ctx in s)]
    assert all(sum(n for n, _ in s) <= STEP_TOKENS for s in steps)
    assert sum(n for s in prefill for n, ctx in s if ctx < 300) == 24 * 300
    assert len(prefill) == 4 and sum(n for n, _ in steps[0]) == STEP_TOKENS
    assert all(n == 1 for s in steps if s not in prefill for n, _ in s)
    assert len(served_steps(4, 100, 8)) == 8  # one prefill step, then 7 decode steps


def test_one_step_prefill_predicts_as_predict_does(store):
    """Where the whole batch prefills in one step, the replay is `predict`'s request; where it needs several,
    it costs more than one step of all the tokens (chunks of 2048 rows, each routed to 128 experts)."""
    hw = host_card()
    card = reduce_card(store.model("qwen2.5-7b"), 1, 3000)
    served = predict_served(card, hw, 4, 160, 8, "bf16")
    whole = predict(card, hw, make_workload(prompt_tokens=160, output_tokens=8, batch=4, quant="default=bf16",
                                            kv_quant="bf16"))
    assert served.ttft_s == pytest.approx(whole.ttft_s, rel=1e-3)
    assert served.itl_s == pytest.approx(whole.itl_s, rel=2e-2)
    moe = reduce_card(store.model("qwen3-30b-a3b"), 1, 3000)
    chunked = predict_served(moe, hw, 24, 300, 8, "bf16")
    one_step = predict(moe, hw, make_workload(prompt_tokens=300, output_tokens=8, batch=24, quant="default=bf16",
                                              kv_quant="bf16"))
    assert chunked.ttft_s > 1.2 * one_step.ttft_s


def test_quick_grid_runs_every_layer_kind_up_to_the_step_budget(store):
    assert layer_kinds(QUICK, store) >= {"full", "gqa", "sliding", "dense", "moe-coarse", "moe-fine", "mamba2",
                                         "hybrid"}
    assert max(p["batch"] * p["new_tokens"] for p in grid_points(QUICK) if p["phase"] == "prefill") == STEP_TOKENS
    assert not layer_kinds(SMOKE, store) & {"mamba2", "moe-fine"}  # the smoke grid stays one small dense card
