"""What every schema shares: the strict pydantic base, a pydantic error as one line, and the broadcastable number."""

from __future__ import annotations

import difflib
import math
from typing import Annotated, Any, get_args

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from roofline.cards.quantity import MIN_RATE
from roofline.cards.versions import compute_capability_key
from roofline.errors import RooflineError

Num = Any  # a float, or a numpy array broadcast over batch x context (one code path for a point and a grid)

# Sane maxima for every count a card may declare. Each is well above any published model (largest today, for
# reference: 126 layers in Llama-3.1-405B, 128 query heads, 384 experts in Kimi K2, 262,144-token vocabularies in
# Gemma 3, 10M-token context in Llama 4 Scout, hidden size 25,600 in Gemma... ) and small enough that a step's
# operator graph stays a few thousand ops and every product of counts stays far inside a float's exact range.
MAX_LAYERS = 1024
MAX_HEADS = 4096
MAX_WIDTH = 1 << 20  # hidden, intermediate, head and latent dimensions, state sizes
MAX_EXPERTS = 65_536
MAX_VOCAB = 1 << 24  # 16.7M tokens
MAX_CONTEXT = 1 << 30  # 1.07e9 tokens
MAX_SMALL = 1024  # kernel sizes, chunk sizes, groups, ratios, per-layer repeats

def _count(most: int):
    return Annotated[int, Field(gt=0, le=most)]


Layers = _count(MAX_LAYERS)
Heads = _count(MAX_HEADS)
Width = _count(MAX_WIDTH)
Experts = _count(MAX_EXPERTS)
Vocab = _count(MAX_VOCAB)
Context = _count(MAX_CONTEXT)
Small = _count(MAX_SMALL)


def _compute_capability(value: object) -> str:
    compute_capability_key(value)  # raises on anything but "major.minor" text
    return value.strip()


# a CUDA compute capability, "8.9": text, since a YAML number loses the form (12.10 would read as 12.1)
ComputeCapability = Annotated[str, BeforeValidator(_compute_capability)]


class Strict(BaseModel):
    """Cards are frozen, reject unknown fields (a typo is an error, not a silently ignored key), and refuse NaN and
    infinities in every float (a card's number must be a number)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _numbers_are_not_booleans(cls, data):
        """A number field written `true` is a typo, not 1 (pydantic's lax mode would take a bool as a number)."""
        if isinstance(data, dict):
            for name, info in cls.model_fields.items():
                if isinstance(data.get(name), bool) and _numeric(info.annotation):
                    raise ValueError(f"{name}: expected a number, got {str(data[name]).lower()}")
        return data


def _numeric(annotation: object) -> bool:
    """int or float, or an optional one (`float | None`)."""
    args = get_args(annotation) or (annotation,)
    return any(a in (int, float) for a in args) and bool not in args


def first_problem(err: ValidationError) -> tuple[str, str, dict]:
    """The first thing pydantic found wrong: (dotted location, message without pydantic's prefix, the raw error).
    A required field missing beside an unknown one spelt like it is the misspelling: 'homepag: unknown field; did
    you mean homepage?' (the raw error then carries `suggestion`)."""
    errors = err.errors()
    first = errors[0]
    if first["type"] == "missing":
        wanted = str(first["loc"][-1])
        for e in errors:
            if e["type"] == "extra_forbidden" and e["loc"][:-1] == first["loc"][:-1] \
                    and difflib.get_close_matches(str(e["loc"][-1]), [wanted], cutoff=0.6):
                return ".".join(str(p) for p in e["loc"]), f"unknown field; did you mean {wanted}?", \
                    {**e, "suggestion": wanted}
    loc = ".".join(str(p) for p in first["loc"])
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "missing":
        msg = "required field is missing"
    return loc, msg, first


def comma_entries(what: str, text: str) -> list[str]:
    """The stripped entries of a comma-separated value, in order; [] where none is given (' ', ','); an empty entry
    beside a given one ('a,,b', 'a,') is refused."""
    entries = [v.strip() for v in text.split(",")]
    if not any(entries):
        return []
    if not all(entries):
        raise RooflineError(f"{what} {text[:60]!r}: an empty entry between commas; write a,b")
    return entries


def card_name(value: str, example: str) -> str:
    """A card's `name`: lowercase with no spaces (it is also the file name), e.g. `example`."""
    if value != value.lower() or " " in value:
        raise ValueError(f"must be lowercase with no spaces, e.g. '{example}'")
    return value


# The most a non-fraction efficiency field may say (a hardware card's `efficiency:`, a runtime profile's): far above
# any measured value, low enough that a step's arithmetic stays finite (a typo such as 1e300 would overflow it).
SECONDS_MAX = 1.0  # a fixed cost per kernel, step, sequence or token of a second is no runtime's
TOKENS_MAX = MAX_CONTEXT  # tile sizes, batch and context buckets, prefill chunks
EFFICIENCY_MAX = {"gemv_unit_bandwidth_bytes_per_s": 1e14, "kernels_per_expert": MAX_SMALL,
                  "routing_concentration": 1e6, "allreduce_latency_hops": MAX_SMALL}


# The least fraction of a datasheet peak an efficiency may be: the lowest any fit or calibration here has reached is
# a few percent (attention 0.02 in an H100 calibration, docs/calibration.md); 5e-324 overflowed a step's time to inf
# and crashed the serving simulator
MIN_FRACTION = 1e-3


def efficiency_number_problem(key: str, value: object) -> str | None:
    """Why `value` cannot be the non-fraction efficiency field `key` (None: it can): a number (not a bool), finite,
    >= 0 and at most its bound; a prefill chunk of 0 (the whole prompt) or at least one token."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return f"{value!r} is not a finite number"
    most = SECONDS_MAX if key.endswith("_overhead_s") else EFFICIENCY_MAX.get(key, TOKENS_MAX)
    if not 0 <= value <= most:
        return f"{value!r} is outside [0, {most:g}]"
    if key in ("graph_max_batch", "graph_max_context") and value != int(value):
        return f"{value!r}: give a whole number of {'sequences' if key == 'graph_max_batch' else 'tokens'}"
    if key == "prefill_chunk_tokens" and 0 < value < 1:
        return f"{value!r}: give 0 (the whole prompt in one step) or a whole number of tokens"
    if key == "gemv_unit_bandwidth_bytes_per_s" and 0 < value < MIN_RATE:  # the card rates' floor (1e-300 decoded
        # at 0.00 tok/s; the bundled cards' SMs draw 6-52 GB/s)
        return f"{value!r} B/s per compute unit: give 0 (no limit) or at least {MIN_RATE:g} (a unit prefix missing?)"
    return None
