"""A model card as a runtime runs it: a runtime without a windowed KV cache for the card's family keeps its
sliding-window layers' whole context and attends over all of it (llama.cpp runs Mistral-7B-v0.1 and Phi-3 so), so
those layers are sized and timed as full attention."""

from __future__ import annotations

from roofline.cards.model import STANDARD_LAYER_TYPES, ModelCard
from roofline.cards.runtime import RuntimeChoice


def sliding_letters(card: ModelCard) -> list[str]:
    """The layer-pattern letters of `card` whose layers slide (a window of `attention.sliding_window` tokens)."""
    arch = card.architecture
    types = {**STANDARD_LAYER_TYPES, **arch.layer_types}
    return sorted(letter for letter in set(arch.pattern_letters()) if types[letter].mixer == "sliding")


def as_run(card: ModelCard, choice: RuntimeChoice | None) -> ModelCard:
    """`card` with its sliding-window layers made full attention where the runtime (None: generic, which honours
    every window) keeps their windows whole, else `card` itself."""
    if choice is None or not choice.profile.ignores_windows(card.family, choice.version or choice.range_start):
        return card
    letters = sliding_letters(card)
    if not letters:
        return card
    arch = card.architecture
    types = {**STANDARD_LAYER_TYPES, **arch.layer_types}
    full = {letter: types[letter].model_copy(update={"mixer": "full"}) for letter in letters}
    arch = arch.model_copy(update={"layer_types": {**arch.layer_types, **full}})
    return card.model_copy(update={"architecture": arch})
