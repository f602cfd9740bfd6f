"""Pieces of a card read from a transformers config: attention, FFN, RoPE, sliding layouts, MoE, MLA, Mamba-2."""

from __future__ import annotations

from typing import Any, Callable

from roofline.errors import CardError
from roofline.importers.hf_fields import _DTYPES, _Fields


def _num_layers(c: _Fields) -> int:
    return c.int("num_hidden_layers")


def _head_dim(c: _Fields) -> int:
    """`head_dim` where given (Qwen3, Gemma, gpt-oss: q width != hidden), else hidden / heads."""
    if c.has("head_dim") or "head_dim" in c.defaults:
        return c.int("head_dim")
    hidden, heads = c.int("hidden_size"), c.int("num_attention_heads")
    if heads <= 0:
        raise c.error("num_attention_heads", f"must be at least 1, got {heads}")
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
                "gelu_new": "gelu_tanh", "gelu_fast": "gelu_tanh", "gelu": "gelu", "relu2": "relu2", "relu": "relu"}


def _activation(c: _Fields, default: str = "silu") -> str:
    act = c.str("hidden_act", "hidden_activation", "mlp_hidden_act", "activation_function", default=default)
    return _ACTIVATIONS.get(act, act)


def _ffn(c: _Fields, gated: bool = True, activation: str | None = None, bias: bool | None = None,
         width: int | None = None) -> dict:
    """The dense MLP: `intermediate_size` wide unless `width` is given (GPT-2 style 4 x hidden)."""
    return {"intermediate_size": width or c.int("intermediate_size"), "activation": activation or _activation(c),
            "gated": gated, "bias": c.bool("mlp_bias", False) if bias is None else bias}


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


def _ntk_alpha_rope(c: _Fields, rope: dict, head_dim: int, notes: list[str]) -> dict:
    """Hunyuan's 'dynamic' RoPE with a fixed `alpha` (NTK-alpha) only stretches the base: a plain RoPE of theta x
    alpha ^ (head_dim / (head_dim - 2)). Other RoPE sections are returned as they are."""
    scaling = rope["scaling"] or {}
    alpha = scaling.get("alpha")
    if scaling.get("type") != "dynamic" or alpha is None or head_dim <= 2:
        return rope
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or alpha <= 0:
        raise c.error("rope_scaling", f"alpha must be a positive number, got {alpha!r}")
    theta = rope["theta"] * float(alpha) ** (head_dim / (head_dim - 2))
    notes.append(f"NTK-alpha RoPE (alpha {alpha:g}) folded into theta {theta:.6g}")
    return {**rope, "theta": theta, "scaling": None}


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
    """gpt-oss and Gemma 2 when `layer_types` is absent: sliding, full, sliding, ... (layer 0 sliding)."""
    return [i % 2 == 0 for i in range(n)]


_Layout = Callable[[_Fields, int], list[bool]]


def _sliding(c: _Fields, n: int, fallback: _Layout | None) -> tuple[list[bool], int | None]:
    """Which layers slide (a `layer_types` list wins over the family's own rule) and the window they use."""
    flags = _from_layer_types(c, n)
    if flags is None:
        flags = fallback(c, n) if fallback else [False] * n
    if not any(flags):
        return flags, None
    window = c.int("sliding_window")
    context = c.int("max_position_embeddings", default=None)
    if context is not None and window >= context:  # Phi-4-mini: a window as long as the context never slides
        return [False] * n, None
    return flags, window


# ------------------------------------------------------------------------------------------------ MoE, MLA, Mamba


def _moe(c: _Fields, *, expert_size_keys=("moe_intermediate_size", "intermediate_size"), gated: bool = True,
         expert_bias: bool = False, router_bias: bool = False) -> dict:
    experts = c.int("num_local_experts", "num_experts", "n_routed_experts")
    shared = c.int("moe_shared_expert_intermediate_size", "shared_expert_intermediate_size", "shared_intermediate_size",
                   default=None)
    return {
        "num_experts": experts,
        "experts_per_token": c.int("num_experts_per_tok", "experts_per_token"),
        "expert_intermediate_size": c.int(*expert_size_keys),
        # a shared width without a count (Qwen2-MoE, Granite-MoE-shared) is one shared expert that wide
        "num_shared_experts": c.int("n_shared_experts", default=1 if shared else 0),
        "shared_expert_intermediate_size": shared,
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


# config names of (state size, heads, head_dim): Nemotron-H's, and the Bamba-style ones of Granite-4.0-H and Falcon-H1
NEMOTRON_MAMBA_KEYS = ("ssm_state_size", "mamba_num_heads", "mamba_head_dim")
BAMBA_MAMBA_KEYS = ("mamba_d_state", "mamba_n_heads", "mamba_d_head")


def _mamba2(c: _Fields, keys: tuple[str, str, str] = NEMOTRON_MAMBA_KEYS, head_dim: int | None = None,
            gated_norm: bool = True) -> dict:
    state_key, heads_key, head_dim_key = keys
    return {
        "state_size": c.int(state_key),
        "num_heads": c.int(heads_key),
        "head_dim": head_dim if head_dim is not None else c.int(head_dim_key),
        "n_groups": c.int("n_groups", "mamba_n_groups", default=1),
        "conv_kernel": c.int("conv_kernel", "mamba_d_conv", default=4),
        "expand": c.int("expand", "mamba_expand", default=2),
        "chunk_size": c.int("chunk_size", "mamba_chunk_size", default=256),
        "state_dtype": _DTYPES.get(str(c.raw("mamba_ssm_cache_dtype", "")).removeprefix("torch.")),
        "gated_norm": gated_norm,
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


def _mla_attention(c: _Fields, mla: dict) -> dict:
    """The attention section of an MLA model: its query heads (and the KV heads transformers' config names, for the
    card's head count) at the nope + rope head width."""
    heads = c.int("num_attention_heads")
    return {"num_heads": heads, "num_kv_heads": c.int("num_key_value_heads", default=heads),
            "head_dim": mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"]}


def _mlp_layer_types(c: _Fields, n: int, fallback: Callable[[_Fields, int], list[str]]) -> list[str]:
    """transformers >= 5 `mlp_layer_types` ('dense' / 'sparse' per layer), else the family's own layout."""
    names = c.list("mlp_layer_types")
    if names is None:
        return fallback(c, n)
    if len(names) != n or any(name not in ("dense", "sparse") for name in names):
        raise c.error("mlp_layer_types", f"must list {n} entries of dense / sparse, got {names!r}")
    return ["moe" if name == "sparse" else "dense" for name in names]


def _letter_sliding(c: _Fields, n: int) -> list[bool]:
    """EXAONE's `sliding_window_pattern` letters repeat over the layers, 'L' local and 'G' global ('LLLG')."""
    pattern = c.str("sliding_window_pattern", default=None)
    if not c.has("sliding_window") or not pattern:
        return [False] * n
    if set(pattern) - {"L", "G"}:
        raise c.error("sliding_window_pattern", f"must be letters L (local) and G (global), got {pattern!r}")
    return [pattern[i % len(pattern)] == "L" for i in range(n)]


def _gemma_local_theta(c: _Fields, default: float | None = None) -> float:
    """The sliding layers' rope theta of Gemma 3 / 4: rope_parameters' 'sliding_attention' entry, else
    `rope_local_base_freq` (required unless `default` is given)."""
    params = c.raw("rope_parameters")
    if isinstance(params, dict) and isinstance(params.get("sliding_attention"), dict):
        return float(params["sliding_attention"].get("rope_theta", 10000.0))
    return c.float("rope_local_base_freq") if default is None else c.float("rope_local_base_freq", default=default)
