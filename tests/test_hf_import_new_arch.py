"""config.json import of the new mixers (Qwen3-Next, Falcon-H1, Llama 4, DeepSeek-V3.2, Jamba, Granite-4.0-H): the
imported card sizes like the bundled one, and each family's layout rules read as their configs define them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roofline.cards.store import CardStore
from roofline.errors import RooflineError
from roofline.importers.config_json import card_from_config
from roofline.sizing import kv, params
from roofline.sizing.layers import resolve_layers

CONFIGS = Path(__file__).resolve().parent / "data" / "configs"


def test_qwen3_next_import_matches_the_bundled_card_and_the_safetensors_total():
    card = card_from_config(json.loads((CONFIGS / "qwen3-next-80b-a3b.json").read_text()), source="fixture")
    bundled = CardStore().model("qwen3-next-80b-a3b")
    assert card.architecture.pattern_letters().count("A") == 12  # one gated full-attention layer in four
    assert params.total_params(card) == params.total_params(bundled)
    shared_expert_gates = 48 * 2048  # one [hidden, 1] sigmoid gate per layer, which the cards leave out
    assert params.total_params(card) + shared_expert_gates == 79_674_391_296  # HF safetensors total
    assert kv.kv_bytes(card, 100_000, "bf16") == kv.kv_bytes(bundled, 100_000, "bf16")


def _config(stem: str) -> dict:
    return json.loads((CONFIGS / f"{stem}.json").read_text())


def test_falcon_h1_every_layer_is_parallel_with_kv_and_state():
    card = card_from_config(_config("falcon-h1-34b-base"), source="fixture")
    layers = resolve_layers(card.architecture)
    assert {(lay.mixer, lay.ffn) for lay in layers} == {("parallel", "dense")} and len(layers) == 72
    assert kv.kv_bytes_per_token(card, "bf16") == 72 * 2 * 4 * 128 * 2  # K and V, 4 KV heads of 128, every layer
    conv = (4096 + 2 * 2 * 256) * (4 - 1)  # x, B, C channels (2 groups of state 256) x (kernel - 1)
    assert kv.state_bytes(card, "bf16") == 72 * (conv + 32 * 128 * 256) * 2
    assert card.architecture.rope.theta == 1e11 and card.family == "falcon"


def test_falcon_h1_without_mamba_rms_norm_drops_the_gated_norm_weights():
    config = _config("falcon-h1-34b-base")
    with_norm = params.param_counts(card_from_config(config, source="fixture"))["mamba"]
    without = params.param_counts(card_from_config({**config, "mamba_rms_norm": False}, source="fixture"))["mamba"]
    assert with_norm - without == 72 * 4096  # one d_ssm-wide norm weight per layer


def test_falcon_h1_head_dim_auto_is_width_over_heads():
    config = {**_config("falcon-h1-34b-base"), "mamba_d_head": "auto"}
    assert card_from_config(config, source="fixture").architecture.mamba2.head_dim == 4096 // 32


@pytest.mark.parametrize("change", [{"attn_layer_indices": [0, 1]}, {"projectors_bias": True},
                                    {"mamba_d_head": 100}])
def test_falcon_h1_refuses_what_it_does_not_model_in_one_line(change):
    with pytest.raises(RooflineError) as err:
        card_from_config({**_config("falcon-h1-34b-base"), **change}, source="fixture")
    assert "\n" not in str(err.value)


def test_llama4_text_config_flat_or_nested_reads_the_same():
    nested = _config("llama-4-maverick-17b-128e-instruct")
    flat = card_from_config(nested["text_config"], source="fixture")
    assert params.param_counts(flat) == params.param_counts(card_from_config(nested, source="fixture"))
    layers = resolve_layers(flat.architecture)
    assert [lay.ffn for lay in layers[:4]] == ["dense", "moe", "dense", "moe"]  # interleave_moe_layer_step 2
    assert [lay.mixer for lay in layers[:4]] == ["chunked", "chunked", "chunked", "full"]  # NoPE every 4th: global
    assert layers[0].window == 8192


def test_deepseek_v32_adds_the_indexer_key_to_the_cache():
    v3 = card_from_config(_config("deepseek-v3"), source="fixture")
    v32 = card_from_config(_config("deepseek-v3.2-exp"), source="fixture")
    assert kv.kv_bytes_per_token(v32, "bf16") - kv.kv_bytes_per_token(v3, "bf16") == 61 * 128 * 2
    assert v32.architecture.mla.indexer.topk == 2048


def test_jamba_layers_follow_the_attention_and_expert_periods():
    card = card_from_config(_config("ai21-jamba-1.5-mini"), source="fixture")
    layers = resolve_layers(card.architecture)
    assert [i for i, lay in enumerate(layers) if lay.mixer == "full"] == [4, 12, 20, 28]
    assert [lay.ffn for lay in layers[:2]] == ["dense", "moe"]
    assert card.architecture.mamba1.d_inner == 2 * 4096 and card.architecture.rope is None


def test_granite_hybrid_without_experts_uses_the_shared_mlp_as_its_ffn():
    config = {**_config("granite-4.0-h-small"), "num_local_experts": 0, "num_experts_per_tok": 0}
    card = card_from_config(config, source="fixture")
    assert card.architecture.moe is None and card.architecture.ffn.intermediate_size == 1536
    assert [lay.mixer for lay in resolve_layers(card.architecture)].count("full") == 4
