"""The operator graph of one forward step, for prefill and decode alike.

A step is `n` new tokens for each of `batch` sequences on top of `context` cached tokens (prefill: n = chunk;
decode: n = 1; speculative verify: n = k + 1). `batch` and `context` may be numpy arrays: every formula below
broadcasts, so one code path serves a single prediction and a vectorised sweep.

Layers with identical shapes are grouped; each Op carries its layer multiplicity in `count`.
Units: FLOPs, bytes. Shapes in comments: T = batch * n tokens in the step.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from dataclasses import dataclass

import numpy as np

from roofline.cards.hardware import HardwareCard
from roofline.cards.model import ModelCard
from roofline.cards.schema import Num
from roofline.perf.routing import expected_experts_touched
from roofline.sizing.kv import (
    compressed_entry_values,
    layer_kv_values_per_token,
    layer_state_values,
    state_bytes_per_value,
)
from roofline.sizing.layers import Layer, norms_in_layer, resolve_layers
from roofline.sizing.params import (
    compressed_o_params,
    compressed_q_params,
    mla_q_params,
    mlp_activation_width,
    mlp_params,
    qkv_params,
    qkv_widths,
)
from roofline.sizing.precision import Formats


@dataclass(frozen=True)
class Step:
    phase: str  # "prefill" | "decode"
    n: int  # new tokens per sequence
    batch: Num = 1
    context: Num = 0  # tokens already cached per sequence

    @property
    def tokens(self) -> Num:
        return self.batch * self.n

    @property
    def logit_tokens(self) -> Num:
        """Prefill needs logits for the last prompt token only; decode/verify for every new token."""
        return self.batch if self.phase == "prefill" else self.tokens


@dataclass(frozen=True)
class Op:
    name: str  # qkv_proj, attention, o_proj, ffn, router, experts, shared_experts, mamba_proj, ssm_scan, ...
    op_class: str  # attention | projection | ffn | moe | mamba | lm_head | embedding | norm
    dtype: str  # math dtype
    flops: Num
    weight_bytes: Num = 0.0
    act_bytes: Num = 0.0
    kv_read_bytes: Num = 0.0
    kv_write_bytes: Num = 0.0
    count: int = 1  # layers sharing this op
    kernels: int = 1  # kernel launches per layer
    gemm_tokens: Num = None  # M of each GEMM when not the step's token count (MoE: tokens per expert)
    routing: tuple[int, int] | None = None  # MoE experts: (num_experts, experts_per_token)
    experts_touched: Num = 0.0  # MoE experts: distinct experts run (engines that launch per expert pay each)
    gemm: bool = True  # a weight matmul (tensor cores, tile padding); False: attention core, scans, norms
    elementwise: bool = False  # an activation pass (norms, residual adds, activation functions, MoE gather/scatter)
    activation: str = ""  # the activation function an elementwise pass applies (its cost differs: tanh-GELU, SiLU)
    kv_shards: int = 0  # ways its KV/state splits under tensor parallelism (kv heads; 1 = replicated MLA latent)
    link_bytes: Num = 0.0  # bytes each GPU sends over the interconnect (collectives only)
    link_hops: int = 0  # latency-bound hops per collective
    weight_format: str = ""  # the weights' storage format (runtimes' kernels differ by format: llama.cpp MMQ)
    scores: Num = 0.0  # attention core: query-key scores over every held key (batch x new tokens x span x heads),
    # which a kernel without flash attention writes out and reads back (Efficiency.flash_attention)

    @property
    def bytes(self) -> Num:
        return self.weight_bytes + self.act_bytes + self.kv_read_bytes + self.kv_write_bytes


def matmul(name: str, op_class: str, component: str, params: float, t: Num, d_in: int, d_out: int, f: Formats,
           count: int, kernels: int = 1) -> Op:
    """A weight matmul over t tokens: 2*t*params FLOPs, weights read once, activations in and out."""
    return Op(name, op_class, f.dtype(component), 2.0 * t * params, params * f.wbytes(component),
              t * (d_in + d_out) * f.act_bytes, count=count, kernels=kernels,
              weight_format=f.component_format(component))


def attended_pairs(n: int, context: Num, window: int | None) -> Num:
    """Query-key pairs per sequence when n new tokens follow `context` cached ones, causally (half the square),
    each new token seeing at most `window` keys: sum_{i=1..n} min(context + i, window)."""
    full = n * context + n * (n + 1) / 2.0
    if window is None:
        return full
    m = np.clip(window - context, 0, n)  # new tokens whose span still fits the window
    return m * context + m * (m + 1) / 2.0 + (n - m) * window


def _span(step: Step, window: int | None) -> Num:
    held = step.context + step.n
    return held if window is None else np.minimum(held, float(window))  # float: products of it reach past int64


def attention_ops(card: ModelCard, lay: Layer, step: Step, f: Formats, count: int) -> list[Op]:
    """GQA/MHA, full or sliding: QKV, the attention core (scores + values), O."""
    h, t = card.architecture.hidden_size, step.tokens
    q_out, qkv_out = qkv_widths(card.architecture, lay)
    kv_tok = layer_kv_values_per_token(card.architecture, lay) * f.kv_bytes
    pairs = attended_pairs(step.n, step.context, lay.window)
    core = Op("attention", "attention", f.act_dtype, step.batch * pairs * 4.0 * lay.num_heads * lay.head_dim,
              act_bytes=2 * t * q_out * f.act_bytes, kv_read_bytes=step.batch * _span(step, lay.window) * kv_tok,
              kv_write_bytes=t * kv_tok, count=count, gemm=False, kv_shards=lay.num_kv_heads,
              scores=step.batch * step.n * _span(step, lay.window) * lay.num_heads)
    ops = [matmul("qkv_proj", "projection", "attention", qkv_params(card.architecture, lay), t, h, qkv_out, f, count),
           core, matmul("o_proj", "projection", "attention", q_out * h, t, q_out, h, f, count)]
    if card.architecture.attention.qk_norm:  # RMSNorm over each query and key head (Qwen3, Gemma 3, OLMo 2)
        ops.append(norm_op(t, (lay.num_heads + lay.num_kv_heads) * lay.head_dim, f, count, 2, 0, "qk_norm"))
    return ops


def mla_ops(card: ModelCard, step: Step, f: Formats, count: int) -> list[Op]:
    """DeepSeek MLA. Decode uses the absorbed form (attend over the latent); prefill decompresses K/V."""
    arch = card.architecture
    m, h, heads, t = arch.mla, arch.hidden_size, arch.attention.num_heads, step.tokens
    qk = m.qk_nope_head_dim + m.qk_rope_head_dim
    kv_b = m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim)
    latent = (m.kv_lora_rank + m.qk_rope_head_dim) * f.kv_bytes
    topk = m.indexer.topk if m.indexer else None
    pairs = sparse_pairs(step.n, step.context, topk)
    if step.phase == "decode":  # absorbed: q_nope -> latent, scores over 576 dims, values over 512, latent -> v
        core_flops = step.batch * pairs * 2.0 * heads * (2 * m.kv_lora_rank + m.qk_rope_head_dim)
        kvb_flops = 2.0 * t * heads * m.kv_lora_rank * (m.qk_nope_head_dim + m.v_head_dim)
    else:  # decompress every attended latent, then ordinary attention with qk=192, v=128 dims
        core_flops = step.batch * pairs * 2.0 * heads * (qk + m.v_head_dim)
        kvb_flops = 2.0 * step.batch * (step.context + step.n) * kv_b  # top-k sets of a chunk cover the context
    kvb_rows = None if step.phase == "decode" else step.batch * (step.context + step.n)  # GEMM rows: every latent
    indexer = [] if m.indexer is None else indexer_ops(m.indexer, m.q_lora_rank or h, h, step, f, count, 1,
                                                       key_params=h * m.indexer.head_dim)
    return indexer + [
        matmul("q_proj", "projection", "attention", mla_q_params(arch), t, h, heads * qk, f, count, kernels=2),
        matmul("kv_a_proj", "projection", "attention", h * (m.kv_lora_rank + m.qk_rope_head_dim), t, h,
               m.kv_lora_rank + m.qk_rope_head_dim, f, count),
        Op("kv_b_proj", "projection", f.dtype("attention"), kvb_flops, kv_b * f.wbytes("attention"), count=count,
           gemm_tokens=kvb_rows, weight_format=f.component_format("attention")),
        Op("attention", "attention", f.act_dtype, core_flops, act_bytes=2 * t * heads * m.v_head_dim * f.act_bytes,
           kv_read_bytes=step.batch * _span(step, topk) * latent, kv_write_bytes=t * latent, count=count, gemm=False,
           kv_shards=1),
        matmul("o_proj", "projection", "attention", heads * m.v_head_dim * h, t, heads * m.v_head_dim, h, f, count),
    ]


def sparse_pairs(n: int, context: Num, topk: int | None) -> Num:
    """Query-key pairs when each new token attends to at most `topk` selected keys (DSA / CSA top-k): the causal
    count while the context is short, `topk` per query once it is longer (selection, not a sliding window)."""
    return attended_pairs(n, context, topk)


def indexer_ops(ix, q_in: int, h: int, step: Step, f: Formats, count: int, ratio: int, key_params: int = 0) -> list[Op]:
    """DeepSeek lightning indexer: q [T, n x d] from the low-rank query, per-head weights [T, n] from the hidden
    state (and, V3.2, its key [T, h] -> [T, d]: `key_params`); every query scores every cached key (one per `ratio`
    tokens): 2 x n x d FLOPs per (query, key), reading the d-value keys once per sequence."""
    t = step.tokens
    keys = (step.context + step.n) / ratio
    scores = step.batch * attended_pairs(step.n, step.context, None) / ratio * 2.0 * ix.num_heads * ix.head_dim
    return [matmul("indexer_proj", "projection", "attention",
                   q_in * ix.num_heads * ix.head_dim + h * ix.num_heads + key_params,
                   t, q_in, ix.num_heads * (ix.head_dim + 1), f, count, kernels=2),
            Op("indexer", "attention", f.act_dtype, scores, act_bytes=t * ix.num_heads * ix.head_dim * f.act_bytes,
               kv_read_bytes=step.batch * keys * ix.head_dim * f.kv_bytes, kv_write_bytes=t / ratio * ix.head_dim * f.kv_bytes,
               count=count, gemm=False, kv_shards=1)]


def compressed_ops(card: ModelCard, lay: Layer, step: Step, f: Formats, count: int) -> list[Op]:
    """DeepSeek-V4 CSA/HCA layer. Shapes (V4-Pro): hidden h 7168, heads 128 x head_dim 512, one K=V head of 512.
    q: [T, h] -> [T, 1536] -> [T, 128 x 512]; kv: [T, h] -> [T, 512]; compressor: kv + gate [T, h] -> [T, w]
    (w = 512 HCA, 1024 CSA), pooled to one entry per `compress_ratio` tokens; attention over the raw window (128)
    plus the pooled entries (HCA: all c/128; CSA: the indexer's top 1024 of c/4), scores and values both 512-wide;
    output: grouped [T, 16 x 4096] -> [T, 16 x 1024] -> [T, h]."""
    arch = card.architecture
    c, h, t, heads, hd = arch.compressed, arch.hidden_size, step.tokens, lay.num_heads, lay.head_dim
    ratio, window = lay.compress_ratio, c.sliding_window
    width = hd * (2 if lay.indexer else 1)
    entries = np.floor((step.context + step.n) / ratio)
    attended = np.minimum(entries, c.indexer.topk) if lay.indexer else entries
    # every new token: its window + the pooled entries before it (causal: (context + i) / ratio, at most the indexer's
    # top-k), 2 matmuls of hd per (query, key)
    pooled = attended_pairs(step.n, step.context, c.indexer.topk * ratio if lay.indexer else None) / ratio
    pairs = attended_pairs(step.n, step.context, window) + pooled
    entry_bytes = compressed_entry_values(arch, lay) * f.kv_bytes
    raw_bytes = hd * f.kv_bytes
    core = Op("attention", "attention", f.act_dtype, step.batch * pairs * 4.0 * heads * hd,
              act_bytes=2 * t * heads * hd * f.act_bytes,
              kv_read_bytes=step.batch * (_span(step, window) * raw_bytes + attended * hd * f.kv_bytes),
              kv_write_bytes=t * raw_bytes + t / ratio * entry_bytes, count=count, gemm=False, kv_shards=1)
    ops = [matmul("q_proj", "projection", "attention", compressed_q_params(arch, lay), t, h, heads * hd, f, count,
                  kernels=2),
           matmul("kv_proj", "projection", "attention", h * hd + 2 * h * width, t, h, hd + 2 * width, f, count, 3)]
    if lay.indexer:
        ops += indexer_ops(c.indexer, c.q_lora_rank, h, step, f, count, ratio)
        ops.append(matmul("indexer_compressor", "projection", "attention", 2 * h * 2 * c.indexer.head_dim, t, h,
                          4 * c.indexer.head_dim, f, count, kernels=2))
    return ops + [core, matmul("o_proj", "projection", "attention", compressed_o_params(arch, lay), t, heads * hd, h,
                                  f, count, kernels=2)]


def deltanet_ops(card: ModelCard, lay: Layer, step: Step, f: Formats, count: int) -> list[Op]:
    """Gated DeltaNet (Qwen3-Next): in_proj [T, h] -> [T, 2 nk dk + 2 nv dv + 2 nv]; conv over the q/k/v channels;
    delta-rule recurrence on an [nv, dk, dv] state (decay, S k readout, rank-1 correction, q S readout: ~8 dk dv FLOPs
    per value head and token; chunked prefill adds intra-chunk products ~ chunk x (dk + dv) per head and token, chunk
    64 in the fla kernels); out_proj [T, nv dv] -> [T, h]. The state is read and written once per sequence per step."""
    arch = card.architecture
    d, h, t = arch.deltanet, arch.hidden_size, step.tokens
    kd, vd = d.num_key_heads * d.key_head_dim, d.num_value_heads * d.value_head_dim
    proj_out = 2 * kd + 2 * vd + 2 * d.num_value_heads
    chunk = 64 if step.phase == "prefill" else 0
    per_token = d.num_value_heads * (8.0 * d.key_head_dim * d.value_head_dim + chunk * (d.key_head_dim + d.value_head_dim))
    state = layer_state_values(arch, lay) * state_bytes_per_value(arch, f.kv_quant, lay)
    return [
        matmul("deltanet_in_proj", "mamba", "mamba", h * proj_out, t, h, proj_out, f, count),
        Op("delta_scan", "mamba", f.act_dtype, t * (per_token + 2.0 * d.conv_channels * d.conv_kernel),
           act_bytes=2 * t * d.conv_channels * f.act_bytes, kv_read_bytes=step.batch * state,
           kv_write_bytes=step.batch * state, count=count, kernels=3, gemm=False, kv_shards=d.num_value_heads),
        matmul("deltanet_out_proj", "mamba", "mamba", vd * h, t, vd, h, f, count),
    ]


def mamba1_ops(card: ModelCard, lay: Layer, step: Step, f: Formats, count: int) -> list[Op]:
    """Mamba-1 (Jamba): in_proj [T, h] -> [T, 2 d_inner]; conv; x_proj [T, d_inner] -> [T, dt_rank + 2N];
    dt_proj [T, dt_rank] -> [T, d_inner]; selective scan ~9 d_inner N FLOPs per token (discretise, update, readout);
    out_proj [T, d_inner] -> [T, h]. The [d_inner, N] state is read and written once per sequence per step."""
    arch = card.architecture
    m, h, t = arch.mamba1, arch.hidden_size, step.tokens
    state = layer_state_values(arch, lay) * state_bytes_per_value(arch, f.kv_quant, lay)
    return [
        matmul("mamba_in_proj", "mamba", "mamba", h * 2 * m.d_inner, t, h, 2 * m.d_inner, f, count),
        matmul("mamba_x_dt_proj", "mamba", "mamba", m.d_inner * (m.dt_rank + 2 * m.state_size) + m.dt_rank * m.d_inner,
               t, m.d_inner, m.d_inner, f, count, kernels=2),
        Op("ssm_scan", "mamba", f.act_dtype, t * m.d_inner * (9.0 * m.state_size + 2.0 * m.conv_kernel),
           act_bytes=3 * t * m.d_inner * f.act_bytes, kv_read_bytes=step.batch * state,
           kv_write_bytes=step.batch * state, count=count, kernels=2, gemm=False, kv_shards=m.d_inner),
        matmul("mamba_out_proj", "mamba", "mamba", m.d_inner * h, t, m.d_inner, h, f, count),
    ]


SCAN_DTYPE = "fp32"  # Mamba-2 scans run in fp32 (the state accumulates in fp32 in mamba_ssm's SSD kernels and the engine)
SCAN_VALUE_BYTES = 4  # bytes per value of the scan's fp32 intermediates


def mamba2_ops(card: ModelCard, lay: Layer, step: Step, f: Formats, count: int) -> list[Op]:
    """Mamba-2: in_proj [T, h] -> [T, 2 d_in + 2 G N + H]; causal conv1d over the x/B/C channels; the SSD scan;
    out_proj [T, d_in] -> [T, h]. The state is read and written once per sequence per step.

    Scan per token (H heads of P dims, d_in = H P; G groups of N state dims): decode runs the recurrence, ~6 d_in N
    FLOPs (decay, x (outer) B, C h). Prefill runs the chunked SSD form over chunks of l = min(chunk_size, n) tokens
    (Mamba-2 paper, section 6): C B^T per group and its product with X over the whole l x l block, 2 l (G N + d_in);
    each chunk's state and its readout, 4 d_in N; the [H, l, l] decay matrix and the scores times it, materialised
    in fp32 and read back (~3 H l values written and read per token)."""
    arch = card.architecture
    m, h, t = arch.mamba2, arch.hidden_size, step.tokens
    d_in, gs = m.d_inner, m.n_groups * m.state_size
    proj_out = 2 * d_in + 2 * gs + m.num_heads
    if step.phase == "prefill":
        chunk = np.minimum(m.chunk_size, step.n)  # the last chunk of a shorter prompt is the prompt
        scan_flops = 2.0 * chunk * (gs + d_in) + 4.0 * d_in * m.state_size + 4.0 * chunk * m.num_heads
        scan_bytes = 2 * 3 * chunk * m.num_heads * SCAN_VALUE_BYTES
    else:
        scan_flops, scan_bytes = 6.0 * d_in * m.state_size, 0
    conv_flops = 2.0 * (d_in + 2 * gs) * m.conv_kernel
    state = layer_state_values(arch, lay) * state_bytes_per_value(arch, f.kv_quant, lay)
    return [
        matmul("mamba_in_proj", "mamba", "mamba", h * proj_out, t, h, proj_out, f, count),
        Op("ssm_scan", "mamba", SCAN_DTYPE, t * (scan_flops + conv_flops),
           act_bytes=t * (2 * (d_in + 2 * gs) * f.act_bytes + scan_bytes), kv_read_bytes=step.batch * state,
           kv_write_bytes=step.batch * state, count=count, kernels=3, gemm=False, kv_shards=m.num_heads),
        matmul("mamba_out_proj", "mamba", "mamba", d_in * h, t, d_in, h, f, count),
    ]


def activation_pass(name: str, op_class: str, rows: Num, values_per_row: Num, f: Formats, count: int,
                    kernels: int = 1, activation: str = "") -> Op:
    """An elementwise pass over activations: `values_per_row` values read and written per row, no weights;
    `activation`: the function it applies, if any."""
    return Op(name, op_class, f.act_dtype, 0.0, act_bytes=rows * values_per_row * f.act_bytes, count=count,
              kernels=kernels, gemm=False, elementwise=True, activation=activation)


# MoE routed rows: gathered (read, write), scaled by their router weight (read, write) and added back into their
# token's row (read both, write): 7 passes of the expert width per routed row, beside the activation
MOE_ROW_PASSES = 7


def ffn_ops(card: ModelCard, lay: Layer, step: Step, f: Formats, count: int) -> list[Op]:
    arch, t = card.architecture, step.tokens
    h = arch.hidden_size
    if lay.ffn == "dense":
        fc = arch.ffn
        act_width = mlp_activation_width(fc.intermediate_size, fc.gated)
        return [matmul("ffn", "ffn", "ffn", mlp_params(h, fc.intermediate_size, fc.gated, fc.bias), t, h, act_width, f,
                       count, kernels=2),
                activation_pass("ffn_act", "ffn", t, act_width, f, count, activation=fc.activation)]
    if lay.ffn != "moe":
        return []
    e = arch.moe
    width = e.latent_size or h
    per_expert = mlp_params(width, e.expert_intermediate_size, e.gated, e.expert_bias)
    touched = expected_experts_touched(e.num_experts, e.experts_per_token, t)
    routed = t * e.experts_per_token
    ops = [matmul("router", "moe", "router", h * e.num_experts, t, h, e.num_experts, f, count),
           Op("experts", "moe", f.dtype("experts"), 2.0 * routed * per_expert, touched * per_expert * f.wbytes("experts"),
              routed * (2 * width + mlp_activation_width(e.expert_intermediate_size, e.gated)) * f.act_bytes, count=count,
              kernels=3, gemm_tokens=routed / touched, experts_touched=touched,
              routing=(e.num_experts, e.experts_per_token), weight_format=f.component_format("experts")),
           # launched per expert: the experts op's kernels_per_expert counts them
           activation_pass("experts_act", "moe", routed, mlp_activation_width(e.expert_intermediate_size, e.gated), f,
                           count, kernels=0, activation=arch.moe_activation),
           activation_pass("experts_rows", "moe", routed, MOE_ROW_PASSES * width, f, count, kernels=0)]
    if e.latent_size:
        ops.append(matmul("latent_proj", "moe", "experts", 2 * h * e.latent_size, t, h, e.latent_size, f, count, 2))
    if e.num_shared_experts:
        inner = e.shared_expert_intermediate_size or e.num_shared_experts * e.expert_intermediate_size
        ops += [matmul("shared_experts", "moe", "shared_experts", mlp_params(h, inner, e.gated), t, h,
                       mlp_activation_width(inner, e.gated), f, count, kernels=2),
                activation_pass("shared_act", "moe", t, mlp_activation_width(inner, e.gated), f, count,
                                activation=arch.moe_activation)]
    return ops


def norm_op(rows: Num, width: int, f: Formats, count: int, norms: int, residual_adds: int, name: str = "norms") -> Op:
    """`norms` RMSNorms over `width` values a row (read and write them, ~5 FLOPs a value) and residual adds (read
    two, write one), one per residual block."""
    return Op(name, "norm", f.act_dtype, 5.0 * rows * width * norms,
              act_bytes=rows * width * f.act_bytes * (2 * norms + 3 * residual_adds), count=count,
              kernels=norms, gemm=False, elementwise=True)  # serving runtimes fuse the add into the norm's kernel


def layer_ops(card: ModelCard, lay: Layer, step: Step, f: Formats, count: int) -> list[Op]:
    """Every op of one layer type, for `count` identical layers."""
    ops: list[Op] = []
    if lay.is_attention:
        ops += attention_ops(card, lay, step, f, count)
    elif lay.mixer == "mla":
        ops += mla_ops(card, step, f, count)
    elif lay.mixer == "compressed":
        ops += compressed_ops(card, lay, step, f, count)
    elif lay.mixer == "mamba1":
        ops += mamba1_ops(card, lay, step, f, count)
    elif lay.mixer == "deltanet":
        ops += deltanet_ops(card, lay, step, f, count)
    if lay.has_mamba2:  # Mamba-2 layers, and the Mamba-2 half of parallel hybrids
        ops += mamba2_ops(card, lay, step, f, count)
    ops += ffn_ops(card, lay, step, f, count)
    ops.append(norm_op(step.tokens, card.architecture.hidden_size, f, count, norms_in_layer(card.architecture, lay),
                       lay.blocks))
    return ops


STEP_OPS_MEMO_SIZE = 4096  # steps whose op lists are kept: fits and simulations time the same steps many times
_STEP_OPS_MEMO: OrderedDict = OrderedDict()  # (id(card), id(hw), step, quant, kv_quant) -> (card, hw, ops)


def step_ops(card: ModelCard, hw: HardwareCard, step: Step, quant: str | None = None, kv_quant: str = "bf16") -> list[Op]:
    """The whole step's ops (`build_step_ops`), memoised: cards are frozen, and an entry holds its card and hardware
    card, so their ids cannot be reused while it lives. A step over arrays (vectorised sweeps) is built each time.
    Code that patches what ops are built from (tests) clears `_STEP_OPS_MEMO`."""
    try:
        key = (id(card), id(hw), step, quant, kv_quant)
        hit = _STEP_OPS_MEMO.get(key)
    except TypeError:  # unhashable: array-valued step fields
        return build_step_ops(card, hw, step, quant, kv_quant)
    if hit is not None and hit[0] is card and hit[1] is hw:
        _STEP_OPS_MEMO.move_to_end(key)
        return list(hit[2])
    ops = build_step_ops(card, hw, step, quant, kv_quant)
    _STEP_OPS_MEMO[key] = (card, hw, tuple(ops))
    if len(_STEP_OPS_MEMO) > STEP_OPS_MEMO_SIZE:
        _STEP_OPS_MEMO.popitem(last=False)
    return ops


def build_step_ops(card: ModelCard, hw: HardwareCard, step: Step, quant: str | None = None,
                   kv_quant: str = "bf16") -> list[Op]:
    """The whole step: embedding gather, every layer type x its multiplicity, final norm + lm_head."""
    f = Formats(card, hw, quant, kv_quant)
    arch, h = card.architecture, card.architecture.hidden_size
    groups = Counter((lay.mixer, lay.ffn, lay.num_heads, lay.num_kv_heads, lay.head_dim, lay.window, lay.k_eq_v,
                      lay.compress_ratio, lay.indexer) for lay in resolve_layers(arch))
    ops = [Op("embedding", "embedding", f.act_dtype, 0.0, step.tokens * h * f.wbytes("embedding"),
              step.tokens * h * f.act_bytes, gemm=False)]
    for key, count in groups.items():
        ops += layer_ops(card, Layer(0, *key), step, f, count)
    head = "embedding" if arch.tie_embeddings else "lm_head"
    lm = matmul("lm_head", "lm_head", head, arch.vocab_size * h, step.logit_tokens, h, arch.vocab_size, f, 1, 2)
    return ops + [lm]
