"""DeepSeek-V4 compressed attention (CSA/HCA) and V3.2 sparse attention: cache sizes the seeds quote, op charges.

Both figures come from the seeds (SEED_TARGETS: 'DeepSeek V4-Pro @1M context: 9.62 GiB KV per sequence (bf16) vs
~83.9 GiB for a V3.2-style design') and are computed by `roofline.kv.kv_bytes`, the function `predict` and `fits` use.
"""

from __future__ import annotations

import numpy as np
import pytest

from roofline.cards.store import CardStore
from roofline.perf.ops import Step, step_ops
from roofline.sizing import kv
from roofline.sizing.layers import resolve_layers

GIB = 2**30
ONE_M_TOKENS = 2**20


@pytest.fixture
def store() -> CardStore:
    return CardStore()


def test_deepseek_v4_pro_kv_at_1m_tokens_is_9_62_gib(store):
    assert round(kv.kv_bytes(store.model("deepseek-v4"), ONE_M_TOKENS, "bf16") / GIB, 2) == 9.62


def test_deepseek_v3_2_kv_at_1m_tokens_is_83_9_gib(store):
    assert round(kv.kv_bytes(store.model("deepseek-v3.2"), ONE_M_TOKENS, "bf16") / GIB, 1) == 83.9


def test_deepseek_v4_pro_layer_mix(store):
    layers = resolve_layers(store.model("deepseek-v4").architecture)
    csa = [lay.index for lay in layers if lay.compress_ratio == 4 and lay.indexer]
    hca = [lay.index for lay in layers if lay.compress_ratio == 128 and not lay.indexer]
    assert (len(csa), len(hca)) == (30, 31)
    assert csa == list(range(2, 61, 2))  # the checkpoint's indexer tensors sit on layers 2, 4, ..., 60


def test_compressed_cache_closed_form(store):
    card = store.model("deepseek-v4")
    ctx = 100_003  # not a multiple of either ratio: unfinished groups are not cached entries
    csa = (ctx // 4) * (512 + 128) + 128 * 512
    hca = (ctx // 128) * 512 + 128 * 512
    assert kv.kv_bytes(card, ctx, "bf16") == (30 * csa + 31 * hca) * 2
    assert kv.kv_bytes(card, 3, "bf16") == 61 * 3 * 512 * 2  # shorter than every group: only the raw window
    assert kv.kv_bytes_per_token(card, "bf16") == (30 * 640 / 4 + 31 * 512 / 128) * 2


def test_compressed_cache_replicated_under_tensor_parallelism(store):
    card = store.model("deepseek-v4")
    assert kv.kv_bytes(card, 65536, "bf16", tp=8) == kv.kv_bytes(card, 65536, "bf16")


def _attention_kv_read(card, hw, context):
    ops = step_ops(card, hw, Step("decode", 1, 1, np.asarray(context, dtype=float)))
    return sum(op.kv_read_bytes * op.count for op in ops if op.op_class == "attention")


def test_v3_2_sparse_attention_reads_at_most_topk_latents(store):
    card, hw = store.model("deepseek-v3.2"), store.hardware("h100-sxm")
    latent_bytes = 61 * 576 * 2
    index_bytes = 61 * 128 * 2
    # short context: everything is read; long context: every index key but only 2048 latents
    assert _attention_kv_read(card, hw, 1000) == pytest.approx(1001 * (latent_bytes + index_bytes))
    assert _attention_kv_read(card, hw, 100_000) == pytest.approx(2048 * latent_bytes + 100_001 * index_bytes)


def test_v4_decode_reads_far_less_than_v3_2_at_1m(store):
    hw = store.hardware("h100-sxm")
    v4 = _attention_kv_read(store.model("deepseek-v4"), hw, ONE_M_TOKENS)
    v32 = _attention_kv_read(store.model("deepseek-v3.2"), hw, ONE_M_TOKENS)
    assert 0 < v4 < 0.2 * v32
