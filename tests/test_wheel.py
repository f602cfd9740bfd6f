"""The cards ship inside the wheel, and the installed package finds them from any directory."""

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import REPO


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out),
                    str(REPO)], check=True, capture_output=True, timeout=300)
    return next(out.glob("roofline-*.whl"))


def test_wheel_contains_every_card(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for kind in ("hardware", "models", "runtimes"):
        for card in (REPO / kind).glob("*.yaml"):
            assert f"roofline/data/{kind}/{card.name}" in names
    assert any(n.endswith("entry_points.txt") for n in names)
    assert not any("torch" in n for n in names)


def test_wheel_installs_only_the_roofline_package(wheel):
    """One top-level name: the engine ships as roofline/engine (its checkout folder is engine/), never as `engine`."""
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"roofline", wheel.name.split("-py")[0] + ".dist-info"}
    engine_files = {n.removeprefix("roofline/engine/") for n in names if n.startswith("roofline/engine/")}
    checkout = {str(p.relative_to(REPO / "engine")) for p in (REPO / "engine").rglob("*.py")}
    assert engine_files == checkout  # the real engine package, not the checkout's shim


def test_installed_wheel_lists_cards_outside_the_checkout(wheel, tmp_path):
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
                   check=True, capture_output=True, timeout=300)
    env = {**os.environ, "PYTHONPATH": str(site)}
    run = subprocess.run([sys.executable, "-m", "roofline", "hw", "list", "--json"], capture_output=True, text=True,
                         cwd=tmp_path, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    cards = json.loads(run.stdout)
    assert len(cards) == len(list((REPO / "hardware").glob("*.yaml")))
    assert all(c["origin"] == "bundled" for c in cards)
    where = subprocess.run([sys.executable, "-c", "import roofline; print(roofline.__file__)"], capture_output=True,
                           text=True, cwd=tmp_path, env=env).stdout
    assert where.startswith(str(site))
    core = subprocess.run([sys.executable, "-c", "import sys, roofline.engine.core.scheduler as s; "
                           "print(s.__file__, 'torch' in sys.modules)"], capture_output=True, text=True, cwd=tmp_path,
                          env=env)
    assert core.stdout.startswith(str(site / "roofline" / "engine" / "core")) and core.stdout.split()[-1] == "False"
