"""Resolve a card's layer pattern into one concrete description per layer."""

from __future__ import annotations

from dataclasses import dataclass

from roofline.cards.model import STANDARD_LAYER_TYPES, Architecture


@dataclass(frozen=True)
class Layer:
    index: int
    mixer: str  # full | sliding | chunked | mla | compressed | mamba1 | mamba2 | deltanet | parallel | none
    ffn: str  # dense | moe | none
    num_heads: int = 0
    num_kv_heads: int = 0
    head_dim: int = 0
    window: int | None = None  # tokens attended (and cached) on sliding layers; the chunk on chunked layers
    k_eq_v: bool = False
    compress_ratio: int | None = None  # compressed layers: tokens per cached entry
    indexer: bool = False  # compressed layers: top-k sparse over the entries (CSA)

    @property
    def is_attention(self) -> bool:
        """A GQA/MHA attention block with a per-token K/V cache (parallel hybrids have one beside their Mamba)."""
        return self.mixer in ("full", "sliding", "chunked", "parallel")

    @property
    def has_mamba2(self) -> bool:
        return self.mixer in ("mamba2", "parallel")

    @property
    def blocks(self) -> int:
        """Residual blocks in the layer: a mixer and an FFN (2), or one of them (Nemotron-H 'M', 'E', '-' layers)."""
        return (self.mixer != "none") + (self.ffn != "none")


def norms_in_layer(arch: Architecture, layer: Layer) -> int:
    """RMSNorms a layer applies: the card's `norms_per_layer` for two-block layers (2 pre-norms; 4 with Gemma's
    sandwich norms), one for a single-block layer."""
    return arch.norms_per_layer if layer.blocks == 2 else 1


def resolve_layers(arch: Architecture) -> list[Layer]:
    """One Layer per decoder layer, in order, with 'auto' FFNs and per-type head overrides applied."""
    types = {**STANDARD_LAYER_TYPES, **arch.layer_types}
    first_dense = arch.moe.first_dense_layers if arch.moe else 0
    out = []
    for i, letter in enumerate(arch.pattern_letters()):
        lt = types[letter]
        ffn = lt.ffn
        if ffn == "auto":
            ffn = "moe" if arch.moe is not None and i >= first_dense else "dense"
        att = arch.attention
        heads = kv = hd = 0
        if lt.mixer in ("full", "sliding", "chunked", "parallel", "compressed") and att is not None:
            heads = att.num_heads
            kv = lt.num_kv_heads or att.num_kv_heads
            hd = lt.head_dim or att.head_dim
        elif lt.mixer == "mla" and arch.attention is not None:
            heads = arch.attention.num_heads
        window = None
        if lt.mixer == "sliding" and att is not None:
            window = att.sliding_window
        elif lt.mixer == "chunked":
            # a chunked layer never holds or attends more than one chunk: sized like a window of chunk tokens
            window = att.attention_chunk_size
        out.append(Layer(i, lt.mixer, ffn, heads, kv, hd, window, lt.k_eq_v, lt.compress_ratio, lt.indexer))
    return out


def layer_summary(layers: list[Layer]) -> str:
    """'40 full · 40 sliding/1024 + MoE' style summary of what the layers are, in first-seen order."""
    counts: dict[str, int] = {}
    for lay in layers:
        mixer = f"{lay.mixer}/{lay.window}" if lay.window else lay.mixer
        if lay.compress_ratio:
            mixer += f"/{lay.compress_ratio}" + ("+topk" if lay.indexer else "")
        if lay.is_attention and lay.num_kv_heads != lay.num_heads:
            mixer += f" gqa {lay.num_heads}:{lay.num_kv_heads}"
        key = mixer if lay.ffn in ("none", "dense") and lay.mixer != "none" else f"{mixer}+{lay.ffn}"
        key = key.replace("none+", "")
        counts[key] = counts.get(key, 0) + 1
    return " · ".join(f"{n}× {k}" for k, n in counts.items())
