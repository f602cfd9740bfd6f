"""One output sink for every command: a rich table for people, `--json` (SI numbers) for machines."""

from __future__ import annotations

import csv
import json
import math
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from roofline.errors import RooflineError

# Terminal control: ANSI/VT escape sequences (CSI, OSC, single-character) and every other C0/C1 control character
# except newline and tab. A card's text or an argument must never move the cursor, retitle the window or hide text.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?|[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# The only rich markup roofline's own messages use; any other '[...]' (a card's '[/oops]') prints literally.
_OUR_STYLES = re.compile(r"\[/?(?:bold|dim|italic)?(?: ?(?:red|green|yellow|cyan))?\]")
# A spreadsheet treats a cell starting with one of these as a formula (CSV injection): such text cells get a
# leading apostrophe, which spreadsheets show as text (OWASP's advice). Numbers are written as numbers.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def plain(text: object) -> str:
    """Text safe for a terminal: control characters and escape sequences removed."""
    return _ESCAPES.sub("", str(text))


def _markup(text: str) -> str:
    """A message of roofline's own for rich: its style tags kept, every other '[' escaped, controls removed."""
    text = plain(text)
    out, pos = [], 0
    for m in _OUR_STYLES.finditer(text):
        if m.group() == "[]":
            continue
        out.append(text[pos:m.start()].replace("[", "\\["))
        out.append(m.group())
        pos = m.end()
    out.append(text[pos:].replace("[", "\\["))
    return "".join(out)


def literal(text: object):
    """A rich Text that prints exactly `text` (no markup), controls removed: for card text, names, paths."""
    from rich.text import Text

    return Text(plain(text))


def json_safe(obj: Any, whole: bool = False) -> Any:
    """Make data JSON-safe: NaN/inf become null, tuples lists, numpy scalars floats. Byte counts (every number
    under a key ending in 'bytes') are whole numbers: a memory size is never 1.5 bytes."""
    if isinstance(obj, dict):
        return {str(k): json_safe(v, whole or str(k).endswith("bytes")) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v, whole) for v in obj]
    if isinstance(obj, float):
        if not math.isfinite(obj):
            return None
        return int(round(obj)) if whole else obj
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalar
        return json_safe(obj.item(), whole)
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

    class PipedConsole(Console):
        def on_broken_pipe(self) -> None:
            """`roofline formats | head -1`: left to the app's handler (the reader has what it wanted: exit 0), where
            rich's own exits 1 and fails a `set -o pipefail` script."""
            raise BrokenPipeError

    return PipedConsole(stderr=stderr, highlight=False, soft_wrap=False, width=width)


@contextmanager
def progress(label: str, total: float | None) -> Iterator[Callable[[int], None]]:
    """A transient progress bar on stderr (so `--json` stays clean; none where stderr is not a terminal) for work
    that may take over a second; yields `advance(n=1)`. It redraws from `advance` at most every REFRESH_S, never from
    a thread of its own: the work may fork processes, and a simulation advances it thousands of times a second."""
    import time

    from rich.progress import Progress

    err = console(stderr=True)
    with Progress(transient=True, console=err, auto_refresh=False, disable=not err.is_terminal) as bar:
        task, last = bar.add_task(label, total=total), [0.0]
        bar.refresh()  # shown before the first step, which may take long

        def advance(n: int = 1) -> None:
            bar.advance(task, n)
            if time.monotonic() - last[0] >= REFRESH_S:
                last[0] = time.monotonic()
                bar.refresh()

        yield advance


REFRESH_S = 0.1  # progress bars redraw at most ten times a second


def table(title: str | None, columns: Sequence[Column | str], rows: Iterable[Sequence[Any]], caption: str | None = None):
    from rich.table import Table

    t = Table(title=None if title is None else literal(title), caption=None if caption is None else literal(caption),
              title_justify="left", caption_justify="left", header_style="bold")
    for col in columns:
        col = Column(col) if isinstance(col, str) else col
        t.add_column(literal(col.header), justify=col.justify, style=col.style, overflow="fold")
    for row in rows:
        t.add_row(*(v if _is_renderable(v) else literal("—" if v is None else v) for v in row))
    return t


def _is_renderable(v: Any) -> bool:
    return hasattr(v, "__rich_console__") or hasattr(v, "__rich__")


def emit(data: Any, as_json: bool, render: Callable[[], Iterable[Any]], as_csv: bool = False,
         csv_rows: Callable[[], list[dict]] | None = None) -> None:
    """Print `data` as JSON, CSV rows (`csv_rows()`), or the renderables `render()` yields (tables, text) for a
    person. Strings yielded are roofline's own messages: their style tags render, anything else prints literally."""
    check_formats(as_json, as_csv)
    if as_csv:
        if csv_rows is None:
            raise RooflineError("--csv is not available for this command; use --json")
        write_csv(csv_rows())
        return
    if as_json:
        if isinstance(data, dict):  # what stderr says, a machine reads too
            data = {**data, "warnings": list(dict.fromkeys([*data.get("warnings", []), *_SAID, *map(plain, _HELD)]))}
        sys.stdout.write(json.dumps(json_safe(data), indent=2) + "\n")
        return
    out = console()
    for item in render():
        out.print(_markup(item) if isinstance(item, str) else item)


def check_formats(as_json: bool, as_csv: bool) -> None:
    """One output format at a time."""
    if as_json and as_csv:
        raise RooflineError("--json and --csv cannot be combined; pick one")


def warn(message: str) -> None:
    """One warning line on stderr (never on stdout, which may be JSON or CSV); --json's `warnings` holds it too."""
    sys.stderr.write(f"warning: {plain(message)}\n")
    _SAID.append(plain(message))


_SAID: list[str] = []  # the warnings this run has printed
_HELD: list[str] = []  # warnings said once the command succeeds (an error stays the one line it is)


def warn_on_success(message: str) -> None:
    """A warning `flush_held_warnings` prints after the command's output, once however often it is raised (a card
    at a time); dropped if the command fails."""
    if message not in _HELD:
        _HELD.append(message)


def flush_held_warnings(succeeded: bool) -> None:
    for message in _HELD if succeeded else ():
        warn(message)
    _HELD.clear()
    _SAID.clear()


def csv_cell(value: Any) -> Any:
    """A CSV cell a spreadsheet will not run: text starting like a formula gets a leading apostrophe; numbers
    (including negative ones) stay numbers; NaN/inf are left empty."""
    if isinstance(value, float) and not math.isfinite(value):
        return ""
    if hasattr(value, "item") and callable(value.item):  # numpy scalar
        value = value.item()
    if isinstance(value, str):
        value = plain(value)
        if value.startswith(_FORMULA_START):
            return "'" + value
    return value


def write_csv(rows: list[dict]) -> None:
    """CSV rows with one header, every cell through csv_cell."""
    if not rows:
        raise RooflineError("nothing to write as CSV")
    writer = csv.DictWriter(sys.stdout, fieldnames=list(rows[0]), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: csv_cell(v) for k, v in row.items()} for row in rows)
