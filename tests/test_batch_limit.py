"""A --batch beyond what the runtime's server runs at once is still timed as asked, with a warning that names the
limit (vLLM's max_num_seqs, llama.cpp's slots) and where the queue is modelled (`roofline serve`)."""

from __future__ import annotations

import pytest
from hostile import cli

ARGS = ("-m", "llama-3.1-8b", "--hw", "h100-sxm")


@pytest.mark.parametrize("command, runtime, batch, needle", [
    ("predict", "vllm", 512, "at most 256 sequences at once by default (max_num_seqs)"),
    ("compare", "llama.cpp", 4, "at most 1 sequence at once by default (slots)"),
])
def test_a_batch_beyond_the_runtime_limit_is_warned(command, runtime, batch, needle, capsys):
    code, _out, err = cli(capsys, command, *ARGS, "--runtime", runtime, "--batch", batch)
    assert code == 0 and needle in err and f"serve --concurrency {batch}" in err


@pytest.mark.parametrize("runtime, batch", [("vllm", 256), (None, 4096)])
def test_a_batch_within_the_limit_or_without_a_runtime_is_not_warned(runtime, batch, capsys):
    extra = ("--runtime", runtime) if runtime else ()
    code, _out, err = cli(capsys, "predict", *ARGS, *extra, "--batch", batch)
    assert code == 0 and "at once by default" not in err
