"""Mamba-2 mixer: chunked SSD scan for prefill, constant-state recurrence for decode.

Per sequence the layer keeps a conv state [conv_dim, kernel-1] and an SSM state [heads, head_dim, state] (fp32) in
slots of a preallocated pool; a prefill chunk starts from the slot's state, so chunked prefill and decode agree with
one long prefill.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from roofline.engine.model.attention import StepMeta
from roofline.engine.model.modules import Linear
from torch import nn


class MambaState:
    """Recurrent state of one Mamba-2 layer for `slots` sequences."""

    def __init__(self, slots: int, conv_dim: int, kernel: int, heads: int, head_dim: int, state: int, device,
                 dtype: torch.dtype = torch.float32):
        self.conv = torch.zeros(slots, conv_dim, kernel - 1, device=device, dtype=dtype)
        self.ssm = torch.zeros(slots, heads, head_dim, state, device=device, dtype=dtype)

    def bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.conv, self.ssm))

    def reset(self, slot: int) -> None:
        self.conv[slot].zero_()
        self.ssm[slot].zero_()


def segsum(x: torch.Tensor) -> torch.Tensor:
    """Stable segment sums: out[..., i, j] = sum(x[..., j+1:i+1]) for j <= i, -inf above the diagonal."""
    t = x.shape[-1]
    x = x[..., None].expand(*x.shape, t)
    x = x.masked_fill(~torch.tril(torch.ones(t, t, dtype=torch.bool, device=x.device), -1), 0)
    out = x.cumsum(dim=-2)
    return out.masked_fill(~torch.tril(torch.ones(t, t, dtype=torch.bool, device=x.device)), float("-inf"))


def ssd_scan(x, a, b, c, chunk: int, h0):
    """Chunked SSD (Mamba-2 paper, section 6): x [L, H, P] (dt-scaled), a [L, H] (dt*A), b/c [L, G, N] (G groups,
    H/G heads each), h0 [H, P, N] -> y [L, H, P], final state [H, P, N]. Whole chunks of `chunk` tokens, then the
    remainder as one shorter chunk from their state (no padding: a 16-token prompt costs 16 tokens, not `chunk`)."""
    length = x.shape[0]
    full = length // chunk * chunk
    if 0 < full < length:
        y_head, h = _ssd_chunks(x[:full], a[:full], b[:full], c[:full], chunk, h0)
        y_tail, h = _ssd_chunks(x[full:], a[full:], b[full:], c[full:], length - full, h)
        return torch.cat([y_head, y_tail]), h
    return _ssd_chunks(x, a, b, c, min(chunk, length), h0)


def _ssd_chunks(x, a, b, c, chunk: int, h0):
    """ssd_scan over a whole number of chunks. Shapes: n chunks (c) of l tokens (l, s), G groups (g) of R heads
    (r), P head dims (p), N state dims (n). Intra-chunk: y = (C B^T per group, masked by the decays) X, the quadratic
    form; inter-chunk: each chunk's end state from its tokens, passed along the chunks by their total decay."""
    length, heads, p = x.shape
    groups = b.shape[1]
    n = length // chunk
    x = x.reshape(n, chunk, groups, heads // groups, p)
    b, c = b.reshape(n, chunk, *b.shape[1:]), c.reshape(n, chunk, *c.shape[1:])
    a = a.reshape(n, chunk, groups, heads // groups).permute(2, 3, 0, 1)  # [G, R, n, l]
    a_cum = a.cumsum(-1)
    causal = torch.tril(torch.ones(chunk, chunk, dtype=torch.bool, device=x.device))
    decay = torch.exp((a_cum[..., :, None] - a_cum[..., None, :]).masked_fill(~causal, float("-inf")))  # [G,R,n,l,s]
    scores = torch.einsum("clgn,csgn->gcls", c, b)  # C B^T once per group, shared by its heads
    y_diag = torch.einsum("grcls,csgrp->clgrp", decay * scores[:, None], x)
    to_end = torch.exp(a_cum[..., -1:] - a_cum)  # [G, R, n, l]
    states = torch.einsum("clgn,grcl,clgrp->cgrpn", b, to_end, x)
    states = torch.cat([h0.reshape(1, groups, heads // groups, p, -1), states], dim=0)  # [n+1, G, R, P, N]
    chunk_decay = torch.exp(segsum(F.pad(a_cum[..., -1], (1, 0))))  # [G, R, n+1, n+1]
    states = torch.einsum("grzc,cgrpn->zgrpn", chunk_decay, states)
    y_off = torch.einsum("clgn,cgrpn,grcl->clgrp", c, states[:-1], torch.exp(a_cum))
    return (y_diag + y_off).reshape(length, heads, p), states[-1].reshape(heads, p, -1)


def ssd_reference(x, a, b, c, h0):
    """The recurrence ssd_scan computes, token by token (for tests): h = exp(a) h + x (outer) B; y = C h. Shapes as
    ssd_scan's."""
    rep = x.shape[1] // b.shape[1]
    b, c = b.repeat_interleave(rep, dim=1), c.repeat_interleave(rep, dim=1)
    h, ys = h0.clone(), []
    for t in range(x.shape[0]):
        h = h * torch.exp(a[t])[:, None, None] + x[t][..., None] * b[t][:, None, :]
        ys.append((h * c[t][:, None, :]).sum(-1))
    return torch.stack(ys), h


class Mamba2(nn.Module):
    def __init__(self, hidden: int, cfg, eps: float):
        super().__init__()
        self.heads, self.head_dim, self.n, self.groups = cfg.num_heads, cfg.head_dim, cfg.state_size, cfg.n_groups
        self.d_inner, self.kernel, self.chunk = cfg.d_inner, cfg.conv_kernel, cfg.chunk_size
        self.conv_dim = self.d_inner + 2 * self.groups * self.n
        self.in_proj = Linear(hidden, 2 * self.d_inner + 2 * self.groups * self.n + self.heads, bias=False)
        self.conv_weight = nn.Parameter(torch.empty(self.conv_dim, self.kernel))
        self.conv_bias = nn.Parameter(torch.zeros(self.conv_dim))
        self.dt_bias = nn.Parameter(torch.zeros(self.heads))
        self.a_log = nn.Parameter(torch.zeros(self.heads))
        self.d = nn.Parameter(torch.ones(self.heads))
        self.norm_weight = nn.Parameter(torch.ones(self.d_inner))
        self.out_proj = Linear(self.d_inner, hidden, bias=False)
        self.eps = eps

    def make_state(self, slots: int, device, dtype: torch.dtype) -> MambaState:
        """State in fp32 (the cards' mamba_ssm_cache_dtype), or the model dtype when that is wider."""
        acc = torch.promote_types(dtype, torch.float32)
        return MambaState(slots, self.conv_dim, self.kernel, self.heads, self.head_dim, self.n, device, acc)

    def forward(self, x: torch.Tensor, meta: StepMeta, state: MambaState) -> torch.Tensor:
        proj = self.in_proj(x)
        z, xbc, dt = proj.split([self.d_inner, self.conv_dim, self.heads], dim=-1)
        y = torch.empty(x.shape[0], self.d_inner, dtype=x.dtype, device=x.device)
        singles = [i for i, n in enumerate(meta.q_lens) if n == 1]
        if singles:  # one-token sequences (decode) step together
            rows = [meta.q_starts[i] for i in singles]
            y[rows] = self._step(xbc[rows], dt[rows], state, [meta.state_slots[i] for i in singles])
        for q0, n, slot in zip(meta.q_starts, meta.q_lens, meta.state_slots):
            if n > 1:
                y[q0:q0 + n] = self._sequence(xbc[q0:q0 + n], dt[q0:q0 + n], state, slot)
        y = y * F.silu(z)
        yf = y.to(torch.promote_types(y.dtype, torch.float32))
        y = (yf * torch.rsqrt(yf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.norm_weight
        return self.out_proj(y)

    def _split(self, conv: torch.Tensor, dt: torch.Tensor, acc: torch.dtype):
        """conv output [n, conv_dim] and dt [n, H] -> x [n, H, P], B and C [n, G, N], dt [n, H] (softplus), A [H]."""
        xs, b, c = F.silu(conv).to(acc).split([self.d_inner, self.groups * self.n, self.groups * self.n], dim=-1)
        n = xs.shape[0]
        dt = F.softplus(dt.to(acc) + self.dt_bias.to(acc))
        return (xs.view(n, self.heads, self.head_dim), b.view(n, self.groups, self.n), c.view(n, self.groups, self.n),
                dt, -torch.exp(self.a_log.to(acc)))

    def _step(self, xbc: torch.Tensor, dt: torch.Tensor, state: MambaState, slots: list[int]) -> torch.Tensor:
        """One token for each of S sequences [S, conv_dim], batched: conv over each slot's window, then
        h = exp(dt A) h + dt x (outer) B in place; y = C h + D x. The [S, H, P, N] state is the step's largest
        traffic: where the slots are one contiguous range it is updated through a view (read and written twice,
        read once more by the readout), else gathered and scattered back."""
        acc, order = state.ssm.dtype, sorted(range(len(slots)), key=slots.__getitem__)
        lo, hi = min(slots), max(slots) + 1
        contiguous = hi - lo == len(slots)
        if contiguous:  # rows in slot order, so row i is slot lo + i
            perm = torch.tensor(order, device=xbc.device)
            xbc, dt = xbc[perm], dt[perm]
            conv_state, ssm = state.conv[lo:hi], state.ssm[lo:hi]
        else:
            idx = torch.tensor(slots, device=xbc.device)
            conv_state, ssm = state.conv[idx], state.ssm[idx]
        window = torch.cat([conv_state.to(xbc.dtype), xbc[:, :, None]], dim=2)  # [S, conv_dim, K]
        conv_state.copy_(window[:, :, 1:])
        conv = (window * self.conv_weight.to(xbc.dtype)).sum(-1) + self.conv_bias.to(xbc.dtype)
        xs, b, c, dt, a = self._split(conv, dt, acc)
        s, rep = len(slots), self.heads // self.groups
        b, c = b.repeat_interleave(rep, dim=1), c.repeat_interleave(rep, dim=1)  # [S, H, N]
        ssm.mul_(torch.exp(dt * a)[..., None, None]).addcmul_((dt[..., None] * xs)[..., None], b[:, :, None, :])
        y = torch.bmm(ssm.view(s * self.heads, self.head_dim, self.n), c.reshape(s * self.heads, self.n, 1))
        y = y.view(s, self.heads, self.head_dim) + self.d.to(acc)[:, None] * xs
        if contiguous:
            y = y[torch.argsort(perm)]
        else:
            state.conv[idx], state.ssm[idx] = conv_state, ssm
        return y.reshape(s, self.d_inner).to(xbc.dtype)

    def _sequence(self, xbc: torch.Tensor, dt: torch.Tensor, state: MambaState, slot: int) -> torch.Tensor:
        """One sequence's chunk of n > 1 new tokens [n, conv_dim] from its slot's state: causal conv1d as one op,
        then the chunked SSD scan; updates the slot."""
        acc = state.ssm.dtype
        window = torch.cat([state.conv[slot].to(xbc.dtype), xbc.t()], dim=1)  # [conv_dim, K-1+n]
        state.conv[slot] = window[:, -(self.kernel - 1):].to(acc)
        conv = F.conv1d(window[None], self.conv_weight[:, None, :].to(xbc.dtype), self.conv_bias.to(xbc.dtype),
                        groups=self.conv_dim)[0].t()  # [n, conv_dim]
        xs, b, c, dt, a = self._split(conv, dt, acc)
        y, h = ssd_scan(xs * dt[..., None], dt * a, b, c, self.chunk, state.ssm[slot])
        state.ssm[slot] = h
        y = y + self.d.to(acc)[:, None] * xs
        return y.reshape(xs.shape[0], self.d_inner).to(xbc.dtype)
