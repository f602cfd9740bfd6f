"""What the engine measured, as typed records the calibration reads (torch-free: calibration never imports torch)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields


@dataclass(frozen=True)
class StepRecord:
    """One measured engine step: `batch` sequences each running `new_tokens` (decode: 1) on top of `context` cached
    tokens, on the first `layers` layers of `card` with a `vocab`-token vocabulary, in `dtype`. `seconds` is the
    step's wall time (forward + lm_head + sampling, as LLMEngine.step runs it)."""

    card: str
    layers: int
    vocab: int
    dtype: str
    phase: str  # "prefill" | "decode"
    batch: int
    context: int
    new_tokens: int
    seconds: float
    device: str = ""
    device_name: str = ""
    torch: str = ""

    @property
    def key(self) -> str:
        """The grid point, without the measurement: equal for two passes over the same shape."""
        return f"{self.card}|{self.layers}|{self.dtype}|{self.phase}|{self.batch}|{self.context}|{self.new_tokens}"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> StepRecord:
        """A record from a card's `calibration.measurements` entry (extra keys such as `split` are ignored)."""
        known = {f.name: f.type for f in fields(cls)}
        casts = {"int": int, "float": float, "str": str}
        return cls(**{k: casts[known[k]](v) for k, v in data.items() if k in known})


@dataclass(frozen=True)
class RequestTiming:
    """A served batch of requests: TTFT = the prefill step(s) + the first decode step; ITL = mean decode step."""

    ttft_s: float
    itl_s: float
    prefill_tok_s: float
    decode_tok_s: float

    def to_dict(self) -> dict:
        return asdict(self)
