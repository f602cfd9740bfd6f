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
    """Chunked SSD (Mamba-2 paper, 'minimal discrete'): x [L, H, P] (dt-scaled), a [L, H] (dt*A), b/c [L, H, N],
    h0 [H, P, N] -> y [L, H, P], final state [H, P, N]. Padding to whole chunks leaves the state unchanged."""
    length = x.shape[0]
    pad = (-length) % chunk
    if pad:
        x, a, b, c = (F.pad(t, (0, 0) * (t.dim() - 1) + (0, pad)) for t in (x, a, b, c))
    n = x.shape[0] // chunk
    x, b, c = (t.reshape(n, chunk, *t.shape[1:]) for t in (x, b, c))
    a = a.reshape(n, chunk, -1).permute(2, 0, 1)  # [H, n, l]
    a_cum = a.cumsum(-1)
    decay = torch.exp(segsum(a))  # [H, n, l, l]
    y_diag = torch.einsum("clhn,cshn,hcls,cshp->clhp", c, b, decay, x)
    to_end = torch.exp(a_cum[:, :, -1:] - a_cum)  # [H, n, l]
    states = torch.einsum("clhn,hcl,clhp->chpn", b, to_end, x)
    states = torch.cat([h0[None], states], dim=0)  # [n+1, H, P, N]
    chunk_decay = torch.exp(segsum(F.pad(a_cum[:, :, -1], (1, 0))))  # [H, n+1, n+1]
    states = torch.einsum("hzc,chpn->zhpn", chunk_decay, states)
    y_off = torch.einsum("clhn,chpn,hcl->clhp", c, states[:-1], torch.exp(a_cum))
    y = (y_diag + y_off).reshape(n * chunk, *y_diag.shape[2:])
    return y[:length], states[-1]


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
        for q0, n, slot in zip(meta.q_starts, meta.q_lens, meta.state_slots):
            y[q0:q0 + n] = self._sequence(xbc[q0:q0 + n], dt[q0:q0 + n], state, slot)
        y = y * F.silu(z)
        yf = y.to(torch.promote_types(y.dtype, torch.float32))
        y = (yf * torch.rsqrt(yf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.norm_weight
        return self.out_proj(y)

    def _sequence(self, xbc: torch.Tensor, dt: torch.Tensor, state: MambaState, slot: int) -> torch.Tensor:
        """One sequence's new tokens [n, conv_dim] from its slot's state; updates the slot."""
        acc = state.ssm.dtype
        window = torch.cat([state.conv[slot].to(xbc.dtype), xbc.t()], dim=1)  # [conv_dim, K-1+n]
        state.conv[slot] = window[:, -(self.kernel - 1):].to(acc)
        conv = F.conv1d(window[None], self.conv_weight[:, None, :].to(xbc.dtype), self.conv_bias.to(xbc.dtype),
                        groups=self.conv_dim)[0].t()  # [n, conv_dim]
        xs, b, c = F.silu(conv).to(acc).split([self.d_inner, self.groups * self.n, self.groups * self.n], dim=-1)
        n = xs.shape[0]
        xs = xs.view(n, self.heads, self.head_dim)
        b = b.view(n, self.groups, self.n).repeat_interleave(self.heads // self.groups, dim=1)
        c = c.view(n, self.groups, self.n).repeat_interleave(self.heads // self.groups, dim=1)
        dt = F.softplus(dt.to(acc) + self.dt_bias.to(acc))  # [n, H]
        a = -torch.exp(self.a_log.to(acc))  # [H]
        if n == 1:  # decode: h = exp(dt A) h + dt x (outer) B; y = C h
            h = state.ssm[slot] * torch.exp(dt[0] * a)[:, None, None] + (dt[0, :, None] * xs[0])[..., None] * b[0][:, None, :]
            y = (h * c[0][:, None, :]).sum(-1)[None]
        else:
            y, h = ssd_scan(xs * dt[..., None], dt * a, b, c, self.chunk, state.ssm[slot])
        state.ssm[slot] = h
        y = y + self.d.to(acc)[:, None] * xs
        return y.reshape(n, self.d_inner).to(xbc.dtype)
