"""Smaller variants of a model card: the first N layers (same shapes) and/or a smaller vocabulary, so big cards run
on small machines and a prediction describes exactly the work the engine ran."""

from __future__ import annotations

from roofline.cards.model import ModelCard
from roofline.cards.schema import MAX_VOCAB
from roofline.errors import RooflineError
from roofline.sizing.layers import resolve_layers
from roofline.sizing.params import total_params


def reduce_card(card: ModelCard, layers: int | None = None, vocab: int | None = None) -> ModelCard:
    if layers is None and vocab is None:
        return card
    arch = card.architecture
    if layers is not None and not 0 < layers <= arch.num_layers:
        raise RooflineError(f"--layers: {card.name} has {arch.num_layers} layers; pass 1..{arch.num_layers}")
    if vocab is not None and not 0 < vocab <= MAX_VOCAB:
        raise RooflineError(f"--vocab: give 1 to {MAX_VOCAB:,} tokens, got {vocab:,}")
    data = card.model_dump(mode="python")
    a = data["architecture"]
    suffix = []
    if layers is not None:
        a["num_layers"] = layers
        a["layer_pattern"] = arch.pattern_letters()[:layers]
        if arch.moe is not None:
            a["moe"]["first_dense_layers"] = min(arch.moe.first_dense_layers, layers)
            if not any(lay.ffn == "moe" for lay in resolve_layers(arch)[:layers]):
                a["moe"] = None  # the layers kept are all dense (DeepSeek's first three): no experts left
        suffix.append(f"{layers}l")
    if vocab is not None:
        a["vocab_size"] = vocab
        suffix.append(f"v{vocab}")
    data["name"] = f"{card.name}@{'-'.join(suffix)}"
    data["aliases"] = []
    small = ModelCard.model_validate(data)
    params = {"total": float(total_params(small)), "source": f"derived: {card.name} reduced to {', '.join(suffix)}"}
    return small.model_copy(update={"params": small.params.model_copy(update=params)})
