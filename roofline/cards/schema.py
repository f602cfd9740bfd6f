"""What every schema shares: the strict pydantic base, a pydantic error as one line, and the broadcastable number."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

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

Layers = Annotated[int, Field(gt=0, le=MAX_LAYERS)]
Heads = Annotated[int, Field(gt=0, le=MAX_HEADS)]
Width = Annotated[int, Field(gt=0, le=MAX_WIDTH)]
Experts = Annotated[int, Field(gt=0, le=MAX_EXPERTS)]
Vocab = Annotated[int, Field(gt=0, le=MAX_VOCAB)]
Context = Annotated[int, Field(gt=0, le=MAX_CONTEXT)]
Small = Annotated[int, Field(gt=0, le=MAX_SMALL)]


class Strict(BaseModel):
    """Cards are frozen, reject unknown fields (a typo is an error, not a silently ignored key), and refuse NaN and
    infinities in every float (a card's number must be a number)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def first_problem(err: ValidationError) -> tuple[str, str, dict]:
    """The first thing pydantic found wrong: (dotted location, message without pydantic's prefix, the raw error)."""
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"])
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "missing":
        msg = "required field is missing"
    return loc, msg, first


def card_name(value: str, example: str) -> str:
    """A card's `name`: lowercase with no spaces (it is also the file name), e.g. `example`."""
    if value != value.lower() or " " in value:
        raise ValueError(f"must be lowercase with no spaces, e.g. '{example}'")
    return value
