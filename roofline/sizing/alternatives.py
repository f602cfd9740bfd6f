"""What would fit when a setup does not: a smaller weight format, a smaller KV format, fewer sequences, a shorter
context, more GPUs. `fits` lists them; `predict` and `compare` use them to say what to run instead."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from roofline.cards.formats import kv_format
from roofline.cards.hardware import HardwareCard
from roofline.cards.model import ModelCard
from roofline.sizing.memory import Budget, Deployment, max_concurrency, max_context, memory_budget, min_gpus

# tried smallest-saving first: the first that fits is the least lossy change
SMALLER_FORMATS = ("fp8", "q8_0", "q6_k", "q4_k_m", "int4", "nvfp4")
SMALLER_KV = ("fp8", "q4_0")


@dataclass(frozen=True)
class Alternative:
    """One change that makes the setup fit: the option to pass, its value, and what it leaves."""

    option: str  # --quant | --kv-quant | --concurrency | --context | --gpus
    value: str
    detail: str
    # the Workload fields it changes (quant, kv_quant, batch, tp, pp); a shorter --context maps to none of them
    changes: dict = field(default_factory=dict)

    @property
    def flag(self) -> str:
        return f"{self.option} {self.value}"


def _gb(n: float) -> str:
    return f"{n / 1e9:,.2f} GB"


Runs = Callable[[str, str], bool]  # (weight format, KV format) -> whether the runtime runs them


def _smaller_weights(card, hw, quant, kv_quant, ctx, n, dep, budget, runs: Runs) -> list[Alternative]:
    for fmt in SMALLER_FORMATS:
        if not runs(fmt, kv_quant):
            continue
        b = memory_budget(card, hw, fmt, kv_quant, ctx, n, dep)
        if b.weights_bytes < budget.weights_bytes and b.fits:
            return [Alternative("--quant", fmt, f"weights {_gb(b.weights_bytes)}, {_gb(b.headroom_bytes)} to spare",
                                {"quant": fmt})]
    return []


def _smaller_kv(card, hw, quant, kv_quant, ctx, n, dep, runs: Runs) -> list[Alternative]:
    for kv in SMALLER_KV:
        if kv_format(kv).bits_per_value < kv_format(kv_quant).bits_per_value and runs(quant, kv):
            b = memory_budget(card, hw, quant, kv, ctx, n, dep)
            if b.fits:
                return [Alternative("--kv-quant", kv, f"KV {_gb(float(b.kv_bytes))}, {_gb(b.headroom_bytes)} to spare",
                                    {"kv_quant": kv})]
    return []


ALL_OPTIONS = ("--quant", "--kv-quant", "--concurrency", "--context", "--gpus")


def what_would_fit(card: ModelCard, hw: HardwareCard, quant: str | None, kv_quant: str, ctx: int, n: int,
                   dep: Deployment, budget: Budget, options: tuple[str, ...] = ALL_OPTIONS,
                   runs: Runs | None = None) -> list[Alternative]:
    """Each single change among `options` that makes `n` sequences of `ctx` tokens fit (empty when it already
    fits); a smaller format only where `runs` says the runtime runs it (None: any). `predict` leaves out
    --context: a request's length is not a knob there (and its search is the costly one)."""
    if budget.fits:
        return []
    runs = runs or (lambda _weights, _kv: True)
    out = _smaller_weights(card, hw, quant, kv_quant, ctx, n, dep, budget, runs) if "--quant" in options else []
    out += _smaller_kv(card, hw, quant, kv_quant, ctx, n, dep, runs) if "--kv-quant" in options else []
    users = max_concurrency(card, hw, quant, kv_quant, ctx, dep) if "--concurrency" in options and n > 1 else 0
    if 0 < users < n:
        plural = "s" if users > 1 else ""
        out.append(Alternative("--concurrency", str(users), f"at most {users} sequence{plural} of {ctx:,} tokens fit",
                               {"batch": users}))
    longest = max_context(card, hw, quant, kv_quant, n, dep) if "--context" in options else 0
    if 0 < longest < ctx:
        out.append(Alternative("--context", str(longest), f"the longest context {n} sequence(s) can hold"))
    more = min_gpus(card, hw, quant, kv_quant, ctx, n, dep) if "--gpus" in options else None
    if more is not None and more.gpus > dep.gpus:
        value = f"{more.tp}" + (f" --pp {more.pp}" if more.pp > 1 else "")
        out.append(Alternative("--gpus", value, f"{more.gpus} × {hw.name}", {"tp": more.tp, "pp": more.pp}))
    return out
