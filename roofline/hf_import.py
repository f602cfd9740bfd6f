"""Build a ModelCard from a transformers config.json (a plain dict; torch and transformers are never imported).

One shared decoder path reads the fields every supported family has (layers, hidden, heads, vocab, context, rope,
dtype); small per-family functions add what differs: biases, QK-norm, sliding-window layouts, MoE, MLA, Mamba-2.
The parameter count is derived from the shapes (params.py), not published, and the card says so.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from pydantic import BaseModel, ValidationError

from .errors import CardError, RooflineError
from .modelcard import STANDARD_LAYER_TYPES, Architecture, ModelCard, expand_pattern
from .params import active_param_counts, param_counts

_MISSING = object()

# ------------------------------------------------------------------------------------------------ reading fields


class _Fields:
    """Typed reads from one config mapping; a missing or mistyped field raises a one-line error naming it."""

    def __init__(self, data: dict, source: str, prefix: str = "", defaults: dict | None = None):
        self.data, self.source, self.prefix = data, source, prefix
        self.defaults = defaults or {}
        self.defaulted: list[str] = []  # family defaults used because the config left the field out

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def raw(self, key: str, default: Any = None) -> Any:
        if self.has(key):
            return self.data[key]
        if key in self.defaults:
            if f"{key}={self.defaults[key]}" not in self.defaulted:
                self.defaulted.append(f"{key}={self.defaults[key]}")
            return self.defaults[key]
        return default

    def error(self, key: str, problem: str) -> CardError:
        return CardError(self.source, "", f"'{self.prefix}{key}' {problem}")

    def _pick(self, keys: tuple[str, ...], default: Any) -> tuple[str, Any]:
        for key in keys:
            value = self.raw(key, _MISSING)
            if value is not _MISSING:
                return key, value
        if default is _MISSING:
            also = f" (also read as {', '.join(keys[1:])})" if len(keys) > 1 else ""
            raise CardError(self.source, "", f"missing '{self.prefix}{keys[0]}'{also}")
        return keys[0], default

    def int(self, *keys: str, default: Any = _MISSING) -> int:
        key, value = self._pick(keys, default)
        if value is None:
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
            raise self.error(key, f"must be an integer, got {value!r}")
        return int(value)

    def float(self, *keys: str, default: Any = _MISSING) -> float:
        key, value = self._pick(keys, default)
        if value is None:
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(key, f"must be a number, got {value!r}")
        return float(value)

    def bool(self, key: str, default: bool) -> bool:
        key, value = self._pick((key,), default)
        if not isinstance(value, bool):
            raise self.error(key, f"must be true or false, got {value!r}")
        return value

    def str(self, *keys: str, default: Any = _MISSING) -> str:
        key, value = self._pick(keys, default)
        if value is not None and not isinstance(value, str):
            raise self.error(key, f"must be a string, got {value!r}")
        return value

    def list(self, key: str) -> list | None:
        value = self.raw(key)
        if value is not None and not isinstance(value, list):
            raise self.error(key, f"must be a list, got {value!r}")
        return value


# ------------------------------------------------------------------------------------------------ shared pieces


def _num_layers(c: _Fields) -> int:
    return c.int("num_hidden_layers")


def _head_dim(c: _Fields) -> int:
    """`head_dim` where given (Qwen3, Gemma, gpt-oss: q width != hidden), else hidden / heads."""
    if c.has("head_dim") or "head_dim" in c.defaults:
        return c.int("head_dim")
    hidden, heads = c.int("hidden_size"), c.int("num_attention_heads")
    if hidden % heads:
        raise c.error("hidden_size", f"({hidden}) is not a multiple of num_attention_heads ({heads}); set head_dim")
    return hidden // heads


def _attention(c: _Fields, *, qkv_bias: bool | None = None, qk_norm: bool = False, sinks: bool = False,
               window: int | None = None) -> dict:
    """GQA attention. `attention_bias` puts a bias on q, k, v and o (Llama, Qwen3, Gemma, gpt-oss)."""
    bias = c.bool("attention_bias", False)
    heads = c.int("num_attention_heads")
    return {
        "num_heads": heads,
        "num_kv_heads": c.int("num_key_value_heads", default=heads),  # absent: multi-head attention
        "head_dim": _head_dim(c),
        "sliding_window": window,
        "qkv_bias": bias if qkv_bias is None else qkv_bias,
        "o_bias": bias,
        "qk_norm": qk_norm,
        "sinks": sinks,
    }


_ACTIVATIONS = {"silu": "silu", "swish": "silu", "gelu_pytorch_tanh": "gelu_tanh", "gelu_tanh": "gelu_tanh",
                "gelu": "gelu", "relu2": "relu2", "relu": "relu"}


def _activation(c: _Fields, default: str = "silu") -> str:
    act = c.str("hidden_act", "hidden_activation", "mlp_hidden_act", default=default)
    return _ACTIVATIONS.get(act, act)


def _ffn(c: _Fields, gated: bool = True, activation: str | None = None) -> dict:
    return {"intermediate_size": c.int("intermediate_size"), "activation": activation or _activation(c), "gated": gated,
            "bias": c.bool("mlp_bias", False)}


_SCALING_KEYS = {"rope_type": "type", "original_max_position_embeddings": "original_max_position"}


def _rope_scaling(raw: Any) -> dict | None:
    """rope_scaling (or new-style rope_parameters) -> card form: 'type', 'original_max_position', scalars only."""
    if not isinstance(raw, dict):
        return None
    out: dict[str, float | str] = {}
    for key, value in raw.items():
        if key in ("rope_theta", "partial_rotary_factor") or value is None or isinstance(value, (list, dict)):
            continue
        out[_SCALING_KEYS.get(key, key)] = str(value).lower() if isinstance(value, bool) else value
    if out.get("type") in (None, "default") and len(out) <= 1:
        return None
    return out


def _rope_parameters(c: _Fields) -> dict:
    """transformers >= 5 `rope_parameters`; per layer type for Gemma 3 (the full-attention entry is the global)."""
    params = c.raw("rope_parameters")
    if not isinstance(params, dict):
        return {}
    if isinstance(params.get("full_attention"), dict):
        return params["full_attention"]
    return params


def _rope(c: _Fields, default_theta: float) -> dict:
    params = _rope_parameters(c)
    if c.has("rope_theta") or "rope_theta" not in params:
        theta = c.float("rope_theta", default=default_theta)
    else:
        theta = float(params["rope_theta"])
    partial = c.float("partial_rotary_factor", default=params.get("partial_rotary_factor", 1.0))
    scaling = _rope_scaling(c.raw("rope_scaling") or params)
    return {"theta": theta, "scaling": scaling, "partial_rotary_factor": partial}


# ------------------------------------------------------------------------------------------------ sliding windows


def _from_layer_types(c: _Fields, n: int) -> list[bool] | None:
    """`layer_types` list: 'sliding_attention' / 'full_attention' per layer (gpt-oss, Gemma 3, new Qwen/Mistral)."""
    types = c.list("layer_types")
    if types is None:
        return None
    if len(types) != n:
        raise c.error("layer_types", f"has {len(types)} entries but num_hidden_layers is {n}")
    unknown = sorted({t for t in types if t not in ("sliding_attention", "full_attention")})
    if unknown:
        raise c.error("layer_types", f"has {unknown}; only sliding_attention and full_attention are supported")
    return [t == "sliding_attention" for t in types]


def _every_layer_sliding(c: _Fields, n: int) -> list[bool]:
    """Mistral / Mixtral: a non-null `sliding_window` applies to every layer."""
    return [c.has("sliding_window")] * n


def _qwen_sliding(c: _Fields, n: int) -> list[bool]:
    """Qwen2/3: `use_sliding_window` turns it on for layers at index >= `max_window_layers` (off in released models)."""
    if not (c.bool("use_sliding_window", False) and c.has("sliding_window")):
        return [False] * n
    first = c.int("max_window_layers", default=n)
    return [i >= first for i in range(n)]


def _gemma_sliding(c: _Fields, n: int) -> list[bool]:
    """Gemma 3: every `sliding_window_pattern`-th layer is global, the rest local (5:1 by default)."""
    every = c.int("sliding_window_pattern")
    return [(i + 1) % every != 0 for i in range(n)]


def _alternating_sliding(c: _Fields, n: int) -> list[bool]:
    """gpt-oss default when `layer_types` is absent: sliding, full, sliding, ... (layer 0 sliding)."""
    return [i % 2 == 0 for i in range(n)]


_Layout = Callable[[_Fields, int], list[bool]]


def _sliding(c: _Fields, n: int, fallback: _Layout | None) -> tuple[list[bool], int | None]:
    """Which layers slide (a `layer_types` list wins over the family's own rule) and the window they use."""
    flags = _from_layer_types(c, n)
    if flags is None:
        flags = fallback(c, n) if fallback else [False] * n
    if not any(flags):
        return flags, None
    return flags, c.int("sliding_window")


# ------------------------------------------------------------------------------------------------ MoE, MLA, Mamba


def _moe(c: _Fields, *, expert_size_keys=("moe_intermediate_size", "intermediate_size"), gated: bool = True,
         expert_bias: bool = False, router_bias: bool = False) -> dict:
    experts = c.int("num_local_experts", "num_experts", "n_routed_experts")
    return {
        "num_experts": experts,
        "experts_per_token": c.int("num_experts_per_tok", "experts_per_token"),
        "expert_intermediate_size": c.int(*expert_size_keys),
        "num_shared_experts": c.int("n_shared_experts", default=0),
        "shared_expert_intermediate_size": c.int("moe_shared_expert_intermediate_size",
                                                 "shared_expert_intermediate_size", default=None),
        "gated": gated,
        "expert_bias": expert_bias,
        "router_bias": router_bias,
        "latent_size": c.int("moe_latent_size", default=None),
    }


def _qwen3_moe_ffns(c: _Fields, n: int) -> list[str]:
    """Qwen3-MoE: dense MLP on `mlp_only_layers` and off the `decoder_sparse_step` grid; MoE elsewhere."""
    dense = set(c.list("mlp_only_layers") or [])
    step = c.int("decoder_sparse_step", default=1)
    return ["dense" if i in dense or (i + 1) % step else "moe" for i in range(n)]


def _deepseek_ffns(c: _Fields, n: int) -> list[str]:
    """DeepSeek-V3: the first `first_k_dense_replace` layers are dense, then MoE every `moe_layer_freq` layers."""
    first = c.int("first_k_dense_replace", default=0)
    freq = c.int("moe_layer_freq", default=1)
    return ["moe" if i >= first and i % freq == 0 else "dense" for i in range(n)]


def _mla(c: _Fields) -> dict:
    return {
        "q_lora_rank": c.int("q_lora_rank", default=None),
        "kv_lora_rank": c.int("kv_lora_rank"),
        "qk_nope_head_dim": c.int("qk_nope_head_dim"),
        "qk_rope_head_dim": c.int("qk_rope_head_dim"),
        "v_head_dim": c.int("v_head_dim"),
    }


def _mamba2(c: _Fields) -> dict:
    return {
        "state_size": c.int("ssm_state_size"),
        "num_heads": c.int("mamba_num_heads"),
        "head_dim": c.int("mamba_head_dim"),
        "n_groups": c.int("n_groups", "mamba_n_groups", default=1),
        "conv_kernel": c.int("conv_kernel", "mamba_d_conv", default=4),
        "expand": c.int("expand", "mamba_expand", default=2),
        "chunk_size": c.int("chunk_size", "mamba_chunk_size", default=256),
        "state_dtype": _DTYPES.get(str(c.raw("mamba_ssm_cache_dtype", "")).removeprefix("torch.")),
    }


_NEMOTRON_BLOCKS = {"M": ("mamba2", "none"), "E": ("none", "moe"), "*": ("full", "none"), "-": ("none", "dense")}
_NEMOTRON_NAMES = {"mamba": "M", "linear_attention": "M", "moe": "E", "attention": "*", "full_attention": "*",
                   "mlp": "-"}


def _nemotron_letters(c: _Fields) -> str:
    """`hybrid_override_pattern` ('MEM*E-') or the newer `layers_block_type` list ('mamba', 'moe', ...)."""
    if c.has("hybrid_override_pattern"):
        letters = c.str("hybrid_override_pattern").strip()
        bad = sorted(set(letters) - set(_NEMOTRON_BLOCKS))
        if bad:
            raise c.error("hybrid_override_pattern", f"has unknown letters {bad}; expected M, E, * or -")
    elif c.has("layers_block_type"):
        names = c.list("layers_block_type")
        bad = sorted({b for b in names if b not in _NEMOTRON_NAMES})
        if bad:
            raise c.error("layers_block_type", f"has unknown blocks {bad}; expected {', '.join(_NEMOTRON_NAMES)}")
        letters = "".join(_NEMOTRON_NAMES[b] for b in names)
    else:
        raise CardError(c.source, "", f"missing '{c.prefix}hybrid_override_pattern' (or layers_block_type)")
    n = c.int("num_hidden_layers", default=len(letters))
    if n != len(letters):
        raise c.error("hybrid_override_pattern", f"has {len(letters)} layers but num_hidden_layers is {n}")
    return letters


# ------------------------------------------------------------------------------------------------ layer pattern

_STANDARD = {(lt.mixer, lt.ffn): letter for letter, lt in STANDARD_LAYER_TYPES.items()}
_CUSTOM = {("full", "dense"): "D", ("sliding", "dense"): "T", ("mla", "dense"): "N", ("full", "moe"): "F",
           ("sliding", "moe"): "X", ("mla", "moe"): "Y", ("sliding", "none"): "W", ("mla", "none"): "V"}
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


def _decoder(c: _Fields, *, mixers: list[str], ffns: list[str], attention: dict | None, ffn: dict | None,
             moe: dict | None = None, mla: dict | None = None, mamba2: dict | None = None,
             rope: dict | None = None, tie_default: bool = False, norms_per_layer: int = 2,
             max_context_default: Any = _MISSING, mtp_layers: int = 0) -> dict:
    """The shared architecture: vocab, hidden, layers, context, tying, and the per-layer pattern."""
    pattern, custom, first_dense = _pattern(mixers, ffns, moe is not None)
    if moe is not None:
        moe = {**moe, "first_dense_layers": first_dense}
    if "dense" not in ffns:
        ffn = None  # MoE-only models: `intermediate_size` is the expert width or unused
    return {
        "vocab_size": c.int("vocab_size"),
        "hidden_size": c.int("hidden_size"),
        "num_layers": len(mixers),
        "attention": attention,
        "mla": mla,
        "ffn": ffn,
        "moe": moe,
        "mamba2": mamba2,
        "tie_embeddings": c.bool("tie_word_embeddings", tie_default),
        "max_context": c.int("max_position_embeddings", default=max_context_default),
        "rope": rope,
        "norms_per_layer": norms_per_layer,
        "layer_pattern": pattern,
        "layer_types": custom,
        "mtp_layers": mtp_layers,
    }


def _dense_family(c: _Fields, *, sliding=None, qkv_bias=None, qk_norm=False, default_theta=10000.0,
                  norms_per_layer=2, tie_default=False, max_context_default: Any = _MISSING) -> dict:
    n = _num_layers(c)
    flags, window = _sliding(c, n, sliding)
    return _decoder(
        c,
        mixers=["sliding" if s else "full" for s in flags],
        ffns=["dense"] * n,
        attention=_attention(c, qkv_bias=qkv_bias, qk_norm=qk_norm, window=window),
        ffn=_ffn(c),
        rope=_rope(c, default_theta),
        norms_per_layer=norms_per_layer,
        tie_default=tie_default,
        max_context_default=max_context_default,
    )


def _llama(c: _Fields, notes: list[str]) -> dict:
    return _dense_family(c, default_theta=10000.0)


def _mistral(c: _Fields, notes: list[str]) -> dict:
    return _dense_family(c, sliding=_every_layer_sliding, default_theta=10000.0)


def _qwen2(c: _Fields, notes: list[str]) -> dict:
    return _dense_family(c, sliding=_qwen_sliding, qkv_bias=True, default_theta=10000.0)  # bias on q, k, v only


def _qwen3(c: _Fields, notes: list[str]) -> dict:
    return _dense_family(c, sliding=_qwen_sliding, qk_norm=True, default_theta=10000.0)


# Gemma3TextConfig defaults: the released gemma-3 configs leave these out of `text_config`.
GEMMA3_DEFAULTS = {"vocab_size": 262208, "max_position_embeddings": 131072, "rope_theta": 1_000_000.0,
                   "rope_local_base_freq": 10000.0, "sliding_window_pattern": 6, "head_dim": 256,
                   "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": True}


def _gemma_local_theta(c: _Fields) -> float:
    params = c.raw("rope_parameters")
    if isinstance(params, dict) and isinstance(params.get("sliding_attention"), dict):
        return float(params["sliding_attention"].get("rope_theta", 10000.0))
    return c.float("rope_local_base_freq")


def _gemma3(c: _Fields, notes: list[str]) -> dict:
    """Gemma 3: 5 local : 1 global layers, QK-norm, four norms per layer, tied embeddings, GeGLU (tanh)."""
    arch = _dense_family(c, sliding=_gemma_sliding, qk_norm=True, default_theta=1_000_000.0, norms_per_layer=4,
                         tie_default=True)
    notes.append(f"sliding layers use rope theta {_gemma_local_theta(c):g} (the card's rope section is the global one)")
    return arch


def _mixtral(c: _Fields, notes: list[str]) -> dict:
    n = _num_layers(c)
    flags, window = _sliding(c, n, _every_layer_sliding)
    return _decoder(c, mixers=["sliding" if s else "full" for s in flags], ffns=["moe"] * n,
                    attention=_attention(c, window=window), ffn=None,
                    moe=_moe(c, expert_size_keys=("intermediate_size",)), rope=_rope(c, 1_000_000.0))


def _qwen3_moe(c: _Fields, notes: list[str]) -> dict:
    n = _num_layers(c)
    flags, window = _sliding(c, n, _qwen_sliding)
    ffns = _qwen3_moe_ffns(c, n)
    return _decoder(c, mixers=["sliding" if s else "full" for s in flags], ffns=ffns,
                    attention=_attention(c, qk_norm=True, window=window),
                    ffn=_ffn(c) if "dense" in ffns else None,
                    moe=_moe(c, expert_size_keys=("moe_intermediate_size",)), rope=_rope(c, 10000.0))


def _gpt_oss(c: _Fields, notes: list[str]) -> dict:
    """gpt-oss: biased attention with learned sinks; experts and router carry biases; clamped SwiGLU."""
    n = _num_layers(c)
    flags, window = _sliding(c, n, _alternating_sliding)
    if c.has("swiglu_limit"):
        notes.append(f"experts use SwiGLU clamped at {c.float('swiglu_limit'):g}")
    return _decoder(c, mixers=["sliding" if s else "full" for s in flags], ffns=["moe"] * n,
                    attention=_attention(c, sinks=True, window=window), ffn=None,
                    moe=_moe(c, expert_size_keys=("intermediate_size",), expert_bias=True, router_bias=True),
                    rope=_rope(c, 150000.0))


def _deepseek_v3(c: _Fields, notes: list[str]) -> dict:
    """DeepSeek-V3: MLA on every layer, first_k_dense_replace dense layers, routed + shared experts, MTP."""
    n = _num_layers(c)
    mla = _mla(c)
    heads = c.int("num_attention_heads")
    attention = {"num_heads": heads, "num_kv_heads": c.int("num_key_value_heads", default=heads),
                 "head_dim": mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"]}
    ffns = _deepseek_ffns(c, n)
    mtp = c.int("num_nextn_predict_layers", default=0)
    noaux = c.str("topk_method", default="greedy") == "noaux_tc"  # per-expert e_score_correction_bias
    notes.append(f"routing: {c.raw('scoring_func', 'softmax')} scores, {c.raw('topk_method', 'greedy')}, "
                 f"{c.raw('n_group', 1)} groups / top {c.raw('topk_group', 1)}"
                 + ("; router_bias = e_score_correction_bias" if noaux else ""))
    return _decoder(c, mixers=["mla"] * n, ffns=ffns, attention=attention,
                    ffn=_ffn(c) if "dense" in ffns else None,
                    moe=_moe(c, expert_size_keys=("moe_intermediate_size",), router_bias=noaux), mla=mla,
                    rope=_rope(c, 10000.0), mtp_layers=mtp)


def _nemotron_h(c: _Fields, notes: list[str]) -> dict:
    """Nemotron-H: one block per layer from the hybrid pattern (Mamba-2, MoE, attention, MLP); ReLU^2 MLPs."""
    letters = _nemotron_letters(c)
    mixers = [_NEMOTRON_BLOCKS[x][0] for x in letters]
    ffns = [_NEMOTRON_BLOCKS[x][1] for x in letters]
    act = _activation(c, default="relu2")
    gated = act not in ("relu2", "relu")
    notes.append("attention layers use no positional encoding (NoPE); router_bias = e_score_correction_bias")
    return _decoder(
        c, mixers=mixers, ffns=ffns,
        attention=_attention(c) if "full" in mixers else None,
        ffn=_ffn(c, gated=gated, activation=act) if "dense" in ffns else None,
        moe=_moe(c, expert_size_keys=("moe_intermediate_size", "intermediate_size"), gated=gated, router_bias=True)
        if "moe" in ffns else None,
        mamba2=_mamba2(c) if "mamba2" in mixers else None,
        rope=None,
    )


_FAMILIES: dict[str, tuple[str, Callable[[_Fields, list[str]], dict]]] = {
    "llama": ("llama", _llama),
    "mistral": ("mistral", _mistral),
    "mixtral": ("mistral", _mixtral),
    "qwen2": ("qwen", _qwen2),
    "qwen3": ("qwen", _qwen3),
    "qwen3_moe": ("qwen", _qwen3_moe),
    "gemma3": ("gemma", _gemma3),
    "gemma3_text": ("gemma", _gemma3),
    "gpt_oss": ("gpt-oss", _gpt_oss),
    "deepseek_v3": ("deepseek", _deepseek_v3),
    "nemotron_h": ("nemotron", _nemotron_h),
}
SUPPORTED_MODEL_TYPES = tuple(_FAMILIES)
_FAMILY_DEFAULTS = {"gemma3": GEMMA3_DEFAULTS, "gemma3_text": GEMMA3_DEFAULTS}

# ------------------------------------------------------------------------------------------------ weights, name

_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32",
           "float8_e4m3fn": "fp8", "float8_e5m2": "fp8"}
_MODULE_COMPONENTS = (("embed", "embedding"), ("lm_head", "lm_head"), ("attn", "attention"),
                      ("attention", "attention"), ("mixer", "mamba"), ("shared_expert", "shared_experts"),
                      ("router", "router"))


def _dtype(config: dict, notes: list[str]) -> str:
    dtype = config.get("torch_dtype") or config.get("dtype") or (config.get("text_config") or {}).get("torch_dtype")
    if dtype is None:
        notes.append("no torch_dtype in the config; weights assumed bf16")
        return "bf16"
    name = _DTYPES.get(str(dtype).removeprefix("torch."))
    if name is None:
        notes.append(f"torch_dtype '{dtype}' not recognised; weights assumed bf16")
        return "bf16"
    return name


def _unconverted(qc: dict, base: str) -> dict[str, str]:
    """Components `modules_to_not_convert` keeps at the checkpoint dtype (lm_head and embeddings always)."""
    out = {"embedding": base, "lm_head": base}
    for module in qc.get("modules_to_not_convert") or []:
        for needle, component in _MODULE_COMPONENTS:
            if needle in str(module):
                out[component] = base
    return out


def _weights(config: dict, notes: list[str]) -> dict[str, str]:
    """Default format from torch_dtype; quantization_config: fp8 -> fp8 (embeddings, head kept); mxfp4 -> experts."""
    base = _dtype(config, notes)
    qc = config.get("quantization_config")
    if not isinstance(qc, dict):
        return {"default": base}
    method = str(qc.get("quant_method", "")).lower()
    if method == "fp8":
        return {"default": "fp8", **_unconverted(qc, base)}
    if method == "mxfp4":
        return {"default": base, "experts": "mxfp4"}
    if method in ("awq", "gptq") and qc.get("bits") == 4:
        return {"default": "int4", **_unconverted(qc, base)}
    notes.append(f"quantization_config quant_method '{method}' not modelled; weights at {base} (use --quant)")
    return {"default": base}


def _slug(text: str) -> str:
    slug = re.sub(r"[^a-z0-9._-]+", "-", text.strip().lower()).strip("-.")
    return re.sub(r"-{2,}", "-", slug)


def _repo_id(config: dict) -> str | None:
    path = str(config.get("_name_or_path") or "").strip()
    if re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", path):
        return path
    return None


def _size(n: float) -> str:
    return f"{n / 1e9:.3g}b" if n >= 1e9 else f"{n / 1e6:.3g}m"


def _default_name(config: dict, model_type: str, total: int, active: float | None) -> str:
    """Slug of `_name_or_path`'s last part, else '<model_type>-<size>' (MoE: '-a<active>')."""
    path = str(config.get("_name_or_path") or "").rstrip("/\\")
    stem = re.split(r"[/\\]", path)[-1] if path else ""
    if _slug(stem):
        return _slug(stem)
    name = f"{model_type.replace('_', '-')}-{_size(total)}"
    return f"{name}-a{_size(active)}" if active is not None else name


# ------------------------------------------------------------------------------------------------ entry point


def _validated(schema: type[BaseModel], data: dict, source: str, where: str = ""):
    try:
        return schema.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(p) for p in (where, *first["loc"]) if p != "")
        raise CardError(source, loc, first["msg"].removeprefix("Value error, ")) from None


def _text_fields(config: dict, model_type: str, source: str) -> _Fields:
    """Gemma 3 (multimodal) nests the decoder's fields under `text_config`; the rest are flat."""
    defaults = _FAMILY_DEFAULTS.get(model_type)
    if model_type == "gemma3" and "text_config" in config:
        text = config["text_config"]
        if not isinstance(text, dict):
            raise CardError(source, "", "'text_config' must be a mapping of the text model's fields")
        return _Fields(text, source, prefix="text_config.", defaults=defaults)
    return _Fields(config, source, defaults=defaults)


def card_from_config(config: dict, name: str | None = None, source: str = "config.json") -> ModelCard:
    """A ModelCard from a transformers config.json dict; RooflineError (one line) when it cannot be read."""
    if not isinstance(config, dict):
        raise CardError(source, "", "a config.json must be a JSON object of fields")
    model_type = config.get("model_type")
    if model_type is None:
        raise CardError(source, "", "missing 'model_type'")
    if model_type not in _FAMILIES:
        raise RooflineError(f"unsupported model_type '{model_type}'; supported: {', '.join(SUPPORTED_MODEL_TYPES)};"
                            " write a card by hand, see README")
    family, build = _FAMILIES[model_type]
    fields = _text_fields(config, model_type, source)
    notes: list[str] = []
    arch = _validated(Architecture, build(fields, notes), source, "architecture")
    if fields.defaulted:
        notes.append(f"{model_type} defaults used for fields the config leaves out: {', '.join(fields.defaulted)}")
    total = sum(param_counts(arch).values())
    active = sum(active_param_counts(arch).values()) if arch.moe is not None else None
    repo = _repo_id(config)
    weights = _weights(config, notes)
    card = {
        "name": _slug(name) if name else _default_name(config, model_type, total, active),
        "aliases": [repo] if repo else [],
        "family": family,
        "source": {"hf_repo": repo, "shapes_from": source},
        "params": {"total": float(total), "active": float(active) if active else None,
                   "source": f"derived from {source} shapes (no published figure)"},
        "architecture": arch.model_dump(),
        "weights": weights,
        "notes": "; ".join([f"imported from {source} (model_type {model_type})", *notes]),
    }
    return _validated(ModelCard, card, source)
