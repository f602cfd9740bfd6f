"""Resident memory of a deployment: weights at their formats and the KV cache of every sequence."""

from __future__ import annotations

from .kv import kv_bytes
from .modelcard import ModelCard
from .ops import Formats
from .params import param_counts
from .formats import weight_format


def resident_weight_bytes(card: ModelCard, fmts: Formats) -> dict[str, float]:
    """Bytes per component as stored (tied embeddings once), at the formats the prediction uses."""
    return {c: n * weight_format(fmts.component_format(c)).bytes_per_value for c, n in param_counts(card).items()}


def kv_cache_bytes(card: ModelCard, tokens_per_sequence, batch, kv_quant: str) -> float:
    """KV cache (and recurrent state) of `batch` sequences holding `tokens_per_sequence` tokens each."""
    return batch * kv_bytes(card, tokens_per_sequence, kv_quant)


def max_concurrency(card: ModelCard, fmts: Formats, tokens_per_sequence: int, usable_bytes: float) -> int:
    """Sequences of `tokens_per_sequence` whose KV fits beside the weights (0 when the weights alone do not fit)."""
    free = usable_bytes - sum(resident_weight_bytes(card, fmts).values())
    per_seq = kv_bytes(card, tokens_per_sequence, fmts.kv_quant)
    return max(int(free // per_seq), 0) if per_seq > 0 else (10**9 if free >= 0 else 0)
