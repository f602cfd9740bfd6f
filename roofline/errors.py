"""User-facing errors: one line that names the problem and the fix; the CLI prints them and exits 2."""

from __future__ import annotations

import difflib
from typing import Mapping, Sequence


def shown(value: object, limit: int = 40) -> str:
    """A value as an error line quotes it, never longer than `limit` characters: repr, or 'a 401-digit number'."""
    text = repr(value)
    if len(text) <= limit:
        return text
    if isinstance(value, int) and not isinstance(value, bool):
        return f"a {len(str(abs(value)))}-digit number"
    return text[: limit - 3] + "..."


class RooflineError(Exception):
    """An error caused by the user's input (a name, a card, an option). Never a bug."""


class UnknownNameError(RooflineError):
    """'unknown hardware 'h1000'; did you mean h100-sxm?' — `known` maps every spelling to its canonical name."""

    def __init__(self, what: str, name: str, known: Sequence[str] | Mapping[str, str], hint: str = "",
                 unreadable: str = ""):
        """`hint` is said when nothing is close; `unreadable` (a card file that failed to load, which may be the
        one meant) always."""
        spellings = {k.lower(): v for k, v in (known.items() if isinstance(known, Mapping) else ((k, k) for k in known))}
        close = difflib.get_close_matches(name.strip().lower()[:200], list(spellings), n=6, cutoff=0.6)
        self.matches = list(dict.fromkeys(spellings[c] for c in close))[:3]
        suggestion = f"; did you mean {', '.join(self.matches)}?" if self.matches else ""
        tails = [hint] if hint and not self.matches else []
        tail = f" ({'; '.join(tails + [unreadable] if unreadable else tails)})" if tails or unreadable else ""
        super().__init__(f"unknown {what} {shown(name, 80)}{suggestion}{tail}")
        self.name = name


class CardError(RooflineError):
    """A card file that cannot be read: names the file, the field and what was expected."""

    def __init__(self, path: object, field: str, problem: str):
        loc = f"{path}: {field}: " if field else f"{path}: "
        super().__init__(f"{loc}{problem}")
