"""A card's `layer_pattern`: letters, '(..)*N' groups and 'X*N' repeats, expanded to one letter per layer."""

from __future__ import annotations

import re

from roofline.cards.schema import MAX_LAYERS


def _repeat(text: str, times: str) -> str:
    """`text` repeated `times` times, refused beyond MAX_LAYERS letters (a pattern never expands further)."""
    if len(times) > 6 or len(text) * int(times) > MAX_LAYERS:
        raise ValueError(f"layer pattern repeats beyond {MAX_LAYERS} layers")
    return text * int(times)


def expand_pattern(pattern: str) -> str:
    """'(SSSSSA)*10 SS' -> 62 letters. Groups and single letters repeat with '*N'; spaces are ignored."""
    if len(pattern) > 16 * MAX_LAYERS:
        raise ValueError(f"layer pattern longer than {16 * MAX_LAYERS} characters")
    text = re.sub(r"\s+", "", pattern)
    while True:
        new = re.sub(r"\(([^()]*)\)\*(\d+)", lambda m: _repeat(m[1], m[2]), text)
        new = re.sub(r"\(([^()]*)\)(?!\*\d)", r"\1", new)
        new = re.sub(r"([^()*\d])\*(\d+)", lambda m: _repeat(m[1], m[2]), new)
        if len(new) > MAX_LAYERS:
            raise ValueError(f"layer pattern expands beyond {MAX_LAYERS} layers")
        if new == text:
            break
        text = new
    if re.search(r"[()]|\*\d", text):
        raise ValueError(f"cannot parse layer pattern {pattern!r}; write letters, '(..)*N' or 'X*N'")
    return text
