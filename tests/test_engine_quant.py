"""engine.quant: int8 / int4 weight-only quantisation, packed CPU kernels and their fallback.

Tolerances.  A packed kernel is checked against *its own* reference, ``x @ dequantize(qw).T``
(+ bias) computed in fp32 from the very codes and scales the layer holds, never against the
original float weights.  The only differences left are rounding:

* fp32: summation order of a K-term dot product, |err| <= ~K*u * sum|x||w| (u = 2^-24), plus a
  couple of single roundings (per-channel scale, bias);
* bf16 / fp16: the output is rounded to the activation dtype (u = 2^-8 / 2^-11), the bias
  add rounds once more, the fallback rounds each dequantised weight once, and the per-channel
  int8 scale is applied with one more rounding; accumulation is fp32 (K*2^-24).

Hence ``|y - ref| <= tol * (|x| @ |W|^T + |b|)`` element-wise with tol = (K + 4) * 2^-24 for fp32
and 4u + K * 2^-24 for bf16/fp16.  That is tight: a wrong code, scale, zero point, group or
nibble order moves results by ~scale * |x|, orders of magnitude above it.
"""
import pytest

torch = pytest.importorskip("torch")

import roofline.engine.model.quant as Q  # noqa: E402
import roofline.engine.model.quant_formats as QF  # noqa: E402
from roofline.engine.model.quant import (  # noqa: E402
    Int4Weight,
    Int8Weight,
    QuantLinear,
    dequantize,
    quantize_int4,
    quantize_int8,
    quantize_linears,
    weight_bytes,
)
from torch import nn  # noqa: E402

UNIT = {torch.float32: 2.0 ** -24, torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}
HAS_INT8_KERNEL = hasattr(torch, "_weight_int8pack_mm")
HAS_INT4_CPU_KERNEL = (hasattr(torch.ops.aten, "_weight_int4pack_mm_for_cpu")
                       and Q._detect_cpu_int4_layout() is not None)


def _weights(n, k, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(n, k, generator=g) * 0.05
    w[0, : k // 3] *= 40.0          # an outlier-heavy row/group
    if n > 2:
        w[2] = 0.0                  # an all-zero row: scale must not be 0 / NaN
    return w.to(dtype)


def _linear(n, k, bias=True, dtype=torch.float32, seed=0):
    lin = nn.Linear(k, n, bias=bias)
    with torch.no_grad():
        lin.weight.copy_(_weights(n, k, seed))
        if bias:
            lin.bias.copy_(torch.linspace(-1, 1, n))
    return lin.to(dtype)


def _assert_matches_reference(y, x, w_ref, bias):
    """y (x's dtype) vs fp32 ``x @ w_ref.T + bias`` within the rounding budget (module doc)."""
    dt, k = x.dtype, x.shape[-1]
    xf = x.float()
    ref = xf @ w_ref.T
    scale = xf.abs() @ w_ref.abs().T
    if bias is not None:
        ref = ref + bias.float()
        scale = scale + bias.float().abs()
    tol = (k + 4) * UNIT[dt] if dt == torch.float32 else 4 * UNIT[dt] + k * 2.0 ** -24
    assert y.dtype == dt and y.shape == ref.shape
    err = (y.float() - ref).abs()
    worst = (err / (scale + 1e-30)).max().item()
    assert worst <= tol, f"max |err| / (|x||W|) = {worst:.3g} > {tol:.3g}"


# ------------------------------------------------------------------- quantise / dequantise
def test_int8_roundtrip_within_half_a_step():
    w = _weights(48, 200)
    qw = quantize_int8(w)
    assert isinstance(qw, Int8Weight)
    assert qw.qweight.dtype == torch.int8 and qw.qweight.shape == (48, 200)
    assert qw.scales.shape == (48,) and qw.scales.dtype == torch.float32
    assert int(qw.qweight.min()) >= -127 and int(qw.qweight.max()) <= 127
    assert torch.allclose(qw.scales[1], w[1].abs().max() / 127)
    err = (dequantize(qw) - w).abs()
    assert torch.all(err <= qw.scales[:, None] / 2 * (1 + 1e-5))
    assert torch.all(dequantize(qw)[2] == 0)                      # zero row stays exactly zero
    assert torch.isfinite(qw.scales).all() and (qw.scales > 0).all()


@pytest.mark.parametrize("group_size", [32, 64, 128])
def test_int4_roundtrip_within_half_a_step(group_size):
    n, k = 40, 256
    w = _weights(n, k)
    qw = quantize_int4(w, group_size)
    assert isinstance(qw, Int4Weight) and qw.group_size == group_size
    assert qw.qweight.dtype == torch.uint8 and qw.qweight.shape == (n, k // 2)
    assert qw.scales.shape == qw.zeros.shape == (k // group_size, n)
    codes = qw.codes()
    assert codes.shape == (n, k) and int(codes.max()) <= 15
    # nibble order: column 2j low, 2j+1 high
    assert torch.equal(qw.qweight, codes[:, 0::2] | (codes[:, 1::2] << 4))
    step = qw.scales.T.repeat_interleave(group_size, dim=1)        # [n, k]
    err = (dequantize(qw) - w).abs()
    assert torch.all(err <= step / 2 * (1 + 1e-5) + 1e-7)
    # asymmetric: each group's min and max are reproduced to within half a step
    wg = w.reshape(n, k // group_size, group_size)
    dg = dequantize(qw).reshape(n, k // group_size, group_size)
    assert torch.all((dg.amin(-1) - wg.amin(-1)).abs() <= qw.scales.T / 2 + 1e-7)
    assert torch.all((dg.amax(-1) - wg.amax(-1)).abs() <= qw.scales.T / 2 + 1e-7)


def test_int4_constant_and_zero_groups_are_exact():
    w = torch.zeros(16, 64)
    w[1] = 0.37
    w[2, :32] = -1.5
    d = dequantize(quantize_int4(w, 32))
    assert torch.allclose(d, w, atol=1e-6, rtol=0)
    assert torch.equal(dequantize(quantize_int4(w, 32))[0], w[0])


def test_bf16_scales_are_exact_reference():
    """scale_dtype=bf16 rounds the scales first and codes against them: dequantize is then
    exactly what a kernel fed bf16 scales computes, and the error stays ~half a step."""
    w = _weights(32, 128)
    for qw in (quantize_int8(w, scale_dtype=torch.bfloat16), quantize_int4(w, 64, scale_dtype=torch.bfloat16)):
        assert qw.scales.dtype == torch.bfloat16
        step = qw.scales.float()[:, None] if isinstance(qw, Int8Weight) else \
            qw.scales.float().T.repeat_interleave(64, dim=1)
        err = (dequantize(qw) - w).abs()
        # bf16 zero points (int4) may sit up to ulp(zero) off the ideal grid: ~2^-8 of |w|
        assert torch.all(err <= step * 0.51 + w.abs() * 2.0 ** -7 + 1e-7)


@pytest.mark.parametrize("k,group_size", [(100, 128), (200, 128), (96, 64)])
def test_int4_in_not_multiple_of_group_is_rejected(k, group_size):
    with pytest.raises(ValueError, match="not a multiple of group_size"):
        quantize_int4(torch.randn(16, k), group_size)
    with pytest.raises(ValueError, match="group_size"):
        QuantLinear(nn.Linear(k, 16), "int4", group_size)


def test_bad_inputs_are_rejected():
    with pytest.raises(ValueError, match="even"):
        quantize_int4(torch.randn(16, 33), 33)
    with pytest.raises(ValueError, match="2-D"):
        quantize_int8(torch.randn(4, 4, 4))
    with pytest.raises(ValueError, match="fmt"):
        QuantLinear(nn.Linear(8, 8), "int3")
    with pytest.raises(ValueError, match="kernel_policy"):
        QuantLinear(nn.Linear(8, 8), "int8", kernel_policy="fast")
    with pytest.raises(TypeError):
        dequantize(torch.randn(2, 2))
    with pytest.raises(ValueError, match=r"x\[\.\.\., 8\]"):
        QuantLinear(nn.Linear(8, 4), "int8")(torch.randn(3, 7))


# ------------------------------------------------------------------------- QuantLinear
SHAPES = [(64, 256), (176, 256), (40, 128)]   # full 64-row blocks / a 48-row tail / N % 16 != 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("policy", ["packed", "dequant"])
@pytest.mark.parametrize("fmt", ["int8", "int4"])
@pytest.mark.parametrize("n,k", SHAPES)
def test_quantlinear_matches_its_dequantised_reference(n, k, fmt, policy, dtype):
    lin = _linear(n, k, dtype=dtype)
    ql = QuantLinear(lin, fmt, group_size=64, kernel_policy=policy)
    # the reference: quantise the same weights independently with the layer's scale dtype
    qw = quantize_int8(lin.weight, scale_dtype=dtype) if fmt == "int8" else \
        quantize_int4(lin.weight, 64, scale_dtype=dtype)
    w_ref = dequantize(qw)
    assert torch.equal(ql.dequantized_weight(), w_ref)        # decoding the kernel layout is exact
    x = torch.randn(2, 5, k, generator=torch.Generator().manual_seed(1)).to(dtype)
    y = ql(x)
    assert y.shape == (2, 5, n)
    _assert_matches_reference(y, x, w_ref, lin.bias)
    if policy == "dequant":
        assert ql.kernel == "dequant"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("fmt", ["int8", "int4"])
def test_packed_kernels_are_used_where_supported(fmt, dtype):
    ql = QuantLinear(_linear(128, 256, bias=False, dtype=dtype), fmt, 64, kernel_policy="packed")
    x = torch.randn(3, 256).to(dtype)
    ql(x)
    if fmt == "int8" and HAS_INT8_KERNEL:
        assert ql.kernel == ql.packed_kernel == "int8pack_mm"
    elif fmt == "int4" and HAS_INT4_CPU_KERNEL:
        assert ql.int4_layout == "cpu_packed"
        assert ql.kernel == ql.packed_kernel == "int4pack_mm_cpu"
    else:
        assert ql.kernel == "dequant" and ql.fallback_reason


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("fmt", ["int8", "int4"])
def test_forced_fallback_gives_the_same_result(fmt, dtype, monkeypatch):
    lin = _linear(192, 512, dtype=dtype)
    packed = QuantLinear(lin, fmt, 128, kernel_policy="packed")
    fallback = QuantLinear(lin, fmt, 128, kernel_policy="dequant")
    monkeypatch.setattr(Q, "FALLBACK_CHUNK_ELEMS", 64 * 512)   # several chunks, incl. a short last one
    x = torch.randn(7, 512).to(dtype)
    yp, yf = packed(x), fallback(x)
    assert fallback.kernel == "dequant"
    if packed.packed_kernel:
        assert packed.kernel == packed.packed_kernel
    w_ref = packed.dequantized_weight()
    assert torch.equal(w_ref, fallback.dequantized_weight())
    _assert_matches_reference(yp, x, w_ref, lin.bias)
    _assert_matches_reference(yf, x, w_ref, lin.bias)
    if dtype == torch.float32:
        assert torch.allclose(yp, yf, rtol=1e-5, atol=1e-5)


def test_int4_unsupported_kernel_shapes_fall_back():
    for n, g, why in [(40, 64, "multiple of 16"), (64, 16, "group_size")]:
        ql = QuantLinear(_linear(n, 128), "int4", g, kernel_policy="packed")
        assert ql.packed_kernel is None and ql.int4_layout == "plain" and why in ql.fallback_reason
        x = torch.randn(2, 128)
        _assert_matches_reference(ql(x), x, ql.dequantized_weight(), ql.bias)
        assert ql.kernel == "dequant"


def test_bf16_int8_kernel_not_called_when_k_not_multiple_of_16():
    """torch 2.13's CPU bf16 _weight_int8pack_mm returns garbage or segfaults for K % 16 != 0."""
    lin = _linear(64, 200, dtype=torch.bfloat16)
    ql = QuantLinear(lin, "int8", kernel_policy="packed")
    for m in (1, 5):
        x = torch.randn(m, 200).to(torch.bfloat16)
        _assert_matches_reference(ql(x), x, ql.dequantized_weight(), lin.bias)
        assert ql.kernel == "dequant"
    x32 = torch.randn(5, 200)                                 # fp32 has no such restriction
    _assert_matches_reference(ql(x32), x32, ql.dequantized_weight(), lin.bias)
    assert ql.kernel == ("int8pack_mm" if HAS_INT8_KERNEL else "dequant")


def test_auto_policy_uses_packed_for_decode_and_dequant_for_prefill():
    for fmt in ("int8", "int4"):
        ql = QuantLinear(_linear(128, 256, dtype=torch.bfloat16), fmt, 128)
        assert ql.kernel_policy == "auto"
        ql(torch.randn(1, 256).to(torch.bfloat16))
        assert ql.kernel == (ql.packed_kernel or "dequant")
        ql(torch.randn(512, 256).to(torch.bfloat16))
        assert ql.kernel == "dequant"
        ql32 = QuantLinear(_linear(128, 256), fmt, 128)
        ql32(torch.randn(64, 256))
        assert ql32.kernel == "dequant"                       # fp32 CPU kernels are scalar loops


def test_no_full_precision_copy_is_kept():
    n, k = 256, 512
    for fmt in ("int8", "int4"):
        ql = QuantLinear(_linear(n, k), fmt, 128)
        tensors = list(ql.parameters()) + list(ql.buffers())
        assert not any(t.is_floating_point() and t.numel() >= n * k // 8 for t in tensors)
        held = sum(t.numel() * t.element_size() for t in ql.buffers())
        assert held == weight_bytes(ql)
        assert [name for name, _ in ql.named_parameters()] == ["bias"]


def test_weight_bytes_ratios():
    n, k = 512, 1024
    fp32 = _linear(n, k, bias=False)
    full = n * k * 4
    assert weight_bytes(fp32) == full
    q8 = QuantLinear(fp32, "int8")
    assert weight_bytes(q8) == n * k + 4 * n                  # int8 codes + fp32 scales
    assert 0.25 <= weight_bytes(q8) / full < 0.252
    q4 = QuantLinear(fp32, "int4", 128)
    assert weight_bytes(q4) == n * k // 2 + 2 * 4 * n * (k // 128)   # nibbles + fp32 (scale, zero)
    assert weight_bytes(q4) / full == pytest.approx(1 / 8 + 2 / 128)  # 0.1406
    q4b = QuantLinear(fp32.to(torch.bfloat16), "int4", 128)    # bf16 model: bf16 scales
    assert weight_bytes(q4b) / (n * k * 2) == pytest.approx(1 / 4 + 2 / 128)
    assert weight_bytes(q4b) / full == pytest.approx(1 / 8 + 1 / 128)


# ------------------------------------------------------------------------ quantize_linears
class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(64, 128)
        self.act = nn.GELU()
        self.down = nn.Linear(128, 64, bias=False)

    def forward(self, x):
        return self.down(self.act(self.up(x)))


class _Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 64)
        self.layers = nn.ModuleList([_Block(), _Block()])
        self.norm = nn.LayerNorm(64)
        self.lm_head = nn.Linear(64, 10, bias=False)

    def forward(self, ids):
        h = self.emb(ids)
        for layer in self.layers:
            h = h + layer(h)
        return self.lm_head(self.norm(h))


@pytest.mark.parametrize("fmt", ["int8", "int4"])
def test_quantize_linears_replaces_exactly_the_unskipped_linears(fmt):
    torch.manual_seed(0)
    model = _Tiny()
    ids = torch.tensor([[1, 2, 3]])
    before = model(ids)
    names = {n for n, m in model.named_modules() if isinstance(m, nn.Linear)}
    out = quantize_linears(model, fmt, group_size=64, skip=lambda name: name == "lm_head")
    assert out is model
    quantized = {n for n, m in model.named_modules() if isinstance(m, QuantLinear)}
    assert quantized == names - {"lm_head"} and len(quantized) == 4
    assert type(model.lm_head) is nn.Linear
    assert isinstance(model.emb, nn.Embedding) and isinstance(model.norm, nn.LayerNorm)
    assert isinstance(model.layers[0].act, nn.GELU)
    after = model(ids)
    assert after.shape == before.shape
    assert (after - before).abs().max() < 0.1 * before.abs().max()   # still the same model
    quantize_linears(model, fmt, group_size=64)                      # idempotent on QuantLinears
    assert isinstance(model.lm_head, QuantLinear)
    assert {n for n, m in model.named_modules() if isinstance(m, QuantLinear)} == names


def test_quantize_linears_names_the_layer_that_does_not_fit():
    model = nn.Sequential(nn.Linear(128, 64), nn.Linear(64, 96))
    with pytest.raises(ValueError, match=r"layer '1'.*not a multiple of group_size"):
        quantize_linears(model, "int4", group_size=128)
    model = nn.Sequential(nn.Linear(128, 64), nn.Linear(64, 96))
    quantize_linears(model, "int4", group_size=128, skip=lambda name: name == "1")
    assert isinstance(model[0], QuantLinear) and type(model[1]) is nn.Linear


# --------------------------------------------------- CPU int4 layouts other than this CPU's
def _pack_like_torch(codes, layout):
    """Pure-torch model of aten weight_to_int4pack_kernel for each CPU layout."""
    n, k = codes.shape
    bn, lanes = Q._CPU_INT4_LAYOUTS[layout]
    out = []
    for r in range(0, n, bn):
        blk = codes[r:r + bn]
        nb = blk.shape[0]
        if lanes and nb == bn:
            lo, hi = blk[: bn // 2], blk[bn // 2:]
        else:
            lo, hi = blk[0::2], blk[1::2]
        out.append((lo | (hi << 4)).T.reshape(-1))        # k-major within the block
    return torch.cat(out).to(torch.uint8).view(n, k // 2)


@pytest.mark.parametrize("layout", ["avx512", "avx2", "pairwise"])
def test_cpu_int4_layout_decoders(layout, monkeypatch):
    n, k = 64 * 3 + 48, 128
    lin = _linear(n, k, bias=False)
    ql = QuantLinear(lin, "int4", 16)                      # group 16: plain layout, never the kernel
    qw = ql.quantized_weight()
    codes = qw.codes().to(torch.int32)
    packed = _pack_like_torch(codes, layout)
    if Q._detect_cpu_int4_layout() == layout and HAS_INT4_CPU_KERNEL:
        assert torch.equal(torch.ops.aten._convert_weight_to_int4pack_for_cpu(codes, 1).view(n, k // 2), packed)
    bn, lanes = Q._CPU_INT4_LAYOUTS[layout]
    flat = packed.reshape(-1)
    assert torch.equal(Q._decode_cpu_int4_t(flat, n, k, 0, n, bn, lanes).T.to(torch.int32), codes)
    assert torch.equal(Q._decode_cpu_int4_t(flat, n, k, 64, n, bn, lanes).T.to(torch.int32), codes[64:])
    # the fallback's own decode, chunked, on that layout
    monkeypatch.setattr(QF, "_cpu_int4_layout", layout)  # the detected layout lives with the formats
    monkeypatch.setattr(Q, "FALLBACK_CHUNK_ELEMS", 64 * k)
    ql.qweight = packed
    ql.int4_layout = "cpu_packed"
    assert torch.equal(ql.dequantized_weight(), dequantize(qw))
    x = torch.randn(3, k)
    _assert_matches_reference(ql(x), x, dequantize(qw), None)
    assert ql.kernel == "dequant"


def test_cpu_int4_layout_is_detected():
    if not hasattr(torch.ops.aten, "_convert_weight_to_int4pack_for_cpu"):
        pytest.skip("torch without the CPU int4 packing op")
    assert Q._detect_cpu_int4_layout() in Q._CPU_INT4_LAYOUTS


def test_a_failing_packed_kernel_falls_back_and_is_recorded(monkeypatch):
    ql = QuantLinear(_linear(64, 128), "int8", kernel_policy="packed")

    def missing(x2):
        raise RuntimeError("no kernel for this device\n(details)")

    monkeypatch.setattr(ql, "_packed", missing)
    x = torch.randn(3, 128)
    _assert_matches_reference(ql(x), x, ql.dequantized_weight(), ql.bias)
    assert ql.kernel == "dequant" and ql.packed_kernel is None
    assert ql.fallback_reason == "int8pack_mm failed: no kernel for this device"


def test_empty_and_strided_inputs():
    for fmt in ("int8", "int4"):
        ql = QuantLinear(_linear(64, 128), fmt, 64)
        assert ql(torch.randn(0, 128)).shape == (0, 64)
        x = torch.randn(128, 3).T                                 # not contiguous
        _assert_matches_reference(ql(x), x, ql.dequantized_weight(), ql.bias)
