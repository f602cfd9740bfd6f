"""What to predict: the request shape, batch, formats and speculative decoding. Validated with one-line errors."""

from __future__ import annotations

from pydantic import (
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from roofline.cards.formats import kv_format
from roofline.cards.schema import Strict, first_problem
from roofline.errors import RooflineError
from roofline.sizing.params import parse_quant

# Every count a request may state is at most this: far beyond any model's context (the largest, Llama 4 Scout, is 1e7
# tokens) and any batch, small enough that every derived number stays finite and exact in a float.
MAX_COUNT = 10**8


class Workload(Strict):
    """One request shape and how it is served (formats, parallelism, speculation); frozen, unknown fields refused."""

    prompt_tokens: int = Field(500, gt=0, le=MAX_COUNT, description="tokens in each prompt")
    output_tokens: int = Field(200, gt=0, le=MAX_COUNT, description="tokens generated per request")
    batch: int = Field(1, gt=0, le=MAX_COUNT, description="concurrent sequences sharing each step")
    quant: str | None = Field(None, description="weight format for every matmul, or 'component=format,...' "
                                                "(default: the card's native formats)")
    kv_quant: str = Field("bf16", description="KV-cache format")
    spec_tokens: int = Field(0, ge=0, le=64, description="draft tokens proposed per verify step (0 = off)")
    accept_rate: float | None = Field(None, description="probability each draft token is accepted, in (0, 1)")
    draft_model: str | None = Field(None, description="draft model card; None with spec_tokens = MTP heads")
    context_tokens: int = Field(0, ge=0, le=MAX_COUNT, description="tokens already cached before the prompt (prefix reuse)")
    allow_beyond_context: bool = Field(False, description="predict past the model's max context (RoPE-scaled runs)")
    tp: int = Field(1, gt=0, le=1024, description="tensor-parallel GPUs")
    pp: int = Field(1, gt=0, le=1024, description="pipeline-parallel stages")

    @field_validator("quant")
    @classmethod
    def _quant_known(cls, v):
        if v is None:
            return v
        spec = parse_quant(v)  # validates; canonical names, the user's form kept ('default=nvfp4' forces uniform)
        if "=" not in v:
            return spec["default"]
        return ",".join(f"{k}={f}" for k, f in spec.items())

    @field_validator("kv_quant")
    @classmethod
    def _kv_known(cls, v):
        return kv_format(v).name

    @model_validator(mode="after")
    def _spec_consistent(self):
        if not self.spec_tokens and (self.draft_model is not None or self.accept_rate is not None):
            given = "--draft" if self.draft_model is not None else "--accept"
            raise ValueError(f"{given} needs --spec-tokens K (draft tokens per verify step) to turn speculation on")
        if self.spec_tokens and self.accept_rate is None:
            raise ValueError("--spec-tokens needs --accept A (the draft acceptance rate, 0 < A < 1)")
        if self.accept_rate is not None and not 0 < self.accept_rate < 1:
            raise ValueError(f"accept rate must be between 0 and 1 (exclusive), got {self.accept_rate}")
        return self

    @property
    def tokens_per_verify(self) -> float:
        """Expected tokens emitted per target forward pass: (1 - a^(k+1)) / (1 - a); 1 without speculation."""
        if not self.spec_tokens:
            return 1.0
        a, k = self.accept_rate, self.spec_tokens
        return (1 - a ** (k + 1)) / (1 - a)

    @property
    def tokens_held(self) -> int:
        """Tokens each sequence holds at the end: cached prefix + prompt + output."""
        return self.context_tokens + self.prompt_tokens + self.output_tokens


def check_context(max_context: int, model: str, wl: Workload) -> None:
    """Refuse a request longer than the model's context, unless the workload allows it (RoPE-scaled runs)."""
    if wl.tokens_held > max_context and not wl.allow_beyond_context:
        parts = " + ".join(f"{n:,} {what}" for n, what in ((wl.context_tokens, "cached"), (wl.prompt_tokens, "prompt"),
                                                             (wl.output_tokens, "output")) if n)
        raise RooflineError(f"{parts} = {wl.tokens_held:,} tokens is beyond {model}'s max context of {max_context:,}; "
                            "shorten the request (`roofline predict --allow-beyond-context` predicts a RoPE-scaled "
                            "run)")


_FLAG = {"prompt_tokens": "--prompt", "output_tokens": "--output", "batch": "--batch", "spec_tokens": "--spec-tokens",
         "accept_rate": "--accept", "context_tokens": "--cached-tokens", "tp": "--gpus", "pp": "--pp", "kv_quant": "--kv-quant", "quant": "--quant"}


def make_workload(flags: dict[str, str] | None = None, **fields) -> Workload:
    """Build a Workload, turning a validation problem into one RooflineError line that names the option (`flags`:
    the option a command sets a field with, where not the usual one, e.g. {"batch": "--concurrency"})."""
    try:
        return Workload(**{k: v for k, v in fields.items() if v is not None})
    except ValidationError as err:
        loc, msg, first = first_problem(err)
        field = loc.split(".")[0]
        if first["type"] in ("greater_than", "greater_than_equal"):
            msg = f"must be {'≥' if first['type'].endswith('equal') else '>'} {first['ctx'].get('gt', first['ctx'].get('ge'))}, got {first['input']}"
        elif first["type"] in ("less_than", "less_than_equal"):
            msg = f"must be at most {first['ctx'].get('lt', first['ctx'].get('le')):,}, got {first['input']:,}"
        label = {**_FLAG, **(flags or {})}.get(field, field)
        raise RooflineError(f"{label}: {msg}" if label else msg) from None
