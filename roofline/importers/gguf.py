"""A ModelCard from a GGUF file's header: the architecture from its metadata, the exact bytes from its tensor infos.

The metadata (`<arch>.block_count`, `.embedding_length`, `.attention.head_count`, ...; llama.cpp
src/llama-arch.cpp names them) is translated into the transformers config fields the config.json importer already
understands, so both importers share one set of family rules. Each tensor's ggml type gives its exact stored bytes
(a Q4_K_M file is Q4_K and Q6_K tensors); the card carries them per component in `stored_weight_bytes`, so predict,
fits and the engine allocator size the file as it is.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from roofline.cards.formats import WEIGHT_FORMATS, weight_format
from roofline.cards.model import ModelCard
from roofline.errors import CardError, RooflineError
from roofline.importers.checkpoint import attach_stored_bytes, bounded_int, slug
from roofline.importers.config_json import card_from_config
from roofline.importers.gguf_header import GGUFHeader, TensorInfo, read_gguf_header

# GGUF `general.architecture` -> transformers model_type (the config.json importer's families)
ARCH_MODEL_TYPES = {
    "llama": "llama", "mistral3": "mistral", "qwen2": "qwen2", "qwen3": "qwen3", "qwen3moe": "qwen3_moe",
    "gemma3": "gemma3_text", "gpt-oss": "gpt_oss", "deepseek2": "deepseek_v3", "phi3": "phi3", "olmo2": "olmo2",
    "glm4moe": "glm4_moe",
}
# ggml tensor types -> roofline weight formats where the names differ from the lower-cased type name
_GGML_FORMATS = {"F32": "fp32", "F16": "fp16", "BF16": "bf16", "F64": "fp32", "I8": "int8"}
# blk.N.<base>: per-layer norm tensors that the card counts in attention (QK-norm, MLA's latent norms)
_ATTENTION_NORMS = {"attn_q_norm", "attn_k_norm", "attn_q_a_norm", "attn_kv_a_norm"}


def _component(name: str) -> str:
    """The card component a GGUF tensor belongs to (llama.cpp tensor names: gguf/constants.py TENSOR_NAMES)."""
    first = name.split(".", 1)[0]
    if first == "token_embd":
        return "embedding"
    if first == "output":
        return "lm_head"
    if first != "blk":
        return "norms"  # output_norm, token_embd_norm, rope_freqs: small vectors outside the layers
    base = name.split(".")[2] if name.count(".") >= 2 else ""
    if base in _ATTENTION_NORMS or base.startswith("attn_") and "norm" not in base:
        return "attention"
    if "norm" in base:
        return "norms"
    if base in ("ffn_gate_inp", "exp_probs_b"):
        return "router"
    if "shexp" in base:
        return "shared_experts"
    if base.endswith("_exps"):
        return "experts"
    if base.startswith("ffn_"):
        return "ffn"
    if base.startswith("ssm_"):
        return "mamba"
    return "norms"


def _layer_index(name: str) -> int | None:
    m = re.match(r"blk\.(\d+)\.", name)
    return int(m[1]) if m else None


def _format_of(ggml_type: str) -> str:
    """The weight format a ggml type is; a type roofline has no format for takes the nearest GGUF format's bits
    (its bytes stay exact; only the math dtype follows the format)."""
    name = _GGML_FORMATS.get(ggml_type, ggml_type.lower())
    try:
        return weight_format(name).name
    except RooflineError:
        from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

        block, block_bytes = GGML_QUANT_SIZES[GGMLQuantizationType[ggml_type]]
        bits = 8.0 * block_bytes / block
        gguf_formats = [f for f in WEIGHT_FORMATS if f.quantizes_embeddings]
        return min(gguf_formats, key=lambda f: abs(f.bits_per_value - bits)).name


class _Meta:
    """Typed reads of `<arch>.<key>` metadata; a wrong type or an implausible size is one line naming the key."""

    def __init__(self, header: GGUFHeader, arch: str):
        self.header, self.arch = header, arch

    def get(self, key: str, default: Any = None) -> Any:
        return self.header.metadata.get(f"{self.arch}.{key}", default)

    def int(self, key: str, required: bool = False) -> int | None:
        """An integer, or for a per-layer array its one value (all layers equal)."""
        value = self.get(key)
        if value is None:
            if required:
                raise CardError(self.header.path, "", f"GGUF metadata '{self.arch}.{key}' is missing")
            return None
        if isinstance(value, list) and value:
            nonzero = {v for v in value if v}
            if len(nonzero) > 1:
                raise CardError(self.header.path, "", f"GGUF metadata '{self.arch}.{key}' differs per layer "
                                f"({sorted(nonzero)[:4]}...); per-layer sizes are not modelled, write a card by hand")
            value = nonzero.pop() if nonzero else 0
        return bounded_int(value, f"{self.arch}.{key}", self.header.path)

    def float(self, key: str) -> float | None:
        value = self.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
            raise CardError(self.header.path, "", f"GGUF metadata '{self.arch}.{key}' must be a number, got {value!r}")
        return float(value)


def _vocab_size(header: GGUFHeader, meta: _Meta, tensors: dict[str, TensorInfo]) -> int | None:
    """Rows of token_embd (ggml shape [hidden, vocab]), else `<arch>.vocab_size`, else the tokenizer's length."""
    embd = tensors.get("token_embd.weight")
    if embd is not None and len(embd.shape) == 2:
        return bounded_int(embd.shape[1], "token_embd.weight rows", header.path)
    if meta.get("vocab_size") is not None:
        return meta.int("vocab_size")
    tokens = header.metadata.get("tokenizer.ggml.tokens")
    length = getattr(tokens, "length", None) if not isinstance(tokens, list) else len(tokens)
    return bounded_int(length, "tokenizer.ggml.tokens length", header.path) if length else None


def _rope_fields(meta: _Meta, head_dim: int | None) -> dict:
    out: dict[str, Any] = {"rope_theta": meta.float("rope.freq_base")}
    rotary = meta.int("rope.dimension_count")
    if rotary and head_dim and rotary < head_dim:
        out["partial_rotary_factor"] = rotary / head_dim
    kind = meta.get("rope.scaling.type")
    if isinstance(kind, str) and kind not in ("none", ""):
        out["rope_scaling"] = {"rope_type": kind, "factor": meta.float("rope.scaling.factor"),
                               "original_max_position_embeddings": meta.int("rope.scaling.original_context_length")}
    return out


def _mla_fields(meta: _Meta) -> dict:
    """DeepSeek MLA: newer llama.cpp files store the absorbed widths in key_length and the per-head ones in
    key_length_mla / value_length_mla."""
    key = meta.int("attention.key_length_mla") or meta.int("attention.key_length", required=True)
    value = meta.int("attention.value_length_mla") or meta.int("attention.value_length", required=True)
    rope = meta.int("rope.dimension_count", required=True)
    return {"q_lora_rank": meta.int("attention.q_lora_rank"), "kv_lora_rank": meta.int("attention.kv_lora_rank"),
            "qk_rope_head_dim": rope, "qk_nope_head_dim": key - rope, "v_head_dim": value}


def _sliding_fields(meta: _Meta, layers: int) -> dict:
    window = meta.int("attention.sliding_window")
    if not window:
        return {}
    out: dict[str, Any] = {"sliding_window": window}
    pattern = meta.get("attention.sliding_window_pattern")
    if isinstance(pattern, list) and len(pattern) == layers and all(isinstance(p, bool) for p in pattern):
        out["layer_types"] = ["sliding_attention" if p else "full_attention" for p in pattern]
    elif isinstance(pattern, int) and not isinstance(pattern, bool) and pattern > 0:
        out["sliding_window_pattern"] = pattern
    return out


# the config.json field each GGUF metadata key (after '<arch>.') fills in, for errors that name the field
GGUF_KEYS = {"hidden_size": "embedding_length", "num_hidden_layers": "block_count",
             "num_attention_heads": "attention.head_count", "num_key_value_heads": "attention.head_count_kv",
             "head_dim": "attention.key_length", "intermediate_size": "feed_forward_length",
             "max_position_embeddings": "context_length", "sliding_window": "attention.sliding_window",
             "num_experts": "expert_count", "num_experts_per_tok": "expert_used_count",
             "moe_intermediate_size": "expert_feed_forward_length"}


def config_from_gguf(header: GGUFHeader) -> tuple[dict, str]:
    """GGUF metadata -> (a transformers-style config dict, the GGUF architecture name)."""
    arch = header.metadata.get("general.architecture")
    if not isinstance(arch, str):
        raise CardError(header.path, "", "GGUF metadata 'general.architecture' is missing")
    model_type = ARCH_MODEL_TYPES.get(arch)
    if model_type is None:
        raise RooflineError(f"{header.path}: GGUF architecture {arch!r} is not supported; supported: "
                            f"{', '.join(ARCH_MODEL_TYPES)}; write a card by hand (see README)")
    parts = header.metadata.get("split.count")
    if isinstance(parts, int) and not isinstance(parts, bool) and parts > 1:
        raise CardError(header.path, "", f"one part of a GGUF split in {parts} (split.count): its tensors are not the "
                                         "model's; merge the parts (llama-gguf-split --merge FIRST OUT) and give OUT")
    meta = _Meta(header, arch)
    tensors = {t.name: t for t in header.tensors}
    nextn = meta.int("nextn_predict_layers") or 0
    layers = meta.int("block_count", required=True) - nextn
    heads = meta.int("attention.head_count", required=True)
    if layers < 1 or heads < 1:
        what = (f"'{arch}.block_count' less '{arch}.nextn_predict_layers' is {layers}" if layers < 1
                else f"'{arch}.attention.head_count' is {heads}")
        raise CardError(header.path, "", f"GGUF metadata {what}; a model needs at least 1 layer and 1 head")
    kv_heads = meta.int("attention.head_count_kv")
    if kv_heads == 0:
        raise CardError(header.path, "", f"GGUF metadata '{arch}.attention.head_count_kv' is 0; attention needs at "
                                         "least 1 KV head (leave the key out when it equals head_count)")
    head_dim = meta.int("attention.key_length")
    experts = meta.int("expert_count") or 0
    if model_type == "llama" and experts:
        model_type = "mixtral"
    config = {
        "model_type": model_type, "torch_dtype": "bfloat16",  # formats come from the tensors, not from here
        "hidden_size": meta.int("embedding_length", required=True), "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": kv_heads or heads,
        "head_dim": head_dim, "intermediate_size": meta.int("feed_forward_length"),
        "vocab_size": _vocab_size(header, meta, tensors), "max_position_embeddings": meta.int("context_length"),
        "tie_word_embeddings": "output.weight" not in tensors, "num_nextn_predict_layers": nextn,
        # biases are seen in the tensors: an output-projection bias means q/k/v/o biases (Qwen2 has q/k/v only)
        "attention_bias": "blk.0.attn_output.bias" in tensors, "mlp_bias": "blk.0.ffn_up.bias" in tensors,
        **_rope_fields(meta, head_dim), **_sliding_fields(meta, layers),
    }
    if experts:
        expert_width = meta.int("expert_feed_forward_length")
        config.update({"num_experts": experts, "num_experts_per_tok": meta.int("expert_used_count"),
                       "moe_intermediate_size": expert_width,
                       "n_shared_experts": meta.int("expert_shared_count") or 0,
                       "first_k_dense_replace": meta.int("leading_dense_block_count") or 0})
        if model_type == "gpt_oss" and expert_width:
            config["intermediate_size"] = expert_width  # the gpt_oss family reads the expert width there
    if model_type == "deepseek_v3":
        config.update(_mla_fields(meta), num_key_value_heads=heads, head_dim=None)
        if any(name.endswith("exp_probs_b.bias") for name in tensors):
            config["topk_method"] = "noaux_tc"  # the per-expert score-correction bias
    return {k: v for k, v in config.items() if v is not None}, arch


def _stored_bytes(header: GGUFHeader, layers: int) -> tuple[Counter, Counter, Counter, int]:
    """Per component: exact bytes, elements and bytes per format; plus the bytes of MTP layers left out."""
    nbytes, elements, by_format = Counter(), Counter(), Counter()
    mtp = 0
    for t in header.tensors:
        layer = _layer_index(t.name)
        if layer is not None and layer >= layers:
            mtp += t.n_bytes  # next-token-prediction layers: not in the main forward pass
            continue
        component = _component(t.name)
        nbytes[component] += t.n_bytes
        elements[component] += t.n_elements
        by_format[(component, _format_of(t.ggml_type))] += t.n_bytes
    return nbytes, elements, by_format, mtp


def _file_type(header: GGUFHeader) -> str:
    """`general.file_type` as llama.cpp names it (MOSTLY_Q4_K_M), or 'file type not given'."""
    from gguf import LlamaFileType

    try:
        return LlamaFileType(header.metadata.get("general.file_type")).name
    except (ValueError, TypeError):
        return "file type not given"


def card_from_gguf(path: Path, name: str | None = None) -> ModelCard:
    """A ModelCard from a GGUF file: shapes from its metadata, exact bytes per component from its tensor infos."""
    path = Path(path)
    header = read_gguf_header(path)
    config, arch = config_from_gguf(header)
    source = f"{path.name} (GGUF header)"
    try:
        card = card_from_config(config, name=slug(name or path.stem) or "gguf-model", source=source)
    except RooflineError as err:  # it names the config.json field: say which GGUF key gives it
        key = next((g for c, g in GGUF_KEYS.items() if f"'{c}'" in str(err)), None)
        if key is None:
            raise
        raise RooflineError(f"{err} (GGUF metadata '{arch}.{key}')") from None
    nbytes, elements, by_format, mtp = _stored_bytes(header, card.architecture.num_layers)
    notes = [f"weights as stored in {path.name} ({_file_type(header)}, GGUF architecture {arch})"]
    if mtp:
        notes.append(f"{mtp:,} bytes of next-token-prediction layers left out")
    return attach_stored_bytes(card, nbytes, elements, by_format, notes, source)
