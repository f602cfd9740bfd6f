"""Efficiency overrides of a runtime profile: fractions of a hardware card's peaks, the GEMM ramp's floor and the
overheads a runtime adds, for one scope (default, kind, vendor or vendor-kind) of runtimes/*.yaml."""

from __future__ import annotations

from pydantic import Field, StrictBool, field_validator, model_validator

from roofline.cards.formats import GGUF_FORMATS, MATH_DTYPES, card_format
from roofline.cards.schema import MIN_FRACTION, Strict, efficiency_number_problem

# Efficiency fields a profile may set (roofline.perf.efficiency.Efficiency has the same names; a test keeps them equal)
FRACTION_FIELDS = ("memory", "memory_gemv", "memory_kv", "memory_act", "compute", "compute_fp32", "compute_bf16",
                   "compute_fp8", "compute_int8", "compute_fp4", "attention", "scan", "link")
FLOOR_FIELDS = ("gemm_floor",)  # in [0, 1]: 0 = no floor, the GPU default (a calibration may keep it)
NUMBER_FIELDS = ("gemm_min_tokens", "gemm_half_tokens", "gemv_max_tokens", "gemv_unit_bandwidth_bytes_per_s",
                 "kernel_overhead_s", "graph_kernel_overhead_s", "graph_max_batch", "graph_max_context",
                 "kernels_per_expert", "expert_gemm_overhead_s", "expert_gemv_max_tokens",
                 "routing_concentration", "step_overhead_s", "sequence_overhead_s", "token_overhead_s",
                 "prefill_chunk_tokens",
                 "allreduce_latency_hops")
SCOPE_KINDS = ("gpu", "soc", "apple", "cpu", "accelerator")


class EfficiencyOverrides(Strict):
    """Fractions of the datasheet peaks (0 < x <= 1), the GEMM ramp's floor (0 <= x <= 1) and overheads
    (seconds >= 0); None = keep the lower scope's."""

    memory: float | None = None
    memory_gemv: float | None = None
    memory_kv: float | None = None
    memory_act: float | None = None
    compute: float | None = None
    compute_fp32: float | None = None
    compute_bf16: float | None = None
    compute_fp8: float | None = None
    compute_int8: float | None = None
    compute_fp4: float | None = None
    attention: float | None = None
    scan: float | None = None
    gemm_floor: float | None = None
    link: float | None = None
    gemm_min_tokens: float | None = Field(None, ge=1)
    gemm_half_tokens: float | None = Field(None, ge=0)
    gemv_max_tokens: float | None = Field(None, ge=1)
    gemv_unit_bandwidth_bytes_per_s: float | None = Field(None, ge=0)
    kernel_overhead_s: float | None = Field(None, ge=0)
    graph_kernel_overhead_s: float | None = Field(None, ge=0)  # per kernel in a decode step replayed as a CUDA graph
    graph_max_batch: float | None = Field(None, ge=0)  # the largest decode batch replayed as a graph
    graph_max_context: float | None = Field(None, ge=0)  # the longest sequence it holds; 0 = any
    graph_every_decode: StrictBool | None = None  # its graphs hold MoE, recurrent and speculative verify steps too
    kernels_per_expert: float | None = Field(None, ge=0)
    expert_gemm_overhead_s: float | None = Field(None, ge=0)  # per touched expert per layer, matrix-matrix steps
    expert_gemv_max_tokens: float | None = Field(None, ge=1)  # step tokens up to which every expert runs mat-vec
    routing_concentration: float | None = Field(None, ge=0)
    step_overhead_s: float | None = Field(None, ge=0)
    sequence_overhead_s: float | None = Field(None, ge=0)
    token_overhead_s: float | None = Field(None, ge=0)  # host work per new token a step schedules
    allreduce_latency_hops: float | None = Field(None, ge=0)  # link latencies per all-reduce; 0 = the ring's
    flash_attention: StrictBool | None = None  # False: scores materialised between kernels (llama.cpp without -fa)
    prefill_chunk_tokens: float | None = Field(None, ge=0)  # prompt tokens per prefill step (-ub, num_batch); 0 = all
    # large-GEMM efficiency of one weight format's kernels, beside its math dtype's (llama.cpp MMQ per k-quant)
    compute_by_format: dict[str, float] = {}
    # math dtype -> large-GEMM efficiency of the quantized formats without an entry above (Efficiency.compute_quantized)
    compute_quantized: dict[str, float] = {}
    # weight format -> the math dtypes this runtime's kernels run it in, first the card has a peak for (llama.cpp
    # runs MXFP4 through its int8 MMQ like a k-quant, where the format's own chain says fp4); the key `gguf` stands
    # for every GGUF block type (as in `weight_formats`)
    kernel_dtypes: dict[str, list[str]] = {}

    @field_validator("kernel_dtypes")
    @classmethod
    def _gguf_key(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        expanded = {fmt: v["gguf"] for fmt in GGUF_FORMATS} if "gguf" in v else {}
        return expanded | {fmt: dtypes for fmt, dtypes in v.items() if fmt != "gguf"}

    @model_validator(mode="before")
    @classmethod
    def _numbers(cls, data):
        """Every non-fraction number finite and within its bound (cards.schema; `Strict` refuses `true` in any number
        field, and the fractions are checked after); no `true` in the per-format tables either."""
        for name in NUMBER_FIELDS if isinstance(data, dict) else ():
            value = data.get(name)
            problem = None if value is None else efficiency_number_problem(name, value)
            if problem:
                raise ValueError(f"{name}: {problem}")
        for field in ("compute_by_format", "compute_quantized"):
            table = data.get(field) if isinstance(data, dict) else None
            if isinstance(table, dict) and any(isinstance(v, bool) for v in table.values()):
                raise ValueError(f"{field}: give fractions of the peak in (0, 1], not true/false")
        return data

    @model_validator(mode="after")
    def _fractions(self):
        for name in FRACTION_FIELDS:
            value = getattr(self, name)
            if value is not None and not MIN_FRACTION <= value <= 1:
                raise ValueError(f"{name}: {value} is not a fraction of the peak in [{MIN_FRACTION:g}, 1]")
        for name in FLOOR_FIELDS:
            value = getattr(self, name)
            if value is not None and not 0 <= value <= 1:
                raise ValueError(f"{name}: {value} is not a floor in [0, 1] (0 = none)")
        for fmt, value in self.compute_by_format.items():
            card_format(fmt)  # an unknown format name fails here
            if not MIN_FRACTION <= value <= 1:
                raise ValueError(f"compute_by_format.{fmt}: {value} is not a fraction of the peak in "
                                 f"[{MIN_FRACTION:g}, 1]")
        for dtype, value in self.compute_quantized.items():
            if dtype not in MATH_DTYPES or not MIN_FRACTION <= value <= 1:
                raise ValueError(f"compute_quantized.{dtype}: give a math dtype among {', '.join(MATH_DTYPES)} and a "
                                 f"fraction of its peak in [{MIN_FRACTION:g}, 1]")
        for fmt, dtypes in self.kernel_dtypes.items():
            card_format(fmt)
            bad = [d for d in dtypes if d not in MATH_DTYPES]
            if not dtypes or bad:
                raise ValueError(f"kernel_dtypes.{fmt}: {dtypes!r} must list math dtypes among "
                                 f"{', '.join(MATH_DTYPES)}")
        return self

    def values(self) -> dict:
        """The fields this scope sets (compute_by_format, compute_quantized and kernel_dtypes merged by the caller)."""
        merged = {"compute_by_format", "compute_quantized", "kernel_dtypes"}
        return {k: v for k, v in self.model_dump(exclude=merged).items() if v is not None}
