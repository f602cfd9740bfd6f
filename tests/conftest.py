import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PUBLISHED_CSV = REPO / "benchmarks" / "data" / "published_train.csv"


@pytest.fixture(scope="session")
def published_rows() -> list[dict]:
    """Rows of benchmarks/data/published_train.csv (in the repository: every clone has them)."""
    import csv

    with PUBLISHED_CSV.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    """Every test gets an empty user card directory, so a developer's own cards never leak in."""
    home = tmp_path / "roofline-home"
    monkeypatch.setenv("ROOFLINE_HOME", str(home))
    return home


def run_cli(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run `python -m roofline ARGS` as a user would, in a fresh process."""
    return subprocess.run([sys.executable, "-m", "roofline", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, cwd=cwd, timeout=120)
