"""How close a real run gets to the datasheet: the `expected` mode's efficiencies and overheads.

Precedence: built-in defaults per hardware kind < the card's `efficiency` section < its `calibration` section.
The defaults are fitted by `benchmarks/fit_defaults.py` to ../shared/reference/published_train.csv.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from .errors import CardError
from .hardware import HardwareCard


@dataclass(frozen=True)
class Efficiency:
    memory: float = 1.0  # achieved / datasheet bandwidth when streaming weights and KV
    compute: float = 1.0  # achieved / dense peak on large GEMMs
    attention: float = 1.0  # achieved / dense peak in the attention core (flash kernels)
    gemm_half_tokens: float = 0.0  # tokens (GEMM M dimension) at which a GEMM reaches half of `compute`
    kernel_overhead_s: float = 0.0  # fixed cost per kernel launch
    step_overhead_s: float = 0.0  # fixed cost per forward step (sampling, scheduling, host sync)
    source: str = "datasheet peaks, no overhead (ceiling)"

    def compute_at(self, tokens):
        """GEMM efficiency at M = tokens: compute * T / (T + T_half) — small GEMMs do not reach peak."""
        if not self.gemm_half_tokens:
            return self.compute
        return self.compute * tokens / (tokens + self.gemm_half_tokens)


CEILING = Efficiency()

# Fitted by benchmarks/fit_defaults.py (see its printed report; rows of published_train.csv quoted there).
DEFAULTS: dict[str, Efficiency] = {
    "gpu": Efficiency(memory=0.75, compute=0.6, attention=0.4, gemm_half_tokens=64, kernel_overhead_s=4e-6,
                      step_overhead_s=2e-4, source="default for discrete GPUs, fitted to published_train.csv"),
    "soc": Efficiency(memory=0.75, compute=0.6, attention=0.4, gemm_half_tokens=64, kernel_overhead_s=4e-6,
                      step_overhead_s=2e-4, source="default for unified-memory SoCs, fitted to published_train.csv"),
    "cpu": Efficiency(memory=0.7, compute=0.5, attention=0.3, gemm_half_tokens=8, kernel_overhead_s=2e-6,
                      step_overhead_s=1e-4, source="default for CPUs (no published rows; calibrate)"),
    "accelerator": Efficiency(memory=0.75, compute=0.6, attention=0.4, gemm_half_tokens=64, kernel_overhead_s=4e-6,
                              step_overhead_s=2e-4, source="default for accelerators (same as GPUs)"),
}

_KNOWN = {f.name for f in fields(Efficiency)} - {"source"}


def _overrides(hw: HardwareCard, section: dict[str, Any], where: str) -> dict[str, float]:
    values = section.get("values", section)
    out = {}
    for key, value in values.items():
        if key in ("source", "date", "device", "points", "residuals", "versions", "notes"):
            continue
        if key not in _KNOWN:
            raise CardError(hw.name, f"{where}.{key}", f"unknown efficiency field; use one of {', '.join(sorted(_KNOWN))}")
        if not isinstance(value, (int, float)) or value < 0 or (key in ("memory", "compute", "attention") and not 0 < value <= 1):
            raise CardError(hw.name, f"{where}.{key}", f"{value!r} is not a valid value (fractions in (0, 1], seconds ≥ 0)")
        out[key] = float(value)
    return out


def expected_efficiency(hw: HardwareCard) -> Efficiency:
    """The efficiency `expected` mode uses on this card, with its provenance in `source`."""
    eff = DEFAULTS[hw.kind]
    if hw.efficiency:
        eff = replace(eff, **_overrides(hw, hw.efficiency, "efficiency"),
                      source=hw.efficiency.get("source", f"{hw.name} card's efficiency section"))
    if hw.calibration:
        cal = hw.calibration
        eff = replace(eff, **_overrides(hw, cal, "calibration"),
                      source=f"calibrated on {cal.get('date', '?')} on {cal.get('device', '?')}")
    return eff
