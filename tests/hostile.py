"""Shared helpers of the hostile-input and newcomer suites: run the CLI in-process, write cards, bound time."""

from __future__ import annotations

import copy
import os
import signal
from contextlib import contextmanager
from pathlib import Path

import yaml

from roofline.cli.app import main

HW = {
    "name": "box", "vendor": "test", "kind": "gpu", "description": "a test card",
    "memory": {"capacity": "80 GB", "bandwidth": "3 TB/s"},
    "peak_flops": {"bf16": "900 TFLOP/s", "fp8": "1800 TFLOP/s"},
    "interconnect": {"kind": "nvlink4", "bandwidth_per_direction": "450 GB/s", "latency": "5 us", "gpus_per_node": 8},
    "sources": {"memory.capacity": "test", "memory.bandwidth": "test", "peak_flops": "test"},
}
MODEL = {
    "name": "toy", "family": "test", "source": {"shapes_from": "test"}, "params": {"total": 1e9, "source": "test"},
    "architecture": {"vocab_size": 32000, "hidden_size": 2048, "num_layers": 16, "max_context": 8192,
                     "attention": {"num_heads": 16, "num_kv_heads": 4, "head_dim": 128},
                     "ffn": {"intermediate_size": 8192}},
}
CONFIG = {"model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
          "num_attention_heads": 16, "num_key_value_heads": 4, "vocab_size": 32000, "max_position_embeddings": 8192,
          "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "torch_dtype": "bfloat16"}
CASE_SECONDS = 10  # every case finishes in this or fails


def edited(base: dict, path: str, value) -> dict:
    """A deep copy of `base` with the dotted `path` set to `value` (or removed when value is ...)."""
    data = copy.deepcopy(base)
    keys = path.split(".")
    node = data
    for k in keys[:-1]:
        node = node.setdefault(k, {})
    if value is ...:
        node.pop(keys[-1], None)
    else:
        node[keys[-1]] = value
    return data


def write_card(root: Path, kind: str, data: dict | str | bytes, stem: str | None = None) -> Path:
    """A card file under root/kind/ (a dict is dumped as YAML; text and bytes are written as they are)."""
    folder = root / kind
    folder.mkdir(parents=True, exist_ok=True)
    name = stem or (data["name"] if isinstance(data, dict) else "card")
    path = folder / f"{name}.yaml"
    if isinstance(data, dict):
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    elif isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data)
    return path


@contextmanager
def time_limit(seconds: int = CASE_SECONDS):
    """Fail a case that runs past `seconds` (a hang) instead of blocking the suite."""
    def expire(signum, frame):
        raise TimeoutError(f"took more than {seconds} s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def cli(capsys, *args) -> tuple[int, str, str]:
    """Run `roofline ARGS` in this process: (exit code, stdout, stderr)."""
    with time_limit():
        try:
            main([str(a) for a in args])
            code = 0
        except SystemExit as err:
            code = err.code if isinstance(err.code, int) else (0 if err.code is None else 1)
    out = capsys.readouterr()
    return code, out.out, out.err


def refused(result, *needles: str) -> None:
    """Exit 2 with exactly one line on stderr, no traceback, naming every needle (case-insensitive)."""
    code, out, err = result
    assert code == 2, (code, out[-400:], err[-800:])
    assert "Traceback" not in err and "internal error" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("warning:")]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for needle in needles:
        assert needle.lower() in lines[0].lower(), (needle, lines[0])


def ok(result) -> str:
    code, out, err = result
    assert code == 0, (code, err[-800:])
    assert "Traceback" not in err and "internal error" not in err
    return out


def files_under(root: Path) -> set[Path]:
    return {p for p in Path(root).rglob("*")} if Path(root).exists() else set()


def is_writable_by_us(path: Path) -> bool:
    return os.access(path, os.W_OK)
