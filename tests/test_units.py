import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roofline.cards.units import QuantityError, parse_quantity, parse_tokens


@pytest.mark.parametrize(
    "text, kind, expected",
    [
        ("273 GB/s", "bytes_per_s", 273e9),
        ("3.35 TB/s", "bytes_per_s", 3.35e12),
        ("1,792 GB/s", "bytes_per_s", 1.792e12),
        ("128 GB", "bytes", 128e9),
        ("128 GiB", "bytes", 128 * 2**30),
        ("119.7 GiB", "bytes", 119.7 * 2**30),
        ("24 MB", "bytes", 24e6),
        ("989.4 TFLOP/s", "flop_per_s", 989.4e12),
        ("1978.9 TOPS", "flop_per_s", 1978.9e12),
        ("2 PFLOP/s", "flop_per_s", 2e15),
        ("700 W", "watts", 700.0),
        ("2 us", "seconds", 2e-6),
        ("1.5 ms", "seconds", 1.5e-3),
        (273e9, "bytes_per_s", 273e9),
        (80, "bytes", 80.0),
        ("3.35e12", "bytes_per_s", 3.35e12),  # YAML reads `bandwidth: 3.35e12` (no exponent sign) as text
        ("0.5", "seconds", 0.5),
        ("900 GB/sec", "bytes_per_s", 900e9),
        ("989 TFlops", "flop_per_s", 989e12),  # FLOP units as spec tables spell them, in any case
        ("989.4 tflops", "flop_per_s", 989.4e12),
        ("660 TOPs", "flop_per_s", 660e12),
        ("19.5 TF", "flop_per_s", 19.5e12),
        ("19.5 TFLOP/S", "flop_per_s", 19.5e12),
    ],
)
def test_parse_quantity(text, kind, expected):
    assert parse_quantity(text, kind) == pytest.approx(expected, rel=1e-12)


def test_gb_and_gib_are_not_confused():
    assert parse_quantity("1 GiB", "bytes") / parse_quantity("1 GB", "bytes") == pytest.approx(1.073741824)


@pytest.mark.parametrize(
    "text, kind",
    [("273 GX/s", "bytes_per_s"), ("fast", "bytes"), ("128 GB", "bytes_per_s"), ("-5 GB", "bytes"),
     (True, "bytes"), (None, "bytes"), (float("nan"), "bytes"), ("273 GB/s", "bytes"), ("5 GiFLOP/s", "flop_per_s"),
     ("273 Gb/s", "bytes_per_s"), ("273 gb/s", "bytes_per_s"),  # gigabits, or unclear: byte units keep their case
     ("80 G", "bytes"), ("5 mflops", "flop_per_s")],
)
def test_bad_quantities_name_the_expected_form(text, kind):
    with pytest.raises(QuantityError, match="quantity like|token count"):
        parse_quantity(text, kind)


@pytest.mark.parametrize("text, tokens", [("4k", 4096), ("4K", 4096), ("128K", 131072), ("1M", 1048576),
                                          (500, 500), ("32768", 32768)])
def test_parse_tokens(text, tokens):
    assert parse_tokens(text) == tokens


@pytest.mark.parametrize("text", ["12q", "0", "-5", "1.5", "k", "", 0, -1])
def test_bad_token_counts(text):
    with pytest.raises(QuantityError):
        parse_tokens(text)


@given(st.floats(min_value=0, max_value=1e18, allow_nan=False), st.sampled_from(["", "k", "M", "G", "T", "P"]))
def test_decimal_prefixes_round_trip(x, prefix):
    scale = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}[prefix]
    assert math.isclose(parse_quantity(f"{x!r} {prefix}B/s", "bytes_per_s"), x * scale, rel_tol=1e-12)
