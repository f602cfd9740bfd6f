"""Model card schema: the architecture as exact shapes, with a per-layer pattern for hybrid models."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictBool, StrictInt, field_validator, model_validator

from roofline.cards.formats import card_format, weight_format
from roofline.cards.layer_pattern import expand_pattern
from roofline.cards.schema import (
    MAX_LAYERS,
    Context,
    Experts,
    Heads,
    Layers,
    Small,
    Strict,
    Vocab,
    Width,
    card_name,
    comma_entries,
)
from roofline.cards.units import MAX_QUANTITY
from roofline.errors import RooflineError, shown

# full / sliding: GQA; chunked: Llama-4 local attention inside fixed chunks; mla: DeepSeek latent attention;
# compressed: DeepSeek-V4 CSA/HCA (pooled KV); mamba1 / mamba2 / deltanet: recurrent mixers with a constant state;
# parallel: Falcon-H1 attention and Mamba-2 side by side in one layer
MixerKind = Literal["full", "sliding", "chunked", "mla", "compressed", "mamba1", "mamba2", "deltanet", "parallel", "none"]
FfnKind = Literal["dense", "moe", "auto", "none"]
COMPONENTS = ("embedding", "attention", "mamba", "ffn", "router", "experts", "shared_experts", "lm_head", "norms")


def parse_weight_spec(spec: str, what: str = "--quant") -> dict[str, str]:
    """'q4_k_m' -> {'default': 'q4_k_m'}; 'ffn=nvfp4,default=bf16' -> per-component formats (canonical names).
    A bad spec raises RooflineError naming `what` (the option or card field it came from)."""
    out: dict[str, str] = {}
    for part in comma_entries(what, spec):
        component, eq, fmt = part.rpartition("=")
        if eq and not component.strip():  # '=mxfp4': an '=' with no component before it
            raise RooflineError(f"{what}: {part!r} names no component before '='; write {fmt.strip() or 'q4_k_m'} "
                                f"alone, or component=format (experts={fmt.strip() or 'mxfp4'})")
        component = component.strip() or "default"
        if eq and not fmt.strip():  # 'ffn=': a component with no format after '='
            raise RooflineError(f"{what}: {part!r} names no format after '='; write {component}=q4_k_m")
        if component not in ("default", *COMPONENTS):
            raise RooflineError(f"{what}: unknown component '{component}' in {spec!r}; use default or one of "
                                f"{', '.join(COMPONENTS)}")
        if component in out:  # 'fp8,q4_k_m' names the default twice; 'experts=a,experts=b' one component twice
            twice = "two formats for every component" if component == "default" else f"'{component}' twice"
            raise RooflineError(f"{what} {spec!r} gives {twice}; give one format, or component=format pairs "
                                "(experts=mxfp4,default=q8_0)")
        out[component] = weight_format(fmt).name
    if not out:
        raise RooflineError(f"{what}: empty format; e.g. --quant q4_k_m or --quant experts=mxfp4,default=q8_0")
    return out


class Rope(Strict):
    theta: float = Field(10000.0, gt=0)
    scaling: dict[str, float | str] | None = None  # e.g. {type: llama3, factor: 8, ...}; yarn; linear
    partial_rotary_factor: float = Field(1.0, gt=0, le=1)


class Attention(Strict):
    num_heads: Heads
    num_kv_heads: Heads
    head_dim: Width
    sliding_window: Context | None = None
    qkv_bias: StrictBool = False
    o_bias: StrictBool = False
    qk_norm: StrictBool = False
    sinks: StrictBool = False  # gpt-oss learned attention sinks: one scalar per head
    output_gate: StrictBool = False  # Qwen3-Next gated attention: q_proj also emits a per-channel sigmoid gate
    attention_chunk_size: Context | None = None  # Llama-4 'chunked' layers attend inside chunks this long

    @model_validator(mode="after")
    def _kv_heads_divide_heads(self):
        if self.num_kv_heads > self.num_heads or self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_kv_heads ({self.num_kv_heads}) must divide num_heads ({self.num_heads}): each KV "
                             "head serves a whole group of query heads")
        return self


class Indexer(Strict):
    """DeepSeek lightning indexer (DSA, V3.2; CSA, V4): scores every cached key with `num_heads` small heads of
    `head_dim`, then attention reads only the best `topk` entries per query. Its keys (head_dim per entry) are cached."""

    num_heads: Heads
    head_dim: Width
    topk: Context


class MLA(Strict):
    """DeepSeek multi-head latent attention; the cache holds kv_lora_rank + qk_rope_head_dim per token."""

    q_lora_rank: Width | None = None
    kv_lora_rank: Width
    qk_nope_head_dim: Width
    qk_rope_head_dim: Width
    v_head_dim: Width
    indexer: Indexer | None = None  # DeepSeek-V3.2 sparse attention (DSA)


class Compressed(Strict):
    """DeepSeek-V4 compressed attention, shared by its CSA and HCA layers. Heads, the one shared KV head (keys double
    as values) and head_dim come from the `attention` section; each layer type sets `compress_ratio` (tokens pooled
    into one cached entry) and `indexer` (CSA: top-k sparse over the entries; HCA: dense over all of them). Every
    layer also keeps the last `sliding_window` tokens uncompressed."""

    q_lora_rank: Width
    qk_rope_head_dim: Width
    o_groups: Small  # grouped low-rank output projection: o_groups blocks, each to o_lora_rank
    o_lora_rank: Width
    sliding_window: Context
    indexer: Indexer


class DeltaNet(Strict):
    """Gated DeltaNet linear attention (Qwen3-Next): per value head a key_head_dim x value_head_dim state matrix,
    plus a causal conv over q, k, v channels; constant size per sequence like Mamba."""

    num_key_heads: Heads
    num_value_heads: Heads
    key_head_dim: Width
    value_head_dim: Width
    conv_kernel: Small = 4
    state_dtype: str | None = None  # None = the KV-cache format

    @property
    def conv_channels(self) -> int:
        return 2 * self.num_key_heads * self.key_head_dim + self.num_value_heads * self.value_head_dim


class Mamba1(Strict):
    """Mamba-1 selective SSM (Jamba): state d_inner x state_size per layer plus a (conv_kernel - 1)-token conv state."""

    d_inner: Width
    state_size: Width
    conv_kernel: Small = 4
    dt_rank: Width
    inner_norms: StrictBool = False  # Jamba RMS-normalises dt, B and C inside the mixer
    state_dtype: str | None = None


# the FFN activations the predictor and the engine know (engine/model/modules.py ACTIVATIONS); swiglu_clamped is
# gpt-oss's SwiGLU with clamped inputs
Activation = Literal["silu", "gelu", "gelu_tanh", "relu", "relu2", "swiglu_clamped"]


class FFN(Strict):
    intermediate_size: Width
    activation: Activation = "silu"
    gated: StrictBool = True
    bias: StrictBool = False


class MoE(Strict):
    num_experts: Experts
    experts_per_token: Experts
    expert_intermediate_size: Width
    num_shared_experts: int = Field(0, ge=0, le=MAX_LAYERS)
    shared_expert_intermediate_size: int | None = Field(None, ge=0, le=1 << 20)  # total width of the shared expert(s)
    first_dense_layers: int = Field(0, ge=0, le=MAX_LAYERS)  # 'first_k_dense_replace'
    gated: StrictBool = True
    expert_bias: StrictBool = False
    router_bias: StrictBool = False
    latent_size: Width | None = None  # LatentMoE: experts run in this width; hidden<->latent projections

    @model_validator(mode="after")
    def _k_le_e(self):
        if self.experts_per_token > self.num_experts:
            raise ValueError("experts_per_token cannot exceed num_experts")
        return self


class Mamba2(Strict):
    state_size: Width
    num_heads: Heads
    head_dim: Width
    n_groups: Small = 1
    conv_kernel: Small = 4
    expand: Small = 2
    chunk_size: Context = 256
    state_dtype: str | None = None  # e.g. fp32 ('mamba_ssm_cache_dtype'); None = the KV-cache format
    # gated RMSNorm [d_inner] before out_proj; Falcon-H1 configs with 'mamba_rms_norm: false' gate with silu(z) only
    gated_norm: StrictBool = True

    @property
    def d_inner(self) -> int:
        return self.num_heads * self.head_dim


class LayerType(Strict):
    """One layer: a token mixer and an FFN. Overrides apply to this layer type only (e.g. Gemma-4 global layers)."""

    mixer: MixerKind
    ffn: FfnKind = "auto"
    num_kv_heads: Heads | None = None
    head_dim: Width | None = None
    k_eq_v: StrictBool = False  # keys reused as values: one projection and one cache tensor
    compress_ratio: Small | None = None  # compressed layers: tokens pooled into one cached entry
    indexer: StrictBool = False  # compressed layers: top-k sparse selection over the entries (DeepSeek-V4 CSA)


# Letters every card may use in `layer_pattern` without declaring them; Nemotron-H letters included.
STANDARD_LAYER_TYPES: dict[str, LayerType] = {
    "A": LayerType(mixer="full"),
    "S": LayerType(mixer="sliding"),
    "L": LayerType(mixer="mla"),
    "M": LayerType(mixer="mamba2", ffn="none"),
    "E": LayerType(mixer="none", ffn="moe"),
    "*": LayerType(mixer="full", ffn="none"),
    "-": LayerType(mixer="none", ffn="dense"),
}


class Architecture(Strict):
    vocab_size: Vocab
    hidden_size: Width
    num_layers: Layers
    attention: Attention | None = None
    mla: MLA | None = None
    ffn: FFN | None = None
    moe: MoE | None = None
    mamba2: Mamba2 | None = None
    compressed: Compressed | None = None
    deltanet: DeltaNet | None = None
    mamba1: Mamba1 | None = None
    tie_embeddings: StrictBool = False
    max_context: Context
    rope: Rope | None = None
    norms_per_layer: int = Field(2, ge=0, le=16)
    layer_pattern: str | None = None  # letters from STANDARD_LAYER_TYPES or layer_types; default: all 'A' (or 'L')
    layer_types: dict[str, LayerType] = {}
    mtp_layers: int = Field(0, ge=0, le=MAX_LAYERS)  # multi-token-prediction modules (not in the main forward pass)

    @model_validator(mode="after")
    def _consistent(self):
        letters = self.pattern_letters()
        if len(letters) != self.num_layers:
            raise ValueError(f"layer_pattern expands to {len(letters)} layers, num_layers is {self.num_layers}")
        types = {**STANDARD_LAYER_TYPES, **self.layer_types}
        unknown = sorted(set(letters) - set(types))
        if unknown:
            raise ValueError(f"layer_pattern uses undeclared letters {unknown}; declare them in layer_types")
        needs = {"full": ["attention"], "sliding": ["attention"], "chunked": ["attention"], "mla": ["attention", "mla"],
                 "mamba2": ["mamba2"], "compressed": ["attention", "compressed"], "deltanet": ["deltanet"],
                 "mamba1": ["mamba1"], "parallel": ["attention", "mamba2"]}
        for letter in set(letters):
            lt = types[letter]
            for section in needs.get(lt.mixer, []):
                if getattr(self, section) is None:
                    raise ValueError(f"layer type '{letter}' is {lt.mixer} but the card has no {section} section")
            if lt.mixer == "compressed" and lt.compress_ratio is None:
                raise ValueError(f"layer type '{letter}' is compressed but sets no compress_ratio")
            if lt.mixer == "chunked" and self.attention.attention_chunk_size is None:
                raise ValueError(f"layer type '{letter}' is chunked but attention.attention_chunk_size is not set")
            if lt.mixer == "sliding" and (self.attention is None or self.attention.sliding_window is None):
                raise ValueError(f"layer type '{letter}' is sliding but attention.sliding_window is not set")
            if lt.ffn == "moe" and self.moe is None:
                raise ValueError(f"layer type '{letter}' has an MoE FFN but the card has no moe section")
            if lt.ffn == "dense" and self.ffn is None:
                raise ValueError(f"layer type '{letter}' has a dense FFN but the card has no ffn section")
            if lt.ffn == "auto" and self.ffn is None and self.moe is None:
                raise ValueError(f"layer type '{letter}' has an FFN but the card has neither an ffn nor a moe section")
            if lt.num_kv_heads and self.attention is not None and self.attention.num_heads % lt.num_kv_heads:
                raise ValueError(f"layer type '{letter}': num_kv_heads {lt.num_kv_heads} must divide "
                                 f"attention.num_heads {self.attention.num_heads}")
        if self.moe is not None and self.moe.first_dense_layers:
            if self.moe.first_dense_layers > self.num_layers:
                raise ValueError(f"moe.first_dense_layers {self.moe.first_dense_layers} exceeds num_layers "
                                 f"{self.num_layers}")
            if self.ffn is None:
                raise ValueError("moe.first_dense_layers needs an ffn section (the dense layers' intermediate_size)")
        if self.moe is not None and not any(types[x].ffn == "moe" or types[x].ffn == "auto" and i >=
                                            self.moe.first_dense_layers for i, x in enumerate(letters)):
            raise ValueError("the card has a moe section but no layer uses it (moe.first_dense_layers, layer_pattern); "
                             "drop the moe section or give layers an MoE FFN")
        return self

    @property
    def moe_activation(self) -> str:
        """The experts' activation: the card's dense FFN's where it has one, else squared ReLU for ungated experts
        (Nemotron-H) and SiLU for gated ones."""
        if self.ffn is not None:
            return self.ffn.activation
        return "silu" if self.moe.gated else "relu2"

    def pattern_letters(self) -> str:
        if self.layer_pattern is None:
            return ("L" if self.mla is not None else "A") * self.num_layers
        return expand_pattern(self.layer_pattern)


class ParamCount(Strict):
    total: float = Field(gt=0, le=1e16)
    active: float | None = Field(None, gt=0, le=1e16)
    source: str
    includes_mtp: StrictBool = False  # the published figure counts multi-token-prediction modules (DeepSeek-V3: 685B)
    active_excludes_embedding: StrictBool = False  # the published active figure leaves out the embedding (gpt-oss)
    active_excludes_lm_head: StrictBool = False  # ... and the output projection too (GLM-4.5: decoder layers only)
    # the published active figure is only given to this unit (e.g. 1e9 for IBM's '9B active'): a derived count
    # within half of it matches, where that is wider than the 2% the card test allows otherwise
    active_rounded_to: float | None = Field(None, gt=0)
    # parameters in the published figure outside the text decoder the card models (e.g. a vision tower)
    other_params: float = Field(0.0, ge=0)
    other_params_source: str = ""


class Source(Strict):
    hf_repo: str | None = None
    shapes_from: str


class Checkpoint(Strict):
    """A published checkpoint of the model: its name (the mapping key, e.g. 'nvidia/Gemma-4-31B-IT-NVFP4') selects
    the card with these weight formats, written as --quant takes them ('ffn=nvfp4,default=bf16')."""

    weights: str
    source: str = Field(min_length=1)  # where the layout is stated: the checkpoint's quantization config or card

    @field_validator("weights")
    @classmethod
    def _spec(cls, v: str) -> str:
        try:
            parse_weight_spec(v, "weights")
        except RooflineError as err:
            raise ValueError(str(err)) from None
        return v


class ModelCard(Strict):
    name: str
    aliases: list[str] = []
    family: str
    source: Source
    params: ParamCount
    architecture: Architecture
    # native/default weight format per component; 'default' applies to the rest (e.g. gpt-oss experts: mxfp4)
    weights: dict[str, str] = {"default": "bf16"}
    # exact bytes per component in the file the card was imported from (GGUF tensor types, safetensors dtypes,
    # block scales included); used wherever a component keeps its native format (sizing/params.weight_bytes)
    stored_weight_bytes: dict[str, StrictInt] | None = None
    # published checkpoints whose layers are not all in one format: name -> formats as shipped
    checkpoints: dict[str, Checkpoint] = {}
    notes: str = ""

    @field_validator("name")
    @classmethod
    def _lowercase_name(cls, v: str) -> str:
        return card_name(v, "llama-3.1-8b")

    @field_validator("weights")
    @classmethod
    def _known_formats(cls, v: dict[str, str]) -> dict[str, str]:
        for component, fmt in v.items():
            if component != "default" and component not in COMPONENTS:
                raise ValueError(f"unknown component '{component}'; use default or one of {', '.join(COMPONENTS)}")
            card_format(fmt)
        if "default" not in v:
            raise ValueError("weights needs a 'default' format")
        return v

    @field_validator("stored_weight_bytes")
    @classmethod
    def _known_components(cls, v: dict[str, int] | None) -> dict[str, int] | None:
        for component, n in (v or {}).items():
            if component not in COMPONENTS:
                raise ValueError(f"unknown component '{component}'; use one of {', '.join(COMPONENTS)}")
            if isinstance(n, bool) or not 0 < n <= MAX_QUANTITY:
                raise ValueError(f"'{component}' bytes must be a whole number above 0 and at most {MAX_QUANTITY:g} "
                                 f"(leave out a component the file does not hold), got {shown(n)}")
        return v

    @property
    def is_moe(self) -> bool:
        return self.architecture.moe is not None
