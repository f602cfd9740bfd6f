"""Transformer building blocks, shapes exactly as the model card says. Token tensors are flattened: [T, ...]."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .attention import PagedKV, StepMeta, paged_attention
from .rope import Rotary

THIN_ROWS = 32  # CPU linears of up to this many rows run as (weight @ x^T)^T


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x [M, in] @ weight[out, in]^T (+ bias). One row on the CPU goes through a matrix-vector kernel: in bf16 it
    streams the weight at 25-46 GB/s where the GEMM path reaches 10-29 GB/s (measured, 2-core Sapphire Rapids).
    Batched decode runs as (weight @ x^T)^T: 8-32 rows in fp32 (x @ weight^T streams the weight at 7-10 GB/s
    there, the transposed product at ~13), 2-32 rows in bf16 (23 vs 30 GB/s; same machine, engine allocator)."""
    if x.dim() == 2 and x.device.type == "cpu":
        m = x.shape[0]
        if m == 1:
            y = torch.mv(weight, x[0])[None]
            return y + bias if bias is not None else y
        if (x.dtype == torch.bfloat16 and 2 <= m <= THIN_ROWS) or (x.dtype == torch.float32 and 8 <= m <= THIN_ROWS):
            y = (weight @ x.t()).t().contiguous()
            return y + bias if bias is not None else y
        if m > THIN_ROWS and x.dtype == torch.bfloat16 and gemm_rows(m) != m:
            return F.linear(F.pad(x, (0, 0, 0, gemm_rows(m) - m)), weight, bias)[:m]
    return F.linear(x, weight, bias)


def matrix_vector_rows(device: str, dtype: torch.dtype) -> int:
    """Rows up to which `linear` runs bandwidth-bound matrix-vector kernels (roofline's gemv_max_tokens): bf16 on
    the CPU streams the weight at ~30 GB/s up to THIN_ROWS rows; fp32 (13 GB/s at 8-32 rows) and CUDA only at 1."""
    return THIN_ROWS if device == "cpu" and dtype == torch.bfloat16 else 1


def gemm_rows(m: int) -> int:
    """Rows a bf16 CPU GEMM of `m` rows runs as: m rounded up to 1/16 of its power of two (at least 16), so a
    server's ever-changing step sizes and expert loads reuse a few dozen shapes. oneDNN builds a kernel per new
    shape: 5-12 ms extra for a 4096x4096 or 14336x4096 weight, 1.7 ms for 1024x1024 (measured, 2-core Sapphire
    Rapids; fp32 and fp16 pay nothing); the padding costs at most 1/16 more rows."""
    step = max(16, 1 << max(m.bit_length() - 5, 0))
    return -(-m // step) * step


class Linear(nn.Linear):
    """nn.Linear with the one-row fast path (still an nn.Linear, so weight-only quantisation replaces it)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias)


ACTIVATIONS = {"silu": F.silu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "gelu": F.gelu,
               "relu2": lambda x: F.relu(x).square(), "swiglu_clamped": F.silu}


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.to(torch.promote_types(dtype, torch.float32))
        return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)).to(dtype) * self.weight


class MLP(nn.Module):
    """Gated: down(act(gate x) * up x), gate and up fused in one matmul; else down(act(up x))."""

    def __init__(self, hidden: int, inner: int, activation: str, gated: bool, bias: bool = False):
        super().__init__()
        self.gated, self.act = gated, ACTIVATIONS[activation]
        self.up = Linear(hidden, inner * (2 if gated else 1), bias=bias)
        self.down = Linear(inner, hidden, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.up(x)
        if self.gated:
            gate, up = h.chunk(2, dim=-1)
            return self.down(self.act(gate) * up)
        return self.down(self.act(h))


class MoE(nn.Module):
    """Top-k routing (softmax over the chosen k), grouped expert compute, optional shared experts and latent width."""

    def __init__(self, hidden: int, cfg, activation: str):
        super().__init__()
        self.k, self.gated, self.act = cfg.experts_per_token, cfg.gated, ACTIVATIONS[activation]
        width, inner, e = cfg.latent_size or hidden, cfg.expert_intermediate_size, cfg.num_experts
        self.router = Linear(hidden, e, bias=cfg.router_bias)
        self.w_up = nn.Parameter(torch.empty(e, inner * (2 if cfg.gated else 1), width))  # [E, out, in]
        self.w_down = nn.Parameter(torch.empty(e, width, inner))
        self.b_up = nn.Parameter(torch.zeros(e, self.w_up.shape[1])) if cfg.expert_bias else None
        self.b_down = nn.Parameter(torch.zeros(e, width)) if cfg.expert_bias else None
        self.to_latent = Linear(hidden, width, bias=False) if cfg.latent_size else None
        self.from_latent = Linear(width, hidden, bias=False) if cfg.latent_size else None
        shared = cfg.shared_expert_intermediate_size or cfg.num_shared_experts * inner
        self.shared = MLP(hidden, shared, activation, cfg.gated) if cfg.num_shared_experts else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.router(x).to(torch.promote_types(x.dtype, torch.float32))
        weights, chosen = logits.topk(self.k, dim=-1)
        weights = weights.softmax(dim=-1).to(x.dtype)  # = softmax over all, top-k, renormalised
        h = self.to_latent(x) if self.to_latent is not None else x
        out = torch.zeros_like(h)
        order = chosen.flatten().argsort()
        counts = torch.bincount(chosen.flatten(), minlength=self.w_up.shape[0]).tolist()
        token_of = order // self.k
        start = 0
        for expert, n in enumerate(counts):  # grouped: one matmul pair per expert over its tokens
            if n == 0:
                continue
            rows = order[start:start + n]
            tokens = token_of[start:start + n]
            start += n
            y = self._expert(expert, h[tokens]) * weights.flatten()[rows, None]
            out.index_add_(0, tokens, y)
        out = self.from_latent(out) if self.from_latent is not None else out
        return out + self.shared(x) if self.shared is not None else out

    def _expert(self, e: int, x: torch.Tensor) -> torch.Tensor:
        h = linear(x, self.w_up[e], None if self.b_up is None else self.b_up[e])
        if self.gated:
            gate, up = h.chunk(2, dim=-1)
            h = self.act(gate) * up
        else:
            h = self.act(h)
        return linear(h, self.w_down[e], None if self.b_down is None else self.b_down[e])


class Attention(nn.Module):
    """GQA/MHA with fused QKV, optional biases and QK-norm, RoPE (or none), full or sliding window, paged KV."""

    def __init__(self, hidden: int, heads: int, kv_heads: int, head_dim: int, att, window: int | None,
                 rope: Rotary | None, eps: float, k_eq_v: bool = False):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim, self.window, self.rope = heads, kv_heads, head_dim, window, rope
        self.k_eq_v = k_eq_v
        kv_out = kv_heads * head_dim * (1 if k_eq_v else 2)
        self.qkv = Linear(hidden, heads * head_dim + kv_out, bias=att.qkv_bias)
        self.o = Linear(heads * head_dim, hidden, bias=att.o_bias)
        self.q_norm = RMSNorm(head_dim, eps) if att.qk_norm else None
        self.k_norm = RMSNorm(head_dim, eps) if att.qk_norm else None
        self.scale = head_dim ** -0.5

    def forward(self, x: torch.Tensor, meta: StepMeta, cache: PagedKV) -> torch.Tensor:
        t = x.shape[0]
        qkv = self.qkv(x)
        q_end, k_end = self.heads * self.head_dim, (self.heads + self.kv_heads) * self.head_dim
        q = qkv[:, :q_end].view(t, self.heads, self.head_dim)
        k = qkv[:, q_end:k_end].view(t, self.kv_heads, self.head_dim)
        v = k if self.k_eq_v else qkv[:, k_end:].view(t, self.kv_heads, self.head_dim)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if self.rope is not None:
            q, k = self.rope.apply(q, meta.positions), self.rope.apply(k, meta.positions)
        if self.k_eq_v:
            v = k  # the cache keeps one tensor: values are the stored (normed, rotated) keys
        cache.write(meta.slots, k, v)
        out = paged_attention(q, k, v, cache, meta, self.scale, self.window)
        return self.o(out.reshape(t, self.heads * self.head_dim))
