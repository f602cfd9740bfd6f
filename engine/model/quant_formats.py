"""Weight-only int8 / int4 quantisation for the micro-engine.

Formats
-------
int8  symmetric, per output channel::

        scale[o] = absmax(w[o, :]) / 127
        q[o, i]  = clamp(round(w[o, i] / scale[o]), -127, 127)      (int8)
        w'[o, i] = q[o, i] * scale[o]

int4  *asymmetric*, group-wise over the input dimension, with a floating-point zero
      point (the "tinygemm" convention used by torch's ``_weight_int4pack_mm*`` kernels)::

        g           = i // group_size
        scale[g, o] = (max - min) / 15          over w[o, g*group_size:(g+1)*group_size]
        zero[g, o]  = min + 8 * scale[g, o]
        q[o, i]     = clamp(round((w[o, i] - zero[g, o]) / scale[g, o]) + 8, 0, 15)   (uint4)
        w'[o, i]    = (q[o, i] - 8) * scale[g, o] + zero[g, o]

      Codes are stored two per byte, ``Int4Weight.qweight`` is uint8 ``[out, in/2]`` with
      column ``2j`` in the low nibble and ``2j+1`` in the high nibble.

Both round to nearest, so with fp32 scales ``|w - w'| <= scale / 2`` element-wise.  When
the scales are stored in a narrower dtype (``scale_dtype=torch.bfloat16``, what a bf16
layer uses because the packed kernels want scales in the activation dtype) the scales are
rounded *first* and the codes computed against the rounded values, so ``dequantize`` stays
the exact reference for what the kernels compute (the bound then loosens by the rounding of
the scale, and for int4 of the zero point: up to ~2^-8 |w|).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

INT4_KERNEL_GROUP_SIZES = (32, 64, 128, 256)
KERNEL_POLICIES = ("auto", "packed", "dequant")

# "auto" thresholds: the largest number of rows (tokens) for which the packed kernel beats dequantise-then-GEMM
# (benchmarks/quant_matmul.py; figures in docs/engine.md). The fp32/fp16 CPU kernels are scalar loops that lose
# already at one row, so they run only with kernel_policy="packed".
AUTO_MAX_ROWS_CPU = {
    ("int8", torch.bfloat16): 16,
    ("int4", torch.bfloat16): 32,
}
AUTO_MAX_ROWS_CUDA = 64  # tinygemm / int8 gemv are decode kernels (untested here)


# --------------------------------------------------------------------------- formats
@dataclass(frozen=True)
class Int8Weight:
    """Symmetric per-output-channel int8: ``w ~= qweight * scales[:, None]``."""
    qweight: Tensor   # int8 [out, in]
    scales: Tensor    # [out], float

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.qweight.shape)

    @property
    def nbytes(self) -> int:
        return _nbytes(self.qweight) + _nbytes(self.scales)


@dataclass(frozen=True)
class Int4Weight:
    """Asymmetric group-wise uint4: ``w ~= (q - 8) * scales[g, o] + zeros[g, o]``."""
    qweight: Tensor   # uint8 [out, in // 2], column 2j in the low nibble, 2j+1 in the high
    scales: Tensor    # [in // group_size, out], float
    zeros: Tensor     # [in // group_size, out], float (zero point in the float domain)
    group_size: int

    @property
    def shape(self) -> tuple[int, int]:
        return (self.qweight.shape[0], self.qweight.shape[1] * 2)

    @property
    def nbytes(self) -> int:
        return _nbytes(self.qweight) + _nbytes(self.scales) + _nbytes(self.zeros)

    def codes(self) -> Tensor:
        """Unpacked codes, uint8 [out, in] in 0..15."""
        return _unpack_nibbles(self.qweight)


def _nbytes(t: Tensor) -> int:
    return t.numel() * t.element_size()


def _check_2d_float(w: Tensor, who: str) -> None:
    if not isinstance(w, Tensor) or w.dim() != 2:
        raise ValueError(f"{who}: expected a 2-D weight [out, in], got {getattr(w, 'shape', type(w))}")
    if not w.is_floating_point():
        raise ValueError(f"{who}: expected a floating-point weight, got {w.dtype}")
    if w.numel() == 0:
        raise ValueError(f"{who}: empty weight {tuple(w.shape)}")


def _round_scale(s: Tensor, scale_dtype: torch.dtype) -> Tensor:
    """Scales in ``scale_dtype``, never zero/subnormal (a zero scale would divide by zero)."""
    tiny = torch.finfo(scale_dtype).tiny
    return s.clamp(min=tiny).to(scale_dtype)


def quantize_int8(w: Tensor, scale_dtype: torch.dtype = torch.float32) -> Int8Weight:
    """Symmetric per-output-channel int8 (scale = absmax/127 per row)."""
    _check_2d_float(w, "quantize_int8")
    wf = w.detach().float()
    scales = _round_scale(wf.abs().amax(dim=1) / 127.0, scale_dtype)
    q = torch.round(wf / scales.float()[:, None]).clamp_(-127, 127).to(torch.int8)
    return Int8Weight(qweight=q.contiguous(), scales=scales.contiguous())


def quantize_int4(w: Tensor, group_size: int = 128, scale_dtype: torch.dtype = torch.float32) -> Int4Weight:
    """Asymmetric group-wise uint4 over the input dimension (see module docstring).

    ``in`` must be even and a multiple of ``group_size``; otherwise ValueError.
    """
    _check_2d_float(w, "quantize_int4")
    n, k = w.shape
    if not isinstance(group_size, int) or group_size < 1:
        raise ValueError(f"quantize_int4: group_size must be a positive int, got {group_size!r}")
    if k % group_size:
        raise ValueError(
            f"quantize_int4: in_features={k} is not a multiple of group_size={group_size}; "
            f"choose a group_size dividing {k} (e.g. {math.gcd(k, group_size)}) or skip this layer")
    if k % 2:
        raise ValueError(f"quantize_int4: in_features={k} must be even (two 4-bit codes per byte)")
    ng = k // group_size
    wg = w.detach().float().reshape(n, ng, group_size)
    lo = wg.amin(dim=2)
    hi = wg.amax(dim=2)
    scale = (hi - lo) / 15.0
    # constant group: any positive scale reproduces it (code 0 -> -8*s + (lo + 8*s) = lo)
    flat = scale <= torch.finfo(torch.float32).eps * torch.maximum(hi.abs(), lo.abs())
    scale = torch.where(flat, torch.maximum(hi.abs(), lo.abs()) / 8.0, scale)
    scale = _round_scale(scale, scale_dtype)
    zero = (lo + 8.0 * scale.float()).to(scale_dtype)
    sf, zf = scale.float()[..., None], zero.float()[..., None]
    q = torch.round((wg - zf) / sf).add_(8).clamp_(0, 15).to(torch.uint8).reshape(n, k)
    return Int4Weight(qweight=_pack_nibbles(q), scales=scale.T.contiguous(), zeros=zero.T.contiguous(),
                      group_size=group_size)


def _pack_nibbles(q: Tensor) -> Tensor:
    """uint8 codes [n, k] (0..15) -> uint8 [n, k/2], even column in the low nibble."""
    q = q.to(torch.uint8)
    return (q[:, 0::2] | (q[:, 1::2] << 4)).contiguous()


def _unpack_nibbles(p: Tensor) -> Tensor:
    n = p.shape[0]
    return torch.stack([p & 0xF, p >> 4], dim=-1).reshape(n, -1)


_HI_NIBBLES = 0xF0F0F0F0 - (1 << 32)   # as int32
_SIGN_BITS = 0x80808080 - (1 << 32)


def _nibbles_x16(p: Tensor) -> tuple[Tensor, Tensor]:
    """Bytes -> (16*(lo-8), 16*(hi-8)) as int8, same shape, 4 bytes per int32 op.

    A nibble c moved to the top of its byte and xor'ed with 0x80 reads, as a signed byte,
    16*(c - 8): the offset and the sign extension come for free, and 1/16 goes into the scale
    (exact: a power of two)."""
    flat = p.reshape(-1)
    if flat.numel() % 4 == 0 and flat.storage_offset() % 4 == 0:
        v = flat.view(torch.int32)
        hi = ((v & _HI_NIBBLES) ^ _SIGN_BITS).view(torch.int8)
        lo = (((v << 4) & _HI_NIBBLES) ^ _SIGN_BITS).view(torch.int8)
    else:  # unaligned: byte-wise (uint8 << 4 drops the high nibble by itself)
        hi = ((flat & 0xF0) ^ 0x80).view(torch.int8)
        lo = ((flat << 4) ^ 0x80).view(torch.int8)
    return lo.view(p.shape), hi.view(p.shape)


def dequantize(qw: Int8Weight | Int4Weight, dtype: torch.dtype = torch.float32) -> Tensor:
    """The reference: full-precision weight [out, in] (computed in fp32, returned in ``dtype``)."""
    if isinstance(qw, Int8Weight):
        return (qw.qweight.float() * qw.scales.float()[:, None]).to(dtype)
    if isinstance(qw, Int4Weight):
        return _dequant_int4_codes(qw.codes(), qw.scales, qw.zeros, qw.group_size, torch.float32).to(dtype)
    raise TypeError(f"dequantize: expected Int8Weight or Int4Weight, got {type(qw).__name__}")


def _dequant_int4_codes(codes: Tensor, scales: Tensor, zeros: Tensor, group_size: int,
                        dtype: torch.dtype) -> Tensor:
    """codes [n, k] uint8, scales/zeros [k/g, n] -> w [n, k] in ``dtype``.

    In fp32 this is bit-identical to the fp32 CPU kernel's fma((q-8), s, z)."""
    n, k = codes.shape
    s = scales.T.to(dtype)[..., None]
    z = zeros.T.to(dtype)[..., None]
    w = codes.reshape(n, k // group_size, group_size).to(dtype).sub_(8)
    return torch.addcmul(z, w, s).reshape(n, k)


# ------------------------------------------------------- CPU int4 kernel layout (decode)
# _convert_weight_to_int4pack_for_cpu returns uint8 [N, K/2] in a layout that depends on the
# CPU capability torch dispatched to (blocks of 64 rows on AVX512, 32 on AVX2/other).  The
# fallback path must dequantise from that layout (keeping a second, plain copy would double
# the memory), so the layout is *detected* once per process with a probe and verified; if no
# known decoder matches, QuantLinear keeps the plain layout and never uses the CPU kernel.

def _decode_cpu_int4_t(flat: Tensor, n: int, k: int, r0: int, r1: int, block_n: int, lanes: int) -> Tensor:
    """Codes of rows ``r0:r1`` as uint8 ``[k, r1 - r0]`` (k-major, the order they are stored in).

    Inverse of torch's ``weight_to_int4pack_kernel``: rows come in blocks of ``block_n``; for
    every k a full block stores ``block_n/2`` bytes.  ``lanes > 0`` (AVX512: 2, AVX2: 1): byte
    ``j`` holds row ``j`` in the low nibble and row ``j + block_n/2`` in the high one.
    ``lanes == 0`` ("pairwise", the non-vectorised build), and always for a partial last block:
    byte ``j`` holds rows ``2j`` (low) and ``2j+1`` (high).  ``r0`` must be a multiple of
    ``block_n`` and ``r1`` one too or ``n``."""
    parts = []
    full_end = (n // block_n) * block_n
    e = min(r1, full_end)
    if e > r0:
        nblk = (e - r0) // block_n
        b = flat[r0 * k // 2: e * k // 2].view(nblk, k, block_n // 2)
        lo, hi = b & 0xF, b >> 4
        t = torch.cat([lo, hi], dim=-1) if lanes else torch.stack([lo, hi], dim=-1).view(nblk, k, block_n)
        parts.append(t.permute(1, 0, 2).reshape(k, nblk * block_n))
    if r1 > full_end:
        a = max(r0, full_end)
        b = flat[a * k // 2: r1 * k // 2].view(k, (r1 - a) // 2)
        parts.append(torch.stack([b & 0xF, b >> 4], dim=-1).view(k, r1 - a))
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)


_CPU_INT4_LAYOUTS = {"avx512": (64, 2), "avx2": (32, 1), "pairwise": (32, 0)}
_cpu_int4_layout: str | None | bool = False  # False = not probed yet, None = no known layout


def _detect_cpu_int4_layout() -> str | None:
    """Which decoder inverts ``_convert_weight_to_int4pack_for_cpu`` here (probed once)."""
    global _cpu_int4_layout
    if _cpu_int4_layout is not False:
        return _cpu_int4_layout
    found = None
    try:
        op = torch.ops.aten._convert_weight_to_int4pack_for_cpu
        gen = torch.Generator().manual_seed(0)
        n, k = 64 * 2 + 48, 64          # full 64-row blocks plus a 48-row tail
        codes = torch.randint(0, 16, (n, k), generator=gen, dtype=torch.int32)
        flat = op(codes, 1).reshape(-1)
        for name, (bn, lanes) in _CPU_INT4_LAYOUTS.items():
            whole = _decode_cpu_int4_t(flat, n, k, 0, n, bn, lanes)
            split = torch.cat([_decode_cpu_int4_t(flat, n, k, 0, 2 * bn, bn, lanes),
                               _decode_cpu_int4_t(flat, n, k, 2 * bn, n, bn, lanes)], dim=1)
            if torch.equal(whole.T.to(torch.int32), codes) and torch.equal(split, whole):
                found = name
                break
    except (AttributeError, RuntimeError):
        found = None
    _cpu_int4_layout = found
    return found


# ------------------------------------------------------------------------- the module
