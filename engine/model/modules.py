"""Transformer building blocks, shapes exactly as the model card says. Token tensors are flattened: [T, ...]."""

from __future__ import annotations

import functools
import time

import torch
import torch.nn.functional as F
from roofline.engine.model.attention import PagedKV, StepMeta, paged_attention
from roofline.engine.model.rope import Rotary
from torch import nn

THIN_ROWS = 32  # CPU linears of up to this many rows run as (weight @ x^T)^T
PROBE_SHAPE = (14336, 4096)  # [out, in] of the one-row kernel probe: llama-3.1-8b's MLP up-projection


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x [M, in] @ weight[out, in]^T (+ bias). On the CPU, one row and thin batches (decode) take the kernels that
    stream the weight fastest on this CPU (`cpu_kernels`); GEMMs of more than THIN_ROWS bf16 rows pad their rows."""
    if x.dim() == 2 and x.device.type == "cpu":
        m = x.shape[0]
        one_row, thin_transposed = cpu_kernels(x.dtype)
        if m == 1 and one_row == "mv":
            y = torch.mv(weight, x[0])[None]
            return y + bias if bias is not None else y
        if m == 1 and one_row == "pad2":
            return F.linear(F.pad(x, (0, 0, 0, 1)), weight, bias)[:1]
        thin = 2 <= m <= THIN_ROWS if x.dtype == torch.bfloat16 else 8 <= m <= THIN_ROWS
        if thin and thin_transposed:
            y = (weight @ x.t()).t().contiguous()
            return y + bias if bias is not None else y
        if m > THIN_ROWS and x.dtype == torch.bfloat16 and gemm_rows(m) != m:
            return F.linear(F.pad(x, (0, 0, 0, gemm_rows(m) - m)), weight, bias)[:m]
    return F.linear(x, weight, bias)


@functools.cache
def cpu_kernels(dtype: torch.dtype) -> tuple[str, bool]:
    """How a one-row linear runs on this CPU ("mv": torch.mv, "linear": F.linear, "pad2": F.linear on the row padded
    to two), and whether thin batches run as (weight @ x^T)^T rather than F.linear: whichever streams a
    PROBE_SHAPE weight fastest, probed once per process (~0.7 s): the winners differ from CPU to CPU by up to 2x
    (measurements: docs/engine.md)."""
    w = torch.randn(PROBE_SHAPE, dtype=dtype)
    one, thin = torch.randn(1, PROBE_SHAPE[1], dtype=dtype), torch.randn(8, PROBE_SHAPE[1], dtype=dtype)

    def best(fn) -> float:
        fn()
        times = []
        for _ in range(5):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return min(times)

    one_row = {"mv": lambda: torch.mv(w, one[0]), "linear": lambda: F.linear(one, w),
               "pad2": lambda: F.linear(F.pad(one, (0, 0, 0, 1)), w)[:1]}
    return (min(one_row, key=lambda k: best(one_row[k])),
            best(lambda: (w @ thin.t()).t().contiguous()) <= best(lambda: F.linear(thin, w)))


def matrix_vector_rows(device: str, dtype: torch.dtype) -> int:
    """Rows up to which `linear` streams the weight like a matrix-vector product (roofline's gemv_max_tokens):
    THIN_ROWS where bf16 thin batches run transposed on the CPU (they stream like one row up to 32 rows); else 1
    (fp32's transposed rows stream at less than half a row's rate; F.linear and CUDA ramp as GEMMs)."""
    return THIN_ROWS if device == "cpu" and dtype == torch.bfloat16 and cpu_kernels(dtype)[1] else 1


def gemm_rows(m: int) -> int:
    """Rows a bf16 CPU GEMM of `m` rows runs as: m rounded up to 1/16 of its power of two (at least 16), so a
    server's ever-changing step sizes and expert loads reuse a few dozen shapes: oneDNN builds a bf16 kernel per new
    shape, milliseconds each (docs/engine.md); the padding costs at most 1/16 more rows."""
    step = max(16, 1 << max(m.bit_length() - 5, 0))
    return -(-m // step) * step


class Linear(nn.Linear):
    """nn.Linear with the one-row fast path (still an nn.Linear, so weight-only quantisation replaces it)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias)


ACTIVATIONS = {"silu": F.silu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "gelu": F.gelu,
               "relu2": lambda x: F.relu(x).square(), "relu": F.relu, "swiglu_clamped": F.silu}


def activate(act, h: torch.Tensor, gated: bool) -> torch.Tensor:
    """An MLP's activation pass: act(gate) * up over the halves of a fused [T, 2 inner] projection, or act(h)."""
    if gated:
        gate, up = h.chunk(2, dim=-1)
        return act(gate) * up
    return act(h)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x / rms(x) in at least fp32, times the weight: torch's fused op, one call where the composite took eight
        (one CUDA kernel; in bf16 within one rounding step of weight x cast(x / rms), docs/engine.md)."""
        return F.rms_norm(x, self.weight.shape, self.weight, self.eps)


class MLP(nn.Module):
    """Gated: down(act(gate x) * up x), gate and up fused in one matmul; else down(act(up x))."""

    def __init__(self, hidden: int, inner: int, activation: str, gated: bool, bias: bool = False):
        super().__init__()
        self.gated, self.act = gated, ACTIVATIONS[activation]
        self.up = Linear(hidden, inner * (2 if gated else 1), bias=bias)
        self.down = Linear(inner, hidden, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(activate(self.act, self.up(x), self.gated))


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
        h = activate(self.act, linear(x, self.w_up[e], None if self.b_up is None else self.b_up[e]), self.gated)
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
        if self.rope is not None and self.q_norm is None:  # q and k side by side in qkv: rotated in one pass
            qk = self.rope.apply(qkv[:, :k_end].view(t, self.heads + self.kv_heads, self.head_dim), meta)
            q, k = qk[:, :self.heads], qk[:, self.heads:]
        else:
            q = qkv[:, :q_end].view(t, self.heads, self.head_dim)
            k = qkv[:, q_end:k_end].view(t, self.kv_heads, self.head_dim)
            if self.q_norm is not None:
                q, k = self.q_norm(q), self.k_norm(k)
            if self.rope is not None:
                q, k = self.rope.apply(q, meta), self.rope.apply(k, meta)
        # k_eq_v: the cache keeps one tensor, values are the stored (normed, rotated) keys
        v = k if self.k_eq_v else qkv[:, k_end:].view(t, self.kv_heads, self.head_dim)
        cache.write(meta.slots, k, v)
        out = paged_attention(q, k, v, cache, meta, self.scale, self.window)
        return self.o(out.reshape(t, self.heads * self.head_dim))
