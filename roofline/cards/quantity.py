"""Pydantic field types that accept a quantity string or an SI number and store SI floats."""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator

from roofline.cards.units import parse_quantity


def _as(kind):
    def parse(value):
        return parse_quantity(value, kind)

    return BeforeValidator(parse)


Bytes = Annotated[float, _as("bytes")]
BytesPerS = Annotated[float, _as("bytes_per_s")]
FlopPerS = Annotated[float, _as("flop_per_s")]
Watts = Annotated[float, _as("watts")]
Seconds = Annotated[float, _as("seconds")]
