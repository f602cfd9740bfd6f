"""What every schema shares: the strict pydantic base, a pydantic error as one line, and the broadcastable number."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

Num = Any  # a float, or a numpy array broadcast over batch x context (one code path for a point and a grid)


class Strict(BaseModel):
    """Cards are frozen and reject unknown fields (a typo is an error, not a silently ignored key)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def first_problem(err: ValidationError) -> tuple[str, str, dict]:
    """The first thing pydantic found wrong: (dotted location, message without pydantic's prefix, the raw error)."""
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"])
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "missing":
        msg = "required field is missing"
    return loc, msg, first
