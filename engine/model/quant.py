"""QuantLinear: weight-only int8 / int4 linear layers for the micro-engine (formats: engine/quant_formats.py).

Kernels (torch 2.13)
--------------------
``QuantLinear.forward`` picks, per call, either a packed torch kernel or the reference
"dequantise then matmul" path, and records the choice in ``self.kernel``:

* ``"int8pack_mm"``      ``torch._weight_int8pack_mm(x[M,K], w_int8[N,K], scales[N])``;
  x, scales and output share one dtype (fp32/bf16/fp16), x must be 2-D and contiguous.
  On CPU only the bf16 path is vectorised; bf16 with ``K % 16 != 0`` returns garbage or
  segfaults in this build, so it is never called for that case.
* ``"int4pack_mm_cpu"``  ``aten._convert_weight_to_int4pack_for_cpu(codes int32[N,K], 1)``
  then ``aten._weight_int4pack_mm_for_cpu(x, packed, group_size, scale_and_zeros[K/g,N,2])``;
  N % 16 == 0, group_size in {32, 64, 128, 256}; scale_and_zeros in x's dtype.
* ``"int4pack_mm"``      CUDA tinygemm: ``aten._convert_weight_to_int4pack(uint8[N,K/2], inner_k_tiles)``
  then ``aten._weight_int4pack_mm`` with bf16 x and bf16 scale_and_zeros.  NOT exercised
  here (no GPU in the development sandbox).
* ``"dequant"``          dequantise ``FALLBACK_CHUNK_ELEMS`` weights (a block of output rows) at
  a time and matmul them; the full-precision weight is never whole, let alone kept on the
  module.  int8 applies the per-channel scale to the output ((x @ q^T) * s, exact codes);
  int4 decodes straight from the kernel layout (detected once per process and verified), so
  the module holds ONE copy of the codes.

``kernel_policy="auto"`` (default) uses a packed kernel only where it exists for the dtype /
shape *and* beats the fallback on this CPU: bf16 up to 16 (int8) / 32 (int4) rows.  The
fp32/fp16 CPU kernels are scalar loops, slower than the fallback even at one row, and the
bf16 ones lose to dequantise + AMX matmul for prefill.  ``"packed"`` uses a packed kernel
whenever one is supported; ``"dequant"`` forces the fallback.
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from roofline.engine.model.quant_formats import (  # noqa: F401  (re-exported: the public API and what the tests probe)
    _CPU_INT4_LAYOUTS,
    AUTO_MAX_ROWS_CPU,
    AUTO_MAX_ROWS_CUDA,
    INT4_KERNEL_GROUP_SIZES,
    KERNEL_POLICIES,
    Int4Weight,
    Int8Weight,
    _decode_cpu_int4_t,
    _dequant_int4_codes,
    _detect_cpu_int4_layout,
    _nbytes,
    _nibbles_x16,
    _pack_nibbles,
    _unpack_nibbles,
    dequantize,
    quantize_int4,
    quantize_int8,
)
from torch import Tensor, nn

__all__ = [
    "Int8Weight", "Int4Weight", "quantize_int8", "quantize_int4", "dequantize",
    "QuantLinear", "quantize_linears", "weight_bytes", "INT4_KERNEL_GROUP_SIZES",
]

FALLBACK_CHUNK_ELEMS = 1 << 22   # dequantised weight elements alive at once in the fallback (8 MiB bf16;
                                 # measured best: 4x larger is 2x slower, cache misses)


class QuantLinear(nn.Module):
    """Weight-only quantised drop-in for ``nn.Linear``.

    Holds only the quantised weight (plus scales/zeros and the bias); ``forward(x[..., in])``
    returns ``[..., out]`` in x's dtype (fp32 / bf16 / fp16).

    ``act_dtype`` is the dtype the scales are stored in (default: the Linear's weight dtype;
    fp32 if that is not fp32/bf16/fp16): the packed kernels want scales in x's dtype, so a bf16
    model keeps bf16 scales; a call in another dtype converts the (small) scales per call.

    ``self.kernel`` is the path the last forward took (``"int8pack_mm"``, ``"int4pack_mm_cpu"``,
    ``"int4pack_mm"`` or ``"dequant"``); ``self.packed_kernel`` the packed kernel this layer
    can use (None, with the reason in ``self.fallback_reason``).  Buffers: ``qweight`` (int8
    ``[out, in]``; int4: uint8 ``[out, in/2]`` in the kernel's layout, see ``int4_layout``),
    ``weight_scales`` ``[out]`` (int8) or ``scale_and_zeros`` ``[in/g, out, 2]`` (int4).
    """

    def __init__(self, linear: nn.Linear, fmt: str = "int8", group_size: int = 128, *,
                 act_dtype: torch.dtype | None = None, kernel_policy: str = "auto"):
        super().__init__()
        if not isinstance(linear, nn.Linear):
            raise TypeError(f"QuantLinear: expected nn.Linear, got {type(linear).__name__}")
        if fmt not in ("int8", "int4"):
            raise ValueError(f"QuantLinear: fmt must be 'int8' or 'int4', got {fmt!r}")
        if kernel_policy not in KERNEL_POLICIES:
            raise ValueError(f"QuantLinear: kernel_policy must be one of {KERNEL_POLICIES}, got {kernel_policy!r}")
        w = linear.weight.detach()
        if act_dtype is None:
            act_dtype = w.dtype if w.dtype in (torch.float32, torch.bfloat16, torch.float16) else torch.float32
        self.fmt = fmt
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.group_size = group_size if fmt == "int4" else None
        self.act_dtype = act_dtype
        self.kernel_policy = kernel_policy
        self.kernel: str | None = None          # path of the last forward
        self.packed_kernel: str | None = None   # packed kernel available to this layer
        self.fallback_reason: str | None = None
        self.int4_layout: str | None = None     # int4: "plain" | "cpu_packed" | "cuda_packed"
        device = w.device
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().clone(), requires_grad=False)

        if fmt == "int8":
            qw = quantize_int8(w, scale_dtype=act_dtype)
            self.register_buffer("qweight", qw.qweight)
            self.register_buffer("weight_scales", qw.scales)
            if device.type in ("cpu", "cuda") and hasattr(torch, "_weight_int8pack_mm"):
                self.packed_kernel = "int8pack_mm"
            else:
                self.fallback_reason = f"no int8 packed kernel for device {device.type}"
        else:
            scale_dtype = torch.bfloat16 if device.type == "cuda" else act_dtype  # tinygemm: bf16 only
            qw = quantize_int4(w, group_size, scale_dtype=scale_dtype)
            # kernel-ready [in/g, out, 2] (scale, zero); .scales / .zeros are views of it
            self.register_buffer("scale_and_zeros", torch.stack([qw.scales, qw.zeros], dim=-1).contiguous())
            self._init_int4_weight(qw, device)
        del w

    # -- int4 storage: ONE copy, in a kernel layout when a kernel can use it, else plain
    def _init_int4_weight(self, qw: Int4Weight, device: torch.device) -> None:
        n, k, g = self.out_features, self.in_features, qw.group_size
        why = None
        if g not in INT4_KERNEL_GROUP_SIZES:
            why = f"group_size {g} not in {INT4_KERNEL_GROUP_SIZES}"
        elif device.type == "cpu":
            if n % 16:
                why = f"out_features {n} not a multiple of 16"
            elif not hasattr(torch.ops.aten, "_weight_int4pack_mm_for_cpu"):
                why = "torch has no _weight_int4pack_mm_for_cpu"
            elif _detect_cpu_int4_layout() is None:
                why = "unknown CPU int4pack layout (could not dequantise from it)"
        elif device.type == "cuda":
            if n % 8 or k % 64:
                why = f"CUDA int4pack needs out % 8 == 0 and in % 64 == 0 (got {n}, {k})"
        else:
            why = f"no int4 packed kernel for device {device.type}"
        if why is None:
            try:
                if device.type == "cpu":
                    packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(qw.codes().to(torch.int32), 1)
                    self.int4_layout, self.packed_kernel = "cpu_packed", "int4pack_mm_cpu"
                else:
                    self.inner_k_tiles = 8 if k % 128 == 0 else 4
                    c = qw.codes()
                    hi_first = (c[:, 0::2] << 4 | c[:, 1::2]).contiguous()  # CUDA: even column in the HIGH nibble
                    packed = torch.ops.aten._convert_weight_to_int4pack(hi_first, self.inner_k_tiles)
                    self.int4_layout, self.packed_kernel = "cuda_packed", "int4pack_mm"
                self.register_buffer("qweight", packed)
                return
            except (RuntimeError, AttributeError) as e:  # kernel missing in this build
                why = f"packing failed: {str(e).splitlines()[0]}"
        self.fallback_reason = why
        self.int4_layout = "plain"
        self.register_buffer("qweight", qw.qweight)

    @property
    def scales(self) -> Tensor:
        """int8: ``[out]``; int4: ``[in/g, out]`` (a view of ``scale_and_zeros``)."""
        return self.weight_scales if self.fmt == "int8" else self.scale_and_zeros[..., 0]

    @property
    def zeros(self) -> Tensor | None:
        return self.scale_and_zeros[..., 1] if self.fmt == "int4" else None

    # -- the reference
    def quantized_weight(self) -> Int8Weight | Int4Weight:
        """This layer's weight in the plain format (decoded from the kernel layout if needed)."""
        if self.fmt == "int8":
            return Int8Weight(self.qweight, self.weight_scales)
        return Int4Weight(_pack_nibbles(self._int4_codes_t(0, self.out_features).T), self.scales.contiguous(),
                          self.zeros.contiguous(), self.group_size)

    def dequantized_weight(self, dtype: torch.dtype = torch.float32) -> Tensor:
        """``dequantize(self.quantized_weight())``: the reference weight [out, in] (a temporary)."""
        return dequantize(self.quantized_weight(), dtype)

    def _int4_codes_t(self, r0: int, r1: int) -> Tensor:
        """uint8 codes of output rows r0:r1, as [in, r1 - r0]."""
        n, k = self.out_features, self.in_features
        if self.int4_layout == "plain":
            return _unpack_nibbles(self.qweight[r0:r1]).T
        if self.int4_layout == "cpu_packed":
            bn, lanes = _CPU_INT4_LAYOUTS[_detect_cpu_int4_layout()]
            return _decode_cpu_int4_t(self.qweight.reshape(-1), n, k, r0, r1, bn, lanes)
        # CUDA tinygemm layout (untested here: no GPU in development): let the kernel decode it,
        # identity rows @ W^T, and recover the codes from the bf16 values
        dev, sz = self.qweight.device, self.scale_and_zeros.to(torch.bfloat16)
        parts = []
        for k0 in range(0, k, 1024):
            k1 = min(k, k0 + 1024)
            eye = torch.zeros(k1 - k0, k, dtype=torch.bfloat16, device=dev)
            eye[torch.arange(k1 - k0, device=dev), torch.arange(k0, k1, device=dev)] = 1
            parts.append(torch.ops.aten._weight_int4pack_mm(eye, self.qweight, self.group_size, sz)[:, r0:r1])
        wt = torch.cat(parts).float()
        g = self.group_size
        s = self.scales.float()[:, r0:r1].repeat_interleave(g, 0)
        z = self.zeros.float()[:, r0:r1].repeat_interleave(g, 0)
        return torch.round((wt - z) / s + 8).clamp_(0, 15).to(torch.uint8)

    # -- kernel choice
    def _packed_unsupported(self, x2: Tensor) -> str | None:
        """Why the packed kernel cannot run this call (None: it can)."""
        if self.packed_kernel is None:
            return self.fallback_reason
        dt, dev = x2.dtype, x2.device.type
        if dt not in (torch.float32, torch.bfloat16, torch.float16):
            return f"x dtype {dt}"
        if x2.shape[0] == 0:
            return "empty input"
        if self.fmt == "int8":
            if dev == "cpu" and dt == torch.bfloat16 and self.in_features % 16:
                # torch 2.13 CPU: bf16 int8pack_mm returns garbage (M<4) or segfaults (M>=4)
                # unless K % 16 == 0 (fp32/fp16 are fine)
                return f"bf16 int8pack_mm on CPU needs in_features % 16 == 0 (got {self.in_features})"
        elif dev == "cuda" and dt != torch.bfloat16:
            return f"CUDA int4pack_mm needs bf16 x (got {dt})"
        return None

    def _auto_prefers_packed(self, x2: Tensor) -> bool:
        m = x2.shape[0]
        if x2.device.type == "cuda":
            return m <= AUTO_MAX_ROWS_CUDA
        return m <= AUTO_MAX_ROWS_CPU.get((self.fmt, x2.dtype), 0)

    # -- forward
    def forward(self, x: Tensor) -> Tensor:
        if x.shape[-1] != self.in_features:
            raise ValueError(f"QuantLinear: expected x[..., {self.in_features}], got {tuple(x.shape)}")
        lead = x.shape[:-1]
        x2 = x.reshape(-1, self.in_features)
        use_packed = (self.kernel_policy != "dequant" and self._packed_unsupported(x2) is None
                      and (self.kernel_policy == "packed" or self._auto_prefers_packed(x2)))
        kernel = self.packed_kernel if use_packed else "dequant"
        if use_packed:
            try:
                y = self._packed(x2.contiguous())
            except RuntimeError as e:   # e.g. a kernel this build lacks for the device: stop trying
                self.fallback_reason = f"{kernel} failed: {str(e).splitlines()[0]}"
                self.packed_kernel, kernel = None, "dequant"
                y = self._dequant(x2)
        else:
            y = self._dequant(x2)
        self.kernel = kernel
        if self.bias is not None:
            y = y + self.bias.to(y.dtype)
        return y.reshape(*lead, self.out_features)

    def _packed(self, x2: Tensor) -> Tensor:
        dt = x2.dtype
        if self.fmt == "int8":
            return torch._weight_int8pack_mm(x2, self.qweight, self.weight_scales.to(dt))
        if self.int4_layout == "cpu_packed":
            return torch.ops.aten._weight_int4pack_mm_for_cpu(x2, self.qweight, self.group_size,
                                                              self.scale_and_zeros.to(dt))
        return torch.ops.aten._weight_int4pack_mm(x2, self.qweight, self.group_size,
                                                  self.scale_and_zeros.to(torch.bfloat16))

    def _dequant(self, x2: Tensor) -> Tensor:
        """Dequantise-then-matmul, a chunk of output rows at a time (bounded temporaries)."""
        dt, n, k = x2.dtype, self.out_features, self.in_features
        if not (dt.is_floating_point and dt.itemsize >= 2):
            raise TypeError(f"QuantLinear: x must be fp32/bf16/fp16, got {dt}")
        if self.int4_layout == "cuda_packed":
            return F.linear(x2, _dequant_int4_codes(self._int4_codes_t(0, n).T, self.scales, self.zeros,
                                                    self.group_size, dt))
        step = 64 if self.int4_layout == "cpu_packed" else 1
        rows = max(step, (FALLBACK_CHUNK_ELEMS // k) // step * step)
        if rows >= n:
            return self._dequant_rows(x2, 0, n)
        y = torch.empty(x2.shape[0], n, dtype=dt, device=x2.device)
        for r0 in range(0, n, rows):
            r1 = min(n, r0 + rows)
            y[:, r0:r1] = self._dequant_rows(x2, r0, r1)
        return y

    def _dequant_rows(self, x2: Tensor, r0: int, r1: int) -> Tensor:
        dt = x2.dtype
        if self.fmt == "int8":
            q, s = self.qweight[r0:r1], self.weight_scales[r0:r1].to(dt)
            if dt == torch.float16:  # x @ q^T could overflow fp16 before scaling: scale the weight
                return F.linear(x2, q.to(dt) * s[:, None])
            # the per-row scale commutes with the matmul: (x @ q^T) * s.  int8 codes are exact in
            # bf16/fp32, so this rounds no more than scaling the weight first
            return F.linear(x2, q.to(dt)) * s
        g, k, r = self.group_size, self.in_features, r1 - r0
        # dequantise in bf16/fp32 (fp16: in fp32, a scale/16 could be subnormal in fp16)
        cdt = dt if dt in (torch.float32, torch.bfloat16) else torch.float32
        sz = self.scale_and_zeros[:, r0:r1]                          # [G, R, 2]
        s16 = (sz[..., 0].to(cdt) / 16).unsqueeze(1)                 # contiguous copies: strided
        z = sz[..., 1].to(cdt).contiguous().unsqueeze(1)             # operands slow addcmul ~4x
        wt = self._int4_x16_t(r0, r1, cdt)                           # [K, R] = 16*(q-8), exact
        w3 = wt.view(k // g, g, r)
        torch.addcmul(z, w3, s16, out=w3)                            # (q-8)*s + z, one rounding
        return x2 @ (wt if cdt == dt else wt.to(dt))

    def _int4_x16_t(self, r0: int, r1: int, dtype: torch.dtype) -> Tensor:
        """16*(codes-8) of output rows r0:r1 as ``dtype`` [in, r1-r0] (the fallback's decode)."""
        n, k, r = self.out_features, self.in_features, r1 - r0
        if self.int4_layout == "plain":
            lo, hi = _nibbles_x16(self.qweight[r0:r1])                # [R, K/2]
            out = torch.empty(k // 2, 2, r, dtype=dtype, device=lo.device)
            out[:, 0].copy_(lo.T)
            out[:, 1].copy_(hi.T)
            return out.view(k, r)
        if self.int4_layout != "cpu_packed":
            return (self._int4_codes_t(r0, r1).to(dtype) - 8) * 16
        bn, lanes = _CPU_INT4_LAYOUTS[_detect_cpu_int4_layout()]
        flat = self.qweight.reshape(-1)
        out = torch.empty(k, r, dtype=dtype, device=flat.device)
        full_end = (n // bn) * bn
        e = min(r1, full_end)
        if e > r0:                                                    # whole blocks
            nblk = (e - r0) // bn
            lo, hi = _nibbles_x16(flat[r0 * k // 2: e * k // 2].view(nblk, k, bn // 2))
            dst = out[:, : e - r0].view(k, nblk, bn)
            if lanes:      # byte j: rows j (lo) and j + bn/2 (hi)
                dst[:, :, : bn // 2].copy_(lo.permute(1, 0, 2))
                dst[:, :, bn // 2:].copy_(hi.permute(1, 0, 2))
            else:          # pairwise: byte j: rows 2j (lo) and 2j+1 (hi)
                dst = dst.view(k, nblk, bn // 2, 2)
                dst[..., 0].copy_(lo.permute(1, 0, 2))
                dst[..., 1].copy_(hi.permute(1, 0, 2))
        if r1 > full_end:                                             # partial last block: pairwise
            a = max(r0, full_end)
            lo, hi = _nibbles_x16(flat[a * k // 2: r1 * k // 2].view(k, (r1 - a) // 2))
            dst = out[:, a - r0:].view(k, (r1 - a) // 2, 2)
            dst[..., 0].copy_(lo)
            dst[..., 1].copy_(hi)
        return out

    def extra_repr(self) -> str:
        g = f", group_size={self.group_size}" if self.fmt == "int4" else ""
        return (f"in_features={self.in_features}, out_features={self.out_features}, fmt={self.fmt}{g}, "
                f"bias={self.bias is not None}, packed_kernel={self.packed_kernel}, policy={self.kernel_policy}")


# ------------------------------------------------------------------------- helpers
def quantize_linears(module: nn.Module, fmt: str, group_size: int = 128,
                     skip: Callable[[str], bool] | None = None, **qlinear_kwargs) -> nn.Module:
    """Replace every ``nn.Linear`` (by qualified name, e.g. ``layers.0.mlp.up``) in place.

    ``skip(name) -> True`` keeps that Linear as is (e.g. ``lambda n: n == "lm_head"``).  A
    root module that is itself an ``nn.Linear`` cannot be replaced in place: wrap it.
    Extra keyword arguments go to ``QuantLinear`` (``act_dtype``, ``kernel_policy``).
    Returns ``module``.
    """
    if isinstance(module, nn.Linear):
        raise TypeError("quantize_linears: the root module is an nn.Linear; use QuantLinear(linear, ...)")
    targets = [(name, m) for name, m in module.named_modules()
               if isinstance(m, nn.Linear) and not isinstance(m, QuantLinear) and not (skip and skip(name))]
    for name, lin in targets:
        parent_name, _, attr = name.rpartition(".")
        parent = module.get_submodule(parent_name) if parent_name else module
        try:
            q = QuantLinear(lin, fmt, group_size, **qlinear_kwargs)
        except ValueError as e:
            raise ValueError(f"quantize_linears: layer {name!r}: {e}") from e
        setattr(parent, attr, q)
    return module


def weight_bytes(qlinear: nn.Module) -> int:
    """Bytes held for the weight: quantised weight + scales (+ zeros); bias excluded.

    For a plain ``nn.Linear`` the bytes of its weight, so callers can sum over a model."""
    if isinstance(qlinear, QuantLinear):
        held = [qlinear.qweight, qlinear.weight_scales if qlinear.fmt == "int8" else qlinear.scale_and_zeros]
        return sum(_nbytes(t) for t in held)
    if isinstance(qlinear, nn.Linear):
        return _nbytes(qlinear.weight)
    raise TypeError(f"weight_bytes: expected QuantLinear or nn.Linear, got {type(qlinear).__name__}")
