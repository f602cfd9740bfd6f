"""Rotary position embeddings: default, linear, llama3, YaRN and proportional (Gemma 4's p-RoPE) scaling, partial
rotary dims (HF convention: rotate_half on the first `rot_dim` dims)."""

from __future__ import annotations

import math

import torch


def inv_frequencies(rot_dim: int, theta: float, scaling: dict | None,
                    head_dim: int | None = None) -> tuple[torch.Tensor, float]:
    """Per-pair inverse frequencies [rot_dim/2] and the attention scale factor YaRN applies (1 otherwise).
    Proportional (p-RoPE) keeps the full head's frequency spacing, theta^(-2i / head_dim), for the rotated pairs only;
    the others spread the rotated dims over the whole range, theta^(-2i / rot_dim)."""
    kind = (scaling or {}).get("type") or (scaling or {}).get("rope_type")
    spread = (head_dim or rot_dim) if kind == "proportional" else rot_dim
    inv = 1.0 / theta ** (torch.arange(0, rot_dim, 2, dtype=torch.float64, device="cpu") / spread)
    if not kind or kind in ("default", "proportional"):
        return inv, 1.0
    if "factor" not in scaling:
        raise ValueError(f"rope scaling '{kind}' needs a factor")
    factor = float(scaling["factor"])
    if kind == "linear":
        return inv / factor, 1.0
    if kind == "llama3":
        return _llama3(inv, factor, scaling), 1.0
    if kind == "yarn":
        return _yarn(inv, rot_dim, theta, factor, scaling)
    raise ValueError(f"unsupported rope scaling '{kind}'")


def _llama3(inv: torch.Tensor, factor: float, s: dict) -> torch.Tensor:
    low, high = float(s.get("low_freq_factor", 1.0)), float(s.get("high_freq_factor", 4.0))
    old = float(s.get("original_max_position", s.get("original_max_position_embeddings", 8192)))
    wavelen = 2 * math.pi / inv
    smooth = (old / wavelen - low) / (high - low)
    scaled = torch.where(wavelen > old / low, inv / factor, inv)
    mid = (wavelen <= old / low) & (wavelen >= old / high)
    return torch.where(mid, (1 - smooth) * inv / factor + smooth * inv, scaled)


def _yarn(inv: torch.Tensor, dim: int, theta: float, factor: float, s: dict) -> tuple[torch.Tensor, float]:
    old = float(s.get("original_max_position", s.get("original_max_position_embeddings", 4096)))
    beta_fast, beta_slow = float(s.get("beta_fast", 32)), float(s.get("beta_slow", 1))

    def dim_for(rotations: float) -> float:
        return dim * math.log(old / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    lo, hi = max(math.floor(dim_for(beta_fast)), 0), min(math.ceil(dim_for(beta_slow)), dim - 1)
    ramp = ((torch.arange(dim // 2, dtype=torch.float64, device="cpu") - lo) / max(hi - lo, 1e-3)).clamp(0, 1)
    blended = inv / factor * ramp + inv * (1 - ramp)
    return blended, 0.1 * math.log(factor) + 1.0


class Rotary:
    """cos/sin tables up to `max_positions`, grown on demand; apply(x [T, heads, head_dim], positions [T])."""

    def __init__(self, head_dim: int, theta: float, scaling: dict | None, partial: float = 1.0):
        self.rot_dim = int(head_dim * partial) // 2 * 2
        self.inv, self.mscale = inv_frequencies(self.rot_dim, theta, scaling, head_dim)
        self.cos = self.sin = None

    def _tables(self, n: int, device, dtype):
        if self.cos is None or self.cos.shape[0] < n or self.cos.device != device:
            size = max(n, 4096)
            freqs = torch.outer(torch.arange(size, dtype=torch.float64, device="cpu"), self.inv)
            emb = torch.cat([freqs, freqs], dim=-1)
            self.cos = (emb.cos() * self.mscale).to(device)
            self.sin = (emb.sin() * self.mscale).to(device)
        return self.cos, self.sin

    def step_tables(self, meta, dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin [T, 1, rot_dim] at the step's positions, built once per step (in `meta.memo`) for every layer
        that shares this table; the longest position comes from the host's lengths (reading it off the device
        cost a sync per layer)."""
        key = ("rope", id(self), dtype)
        if key not in meta.memo:
            longest = meta.static_max_len or max(c + n for c, n in zip(meta.ctx_lens, meta.q_lens))
            cos, sin = self._tables(longest, meta.positions.device, dtype)
            meta.memo[key] = cos[meta.positions].to(dtype)[:, None, :], sin[meta.positions].to(dtype)[:, None, :]
        return meta.memo[key]

    def apply(self, x: torch.Tensor, meta) -> torch.Tensor:
        """x [T, heads, head_dim] rotated at the positions of `meta` (a StepMeta)."""
        cos, sin = self.step_tables(meta, x.dtype)
        rot, rest = x[..., : self.rot_dim], x[..., self.rot_dim:]
        half = self.rot_dim // 2
        rotated = torch.cat([-rot[..., half:], rot[..., :half]], dim=-1)
        out = rot * cos + rotated * sin
        return torch.cat([out, rest], dim=-1) if rest.numel() else out
