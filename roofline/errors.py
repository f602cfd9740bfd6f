"""User-facing errors: one line that names the problem and the fix; the CLI prints them and exits 2."""

from __future__ import annotations

import difflib


class RooflineError(Exception):
    """An error caused by the user's input (a name, a card, an option). Never a bug."""


class UnknownNameError(RooflineError):
    def __init__(self, what: str, name: str, known: list[str], hint: str = ""):
        close = difflib.get_close_matches(name.lower(), [k.lower() for k in known], n=3, cutoff=0.5)
        canon = {k.lower(): k for k in known}
        suggestion = f"; did you mean {', '.join(canon[c] for c in close)}?" if close else ""
        tail = f" ({hint})" if hint and not close else ""
        super().__init__(f"unknown {what} '{name}'{suggestion}{tail}")
        self.name, self.matches = name, [canon[c] for c in close]


class CardError(RooflineError):
    """A card file that cannot be read: names the file, the field and what was expected."""

    def __init__(self, path: object, field: str, problem: str):
        loc = f"{path}: {field}: " if field else f"{path}: "
        super().__init__(f"{loc}{problem}")
