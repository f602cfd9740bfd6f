"""Parse quantities written in cards ("273 GB/s", "119.7 GiB", "989.4 TFLOP/s", "128K") into SI numbers.

Decimal prefixes (k, M, G, T, P) are powers of 1000; binary prefixes (Ki, Mi, Gi, Ti) are powers of 1024.
GB = 1e9 bytes, GiB = 2**30 bytes: the two are never confused.
"""

from __future__ import annotations

import re
from typing import Literal

Kind = Literal["bytes", "bytes_per_s", "flop_per_s", "watts", "seconds", "tokens"]

_DECIMAL = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}
# context lengths are conventionally binary: "4K" = 4,096 tokens, "128K" = 131,072, "1M" = 1,048,576
_TOKEN_PREFIX = {"": 1.0, "k": 2.0**10, "K": 2.0**10, "m": 2.0**20, "M": 2.0**20}
_TIME = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ns": 1e-9}  # micro sign and Greek mu

# unit suffixes accepted per kind (after the prefix); all spellings mean the same SI unit. Byte units keep their
# case ("Gb/s" is gigabits); FLOP units are matched in any case ("TFlops", "TOPs", "19.5 TF" as spec tables write
# them), their prefix too where that is unambiguous (t, g, p: no milli-FLOP/s)
_UNITS: dict[str, tuple[str, ...]] = {
    "bytes": ("B",),
    "bytes_per_s": ("B/s", "Bps", "B/sec", "B/S"),
    "flop_per_s": ("flop/s", "flops", "flop", "op/s", "ops", "f"),
    "watts": ("W",),
}
_CASELESS = {"flop_per_s"}
_LOWER_PREFIX = {"t": "T", "g": "G", "p": "P"}

EXPECTED_FORM = {
    "bytes": "a number of bytes or a quantity like '128 GB' or '119.7 GiB'",
    "bytes_per_s": "a number of bytes/s or a quantity like '273 GB/s' or '3.35 TB/s'",
    "flop_per_s": "a number of FLOP/s or a quantity like '989.4 TFLOP/s'",
    "watts": "a number of watts or a quantity like '700 W'",
    "seconds": "a number of seconds or a quantity like '2 us' or '1.5 ms'",
    "tokens": "a token count like 4096, '4k', '128K' or '1M'",
}

# No quantity a card or option states comes near this (1e36 bytes, bytes/s or FLOP/s; tokens are bounded far below
# it by their own options): a larger one is a typo or hostile; products of two stay finite (1e72).
MAX_QUANTITY = 1e36

_NUM = r"(?P<num>[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"
_QTY = re.compile(rf"^\s*{_NUM}\s*(?P<unit>[^\s0-9].*?)?\s*$")
# commas group thousands only ('1,008 GB/s', '2,048'): a comma anywhere else is a decimal comma or a typo
_GROUPED = re.compile(r"^\s*[0-9]{1,3}(?:,[0-9]{3})+(?![0-9,])")
DECIMAL_COMMA_HINT = "write decimals with '.' (a comma only groups thousands, as in 1,008 GB/s)"


class QuantityError(ValueError):
    """A value that is not a valid quantity of the expected kind."""

    def __init__(self, value: object, kind: str, hint: str = ""):
        self.value, self.kind = value, kind
        super().__init__(f"{value!r} is not {EXPECTED_FORM[kind]}" + (f"; {hint}" if hint else ""))


def _scale(prefix: str, kind: str) -> float | None:
    if prefix in _BINARY and kind in ("bytes", "bytes_per_s"):
        return _BINARY[prefix]
    return _DECIMAL.get(prefix)


def _unit_factor(unit: str, kind: str) -> float | None:
    if kind == "tokens":
        return _TOKEN_PREFIX.get(unit)
    if not unit:  # a bare number written as text (YAML reads 3.35e12 as a string): already SI
        return 1.0
    if kind == "seconds":
        return _TIME.get(unit)
    caseless = kind in _CASELESS
    for suffix in _UNITS[kind]:
        if (unit.lower() if caseless else unit).endswith(suffix):
            prefix = unit[: -len(suffix)]
            return _scale(_LOWER_PREFIX.get(prefix, prefix) if caseless else prefix, kind)
    return None


def parse_quantity(value: object, kind: Kind) -> float:
    """Return `value` in SI units (bytes, bytes/s, FLOP/s, W, s or tokens). Raises QuantityError."""
    if isinstance(value, bool):
        raise QuantityError(value, kind)
    if isinstance(value, (int, float)):
        if not 0 <= value <= MAX_QUANTITY:  # also refuses NaN (every comparison with NaN is false)
            raise QuantityError(value, kind)
        return float(value)
    if not isinstance(value, str):
        raise QuantityError(value, kind)
    text = value
    if "," in text:
        grouped = _GROUPED.match(text)
        if not grouped or "," in text[grouped.end():]:
            raise QuantityError(value, kind, DECIMAL_COMMA_HINT)
        text = text.replace(",", "")
    match = _QTY.match(text.replace("_", ""))
    if not match:
        raise QuantityError(value, kind)
    factor = _unit_factor((match["unit"] or "").strip(), kind)
    if factor is None:
        raise QuantityError(value, kind)
    si = float(match["num"]) * factor
    if not si <= MAX_QUANTITY:  # '1e999 GB' parses as infinity
        raise QuantityError(value, kind)
    return si


_ASCII_INT = re.compile(r"\s*[+-]?[0-9]+\s*")


def ascii_int(text: str) -> int:
    """int() of ASCII digits only: int('١') is 1, which a count on the command line never means. ValueError else."""
    if not _ASCII_INT.fullmatch(text):
        raise ValueError(f"{text!r} is not a whole number in ASCII digits")
    return int(text)


def parse_tokens(value: object) -> int:
    """Token counts: 4096, '4k' or '4K' (4,096), '128K' (131,072), '1M' (1,048,576). Must be > 0."""
    tokens = parse_quantity(value, "tokens")
    if tokens <= 0 or tokens != int(tokens):
        raise QuantityError(value, "tokens")
    return int(tokens)


GB = 1e9
GiB = 2.0**30
MiB = 2.0**20
KiB = 2.0**10
TB = 1e12
TFLOP = 1e12


def fmt_bytes(n: float, binary: bool = False) -> str:
    """'80.0 GB' (decimal) or '74.5 GiB' (binary)."""
    steps = [("TiB", 2.0**40), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)] if binary else [
        ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)]
    for name, size in steps:
        if abs(n) >= size:
            return f"{n / size:.3g} {name}" if n / size < 100 else f"{n / size:.0f} {name}"
    return f"{n:.0f} B"


def fmt_rate(n: float, unit: str) -> str:
    """'273 GB/s', '989 TFLOP/s'."""
    for name, size in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.4g} {name}{unit}"
    return f"{n:.4g} {unit}"
