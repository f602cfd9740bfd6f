"""What the GGUF and safetensors importers share: sane integers from untrusted headers, card names, and putting a
file's exact bytes per component (and the format that dominates each) on a card."""

from __future__ import annotations

import math
import re
from collections import Counter

from pydantic import ValidationError

from roofline.cards.model import ModelCard
from roofline.cards.schema import first_problem
from roofline.errors import CardError, shown
from roofline.sizing.params import param_counts

# Sizes in an untrusted header (layers, widths, heads, context) above this are refused before any shape is built:
# 2^31 is far above any released model's largest dimension (vocabularies ~ 2^18, contexts ~ 2^24).
MAX_DIMENSION = 1 << 31
# derived and stored element counts differing by more than this fraction get a note on the card
ELEMENT_MISMATCH = 0.01


def bounded_int(value: object, key: str, path: object) -> int:
    """An integer field of an untrusted header in [0, MAX_DIMENSION); one line naming the key otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or isinstance(value, float) and not math.isfinite(value) or value != int(value):
        raise CardError(path, "", f"'{key}' must be an integer, got {shown(value)}")
    if not 0 <= value < MAX_DIMENSION:
        raise CardError(path, "", f"'{key}' = {shown(value)} is not a plausible model size "
                                  f"(0 to {MAX_DIMENSION - 1:,})")
    return int(value)


IMPORTED_FROM = "imported from "  # the provenance note every importer starts its card's notes with


def assumed_notes(notes: str | None) -> str:
    """What an importer assumed or left out, for the user to read: a card's notes less the 'imported from ...'
    provenance (notes are joined with '; ', and no note holds one)."""
    return "; ".join(n for n in (notes or "").split("; ") if n and not n.startswith(IMPORTED_FROM))


def slug(text: str) -> str:
    """A card name from free text: lower case, runs of other characters -> '-'. '' when nothing is left."""
    out = re.sub(r"[^a-z0-9._-]+", "-", text.strip().lower()).strip("-.")
    return re.sub(r"-{2,}", "-", out)


def _dominant(by_format: Counter, component: str | None = None) -> str | None:
    """The format holding the most bytes (of one component, or of the whole file)."""
    totals: Counter = Counter()
    for (comp, fmt), n in by_format.items():
        if component is None or comp == component:
            totals[fmt] += n
    return max(totals, key=lambda f: (totals[f], f)) if totals else None


def attach_stored_bytes(card: ModelCard, nbytes: Counter, elements: Counter | None, by_format: Counter,
                        notes: list[str], source: str) -> ModelCard:
    """The card with the file's exact bytes per component and each component's dominant format.

    `nbytes`: bytes per component; `elements`: logical values per component where the file gives them (GGUF), for
    a note when the derived shapes disagree; `by_format`: bytes per (component, format). Bytes of a component the
    card's shapes do not have (a tensor kind the schema does not model) are charged to norms, so the card's weight
    bytes stay the file's."""
    derived = param_counts(card)
    nbytes, by_format = Counter(nbytes), Counter(by_format)
    for comp in [c for c in nbytes if not derived.get(c)]:
        notes.append(f"{nbytes[comp]:,} bytes of {comp} tensors the card's shapes do not have, counted under norms")
        nbytes["norms"] += nbytes.pop(comp)
        for key in [k for k in by_format if k[0] == comp]:
            by_format[("norms", key[1])] += by_format.pop(key)
    missing = [c for c, n in derived.items() if n and not nbytes.get(c)]
    if missing:
        notes.append(f"no tensors found for {', '.join(missing)}; sized from their format")
    for comp, n in sorted((elements or {}).items()):
        want = derived.get(comp, 0)
        if want and abs(n - want) > ELEMENT_MISMATCH * want:
            notes.append(f"{comp}: the file has {n:,} values, the shapes give {want:,}")
    default = _dominant(by_format) or card.weights["default"]
    weights = {"default": default}
    for comp in nbytes:
        fmt = _dominant(by_format, comp)
        if fmt and fmt != default:
            weights[comp] = fmt
    data = card.model_dump()
    data.update(weights=weights, stored_weight_bytes={c: int(n) for c, n in nbytes.items() if derived.get(c)},
                notes="; ".join(notes + [n for n in [card.notes] if n]))
    try:
        return ModelCard.model_validate(data)
    except ValidationError as err:
        loc, msg, _ = first_problem(err)
        raise CardError(source, loc, msg) from None
