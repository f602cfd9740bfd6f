"""config.json import of the new mixers: the imported card sizes like the bundled one."""

from __future__ import annotations

import json
from pathlib import Path

from roofline.cards.store import CardStore
from roofline.importers.config_json import card_from_config
from roofline.sizing import kv, params

CONFIGS = Path(__file__).resolve().parent / "data" / "configs"


def test_qwen3_next_import_matches_the_bundled_card_and_the_safetensors_total():
    card = card_from_config(json.loads((CONFIGS / "qwen3-next-80b-a3b.json").read_text()), source="fixture")
    bundled = CardStore().model("qwen3-next-80b-a3b")
    assert card.architecture.pattern_letters().count("A") == 12  # one gated full-attention layer in four
    assert params.total_params(card) == params.total_params(bundled)
    shared_expert_gates = 48 * 2048  # one [hidden, 1] sigmoid gate per layer, which the cards leave out
    assert params.total_params(card) + shared_expert_gates == 79_674_391_296  # HF safetensors total
    assert kv.kv_bytes(card, 100_000, "bf16") == kv.kv_bytes(bundled, 100_000, "bf16")
