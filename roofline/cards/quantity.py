"""Pydantic field types that accept a quantity string or an SI number and store SI floats."""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator

from roofline.cards.units import parse_quantity


# the slowest rate a card may state: 1 MB/s or 1 MFLOP/s (a 1990s PC's); a smaller one is a lost unit prefix, and
# every time divided by it overflows
MIN_RATE = 1e6
# the smallest memory a card may state, 1 MB: a bare "80" is 80 bytes, a lost unit, not a device
MIN_MEMORY_BYTES = 1e6


def _as(kind, positive: bool = False, floor: float = 0.0):
    def parse(value):
        si = parse_quantity(value, kind)
        if positive and si <= 0:
            raise ValueError(f"must be greater than 0, got {value!r}")
        if 0 < si < floor:
            none = "" if positive else " (0 for none)"
            raise ValueError(f"must be at least {floor:g} {kind.replace('_per_', '/')}{none}, got {value!r}: a unit "
                             "prefix missing?")
        return si

    return BeforeValidator(parse)


Bytes = Annotated[float, _as("bytes")]
BytesPerS = Annotated[float, _as("bytes_per_s")]
FlopPerS = Annotated[float, _as("flop_per_s")]
Watts = Annotated[float, _as("watts")]
Seconds = Annotated[float, _as("seconds")]

# figures a division uses (capacity, bandwidth, peaks): zero is a typo, never a device
PositiveBytes = Annotated[float, _as("bytes", positive=True, floor=MIN_MEMORY_BYTES)]
PositiveBytesPerS = Annotated[float, _as("bytes_per_s", positive=True, floor=MIN_RATE)]
PositiveFlopPerS = Annotated[float, _as("flop_per_s", positive=True, floor=MIN_RATE)]
LinkBytesPerS = Annotated[float, _as("bytes_per_s", floor=MIN_RATE)]  # 0: no link
