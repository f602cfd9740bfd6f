"""Pydantic field types that accept a quantity string or an SI number and store SI floats."""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator

from roofline.cards.units import parse_quantity


def _as(kind, positive: bool = False):
    def parse(value):
        si = parse_quantity(value, kind)
        if positive and si <= 0:
            raise ValueError(f"must be greater than 0, got {value!r}")
        return si

    return BeforeValidator(parse)


Bytes = Annotated[float, _as("bytes")]
BytesPerS = Annotated[float, _as("bytes_per_s")]
FlopPerS = Annotated[float, _as("flop_per_s")]
Watts = Annotated[float, _as("watts")]
Seconds = Annotated[float, _as("seconds")]

# figures a division uses (capacity, bandwidth, peaks): zero is a typo, never a device
PositiveBytes = Annotated[float, _as("bytes", positive=True)]
PositiveBytesPerS = Annotated[float, _as("bytes_per_s", positive=True)]
PositiveFlopPerS = Annotated[float, _as("flop_per_s", positive=True)]
