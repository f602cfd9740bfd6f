"""Every example runs and prints the seed figures it reproduces."""

import subprocess
import sys

import pytest
from conftest import REPO

EXPECT = {
    "kv_sizes.py": ["1.25 GiB", "10.00 GiB", "40.00 GiB", "320.00 GiB", "0.78 MiB per token", "68.6 KiB per token"],
    "decode_ceilings.py": ["llama-3.1-8b", "59.3", "73.4", "6.7"],
    "request_trace.py": ["TTFT", "decode", "total", "seed: 38"],
    "concurrency_sweep.py": ["qwen2.5-3b on dgx-spark", "1462.30", "nvidia/Gemma-4-31B-IT-NVFP4 on dgx-spark"],
    "serving_seed_tables.py": ["runtime vllm", "| qwen2.5-3b | bf16 | 64 | 1,462.30 |", "points within 15%"],
}


@pytest.mark.parametrize("script", sorted(p.name for p in (REPO / "examples").glob("*.py")))
def test_example_runs(script):
    out = subprocess.run([sys.executable, str(REPO / "examples" / script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    for text in EXPECT[script]:
        assert text in out.stdout, f"{script}: {text!r} missing from\n{out.stdout}"
