"""The package's layering, read from the source: each layer imports only layers below it, and torch stays in the
engine's model and measurement code (never in roofline/, engine/core or the engine package itself)."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

# pipeline order: a module may import roofline modules of a lower rank, or of its own package
RANKS = {
    "roofline.errors": 0,
    "roofline.cards": 1,
    "roofline.sizing": 2,
    "roofline.importers": 3,
    "roofline.engine.core": 3,
    "roofline.perf": 4,
    "roofline.engine": 5,
    "roofline.calibrate": 6,
    "roofline.report": 7,
    "roofline.cli": 8,
    "roofline": 9,  # the API (__init__) and __main__
}


def _package(module: str) -> str:
    """The layer a dotted module name belongs to: the longest RANKS key that prefixes it."""
    return max((k for k in RANKS if module == k or module.startswith(k + ".")), key=len)


def _module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = list(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
    return ".".join(["roofline", *parts] if parts[0] == "engine" else parts)


def _sources() -> list[Path]:
    files = [*(REPO / "roofline").rglob("*.py"), *(REPO / "engine").rglob("*.py")]
    return [p for p in files if p.relative_to(REPO).parts[:2] != ("roofline", "engine")]  # the shim is not code


def _imports(path: Path) -> set[str]:
    """Every module a file imports, at module level or inside functions (a lazy import is still a dependency)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: use absolute imports (roofline.…)"
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return found


def _roofline_imports(path: Path) -> set[str]:
    return {m for m in _imports(path) if m == "roofline" or m.startswith("roofline.")}


SOURCES = _sources()


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(REPO)))
def test_each_layer_imports_only_layers_below_it(path):
    me = _module_name(path)
    mine = _package(me)
    for target in _roofline_imports(path):
        theirs = _package(target)
        if theirs == mine or target in ("roofline", "roofline.__version__"):
            continue
        assert RANKS[theirs] < RANKS[mine], f"{me} ({mine}) imports {target} ({theirs}), a layer at or above it"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(REPO)))
def test_torch_only_in_the_engine_model_and_measurements(path):
    me = _module_name(path)
    torch_free = not me.startswith(("roofline.engine.model", "roofline.engine.measure", "roofline.engine.engine",
                                    "roofline.engine.device", "roofline.engine.parallel"))
    if torch_free:
        heavy = {m for m in _imports(path) if m.split(".")[0] in ("torch", "triton", "transformers")}
        assert not heavy, f"{me} must not import {sorted(heavy)}"


def test_engine_core_uses_no_engine_model_code():
    for path in (REPO / "engine" / "core").rglob("*.py"):
        engine_deps = {m for m in _roofline_imports(path) if m.startswith("roofline.engine")}
        assert all(m.startswith("roofline.engine.core") for m in engine_deps), (path, engine_deps)


def test_importing_the_engine_package_and_its_core_loads_no_torch():
    code = ("import sys, roofline.engine, roofline.engine.core.scheduler, roofline.engine.core.block_manager; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'numpy', 'pandas')))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert run.returncode == 0, run.stderr
    assert "torch" not in run.stdout


def test_predict_imports_no_torch_pandas_or_matplotlib():
    code = ("import sys; from roofline.cli.app import main; sys.argv = ['roofline', 'predict', '-m', 'llama-3.1-8b', "
            "'--hw', 'h100', '--json']\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('HEAVY', sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'pandas', 'matplotlib')))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert "HEAVY []" in run.stdout, run.stdout[-500:] + run.stderr[-500:]


def test_the_engine_has_one_import_name():
    """`roofline.engine` works; a top-level `engine` (a checkout's root on sys.path) refuses, as in the wheel."""
    run = subprocess.run([sys.executable, "-c", "import engine"], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert run.returncode != 0 and "roofline.engine" in run.stderr
