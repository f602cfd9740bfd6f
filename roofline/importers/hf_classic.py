"""config.json families from before Llama's layout (GPT-2, GPT-J, GPT-NeoX, BLOOM, OPT, Falcon, StarCoder2): biased
non-gated MLPs, LayerNorms, learned or ALiBi positions, parallel attention and MLP blocks."""

from __future__ import annotations

from roofline.importers.hf_decoder import _decoder
from roofline.importers.hf_fields import _Fields
from roofline.importers.hf_parts import (_activation, _attention, _every_layer_sliding, _ffn, _num_layers, _rope,
                                        _sliding)


def _parallel_block_norms(c: _Fields) -> int:
    """Falcon: one LayerNorm feeds attention and MLP in parallel; new_decoder_architecture has one each
    (`num_ln_in_parallel_attn`, default 2); a sequential block has two."""
    if c.bool("new_decoder_architecture", False):
        return c.int("num_ln_in_parallel_attn", default=2)
    return 1 if c.bool("parallel_attn", True) else 2


def _falcon_kv_heads(c: _Fields) -> int:
    """Falcon-7B is multi-query (one KV head); Falcon-40B/180B (new_decoder_architecture) use `num_kv_heads`."""
    heads = c.int("num_attention_heads")
    if c.bool("new_decoder_architecture", False):
        return c.int("num_kv_heads", default=heads)
    return 1 if c.bool("multi_query", True) else heads


def _falcon(c: _Fields, notes: list[str]) -> dict:
    """Falcon (7B/40B/180B, Falcon 2): a non-gated GELU MLP `ffn_hidden_size` (else 4 x hidden) wide, biases on
    every projection when `bias`, RoPE unless `alibi`; LayerNorm biases are not counted (2 x hidden a norm)."""
    n, hidden, bias = _num_layers(c), c.int("hidden_size"), c.bool("bias", False)
    attention = {**_attention(c, qkv_bias=bias), "num_kv_heads": _falcon_kv_heads(c), "o_bias": bias}
    ffn = _ffn(c, gated=False, activation=_activation(c, default="gelu"), bias=bias,
               width=c.int("ffn_hidden_size", default=None) or 4 * hidden)
    return _decoder(c, mixers=["full"] * n, ffns=["dense"] * n, attention=attention, ffn=ffn,
                    rope=None if c.bool("alibi", False) else _rope(c, 10000.0),
                    norms_per_layer=_parallel_block_norms(c), tie_default=True)


def _gpt_neox(c: _Fields, notes: list[str]) -> dict:
    """GPT-NeoX / Pythia: biased q/k/v/o (`attention_bias`, default on) and a biased non-gated GELU MLP; rotary on
    `rotary_pct` of each head; LayerNorm biases are not counted (2 x hidden a norm)."""
    n = _num_layers(c)
    return _decoder(c, mixers=["full"] * n, ffns=["dense"] * n, attention=_attention(c),
                    ffn=_ffn(c, gated=False, activation=_activation(c, default="gelu"), bias=True),
                    rope=_rope(c, 10000.0))


def _gpt2(c: _Fields, notes: list[str]) -> dict:
    """GPT-2 (and GPT-J with `rotary_dim`): biased non-gated MLP `n_inner` (else 4 x hidden) wide. GPT-2 biases q/k/v/o
    and learns absolute positions (n_positions x hidden, not counted: 0.6% of the 124M); GPT-J's attention has no
    biases, RoPE on `rotary_dim` of each head and one LayerNorm feeding attention and MLP in parallel."""
    n, hidden = _num_layers(c), c.int("hidden_size")
    gptj = c.has("rotary_dim")
    attention = _attention(c, qkv_bias=not gptj)
    attention["o_bias"] = not gptj
    ffn = _ffn(c, gated=False, activation=_activation(c, default="gelu_new"), bias=True,
               width=c.int("n_inner", default=None) or 4 * hidden)
    rope = None
    if gptj:
        rope = {**_rope(c, 10000.0), "partial_rotary_factor": c.int("rotary_dim") / attention["head_dim"]}
        notes.append("lm_head bias not counted")
    else:
        notes.append("learned position embeddings (n_positions x hidden) not counted")
    return _decoder(c, mixers=["full"] * n, ffns=["dense"] * n, attention=attention, ffn=ffn, rope=rope,
                    norms_per_layer=1 if gptj else 2, tie_default=not gptj)


def _starcoder2(c: _Fields, notes: list[str]) -> dict:
    """StarCoder2: biased q/k/v/o and a biased non-gated GELU MLP (`use_bias`), LayerNorms (biases not counted), and
    a non-null `sliding_window` on every layer as in Mistral."""
    n, bias = _num_layers(c), c.bool("use_bias", True)
    flags, window = _sliding(c, n, _every_layer_sliding)
    attention = {**_attention(c, qkv_bias=bias, window=window), "o_bias": bias}
    return _decoder(c, mixers=["sliding" if s else "full" for s in flags], ffns=["dense"] * n, attention=attention,
                    ffn=_ffn(c, gated=False, activation=_activation(c, default="gelu_tanh"), bias=bias),
                    rope=_rope(c, 10000.0), tie_default=True)


def _bloom(c: _Fields, notes: list[str]) -> dict:
    """BLOOM: ALiBi (no RoPE), biased q/k/v/o and a biased 4 x hidden GELU MLP, tied embeddings; the LayerNorm after
    the embedding and all LayerNorm biases are not counted (2 x hidden each)."""
    n, hidden = _num_layers(c), c.int("hidden_size")
    attention = {**_attention(c, qkv_bias=True), "o_bias": True}
    return _decoder(c, mixers=["full"] * n, ffns=["dense"] * n, attention=attention,
                    ffn=_ffn(c, gated=False, activation="gelu", bias=True, width=4 * hidden), rope=None,
                    tie_default=True)


def _opt(c: _Fields, notes: list[str]) -> dict:
    """OPT: biased q/k/v/o and MLP (`enable_bias`), ReLU MLP `ffn_dim` wide, tied embeddings; learned positions
    ((max_position_embeddings + 2) x hidden) are not counted. OPT-350m's 512-wide embedding projections are refused."""
    n, hidden, bias = _num_layers(c), c.int("hidden_size"), c.bool("enable_bias", True)
    if c.int("word_embed_proj_dim", default=hidden) != hidden:
        raise c.error("word_embed_proj_dim", f"differs from hidden_size ({hidden}); projected embeddings are not "
                      "modelled")
    notes.append("learned position embeddings not counted")
    ffn = _ffn(c, gated=False, activation=_activation(c, default="relu"), bias=bias, width=c.int("ffn_dim"))
    return _decoder(c, mixers=["full"] * n, ffns=["dense"] * n,
                    attention={**_attention(c, qkv_bias=bias), "o_bias": bias}, ffn=ffn, rope=None, tie_default=True)


def _phi(c: _Fields, notes: list[str]) -> dict:
    """Phi-1/1.5/2 (`phi`): attention and a non-gated GELU MLP in parallel off one LayerNorm, biases on q/k/v, the
    dense output and the MLP, RoPE on `partial_rotary_factor` of each head (no weights); LayerNorm biases and the
    lm_head bias are not counted."""
    n = _num_layers(c)
    attention = {**_attention(c, qkv_bias=True), "o_bias": True}
    return _decoder(c, mixers=["full"] * n, ffns=["dense"] * n, attention=attention,
                    ffn=_ffn(c, gated=False, activation=_activation(c, default="gelu_tanh"), bias=True),
                    rope=_rope(c, 10000.0), norms_per_layer=1)


def _nemotron(c: _Fields, notes: list[str]) -> dict:
    """Nemotron-4 / Minitron (`nemotron`): a non-gated squared-ReLU MLP and LayerNorm1P norms, no biases, RoPE on
    `partial_rotary_factor` of each head; heads x head_dim may exceed hidden (Minitron-8B: 48 x 128 over 4,096)."""
    n = _num_layers(c)
    return _decoder(c, mixers=["full"] * n, ffns=["dense"] * n, attention=_attention(c),
                    ffn=_ffn(c, gated=False, activation=_activation(c, default="relu2"), bias=False),
                    rope=_rope(c, 10000.0))
