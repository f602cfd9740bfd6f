"""config.json dense decoder families released 2024-26: OLMo 3, ERNIE 4.5, Hunyuan dense, Apertus, Arcee AFM,
Granite SWA, Helium, StableLM, VaultGemma, Jais 2, CWM, nanochat, Youtu-LLM (MLA), IQuest-Coder, Hy3 (MoE) and
Bamba (Mamba-2 + attention). Liquid LFM2 is not here: its gated short-convolution layers are no mixer kind a card
has (neither attention nor a state-space or DeltaNet recurrence)."""

from __future__ import annotations

from roofline.importers.hf_decoder import _decoder, _dense_family
from roofline.importers.hf_fields import _Fields
from roofline.importers.hf_parts import (
    BAMBA_MAMBA_KEYS,
    _alternating_sliding,
    _attention,
    _ffn,
    _mamba2,
    _mla,
    _mla_attention,
    _mlp_layer_types,
    _moe,
    _ntk_alpha_rope,
    _num_layers,
    _rope,
    _sliding,
)


def _every_fourth_full(c: _Fields, n: int) -> list[bool]:
    """Granite SWA and CWM without `layer_types`: layer 0 and every 4th after it full, the rest sliding."""
    return [i % 4 != 0 for i in range(n)]


def _every_fourth_full_last(c: _Fields, n: int) -> list[bool]:
    """OLMo 3 without `layer_types`: three sliding layers, then a full one (layers 3, 7, ...)."""
    return [(i + 1) % 4 != 0 for i in range(n)]


def _plain(arch: dict) -> dict:
    """The dense MLP as up -> activation -> down (no gate projection)."""
    arch["ffn"]["gated"] = False
    return arch


def _olmo3(c: _Fields, notes: list[str]) -> dict:
    """OLMo 3: OLMo 2's blocks (norms after attention and after the MLP, QK-norm over all heads) with 3 sliding : 1
    full layers. Its q/k norms span num_heads x head_dim and num_kv_heads x head_dim weights; counted per head
    (2 x head_dim), < 0.01% of the 7B."""
    notes.append("q_norm/k_norm span all heads; counted as per-head QK-norm")
    return _dense_family(c, sliding=_every_fourth_full_last, qk_norm=True, default_theta=500000.0)


def _ernie4_5(c: _Fields, notes: list[str]) -> dict:
    """ERNIE 4.5 dense: Llama shapes, `use_bias` on q, k, v, o and the SwiGLU MLP (read through ALIASES),
    tied embeddings by default, `head_dim` given (0.3B: 16 x 128 over 1,024)."""
    return _dense_family(c, default_theta=500000.0, tie_default=True)


def _hunyuan_dense(c: _Fields, notes: list[str]) -> dict:
    """Hunyuan dense (0.5B-7B): GQA with per-head RMSNorm on queries and keys (query_layernorm, key_layernorm,
    head_dim each), `attention_bias` on q/k/v/o, SwiGLU MLP. Its 'dynamic' RoPE with a fixed `alpha` (NTK-alpha)
    only stretches the base, to theta x alpha ^ (head_dim / (head_dim - 2)): a plain RoPE of that theta."""
    arch = _dense_family(c, qk_norm=True, default_theta=10000.0)
    arch["rope"] = _ntk_alpha_rope(c, arch["rope"], arch["attention"]["head_dim"], notes)
    return arch


def _apertus(c: _Fields, notes: list[str]) -> dict:
    """Apertus: GQA with per-head QK-norm and an ungated MLP (up, xIELU, down: two [hidden, intermediate]
    matrices). xIELU is elementwise with two learned scalars a layer (not counted); the card models it as squared
    ReLU, its nearest activation (quadratic for positive inputs)."""
    arch = _plain(_dense_family(c, qk_norm=True, default_theta=12_000_000.0))
    if arch["ffn"]["activation"] == "xielu":
        arch["ffn"]["activation"] = "relu2"
        notes.append("xIELU activation modelled as squared ReLU (its 2 learned scalars a layer not counted)")
    return arch


def _arcee(c: _Fields, notes: list[str]) -> dict:
    """Arcee AFM: GQA with Llama's attention and an ungated squared-ReLU MLP (up, down; `mlp_bias`)."""
    return _plain(_dense_family(c, default_theta=10000.0))


def _granite_swa(c: _Fields, notes: list[str]) -> dict:
    """Granite SWA: Granite's Llama shapes with a learned sink per head, 1 full : 3 sliding layers (`layer_types`),
    `attention_bias` on q/k/v/o, tied embeddings; muP multipliers are scalars."""
    arch = _dense_family(c, sliding=_every_fourth_full, default_theta=10000.0, tie_default=True)
    arch["attention"]["sinks"] = True
    thetas = c.list("layer_rope_theta") or []
    if any(t == 0 for t in thetas):
        notes.append(f"{sum(t == 0 for t in thetas)} layers use no positional encoding (layer_rope_theta 0)")
    if len({t for t in thetas if t}) > 1:
        notes.append("layers use different rope thetas (layer_rope_theta); the card's rope section has the first")
        arch["rope"]["theta"] = float(next(t for t in thetas if t))
    return arch


def _helium(c: _Fields, notes: list[str]) -> dict:
    """Helium: Llama shapes, `attention_bias` on q/k/v only (o_proj [hidden, hidden] has none)."""
    arch = _dense_family(c, default_theta=100000.0)
    arch["attention"]["o_bias"] = False
    return arch


def _stablelm(c: _Fields, notes: list[str]) -> dict:
    """StableLM (3B-4E1T, 2 1.6B/12B): LayerNorms (biases not counted, 2 x hidden each), q/k/v bias from
    `use_qkv_bias`, o_proj [hidden, hidden] unbiased, SwiGLU MLP, RoPE on `partial_rotary_factor` of each head;
    one norm feeds attention and MLP in parallel with `use_parallel_residual`. `qk_layernorm` LayerNorms are one
    per head (heads x head_dim); counted per head."""
    parallel = c.bool("use_parallel_residual", False)
    arch = _dense_family(c, qkv_bias=c.bool("use_qkv_bias", False), qk_norm=c.bool("qk_layernorm", False),
                         norms_per_layer=1 if parallel else 2, default_theta=10000.0)
    arch["attention"]["o_bias"] = False
    notes.append("LayerNorm biases not counted" + ("; q/k LayerNorms (one per head) counted per head"
                                                   if arch["attention"]["qk_norm"] else ""))
    return arch


def _vaultgemma(c: _Fields, notes: list[str]) -> dict:
    """VaultGemma: Gemma 2's attention (sliding and global layers alternating, layer 0 sliding) with two pre-norms
    a layer (no post-norms), GeGLU (tanh), tied embeddings; the soft-caps are scalars."""
    return _dense_family(c, sliding=_alternating_sliding, default_theta=10000.0, tie_default=True)


def _jais2(c: _Fields, notes: list[str]) -> dict:
    """Jais 2: LayerNorms (biases not counted), `attention_bias` on q/k/v/o, an ungated squared-ReLU MLP with
    `mlp_bias` (up, down)."""
    notes.append("LayerNorm biases not counted")
    return _plain(_dense_family(c, default_theta=10000.0))


def _cwm(c: _Fields, notes: list[str]) -> dict:
    """CWM: Llama 3 shapes (no attention biases), 1 full : 3 sliding layers, layer 0 full (`layer_types`)."""
    return _dense_family(c, sliding=_every_fourth_full, qkv_bias=False, default_theta=1_000_000.0)


def _nanochat(c: _Fields, notes: list[str]) -> dict:
    """nanochat: MHA (or GQA) with weightless RMSNorms everywhere (before each block, on q/k, after the embedding
    and at the end) and an ungated squared-ReLU MLP (fc1, fc2); the logit soft-cap is a scalar."""
    notes.append("RMSNorms carry no weights (the card still counts hidden for the final norm)")
    return _plain(_dense_family(c, default_theta=10000.0, norms_per_layer=0))


def _youtu(c: _Fields, notes: list[str]) -> dict:
    """Youtu-LLM: DeepSeek-V3's multi-head latent attention (q LoRA, kv LoRA + shared rope key) on every layer with
    a dense SwiGLU MLP; tied embeddings."""
    n = _num_layers(c)
    if c.bool("attention_bias", False):
        raise c.error("attention_bias", "is set; MLA projection biases are not modelled")
    mla = _mla(c)
    return _decoder(c, mixers=["mla"] * n, ffns=["dense"] * n, attention=_mla_attention(c, mla), ffn=_ffn(c), mla=mla,
                    rope=_rope(c, 10000.0), tie_default=True)


def _iquestcoder(c: _Fields, notes: list[str]) -> dict:
    """IQuest-Coder: Llama shapes (GQA, `attention_bias`, `mlp_bias`, `head_dim`)."""
    return _dense_family(c, default_theta=10000.0)


def _hy_v3_default_ffns(c: _Fields, n: int) -> list[str]:
    """Hy3 without `mlp_layer_types`: layer 0 dense, the rest MoE."""
    return ["dense"] + ["moe"] * (n - 1)


def _hy_v3(c: _Fields, notes: list[str]) -> dict:
    """Hy3: GQA with per-head QK-norm; MoE on `mlp_layer_types` 'sparse' layers, each `num_experts` routed experts
    `moe_intermediate_size` wide plus `num_shared_experts` shared ones of that width; a sigmoid router [experts,
    hidden] whose e_score_correction_bias is a buffer (not counted); dense SwiGLU layers `intermediate_size` wide."""
    n = _num_layers(c)
    flags, window = _sliding(c, n, None)
    ffns = _mlp_layer_types(c, n, _hy_v3_default_ffns)
    moe = {**_moe(c, expert_size_keys=("moe_intermediate_size",)),
           "num_shared_experts": c.int("num_shared_experts", default=1), "shared_expert_intermediate_size": None}
    notes.append("e_score_correction_bias (a buffer) not counted")
    return _decoder(c, mixers=["sliding" if s else "full" for s in flags], ffns=ffns,
                    attention=_attention(c, qk_norm=True, window=window), ffn=_ffn(c) if "dense" in ffns else None,
                    moe=moe if "moe" in ffns else None, rope=_rope(c, 11_158_840.0))


def _bamba(c: _Fields, notes: list[str]) -> dict:
    """Bamba: attention on `attn_layer_indices`, Mamba-2 (Bamba names: mamba_n_heads x mamba_d_head, mamba_d_state,
    gated RMSNorm) on the other layers, each followed by a SwiGLU MLP; RoPE on `partial_rotary_factor` of each head.
    Mamba projection biases (`mamba_proj_bias`) are refused; the card counts the conv1d bias."""
    n = _num_layers(c)
    if c.bool("mamba_proj_bias", False):
        raise c.error("mamba_proj_bias", "is set; Mamba-2 projection biases are not modelled")
    attn = set(c.list("attn_layer_indices") or [])
    mixers = ["full" if i in attn else "mamba2" for i in range(n)]
    if not c.bool("mamba_conv_bias", True):
        notes.append("conv1d has no bias (counted anyway: conv channels per layer)")
    notes.append("hybrid: Mamba-2 layers with attention on attn_layer_indices")
    return _decoder(c, mixers=mixers, ffns=["dense"] * n, attention=_attention(c) if attn else None, ffn=_ffn(c),
                    mamba2=_mamba2(c, BAMBA_MAMBA_KEYS) if len(attn) < n else None, rope=_rope(c, 10000.0))


FAMILIES: dict = {  # model_type -> (family, function), merged into hf_families._FAMILIES
    "olmo3": ("olmo", _olmo3),
    "ernie4_5": ("ernie", _ernie4_5),
    "hunyuan_v1_dense": ("hunyuan", _hunyuan_dense),
    "apertus": ("apertus", _apertus),
    "arcee": ("arcee", _arcee),
    "granite_swa": ("granite", _granite_swa),
    "helium": ("helium", _helium),
    "stablelm": ("stablelm", _stablelm),
    "vaultgemma": ("gemma", _vaultgemma),
    "jais2": ("jais", _jais2),
    "cwm": ("cwm", _cwm),
    "nanochat": ("nanochat", _nanochat),
    "youtu": ("youtu", _youtu),
    "iquestcoder": ("iquest", _iquestcoder),
    "hy_v3": ("hunyuan", _hy_v3),
    "bamba": ("bamba", _bamba),
}
# transformers' config defaults for fields released configs leave out
DEFAULTS: dict = {
    "jais2": {"attention_bias": True, "mlp_bias": True},
    "arcee": {"hidden_act": "relu2"},
    "nanochat": {"hidden_act": "relu2"},
    "apertus": {"hidden_act": "xielu"},
    "vaultgemma": {"hidden_activation": "gelu_pytorch_tanh", "head_dim": 256},
}
# a family's own names for standard fields: ERNIE 4.5's one `use_bias` covers attention and MLP
ALIASES: dict = {
    "ernie4_5": {"attention_bias": "use_bias", "mlp_bias": "use_bias"},
}
