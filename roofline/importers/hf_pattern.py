"""Per-layer mixer/FFN lists -> a compact layer pattern over the card grammar's letters."""

from __future__ import annotations

from roofline.cards.model import STANDARD_LAYER_TYPES, expand_pattern

_STANDARD = {(lt.mixer, lt.ffn): letter for letter, lt in STANDARD_LAYER_TYPES.items()}
_CUSTOM = {("full", "dense"): "D", ("sliding", "dense"): "T", ("mla", "dense"): "N", ("full", "moe"): "F",
           ("sliding", "moe"): "X", ("mla", "moe"): "Y", ("sliding", "none"): "W", ("mla", "none"): "V",
           ("deltanet", "moe"): "G", ("deltanet", "dense"): "H", ("chunked", "dense"): "c", ("chunked", "moe"): "C",
           ("mamba1", "dense"): "m", ("mamba1", "moe"): "e", ("mamba2", "moe"): "h", ("mamba2", "dense"): "k",
           ("parallel", "dense"): "P", ("parallel", "moe"): "Q", ("mamba1", "none"): "R"}
_AUTO_MIXERS = {"full": "A", "sliding": "S", "mla": "L"}


def _pattern(mixers: list[str], ffns: list[str], moe: bool) -> tuple[str | None, dict, int]:
    """Per-layer (mixer, ffn) -> (layer_pattern, custom layer_types, first_dense_layers)."""
    first_dense = 0
    if moe:
        while first_dense < len(mixers) and mixers[first_dense] in _AUTO_MIXERS and ffns[first_dense] == "dense":
            first_dense += 1
    letters, custom = [], {}
    for i, (mixer, ffn) in enumerate(zip(mixers, ffns)):
        auto = "moe" if moe and i >= first_dense else "dense"
        if mixer in _AUTO_MIXERS and ffn == auto:
            letters.append(_AUTO_MIXERS[mixer])
        elif (mixer, ffn) in _STANDARD and STANDARD_LAYER_TYPES[_STANDARD[(mixer, ffn)]].ffn != "auto":
            letters.append(_STANDARD[(mixer, ffn)])
        else:
            letter = _CUSTOM[(mixer, ffn)]
            custom[letter] = {"mixer": mixer, "ffn": ffn}
            letters.append(letter)
    text = "".join(letters)
    default = "L" if "mla" in mixers else "A"
    if text == default * len(text):
        return None, custom, first_dense
    return compress_pattern(text), custom, first_dense


def _repeat(unit: str, times: int) -> str:
    return f"{unit}*{times}" if len(unit) == 1 and unit != "*" else f"({unit})*{times}"


def _best_repeat(letters: str, i: int) -> tuple[int, int]:
    """(unit length, repeats) of the repeat starting at i that covers the most layers; (0, 0) if none."""
    best_p = best_r = 0
    for p in range(1, (len(letters) - i) // 2 + 1):
        unit, r = letters[i:i + p], 1
        while letters.startswith(unit, i + r * p):
            r += 1
        if r >= (3 if p == 1 else 2) and r * p > best_r * best_p:
            best_p, best_r = p, r
    return best_p, best_r


def compress_pattern(letters: str, max_parts: int = 3) -> str:
    """'SASA..SA' -> '(SA)*12'; 'SSSSSA'*10+'SS' -> '(SSSSSA)*10 SS'. Irregular patterns stay as written."""
    parts: list[tuple[bool, str]] = []  # (is_repeat, text)
    i = 0
    while i < len(letters):
        p, r = _best_repeat(letters, i)
        if r:
            parts.append((True, _repeat(letters[i:i + p], r)))
            i += p * r
        elif parts and not parts[-1][0]:
            parts[-1] = (False, parts[-1][1] + letters[i])
            i += 1
        else:
            parts.append((False, letters[i]))
            i += 1
    text = " ".join(t for _, t in parts)
    try:
        ok = len(parts) <= max_parts and expand_pattern(text) == letters
    except ValueError:
        ok = False
    return text if ok else letters


# ------------------------------------------------------------------------------------------------ families
