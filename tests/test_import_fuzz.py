"""Random and mutated GGUF and safetensors headers: only one-line RooflineErrors escape, each case is fast, and
nothing allocates more than 100 MB (tracemalloc peak)."""

from __future__ import annotations

import json
import struct
import time
import tracemalloc

import pytest

pytest.importorskip("gguf")
pytest.importorskip("safetensors")
from checkpoint_files import llama_config, llama_gguf, llama_tensors, write_checkpoint  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from roofline.errors import RooflineError  # noqa: E402
from roofline.importers.gguf import card_from_gguf  # noqa: E402
from roofline.importers.gguf_header import read_gguf_header  # noqa: E402
from roofline.importers.safetensors import card_from_checkpoint  # noqa: E402

PEAK_LIMIT_BYTES = 100 * 10**6
CASE_LIMIT_S = 2.0
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def gguf_file(tmp_path_factory):
    return llama_gguf(tmp_path_factory.mktemp("g") / "l.gguf")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    cfg = llama_config()
    return write_checkpoint(tmp_path_factory.mktemp("s") / "ckpt", cfg, llama_tensors(cfg))


def _bounded(load, path) -> None:
    """Run one import: a card or a RooflineError, within the time and memory limits."""
    tracemalloc.start()
    start = time.perf_counter()
    try:
        load(path)
    except RooflineError as err:
        assert "\n" not in str(err)
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert time.perf_counter() - start < CASE_LIMIT_S
    assert peak < PEAK_LIMIT_BYTES


def _mutate(data: bytes, edits: list[tuple[int, int]], cut: int | None, header_bytes: int) -> bytes:
    """Overwrite bytes within the first `header_bytes` (where the counts, lengths and types live); maybe truncate."""
    out = bytearray(data)
    for pos, value in edits:
        out[pos % header_bytes] = value
    return bytes(out[:cut]) if cut is not None else bytes(out)


_EDITS = st.lists(st.tuples(st.integers(0, 10**9), st.integers(0, 255)), min_size=1, max_size=8)
_CUT = st.one_of(st.none(), st.integers(0, 4096))


@SETTINGS
@given(edits=_EDITS, cut=_CUT)
def test_mutated_gguf_headers(tmp_path, gguf_file, edits, cut):
    gguf_bytes = gguf_file.read_bytes()
    data_start = read_gguf_header(gguf_file).data_offset  # mutate only the header
    path = tmp_path / "m.gguf"
    path.write_bytes(_mutate(gguf_bytes, edits, cut, data_start))
    _bounded(card_from_gguf, path)


@SETTINGS
@given(data=st.binary(max_size=512))
def test_random_gguf_bytes(tmp_path, data):
    path = tmp_path / "r.gguf"
    path.write_bytes(data if data[:1] != b"G" else b"GGUF\x03\x00\x00\x00" + data)
    _bounded(card_from_gguf, path)


@SETTINGS
@given(edits=_EDITS, cut=_CUT)
def test_mutated_safetensors_headers(tmp_path, checkpoint, edits, cut):
    folder = checkpoint
    data = (folder / "model.safetensors").read_bytes()
    header_end = 8 + struct.unpack("<Q", data[:8])[0]
    target = tmp_path / "ckpt"
    target.mkdir(exist_ok=True)
    (target / "config.json").write_bytes((folder / "config.json").read_bytes())
    (target / "model.safetensors").write_bytes(_mutate(data, edits, cut, header_end))
    _bounded(card_from_checkpoint, target)


_JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                     max_leaves=20)


@SETTINGS
@given(header=st.dictionaries(st.text(max_size=12), _JSON, max_size=6), length=st.one_of(st.none(), st.integers(0, 2**64 - 1)))
def test_random_safetensors_headers(tmp_path, checkpoint, header, length):
    folder = checkpoint
    text = json.dumps(header).encode()
    target = tmp_path / "ckpt"
    target.mkdir(exist_ok=True)
    (target / "config.json").write_bytes((folder / "config.json").read_bytes())
    (target / "model.safetensors").write_bytes(struct.pack("<Q", len(text) if length is None else length) + text)
    _bounded(card_from_checkpoint, target)
