"""Options every command shares, so each command declares them the same way."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..cards import CardStore

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document (numbers in SI units).")]
CardsOpt = Annotated[
    Optional[list[Path]],
    typer.Option("--cards", help="Extra card directory with hardware/ and models/ (overrides bundled and user cards)."),
]


def store(cards: Optional[list[Path]]) -> CardStore:
    return CardStore(extra_dirs=list(cards or []))


def gb(n: float | None, digits: int = 1) -> str | None:
    return None if n is None else f"{n / 1e9:,.{digits}f}"


def tflops(n: float | None) -> str | None:
    return None if n is None else f"{n / 1e12:,.1f}"


def billions(n: float | None) -> str | None:
    return None if n is None else f"{n / 1e9:,.2f}B"
