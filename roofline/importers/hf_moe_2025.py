"""config.json MoE families released 2025-26: DeepSeek-V4 (compressed CSA / HCA attention), Mistral Small 4, GLM-5
(MLA + DSA indexer), GLM-4.7-Flash (MLA), MiniMax-M2, ERNIE-4.5 MoE, dots.llm1, Solar Open, Hunyuan-A13B,
Command A+ (Cohere 2 MoE), K-EXAONE, Arcee Trinity (AFMoE)."""

from __future__ import annotations

from roofline.importers.hf_decoder import _decoder
from roofline.importers.hf_fields import _Fields
from roofline.importers.hf_parts import (_attention, _deepseek_ffns, _ffn, _letter_sliding, _mla, _mla_attention,
                                        _mlp_layer_types, _moe, _ntk_alpha_rope, _num_layers, _rope, _rope_scaling,
                                        _sliding)
from roofline.importers.hf_pattern import compress_pattern

# ------------------------------------------------------------------------------------------------ MLA + MoE


def _mla_moe(c: _Fields, notes: list[str], *, router_bias: bool, indexer: dict | None = None) -> dict:
    """DeepSeek-V3 shapes: MLA on every layer (queries through a `q_lora_rank` LoRA, one latent of `kv_lora_rank`
    plus a shared `qk_rope_head_dim` key cached per token), dense MLPs on the first layers, then routed experts
    `moe_intermediate_size` wide plus `n_shared_experts` of the same width; `num_nextn_predict_layers` MTP modules."""
    n = _num_layers(c)
    mla = _mla(c)
    if indexer is not None:
        mla["indexer"] = indexer
    attention = _mla_attention(c, mla)
    ffns = _mlp_layer_types(c, n, _deepseek_ffns)
    if router_bias:
        notes.append("router_bias = e_score_correction_bias")
    return _decoder(c, mixers=["mla"] * n, ffns=ffns, attention=attention, ffn=_ffn(c) if "dense" in ffns else None,
                    moe=_moe(c, expert_size_keys=("moe_intermediate_size",), router_bias=router_bias), mla=mla,
                    rope=_rope(c, 10000.0), mtp_layers=c.int("num_nextn_predict_layers", default=0))


def _mistral4(c: _Fields, notes: list[str]) -> dict:
    """Mistral Small 4 (text model of its mistral3 wrapper): DeepSeek-V3 shapes (MLA, 128 routed + 1 shared expert)
    with a plain softmax router (no correction bias), RoPE on the qk_rope_head_dim slice."""
    notes.append(f"routing: softmax scores, {c.raw('n_group', 1)} groups / top {c.raw('topk_group', 1)}")
    return _mla_moe(c, notes, router_bias=False)


def _glm4_moe_lite(c: _Fields, notes: list[str]) -> dict:
    """GLM-4.7-Flash: MLA (q LoRA, 512 latent + 64 rope key, 192 + 64 query heads, 256 value heads), one dense layer
    then 64 routed + 1 shared experts behind a sigmoid router with e_score_correction_bias."""
    return _mla_moe(c, notes, router_bias=True)


def _glm_moe_dsa(c: _Fields, notes: list[str]) -> dict:
    """GLM-5: GLM-4.7-Flash's MLA + MoE at 78 layers (3 dense) with DeepSeek-V3.2's lightning indexer (DSA:
    index_n_heads x index_head_dim from the q LoRA, one index key of index_head_dim cached per token, top
    index_topk). Layers whose `indexer_types` entry is 'shared' reuse the previous indexer's choice and have none."""
    indexer = {"num_heads": c.int("index_n_heads"), "head_dim": c.int("index_head_dim"), "topk": c.int("index_topk")}
    shared = sum(1 for t in c.list("indexer_types") or [] if t == "shared")
    if shared:
        notes.append(f"{shared} layers reuse the previous layer's indexer; counted with one of their own")
    return _mla_moe(c, notes, router_bias=True, indexer=indexer)


# ------------------------------------------------------------------------------------------------ DeepSeek-V4

_V4_TYPES = {"compressed_sparse_attention": "C", "heavily_compressed_attention": "H", "sliding_attention": "W"}
_V4_RATIOS = {4: "compressed_sparse_attention", 128: "heavily_compressed_attention", 0: "sliding_attention"}


def _v4_layer_types(c: _Fields, n: int) -> list[str]:
    """`layer_types` names, else legacy `compress_ratios` (0 / 4 / 128 per layer, one more entry for the MTP
    module), else transformers' default: two HCA layers, then HCA and CSA alternating."""
    names = c.list("layer_types")
    if names is None and c.list("compress_ratios") is not None:
        ratios = c.list("compress_ratios")[:n]
        bad = sorted({r for r in ratios if r not in _V4_RATIOS}, key=str)
        if bad:
            raise c.error("compress_ratios", f"has {bad}; DeepSeek-V4 layers compress by 0, 4 or 128")
        names = [_V4_RATIOS[r] for r in ratios]
    if names is None:
        names = ["heavily_compressed_attention"] * min(n, 2)
        names += ["compressed_sparse_attention" if i % 2 else "heavily_compressed_attention" for i in range(n - 2)]
    names = names[:n]
    if len(names) != n or any(name not in _V4_TYPES for name in names):
        raise c.error("layer_types", f"must list {n} entries of {', '.join(_V4_TYPES)}")
    if "sliding_attention" in names:
        raise c.error("layer_types", "has sliding-only DeepSeek-V4 layers (no compressor); the card's compressed "
                      "layers all pool KV, so these are not modelled")
    return names


def _v4_rates(c: _Fields) -> dict[str, int]:
    rates = c.raw("compress_rates") or {}
    if not isinstance(rates, dict):
        raise c.error("compress_rates", f"must be a mapping of layer type to ratio, got {rates!r}")
    return {"C": int(rates.get("compressed_sparse_attention", c.int("compress_rate_csa", default=4))),
            "H": int(rates.get("heavily_compressed_attention", c.int("compress_rate_hca", default=128)))}


def _v4_rope(c: _Fields, head_dim: int, rope_dim: int) -> dict:
    """The compressed layers' RoPE: YaRN (`rope_scaling`, or rope_parameters' 'compress' entry) on the trailing
    qk_rope_head_dim of each head."""
    params = c.raw("rope_parameters")
    nested = params.get("compress") if isinstance(params, dict) else None
    return {"theta": c.float("rope_theta", default=10000.0),
            "scaling": _rope_scaling(c.raw("rope_scaling") or nested or params),
            "partial_rotary_factor": rope_dim / head_dim}


def _deepseek_v4(c: _Fields, notes: list[str]) -> dict:
    """DeepSeek-V4: every layer compressed attention (CSA: 4 tokens pooled per cached entry, top-k lightning
    indexer; HCA: 128 pooled, dense over all entries; both keep a raw sliding window) with `num_attention_heads`
    query heads of `head_dim` from a q LoRA, one shared K=V head, a grouped low-rank output (o_groups x o_lora_rank)
    and a sink per head; every layer MoE (routed + shared experts `moe_intermediate_size` wide)."""
    n = _num_layers(c)
    names = _v4_layer_types(c, n)
    head_dim = c.int("head_dim")
    rope_dim = c.int("qk_rope_head_dim", default=None) or round(head_dim * c.float("partial_rotary_factor",
                                                                                    default=0.125))
    noaux = c.str("topk_method", default="noaux_tc") == "noaux_tc"
    attention = {"num_heads": c.int("num_attention_heads"), "num_kv_heads": c.int("num_key_value_heads", default=1),
                 "head_dim": head_dim}
    arch = _decoder(c, mixers=["full"] * n, ffns=["moe"] * n, attention=attention, ffn=None,
                    moe=_moe(c, expert_size_keys=("moe_intermediate_size",), router_bias=noaux),
                    rope=_v4_rope(c, head_dim, rope_dim), mtp_layers=c.int("num_nextn_predict_layers", default=0))
    rates = _v4_rates(c)
    letters = "".join(_V4_TYPES[name] for name in names)
    arch["layer_pattern"] = compress_pattern(letters)
    arch["layer_types"] = {x: {"mixer": "compressed", "ffn": "moe", "compress_ratio": rates[x], "indexer": x == "C"}
                           for x in sorted(set(letters))}
    arch["compressed"] = {"q_lora_rank": c.int("q_lora_rank"), "qk_rope_head_dim": rope_dim,
                          "o_groups": c.int("o_groups"), "o_lora_rank": c.int("o_lora_rank"),
                          "sliding_window": c.int("sliding_window"),
                          "indexer": {"num_heads": c.int("index_n_heads"), "head_dim": c.int("index_head_dim"),
                                      "topk": c.int("index_topk")}}
    hash_layers = c.int("num_hash_layers", default=3)
    notes.append(f"hyper-connections (hc_mult {c.raw('hc_mult', 4)}: <0.01% of weights) not counted; the first "
                 f"{hash_layers} MoE layers route by a token-id hash table (not a weight); experts use SwiGLU clamped "
                 f"at {c.float('swiglu_limit', default=10.0):g}; compressed layers use rope theta "
                 f"{c.float('compress_rope_theta', default=160000.0):g}")
    return arch


# ------------------------------------------------------------------------------------------------ GQA + MoE


def _minimax_m2(c: _Fields, notes: list[str]) -> dict:
    """MiniMax-M2: GQA (48 query / 8 KV heads of 128) with QK RMSNorm spanning all heads, RoPE on `rotary_dim` of
    each head; every layer 256 experts `intermediate_size` wide (top 8, sigmoid router with a correction bias), no
    shared expert. Its MTP modules are not in transformers' model."""
    n = _num_layers(c)
    attention = _attention(c, qk_norm=c.bool("use_qk_norm", True))
    rope = _rope(c, 10000.0)
    if c.has("rotary_dim"):
        rope["partial_rotary_factor"] = c.int("rotary_dim") / attention["head_dim"]
    notes.append("q_norm/k_norm span all heads; counted as per-head QK-norm; router_bias = e_score_correction_bias")
    return _decoder(c, mixers=["full"] * n, ffns=["moe"] * n, attention=attention, ffn=None,
                    moe=_moe(c, expert_size_keys=("intermediate_size",), router_bias=True), rope=rope)


def _ernie4_5_moe(c: _Fields, notes: list[str]) -> dict:
    """ERNIE-4.5 MoE: GQA; MoE on layers moe_layer_start_index..moe_layer_end_index (-1: the last) every
    `moe_layer_interval`, a dense MLP elsewhere; `moe_num_shared_experts` shared experts fused into one MLP as wide
    as that many experts; the router's e_score_correction_bias is a weight ([1, experts]). `use_bias` biases q/k/v/o
    and the MLPs (the shared experts' and lm_head's biases are not counted). Tied embeddings by default."""
    n = _num_layers(c)
    start, step = c.int("moe_layer_start_index", default=1), c.int("moe_layer_interval", default=1)
    end = c.int("moe_layer_end_index", default=-1)
    end = n - 1 if end == -1 else end
    ffns = ["moe" if (i + 1) % step == 0 and start <= i <= end else "dense" for i in range(n)]
    bias = c.bool("use_bias", False)
    if bias:
        notes.append("use_bias: shared-expert and lm_head biases not counted")
    return _decoder(c, mixers=["full"] * n, ffns=ffns, attention={**_attention(c, qkv_bias=bias), "o_bias": bias},
                    ffn=_ffn(c, bias=bias) if "dense" in ffns else None,
                    moe=_moe(c, expert_size_keys=("moe_intermediate_size",), router_bias=True),
                    rope=_rope(c, 500000.0), tie_default=True)


def _after_max_window(c: _Fields, n: int) -> list[bool]:
    """dots.llm1: a non-null `sliding_window` applies from layer `max_window_layers` on (none in dots.llm1)."""
    first = c.int("max_window_layers", default=n)
    return [c.has("sliding_window") and i >= first for i in range(n)]


def _dots1(c: _Fields, notes: list[str]) -> dict:
    """dots.llm1: GQA with per-head QK-norm, `first_k_dense_replace` dense layers, then routed experts plus
    `n_shared_experts` shared ones (one MLP that many experts wide) behind a sigmoid router with a correction bias."""
    n = _num_layers(c)
    flags, window = _sliding(c, n, _after_max_window)
    ffns = _deepseek_ffns(c, n)
    notes.append("router_bias = e_score_correction_bias")
    return _decoder(c, mixers=["sliding" if s else "full" for s in flags], ffns=ffns,
                    attention=_attention(c, qk_norm=True, window=window), ffn=_ffn(c) if "dense" in ffns else None,
                    moe=_moe(c, expert_size_keys=("moe_intermediate_size",), router_bias=True), rope=_rope(c, 10000.0))


def _solar_open(c: _Fields, notes: list[str]) -> dict:
    """Solar Open: GQA with q/k/v bias from `attention_bias` (o_proj none), every layer MoE: routed experts plus
    `n_shared_experts` shared ones behind a sigmoid router with a correction bias."""
    n = _num_layers(c)
    notes.append("router_bias = e_score_correction_bias")
    return _decoder(c, mixers=["full"] * n, ffns=["moe"] * n, attention={**_attention(c), "o_bias": False}, ffn=None,
                    moe=_moe(c, expert_size_keys=("moe_intermediate_size",), router_bias=True), rope=_rope(c, 10000.0))


# ------------------------------------------------------------------------------------------------ Hunyuan / Cohere


def _per_layer(c: _Fields, key: str, n: int, default=None) -> int:
    """A field given as one integer or one per layer (Hunyuan's moe_topk, num_experts): the card needs one value."""
    value = c.raw(key, default)
    values = value if isinstance(value, list) else [value]
    if isinstance(value, list) and len(value) not in (1, n) or len(set(values)) != 1 \
            or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values):
        raise c.error(key, f"must be one positive integer (or the same one for all {n} layers), got {value!r}")
    return values[0]


def _hunyuan_moe(c: _Fields, notes: list[str]) -> dict:
    """Hunyuan-A13B: GQA with per-head RMSNorm on queries and keys, `attention_bias` on q/k/v/o; every layer MoE:
    `num_experts` routed experts and one always-on shared MLP, all `intermediate_size` wide (transformers' model
    reads that width, not `moe_intermediate_size`), softmax router with no bias. Tied embeddings in the release.
    'dynamic' RoPE with a fixed `alpha` (NTK-alpha) is a plain RoPE of theta x alpha ^ (head_dim / (head_dim - 2))."""
    n = _num_layers(c)
    attention = _attention(c, qk_norm=True)
    width = c.int("intermediate_size")
    moe = {"num_experts": _per_layer(c, "num_experts", n, 1), "experts_per_token": _per_layer(c, "moe_topk", n, 1),
           "expert_intermediate_size": width, "num_shared_experts": 1, "shared_expert_intermediate_size": width,
           "gated": True, "expert_bias": False, "router_bias": False, "latent_size": None}
    if c.has("use_cla") and c.bool("use_cla", False):
        raise c.error("use_cla", "(cross-layer KV sharing) is not in transformers' Hunyuan model nor the card")
    rope = _ntk_alpha_rope(c, _rope(c, 10000.0), attention["head_dim"], notes)
    return _decoder(c, mixers=["full"] * n, ffns=["moe"] * n, attention=attention, ffn=None, moe=moe, rope=rope)


def _cohere2_moe_sliding(c: _Fields, n: int) -> list[bool]:
    """Command A+ without `layer_types`: the `first_k_dense_replace` dense layers slide except every
    `prefix_dense_sliding_window_pattern`-th; after them every `sliding_window_pattern`-th layer is global."""
    first = c.int("first_k_dense_replace", default=0)
    prefix, every = c.int("prefix_dense_sliding_window_pattern", default=1), c.int("sliding_window_pattern", default=4)
    return [(i + 1) % prefix != 0 if i < first else (i - first + 1) % every != 0 for i in range(n)]


def _cohere2_moe(c: _Fields, notes: list[str]) -> dict:
    """Command A+ (Cohere 2 MoE): Cohere 2's parallel block (attention and MLP off one norm, no QK-norm, tied
    embeddings, 3 sliding : 1 global layers) with routed experts `intermediate_size` wide behind a bias-free
    router, `num_shared_experts` fused into one MLP that many experts wide, and dense prefix layers
    (`mlp_layer_types` / `first_k_dense_replace`) `prefix_dense_intermediate_size` wide."""
    n = _num_layers(c)
    flags, window = _sliding(c, n, _cohere2_moe_sliding)
    ffns = _mlp_layer_types(c, n, _deepseek_ffns)
    shared = c.int("num_shared_experts", default=0)
    moe = {**_moe(c, expert_size_keys=("intermediate_size",)), "num_shared_experts": shared,
           "shared_expert_intermediate_size": c.int("intermediate_size") if shared else None}
    notes.append(f"router: {c.str('expert_selection_fn', default='softmax')}; shared experts combined by "
                 f"{c.str('shared_expert_combination_strategy', default='average')}")
    return _decoder(c, mixers=["sliding" if s else "full" for s in flags], ffns=ffns,
                    attention=_attention(c, window=window), moe=moe, rope=_rope(c, 10000.0), tie_default=True,
                    ffn=_ffn(c, width=c.int("prefix_dense_intermediate_size")) if "dense" in ffns else None,
                    norms_per_layer=1)


def _exaone_moe_sliding(c: _Fields, n: int) -> list[bool]:
    """K-EXAONE without `layer_types`: every `sliding_window_pattern`-th layer global (an int), or EXAONE 4's
    letters ('LLLG': L local, G global) repeated; none slide without a `sliding_window`."""
    if isinstance(c.raw("sliding_window_pattern"), str):
        return _letter_sliding(c, n)
    every = c.int("sliding_window_pattern", default=4)
    if not c.has("sliding_window") or not every:
        return [False] * n
    return [(i + 1) % every != 0 for i in range(n)]


def _exaone_moe(c: _Fields, notes: list[str]) -> dict:
    """K-EXAONE (EXAONE MoE): GQA with per-head QK-norm, 3 sliding : 1 global layers (global layers skip RoPE),
    dense `intermediate_size` MLPs on the first `first_k_dense_replace` layers (or `mlp_layer_types`), then routed
    experts plus `num_shared_experts` fused into one MLP that many experts wide, all `moe_intermediate_size` wide,
    behind a sigmoid router with an e_score_correction_bias. Its MTP module is not in transformers' model."""
    n = _num_layers(c)
    flags, window = _sliding(c, n, _exaone_moe_sliding)
    ffns = _mlp_layer_types(c, n, _deepseek_ffns)
    if c.int("num_nextn_predict_layers", default=0):
        notes.append("MTP module not counted (transformers' model drops it)")
    notes.append("router_bias = e_score_correction_bias")
    return _decoder(c, mixers=["sliding" if s else "full" for s in flags], ffns=ffns,
                    attention=_attention(c, qk_norm=True, window=window), ffn=_ffn(c) if "dense" in ffns else None,
                    moe=_moe(c, expert_size_keys=("moe_intermediate_size",), router_bias=True),
                    rope=_rope(c, 1_000_000.0))


def _afmoe(c: _Fields, notes: list[str]) -> dict:
    """Arcee Trinity (AFMoE): GQA with per-head QK-norm and a sigmoid output gate (gate_proj: hidden -> heads x
    head_dim), norms before and after attention and the MLP (four a layer), every `global_attn_every_n_layers`-th
    layer global and the rest sliding; `num_dense_layers` dense `intermediate_size` MLPs, then routed experts plus
    `num_shared_experts` fused into one MLP that many experts wide, all `moe_intermediate_size`, with a learned
    routing `expert_bias` (a weight, [num_experts])."""
    n = _num_layers(c)
    every = c.int("global_attn_every_n_layers", default=4)
    flags, window = _sliding(c, n, lambda f, k: [every > 0 and (i + 1) % every != 0 for i in range(k)])
    dense = c.int("num_dense_layers", default=1)
    ffns = ["dense" if i < dense else "moe" for i in range(n)]
    notes.append("router_bias = expert_bias")
    return _decoder(c, mixers=["sliding" if s else "full" for s in flags], ffns=ffns,
                    attention={**_attention(c, qk_norm=True, window=window), "output_gate": True},
                    ffn=_ffn(c) if "dense" in ffns else None, norms_per_layer=4,
                    moe=_moe(c, expert_size_keys=("moe_intermediate_size",), router_bias=True), rope=_rope(c, 10000.0))


FAMILIES: dict = {  # model_type -> (family, function), merged into hf_families._FAMILIES
    "deepseek_v4": ("deepseek", _deepseek_v4),
    "mistral4": ("mistral", _mistral4),
    "glm_moe_dsa": ("glm", _glm_moe_dsa),
    "glm4_moe_lite": ("glm", _glm4_moe_lite),
    "minimax_m2": ("minimax", _minimax_m2),
    "ernie4_5_moe": ("ernie", _ernie4_5_moe),
    "dots1": ("dots", _dots1),
    "solar_open": ("solar", _solar_open),
    "hunyuan_v1_moe": ("hunyuan", _hunyuan_moe),
    "cohere2_moe": ("cohere", _cohere2_moe),
    "exaone_moe": ("exaone", _exaone_moe),
    "afmoe": ("arcee", _afmoe),
}
DEFAULTS: dict = {  # model_type -> transformers' config defaults for fields released configs leave out
    "glm_moe_dsa": {"first_k_dense_replace": 3},  # GlmMoeDsaConfig: three dense layers, then MoE
    "glm4_moe_lite": {"first_k_dense_replace": 1},  # Glm4MoeLiteConfig: mlp_layer_types default dense, sparse, ...
    "deepseek_v4": {"head_dim": 512, "num_hash_layers": 3},
    "minimax_m2": {"head_dim": 128},
    "exaone_moe": {"first_k_dense_replace": 1, "n_shared_experts": 1, "sliding_window": 4096},  # ExaoneMoeConfig
    "afmoe": {"n_shared_experts": 2, "sliding_window": 1024, "head_dim": 128},  # AfmoeConfig
}
ALIASES: dict = {  # model_type -> {standard field: this family's own name}
    "ernie4_5_moe": {"num_experts": "moe_num_experts", "num_experts_per_tok": "moe_k",
                     "n_shared_experts": "moe_num_shared_experts"},
    "exaone_moe": {"n_shared_experts": "num_shared_experts"},
    "afmoe": {"n_shared_experts": "num_shared_experts"},
}
