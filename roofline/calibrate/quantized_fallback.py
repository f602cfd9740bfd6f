"""What a quantized weight format the published rows do not inform gets under a runtime whose quantized formats share
one kernel family (the profile's `quantized_kernel_family`: llama.cpp's ggml matmuls, one template per block type):
per hardware scope and math dtype, the geometric mean of the fitted quantized formats (`quantized:<dtype>`,
Efficiency.compute_quantized), rather than the hardware kind's prior. vLLM's CUTLASS FP8, FP4 and Marlin GEMMs are
separate kernels, so its fitted formats say nothing of one it was not fitted on."""

from __future__ import annotations

import math
from collections import Counter

from roofline.calibrate.published import cards_of
from roofline.calibrate.row_params import FitRow, param_format, prefixed
from roofline.cards.formats import QUANTIZED_FORMATS, math_dtype, weight_format
from roofline.cards.store import CardStore
from roofline.perf.efficiency import expected_efficiency


def format_dtypes(rows: list[FitRow], store: CardStore) -> dict[str, str]:
    """Weight format -> the math dtype most of `rows` of it ran their GEMMs in (on their card, under their runtime's
    kernels: llama.cpp's MMQ runs k-quants in int8 where the card has int8 tensor cores, dequantized fp16 elsewhere)."""
    counts: dict[str, Counter] = {}
    for r in rows:
        fmt = param_format(r.param)
        if fmt:
            _, hw, _ = cards_of(r.row, store)
            own = math_dtype(weight_format(fmt), hw.supported_dtypes)
            dtype = expected_efficiency(hw, r.choice).kernel_dtype(fmt, own, hw.supported_dtypes)
            counts.setdefault(fmt, Counter())[dtype] += 1
    return {fmt: c.most_common(1)[0][0] for fmt, c in counts.items()}


def with_quantized(values: dict[str, float], dtypes: dict[str, str]) -> dict[str, float]:
    """`values` with, per math dtype, the geometric mean of its fitted quantized formats ("quantized:<dtype>"); 16-bit
    weights run the dense GEMM and take no part."""
    logs: dict[str, list[float]] = {}
    for fmt, v in prefixed(values, "format").items():
        if fmt in QUANTIZED_FORMATS and fmt in dtypes:
            logs.setdefault(dtypes[fmt], []).append(math.log(v))
    return {**values, **{f"quantized:{d}": math.exp(sum(x) / len(x)) for d, x in sorted(logs.items())}}


def quantized_fallback(values: dict[str, float], rows: list[FitRow], store: CardStore) -> dict[str, float]:
    """A group's fitted `values` with the fallback its `rows` support, where their runtime's quantized formats share
    one kernel family; else `values` as they are."""
    if not rows or not rows[0].choice.profile.quantized_kernel_family:
        return values
    return with_quantized(values, format_dtypes(rows, store))
