"""Hardware card schema. Every figure is SI after load (bytes, bytes/s, FLOP/s, W, s)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, StrictBool, field_validator, model_validator

from roofline.cards.formats import MATH_DTYPES
from roofline.cards.quantity import (
    Bytes,
    LinkBytesPerS,
    PositiveBytes,
    PositiveBytesPerS,
    PositiveFlopPerS,
    Seconds,
    Watts,
)
from roofline.cards.schema import ComputeCapability, Strict, card_name
from roofline.cards.versions import compute_capability_key

MAX_LINK_LATENCY_S = 1.0  # a link whose every message waits a second is no GPU link: a unit typo (ms for us)


class Memory(Strict):
    capacity_bytes: PositiveBytes = Field(alias="capacity")
    bandwidth_bytes_per_s: PositiveBytesPerS = Field(alias="bandwidth")
    type: str | None = None
    unified: StrictBool = False
    # what software cannot allocate (capacity - what the device reports): the driver's firmware and ECC share on a
    # discrete GPU; the OS, CPU and driver's share on a unified part
    reserved_bytes: Bytes = Field(0.0, alias="reserved")

    @property
    def usable_bytes(self) -> float:
        return self.capacity_bytes - self.reserved_bytes

    @property
    def capacity_binary(self) -> bool:
        """Whether the capacity is a whole number of GiB (a datasheet's '128 GB' of LPDDR5X is 128 GiB): shown in
        GiB then, beside GB, so the figure the datasheet prints appears as printed."""
        gib = self.capacity_bytes / 2**30
        return gib >= 1 and abs(gib - round(gib)) < 1e-9

    @model_validator(mode="after")
    def _reserved_below_capacity(self):
        if self.reserved_bytes >= self.capacity_bytes:
            raise ValueError("reserved must be smaller than capacity")
        return self


class PeakFlops(Strict):
    """Dense peak FLOP/s (or OP/s) per math dtype. Absent = unsupported. Never a sparsity figure."""

    fp32: PositiveFlopPerS | None = None
    tf32: PositiveFlopPerS | None = None
    bf16: PositiveFlopPerS | None = None
    fp16: PositiveFlopPerS | None = None
    fp16_acc16: PositiveFlopPerS | None = None  # FP16 accumulate, where it differs from `fp16` (GeForce: 2x)
    fp8: PositiveFlopPerS | None = None
    int8: PositiveFlopPerS | None = None
    fp4: PositiveFlopPerS | None = None

    def as_dict(self) -> dict[str, float]:
        return {k: v for k in MATH_DTYPES if (v := getattr(self, k)) is not None}

    @model_validator(mode="after")
    def _has_a_float_peak(self):
        # norms, softmax and the attention core run in a float dtype: a card with only int8 or fp4 peaks would time
        # them at those rates
        if self.as_dict() and all(getattr(self, k) is None for k in ("fp32", "tf32", "bf16", "fp16")):
            raise ValueError("needs a floating-point peak (fp32, bf16 or fp16) beside any int8/fp8/fp4 figure")
        return self


class Interconnect(Strict):
    kind: str = "none"  # nvlink4, nvlink5, pcie5, infinity-fabric, none
    bandwidth_bytes_per_s_per_direction: LinkBytesPerS = Field(0.0, alias="bandwidth_per_direction")
    latency_s: Seconds = Field(0.0, alias="latency")
    gpus_per_node: int = Field(1, ge=1, le=65_536)
    host_link: str | None = None
    host_bandwidth_bytes_per_s_per_direction: LinkBytesPerS | None = Field(None, alias="host_bandwidth_per_direction")

    @model_validator(mode="after")
    def _link_has_bandwidth(self):
        if self.gpus_per_node > 1 and self.bandwidth_bytes_per_s_per_direction <= 0:
            raise ValueError("gpus_per_node > 1 needs bandwidth_per_direction > 0 (the GPU link's rate)")
        if self.latency_s > MAX_LINK_LATENCY_S:
            raise ValueError(f"latency {self.latency_s:g} s is beyond {MAX_LINK_LATENCY_S:g} s; give it with its unit "
                             "('10 us')")
        return self


class HardwareCard(Strict):
    name: str
    aliases: list[str] = []
    vendor: str
    kind: Literal["gpu", "soc", "cpu", "accelerator"]
    # the kind whose efficiency defaults and runtime-profile scopes apply where the card's kernels are another kind's
    # (the MI300A is a unified-memory APU whose GPU runs the MI300X's CDNA 3 kernels); None: `kind`; needs a source
    efficiency_kind: Literal["gpu", "soc", "cpu", "accelerator"] | None = None
    description: str = ""
    memory: Memory
    peak_flops: PeakFlops
    interconnect: Interconnect = Interconnect()
    compute_units: int | None = Field(None, gt=0, le=1 << 20)  # SMs / CUs / GPU cores
    compute_capability: ComputeCapability | None = None  # CUDA major.minor (NVIDIA), "8.9"
    l2_cache_bytes: Bytes | None = Field(None, alias="l2_cache")
    power_watts: Watts | None = Field(None, alias="power")
    price_usd: float | None = Field(None, ge=0)
    # a cloud's on-demand rate for one such GPU, USD per GPU-hour: `capacity`'s default price (with its source)
    cloud_usd_per_gpu_hour: float | None = Field(None, gt=0, le=1000)
    sources: dict[str, str]
    uncertain: dict[str, str] = {}  # field -> why the value is uncertain
    efficiency: dict[str, Any] | None = None  # efficiency overrides for this card (roofline.perf.efficiency)
    calibration: dict[str, Any] | None = None  # what `roofline calibrate` fitted and measured, with provenance

    @field_validator("name")
    @classmethod
    def _lowercase_name(cls, v: str) -> str:
        return card_name(v, "h100-sxm")

    @field_validator("vendor")
    @classmethod
    def _lowercase_vendor(cls, v: str) -> str:
        """'NVIDIA' is nvidia: `hw list --vendor` and the efficiency scopes ('nvidia-gpu') compare it lowercase."""
        if not v.strip():
            raise ValueError("give the maker, e.g. nvidia, amd, intel, apple")
        return v.strip().lower()

    @model_validator(mode="after")
    def _has_compute_and_sources(self):
        if not self.peak_flops.as_dict():
            raise ValueError("peak_flops needs at least one dtype (fp32, tf32, bf16, fp16, fp8, int8, fp4)")
        for key in ("memory.capacity", "memory.bandwidth", "peak_flops"):
            if not any(s == key or s.startswith(key + ".") for s in self.sources):
                raise ValueError(f"sources must say where '{key}' comes from")
        if self.efficiency_kind and "efficiency_kind" not in self.sources:
            raise ValueError("sources must say whose kernels make the card's 'efficiency_kind'")
        if self.compute_capability and "compute_capability" not in self.sources:
            # it decides which runtimes may run on the card, so it needs a citation like every figure
            raise ValueError("sources must say where 'compute_capability' comes from")
        return self

    @property
    def scope_kind(self) -> str:
        """The kind the card's efficiencies are scoped by: `efficiency_kind`, else `kind`."""
        return self.efficiency_kind or self.kind

    @property
    def supported_dtypes(self) -> frozenset[str]:
        return frozenset(self.peak_flops.as_dict())

    def peak(self, dtype: str) -> float:
        """Dense peak FLOP/s of `dtype`; a dtype the card lacks raises KeyError."""
        return self.peak_flops.as_dict()[dtype]


def default_key(hw: HardwareCard) -> str:
    """Which default set a card starts from: Apple silicon has its own; otherwise the card's kind (its
    `efficiency_kind` where it has one)."""
    return "apple" if hw.vendor.lower() == "apple" else hw.scope_kind


def nvidia_architecture(compute_capability: str) -> str | None:
    """The NVIDIA architecture a compute capability names ("6.1" -> Pascal), for messages; None where unknown."""
    major, minor = compute_capability_key(compute_capability)
    if major == 8:
        return "Ada Lovelace" if minor == 9 else "Ampere"
    if major == 7:
        return "Turing" if minor == 5 else "Volta"
    return {3: "Kepler", 5: "Maxwell", 6: "Pascal", 9: "Hopper", 10: "Blackwell", 11: "Blackwell",
            12: "Blackwell"}.get(major)
