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
