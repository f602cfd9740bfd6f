"""Options every command shares, so each command declares them the same way."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from roofline.cards.store import CardStore
from roofline.errors import RooflineError
from roofline.importers import open_store

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document (numbers in SI units).")]
CardsOpt = Annotated[
    Optional[list[Path]],
    typer.Option("--cards", help="Extra card directory with hardware/ and models/ (overrides bundled and user cards)."),
]


def store(cards: Optional[list[Path]]) -> CardStore:
    return open_store(list(cards or []))


def gb(n: float | None, digits: int = 1) -> str | None:
    return None if n is None else f"{n / 1e9:,.{digits}f}"


def tflops(n: float | None) -> str | None:
    return None if n is None else f"{n / 1e12:,.1f}"


def billions(n: float | None) -> str | None:
    return None if n is None else f"{n / 1e9:,.2f}B"


def int_list(option: str, text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise RooflineError(f"{option}: {text!r} is not a comma-separated list of integers like 1,4,8,16") from None
    if not values or min(values) <= 0:
        raise RooflineError(f"{option}: values must be positive integers, got {text!r}")
    return sorted(set(values))
