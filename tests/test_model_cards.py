"""Bundled model cards: shapes reproduce the published parameter counts, and KV sizes match closed forms.

The 2% test is what proves a card's shapes are right: the parameter count derived from the shapes
(roofline.sizing.params) must land within 2% of the published figure the card cites.
"""

from __future__ import annotations

import pytest

from roofline.cards.model import ModelCard
from roofline.cards.card_file import load_card
from roofline.cards.store import CardStore, bundled_dir, names_of
from roofline.sizing import kv, params

MODELS_DIR = bundled_dir() / "models"
CARD_NAMES = sorted(p.stem for p in MODELS_DIR.glob("*.yaml"))
MOE_CARD_NAMES = [n for n in CARD_NAMES if load_card(ModelCard, MODELS_DIR / f"{n}.yaml").is_moe]
GIB = 2**30
TOLERANCE = 0.02



@pytest.fixture
def store() -> CardStore:
    """Bundled cards only: tests/conftest.py points $ROOFLINE_HOME at an empty directory."""
    return CardStore()


def _pct(derived: float, published: float) -> float:
    return 100.0 * (derived / published - 1.0)


def test_required_cards_present():
    required = {
        "llama-3.1-8b", "llama-3.1-70b", "llama-3.3-70b", "llama-2-7b", "llama-2-13b", "llama-2-70b", "mistral-7b",
        "mixtral-8x7b", "qwen2.5-3b", "qwen2.5-7b", "qwen2.5-14b", "qwen3-30b-a3b", "qwen3-32b",
        "deepseek-r1-distill-qwen-14b", "deepseek-v3", "gpt-oss-20b", "gpt-oss-120b", "gemma-3-27b", "gemma-4-31b",
        "nemotron-3-nano", "nemotron-3-super-120b-a12b",
    }
    assert required <= set(CARD_NAMES), f"missing cards: {sorted(required - set(CARD_NAMES))}"


@pytest.mark.parametrize("name", CARD_NAMES)
def test_card_loads_with_sources(store, name):
    card = store.model(name)
    assert card.name == name
    assert card.params.source.strip(), "params.source must cite the published figure"
    assert card.source.shapes_from.strip(), "source.shapes_from must cite where the shapes come from"
    if card.params.other_params:
        assert card.params.other_params_source.strip(), "other_params needs other_params_source"
    if card.is_moe:
        assert card.params.active is not None, "an MoE card needs params.active"


@pytest.mark.parametrize("name", CARD_NAMES)
def test_total_params_match_published(store, name):
    card = store.model(name)
    p = card.params
    derived = params.total_params(card) + (params.mtp_params(card) if p.includes_mtp else 0) + p.other_params
    err = _pct(derived, p.total)
    assert abs(err) <= 100 * TOLERANCE, (
        f"{name}: derived total {derived / 1e9:.3f}B vs published {p.total / 1e9:.3f}B ({err:+.2f}%)"
    )


@pytest.mark.parametrize("name", MOE_CARD_NAMES)
def test_active_params_match_published(store, name):
    card = store.model(name)
    derived = params.published_active_basis(card)
    err = _pct(derived, card.params.active)
    if card.params.active_rounded_to:  # e.g. '9B active': anything in [8.5B, 9.5B] is that figure
        allowed = max(100 * TOLERANCE, 100 * card.params.active_rounded_to / 2 / card.params.active)
        assert abs(err) <= allowed, f"{name}: derived active {derived / 1e9:.3f}B outside the published rounding"
        return
    assert abs(err) <= 100 * TOLERANCE, (
        f"{name}: derived active {derived / 1e9:.3f}B vs published {card.params.active / 1e9:.3f}B ({err:+.2f}%)"
    )


@pytest.mark.parametrize(
    "name, exact",
    [
        # HF API safetensors parameter totals (huggingface.co/api/models/Qwen/Qwen2.5-7B-Instruct and -3B-Instruct),
        # as quoted in a public research note found by search.
        ("qwen2.5-7b", 7_615_616_512),
        ("qwen2.5-3b", 3_085_938_688),
    ],
)
def test_exact_counts_where_published(store, name, exact):
    assert params.total_params(store.model(name)) == exact


# --- KV cache: closed forms -------------------------------------------------------------------------------------


@pytest.mark.parametrize("tokens, gib", [(4096, 1.25), (32768, 10.0), (131072, 40.0)])
def test_llama_3_3_70b_kv_bf16(store, tokens, gib):
    # 80 layers x 2 (K,V) x 8 KV heads x 128 x 2 B = 327,680 B/token
    assert kv.kv_bytes(store.model("llama-3.3-70b"), tokens, "bf16") == gib * GIB


def test_llama_2_13b_kv_per_token(store):
    per_token = kv.kv_bytes_per_token(store.model("llama-2-13b"), "bf16")
    assert per_token == 819_200  # 2 x 40 layers x 40 heads x 128 x 2 B
    assert per_token == 0.78125 * 2**20


def test_deepseek_v3_mla_kv_per_token(store):
    assert kv.kv_bytes_per_token(store.model("deepseek-v3"), "bf16") == 61 * 576 * 2 == 70_272


def test_gpt_oss_20b_sliding_layers_capped(store):
    card = store.model("gpt-oss-20b")
    per_token_layer = 2 * 8 * 64 * 2  # K and V, 8 KV heads, head_dim 64, bf16
    assert kv.kv_bytes(card, 100_000, "bf16") == (12 * 100_000 + 12 * 128) * per_token_layer
    assert kv.kv_bytes_per_token(card, "bf16") == 12 * per_token_layer  # only the full-attention layers grow


def test_mistral_7b_every_layer_sliding(store):
    card = store.model("mistral-7b")
    assert kv.kv_bytes_per_token(card, "bf16") == 0
    assert kv.kv_bytes(card, 32768, "bf16") == 32 * 4096 * 2 * 8 * 128 * 2


def test_gemma_4_31b_global_layers_share_k_and_v(store):
    card = store.model("gemma-4-31b")
    # only the 10 global layers grow: k_eq_v -> one tensor of 4 KV heads x 512
    assert kv.kv_bytes_per_token(card, "bf16") == 10 * 1 * 4 * 512 * 2
    sliding = 50 * 1024 * 2 * 16 * 256 * 2
    assert kv.kv_bytes(card, 100_000, "bf16") == sliding + 100_000 * 10 * 4 * 512 * 2


@pytest.mark.parametrize("ctx", [1, 17, 4096, 131_072, 262_144])
def test_nemotron_3_nano_mamba_state_constant(store, ctx):
    card = store.model("nemotron-3-nano")
    per_token = kv.kv_bytes_per_token(card, "bf16")
    assert per_token == 6 * 2 * 2 * 128 * 2  # 6 attention layers x (K,V) x 2 KV heads x 128 x 2 B
    state = kv.kv_bytes(card, ctx, "bf16") - ctx * per_token
    # 23 Mamba layers x (conv (4096 + 2*8*128) x 3 + SSM 64 heads x 64 x 128) values x 4 B (state_dtype fp32)
    assert state == 23 * ((4096 + 2 * 8 * 128) * 3 + 64 * 64 * 128) * 4
    assert state == kv.state_bytes(card, "fp8")  # the state keeps fp32 whatever the KV format


# --- names ------------------------------------------------------------------------------------------------------


def test_published_model_card_column_resolves(store, published_rows):
    rows = published_rows
    names = sorted({r["model_card"] for r in rows if r.get("model_card")})
    assert names
    for name in names:
        assert store.model(name).name == name


def test_published_model_column_resolves_to_same_card(store, published_rows):
    """The CSV's `model` spellings ('gpt-oss:20b', 'ggml-org/gpt-oss-120b-GGUF', 'Meta-Llama-3-8B (GGUF)') are aliases."""
    for row in published_rows:
        if not row.get("model_card"):
            continue
        spelling = row["model"].removesuffix(" (GGUF)").strip()
        assert store.model(spelling).name == row["model_card"], f"{row['id']}: {row['model']!r}"


def test_aliases_unique_across_cards(store):
    owner: dict[str, str] = {}
    for card in store.all("models"):
        for alias in names_of(card):
            key = alias.strip().lower()
            assert key not in owner or owner[key] == card.name, (
                f"alias {alias!r} is on both {owner.get(key)} and {card.name}"
            )
            owner[key] = card.name
    for name in CARD_NAMES:  # an alias must not shadow another card's file name
        assert owner[name] == name


@pytest.mark.parametrize("name,file_bytes", [
    ("ggml-org/gpt-oss-20b-GGUF", 11.27 * 2**30),  # llama.cpp's loader: 'file size = 11.27 GiB' (Q8_0 + MXFP4)
    ("ggml-org/gpt-oss-120b-GGUF", 59.02 * 2**30),
    ("google/gemma-3-27b-it-qat-q4_0-gguf", 17.2e9),  # its F16 embedding table is 2.8 of the 17.2 GB
])
def test_published_checkpoints_weigh_what_their_files_do(name, file_bytes):
    card, formats = CardStore().model_and_format(name)
    assert sum(params.weight_bytes(card, formats).values()) == pytest.approx(file_bytes, rel=0.015)
