"""Checks the published-measurement CSVs under benchmarks/data/ (see PUBLISHED.md and COLLECTED.md there)."""

import csv
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent.parent / "benchmarks" / "data"
TRAIN = DATA / "published_train.csv"
COLLECTED = DATA / "published_collected.csv"
ALL = [TRAIN, COLLECTED, DATA / "published_more.csv", DATA / "published_extra.csv"]
# Rows whose benchmark does not state a sequence length leave isl/osl empty and must say so in `notes`.
UNSTATED_MARKERS = ("not stated", "variable", "not printed")


def _read(path: Path) -> tuple[list[str], list[dict]]:
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


@pytest.fixture(scope="module", params=ALL, ids=["train", "collected", "more", "extra"])
def table(request):
    return _read(request.param)


def test_collected_columns_are_train_columns_plus_date():
    train_cols, _ = _read(TRAIN)
    collected_cols, _ = _read(COLLECTED)
    assert collected_cols == train_cols + ["date"]


def test_ids_unique_across_all_files():
    ids = [r["id"] for path in ALL for r in _read(path)[1]]
    assert len(ids) == len(set(ids)), sorted(i for i in set(ids) if ids.count(i) > 1)


def test_required_fields_present(table):
    _, rows = table
    for r in rows:
        for col in ("source", "engine", "metric", "unit"):
            assert r[col].strip(), f"{r['id']}: empty {col}"
        assert float(r["value"]) > 0, f"{r['id']}: value {r['value']!r} is not positive"


def test_isl_osl_numeric_or_explained(table):
    _, rows = table
    for r in rows:
        for col in ("isl", "osl"):
            text = r[col].strip()
            if text:
                assert text.isdigit(), f"{r['id']}: {col}={text!r} is not a token count"
            else:
                assert any(m in r["notes"].lower() for m in UNSTATED_MARKERS), \
                    f"{r['id']}: empty {col} without saying the length is not stated"


def test_collected_dates_are_year_month(table):
    cols, rows = table
    if "date" not in cols:
        pytest.skip("train file has no date column")
    for r in (r for r in rows if r["date"].strip()):  # empty: the source gives no date (EXTRA.md)
        parts = r["date"].split("-")
        assert len(parts) in (2, 3) and len(parts[0]) == 4 and all(p.isdigit() for p in parts), \
            f"{r['id']}: date {r['date']!r} is not YYYY-MM or YYYY-MM-DD"
