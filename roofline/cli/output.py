"""One output sink for every command: a rich table for people, `--json` (SI numbers) for machines."""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence


def _clean(obj: Any) -> Any:
    """Make data JSON-safe: NaN/inf become null, tuples lists, numpy scalars floats."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalar
        return _clean(obj.item())
    return obj


@dataclass
class Column:
    header: str
    justify: str = "left"  # left | right
    style: str | None = None


def console(stderr: bool = False):
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else 160  # pipes and files get wide tables, not 80 columns
    return Console(stderr=stderr, highlight=False, soft_wrap=False, width=width)


def table(title: str | None, columns: Sequence[Column | str], rows: Iterable[Sequence[Any]], caption: str | None = None):
    from rich.table import Table

    t = Table(title=title, caption=caption, title_justify="left", caption_justify="left", header_style="bold")
    for col in columns:
        col = Column(col) if isinstance(col, str) else col
        t.add_column(col.header, justify=col.justify, style=col.style, overflow="fold")
    for row in rows:
        t.add_row(*("—" if v is None else str(v) for v in row))
    return t


def emit(data: Any, as_json: bool, render: Callable[[], Iterable[Any]]) -> None:
    """Print `data` as JSON, or the renderables that `render()` yields (tables, text) for a person."""
    if as_json:
        sys.stdout.write(json.dumps(_clean(data), indent=2) + "\n")
        return
    out = console()
    for item in render():
        out.print(item)
