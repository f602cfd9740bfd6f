"""Mixers beyond GQA/MLA/Mamba-2: chunked attention (Llama-4), Gated DeltaNet (Qwen3-Next), Mamba-1 (Jamba),
parallel attention + Mamba-2 (Falcon-H1): cache/state sizes by closed form, parameter counts, the op graph, and the
micro-engine's one-line refusal."""

from __future__ import annotations

import numpy as np
import pytest
from tiny_cards import card

from roofline import predict
from roofline.cards.store import CardStore
from roofline.perf.ops import Step, step_ops
from roofline.sizing import kv, params
from roofline.sizing.memory import Deployment, memory_budget

NEW_CARDS = ["deepseek-v4", "deepseek-v3.2", "qwen3-next-80b-a3b", "llama-4-scout", "llama-4-maverick",
             "jamba-1.5-mini", "granite-4.0-h-small", "falcon-h1-34b"]

CHUNKED = card("tiny-chunked", attention={"num_heads": 4, "num_kv_heads": 2, "head_dim": 16, "attention_chunk_size": 8},
               layer_types={"C": {"mixer": "chunked"}}, layer_pattern="CCCA")
DELTANET = card("tiny-deltanet", deltanet={"num_key_heads": 2, "num_value_heads": 4, "key_head_dim": 8,
                                           "value_head_dim": 16, "conv_kernel": 4, "state_dtype": "fp32"},
                layer_types={"D": {"mixer": "deltanet"}}, layer_pattern="DDDA")
MAMBA1 = card("tiny-mamba1", mamba1={"d_inner": 128, "state_size": 16, "conv_kernel": 4, "dt_rank": 8},
              layer_types={"m": {"mixer": "mamba1"}}, layer_pattern="mmmA")
PARALLEL = card("tiny-parallel", mamba2={"state_size": 8, "num_heads": 4, "head_dim": 16, "n_groups": 1,
                                         "conv_kernel": 4},
                layer_types={"P": {"mixer": "parallel"}}, layer_pattern="PPPP")
TINY_NEW = [CHUNKED, DELTANET, MAMBA1, PARALLEL]
KV_PER_LAYER_TOKEN = 2 * 2 * 16 * 2  # K and V x 2 kv heads x head_dim 16 x bf16


def test_chunked_layers_hold_at_most_one_chunk():
    # 3 chunked layers (chunk 8) + 1 global layer
    assert kv.kv_bytes(CHUNKED, 100, "bf16") == (3 * 8 + 100) * KV_PER_LAYER_TOKEN
    assert kv.kv_bytes_per_token(CHUNKED, "bf16") == KV_PER_LAYER_TOKEN


def test_deltanet_state_is_constant_and_in_its_dtype():
    state = 3 * (4 * 8 * 16 + (2 * 2 * 8 + 4 * 16) * 3) * 4  # 3 layers x (S [4, 8, 16] + conv 96 ch x 3) x fp32
    for ctx in (1, 1000):
        assert kv.kv_bytes(DELTANET, ctx, "bf16") == ctx * KV_PER_LAYER_TOKEN + state


def test_mamba1_state():
    assert kv.state_bytes(MAMBA1, "bf16") == 3 * 128 * (16 + 3) * 2


def test_parallel_hybrid_keeps_kv_and_state_on_every_layer():
    state = 4 * ((64 + 2 * 8) * 3 + 4 * 16 * 8) * 2
    assert kv.kv_bytes(PARALLEL, 50, "bf16") == 4 * 50 * KV_PER_LAYER_TOKEN + state
    counts = params.param_counts(PARALLEL)
    assert counts["attention"] > 0 and counts["mamba"] > 0


def test_mamba2_gated_norm_is_one_d_inner_weight_per_layer():
    plain = card("tiny-parallel-nonorm", mamba2={**PARALLEL.architecture.mamba2.model_dump(), "gated_norm": False},
                 layer_types={"P": {"mixer": "parallel"}}, layer_pattern="PPPP")
    d_inner = 4 * 16
    assert params.param_counts(PARALLEL)["mamba"] - params.param_counts(plain)["mamba"] == 4 * d_inner
    assert kv.kv_bytes(plain, 50, "bf16") == kv.kv_bytes(PARALLEL, 50, "bf16")  # weights only, not state


@pytest.mark.parametrize("tiny", TINY_NEW, ids=lambda c: c.name)
def test_op_graph_charges_the_new_mixers(tiny):
    hw = CardStore().hardware("h100-sxm")
    for step in (Step("prefill", 64), Step("decode", 1, 4, np.array([10.0, 1000.0]))):
        ops = step_ops(tiny, hw, step)
        flops = sum(np.asarray(op.flops) * op.count for op in ops)
        assert np.all(flops > 0)
        mixer_ops = [op for op in ops if op.op_class in ("attention", "mamba")]
        cores = sum(op.count for op in mixer_ops if op.name in ("attention", "ssm_scan", "delta_scan"))
        assert cores == (8 if tiny is PARALLEL else 4)  # parallel layers run attention and Mamba-2 side by side


def test_chunked_attention_reads_no_more_than_the_chunk():
    hw = CardStore().hardware("h100-sxm")
    ops = step_ops(CHUNKED, hw, Step("decode", 1, 1, 1000))
    reads = {op.count: op.kv_read_bytes for op in ops if op.name == "attention"}
    assert reads == {3: 8 * KV_PER_LAYER_TOKEN, 1: 1001 * KV_PER_LAYER_TOKEN}


@pytest.mark.parametrize("name", NEW_CARDS)
def test_predict_and_fits_run_on_every_new_card(name):
    st = CardStore()
    heads = st.model(name).architecture.attention.num_heads
    tp = next(t for t in (8, 4, 2, 1) if heads % t == 0)  # Falcon-H1-34B's 20 heads split over 4 GPUs, not 8
    pred = predict(name, "h200", prompt_tokens=4096, output_tokens=64, tp=tp)
    assert pred.ttft_s > 0 and pred.itl_s > 0
    budget = memory_budget(st.model(name), st.hardware("h200"), None, "bf16", 32768, dep=Deployment(tp=tp))
    assert budget.kv_bytes > 0 and budget.weights_bytes > 0


@pytest.mark.parametrize("tiny", TINY_NEW + ["deepseek-v4", "deepseek-v3.2", "falcon-h1-34b"],
                         ids=lambda c: c if isinstance(c, str) else c.name)
def test_engine_refuses_mixers_it_does_not_run(tiny):
    torch = pytest.importorskip("torch")  # noqa: F841
    from roofline.engine.model.transformer import EngineError, Transformer

    model_card = CardStore().model(tiny) if isinstance(tiny, str) else tiny
    with pytest.raises(EngineError) as err:
        Transformer(model_card)
    assert "\n" not in str(err.value)


def test_engine_refuses_mamba2_without_its_gated_norm():
    pytest.importorskip("torch")
    from roofline.engine.model.transformer import EngineError, Transformer

    mamba = {"state_size": 8, "num_heads": 4, "head_dim": 16, "n_groups": 1, "conv_kernel": 4, "gated_norm": False}
    with pytest.raises(EngineError, match="gated RMSNorm"):
        Transformer(card("tiny-mamba2-nonorm", mamba2=mamba, layer_pattern="MAMA"))
