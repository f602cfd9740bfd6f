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
    device_seconds: float | None = None  # CUDA events around the step; on the CPU the host's seconds
    mode: str = ""  # how decode ran: graphs | static | eager
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
        casts = {"int": int, "float": float, "str": str, "float | None": float}
        known = {f.name: casts[f.type] for f in fields(cls)}
        return cls(**{k: known[k](v) for k, v in data.items() if k in known and v is not None})


@dataclass(frozen=True)
class RequestTiming:
    """A served batch of requests: TTFT = the prefill step(s), which sample the first token; ITL = mean decode step
    (host seconds). `device`: the same in device seconds (CUDA events); `tokens`: the generated ids per request;
    `decode_modes`: decode steps per mode (graphs / static / eager)."""

    ttft_s: float
    itl_s: float
    prefill_tok_s: float
    decode_tok_s: float
    device: RequestTiming | None = None
    tokens: list[list[int]] | None = None
    decode_modes: dict[str, int] | None = None

    def to_dict(self) -> dict:
        return asdict(self)
