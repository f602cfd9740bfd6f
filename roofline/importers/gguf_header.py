"""A bounded reader of a GGUF file's header: metadata and tensor infos, never the tensor data.

The layout is llama.cpp's (docs/gguf.md): magic 'GGUF', version u32, tensor count u64, metadata count u64, the
metadata (key string, value type u32, value), the tensor infos (name, n_dims u32, dims u64 x n_dims, ggml type u32,
offset u64), padding to `general.alignment`, then the data. Type codes and block sizes come from the `gguf` package
(llama.cpp's own Python tables). Every count and length is checked against the bytes left in the file before it is
used, so a truncated or hostile header costs at most one pass over the file's header bytes and never allocates
more than the values it keeps (per-layer arrays up to MAX_KEPT_ARRAY items; long lists such as the tokenizer's
vocabulary are only counted). gguf.GGUFReader is not used: it trusts the counts it reads (a 40-byte file whose array
claims 2^60 items keeps it looping: reads past the end return empty views) and builds one numpy view per
tokenizer string.
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gguf import GGML_QUANT_SIZES, GGUF_DEFAULT_ALIGNMENT, GGMLQuantizationType, GGUFValueType

from roofline.cards.files import open_regular
from roofline.errors import CardError

MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)  # version 1 used 32-bit counts; llama.cpp reads 2 and 3
MAX_DIMS = 4  # GGML_MAX_DIMS in ggml.h
MAX_KEY_BYTES = 65535  # the GGUF spec caps keys at 65535 bytes
MAX_KEPT_STRING_BYTES = 1 << 16  # longer strings (chat templates) are skipped, not decoded
MAX_KEPT_ARRAY = 1 << 12  # per-layer arrays are kept; longer arrays (tokenizer lists) only counted
MAX_ARRAY_ITEMS = 1 << 24  # 16 M entries: ten times the largest tokenizer vocabularies in use
# strings in all arrays of one header together (each is walked item by item, ~0.3 us): 16 x the largest vocabularies
# in use (Gemma 3's 262,144 tokens), so a header of many long string arrays reads in about a second
MAX_STRING_ITEMS = 1 << 22
MAX_COUNT = 1 << 20  # tensors or metadata entries: released models have about 1,000 tensors
MAX_NAME_BYTES = 1024  # tensor names (ggml caps them at 63)
# smallest encodings: a metadata entry (key length u64 + type u32 + one u8 value), a tensor info
# (name length u64 + n_dims u32 + type u32 + offset u64)
MIN_KV_BYTES = 8 + 4 + 1
MIN_TENSOR_INFO_BYTES = 8 + 4 + 4 + 8

_SCALARS = {GGUFValueType.UINT8: "<B", GGUFValueType.INT8: "<b", GGUFValueType.UINT16: "<H",
            GGUFValueType.INT16: "<h", GGUFValueType.UINT32: "<I", GGUFValueType.INT32: "<i",
            GGUFValueType.FLOAT32: "<f", GGUFValueType.BOOL: "<?", GGUFValueType.UINT64: "<Q",
            GGUFValueType.INT64: "<q", GGUFValueType.FLOAT64: "<d"}


@dataclass(frozen=True)
class ArrayCount:
    """A metadata array too long to keep (the tokenizer's tokens): its item type and length only."""

    item_type: str
    length: int


@dataclass(frozen=True)
class TensorInfo:
    name: str
    ggml_type: str  # GGMLQuantizationType name: 'Q4_K', 'F32', ...
    shape: tuple[int, ...]  # ggml order: ne0 (the contiguous, row) dimension first
    n_elements: int
    n_bytes: int  # exact stored bytes: n_elements / block size x block bytes


@dataclass(frozen=True)
class GGUFHeader:
    path: Path
    version: int
    metadata: dict[str, Any]
    tensors: tuple[TensorInfo, ...]
    data_offset: int  # first byte of the tensor data
    file_bytes: int

    @property
    def tensor_data_bytes(self) -> int:
        return sum(t.n_bytes for t in self.tensors)


class _Cursor:
    """Reads little-endian values from a buffer, refusing any read past its end."""

    def __init__(self, buf, path: Path):
        self.buf, self.path, self.pos, self.end = buf, path, 0, len(buf)
        self.strings_left = MAX_STRING_ITEMS  # string-array items this header may still hold

    def skip_strings(self, count: int, what: str) -> None:
        """Walk past `count` u64-length-prefixed strings without decoding them."""
        buf, pos, end, unpack = self.buf, self.pos, self.end, struct.unpack_from
        for _ in range(count):
            if pos + 8 > end:
                break
            pos += 8 + unpack("<Q", buf, pos)[0]
        else:
            if pos <= end:
                self.pos = pos
                return
        raise self.fail(f"{what} runs past the end of the file at offset {min(pos, end):,} (truncated download?)")

    def fail(self, problem: str) -> CardError:
        return CardError(self.path, "", f"not a readable GGUF file: {problem}")

    @property
    def left(self) -> int:
        return self.end - self.pos

    def take(self, n: int, what: str) -> int:
        """Reserve n bytes; returns where they start."""
        if n < 0 or n > self.left:
            raise self.fail(f"{what} needs {n:,} bytes at offset {self.pos:,} but only {self.left:,} are left "
                            "(truncated download?)")
        start, self.pos = self.pos, self.pos + n
        return start

    def unpack(self, fmt: str, what: str):
        start = self.take(struct.calcsize(fmt), what)
        return struct.unpack_from(fmt, self.buf, start)[0]

    def string(self, what: str, limit: int) -> str | None:
        """A u64-length-prefixed UTF-8 string; None (skipped) when longer than `limit`."""
        n = self.unpack("<Q", what)
        start = self.take(n, what)
        if n > limit:
            return None
        try:
            return bytes(self.buf[start:start + n]).decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{what} at offset {start:,} is not UTF-8") from None


def _value_type(cur: _Cursor, raw: int, key: str) -> GGUFValueType:
    try:
        return GGUFValueType(raw)
    except ValueError:
        raise cur.fail(f"metadata {key!r} has unknown value type {raw}") from None


def _array(cur: _Cursor, key: str) -> Any:
    item = _value_type(cur, cur.unpack("<I", f"metadata {key!r} item type"), key)
    count = cur.unpack("<Q", f"metadata {key!r} length")
    if count > MAX_ARRAY_ITEMS:
        raise cur.fail(f"metadata {key!r} claims {count:,} items (limit {MAX_ARRAY_ITEMS:,})")
    if item == GGUFValueType.ARRAY:
        raise cur.fail(f"metadata {key!r} is an array of arrays, which llama.cpp does not read either")
    if item == GGUFValueType.STRING:
        if count * 8 > cur.left:  # every string has at least its u64 length
            raise cur.fail(f"metadata {key!r} claims {count:,} strings but only {cur.left:,} bytes are left")
        if count > cur.strings_left:
            raise cur.fail(f"metadata {key!r} holds {count:,} strings, beyond the {MAX_STRING_ITEMS:,} a header's "
                           "arrays may hold together")
        cur.strings_left -= count
        if count <= MAX_KEPT_ARRAY:
            return [cur.string(f"metadata {key!r} item", MAX_KEPT_STRING_BYTES) for _ in range(count)]
        cur.skip_strings(count, f"metadata {key!r}")
        return ArrayCount(item.name, count)
    fmt = _SCALARS[item]
    size = struct.calcsize(fmt)
    start = cur.take(count * size, f"metadata {key!r} ({count:,} x {item.name})")
    if count > MAX_KEPT_ARRAY:
        return ArrayCount(item.name, count)
    return list(struct.unpack_from(f"<{count}{fmt[1]}", cur.buf, start))


def _value(cur: _Cursor, key: str) -> Any:
    vtype = _value_type(cur, cur.unpack("<I", f"metadata {key!r} type"), key)
    if vtype == GGUFValueType.STRING:
        return cur.string(f"metadata {key!r}", MAX_KEPT_STRING_BYTES)
    if vtype == GGUFValueType.ARRAY:
        return _array(cur, key)
    return cur.unpack(_SCALARS[vtype], f"metadata {key!r}")


def _metadata(cur: _Cursor, count: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i in range(count):
        key = cur.string(f"metadata key #{i}", MAX_KEY_BYTES)
        if key is None:
            raise cur.fail(f"metadata key #{i} is longer than {MAX_KEY_BYTES} bytes")
        if key in out:
            raise cur.fail(f"metadata key {key!r} appears twice")
        out[key] = _value(cur, key)
    return out


def _ggml_type(cur: _Cursor, raw: int, name: str) -> tuple[str, int, int]:
    """(type name, weights per block, bytes per block) of a tensor's ggml type code."""
    try:
        qtype = GGMLQuantizationType(raw)
        block, block_bytes = GGML_QUANT_SIZES[qtype]
    except (ValueError, KeyError):
        raise cur.fail(f"tensor {name!r} has unknown ggml type {raw} (a newer llama.cpp format? "
                       "upgrade the gguf package)") from None
    return qtype.name, block, block_bytes


def _tensor_info(cur: _Cursor, i: int, alignment: int) -> tuple[TensorInfo, int]:
    """One tensor info and its data offset (relative to the data section)."""
    name = cur.string(f"tensor #{i} name", MAX_NAME_BYTES)
    if name is None:
        raise cur.fail(f"tensor #{i} name is longer than {MAX_NAME_BYTES} bytes")
    n_dims = cur.unpack("<I", f"tensor {name!r} n_dims")
    if not 1 <= n_dims <= MAX_DIMS:
        raise cur.fail(f"tensor {name!r} has {n_dims} dimensions (ggml allows 1 to {MAX_DIMS})")
    shape = tuple(cur.unpack("<Q", f"tensor {name!r} dims") for _ in range(n_dims))
    type_name, block, block_bytes = _ggml_type(cur, cur.unpack("<I", f"tensor {name!r} type"), name)
    offset = cur.unpack("<Q", f"tensor {name!r} offset")
    n_elements = 1
    for dim in shape:
        n_elements *= dim
    if shape[0] % block:
        raise cur.fail(f"tensor {name!r} row of {shape[0]} values is not a whole number of {type_name} blocks of "
                       f"{block}")
    if offset % alignment:
        raise cur.fail(f"tensor {name!r} offset {offset} is not a multiple of the alignment {alignment}")
    info = TensorInfo(name, type_name, shape, n_elements, n_elements // block * block_bytes)
    return info, offset


def _alignment(cur: _Cursor, metadata: dict[str, Any]) -> int:
    value = metadata.get("general.alignment", GGUF_DEFAULT_ALIGNMENT)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0 or value & (value - 1):
        raise cur.fail(f"general.alignment must be a power of two, got {value!r}")
    return value


def _check_count(cur: _Cursor, count: int, what: str, min_bytes: int) -> None:
    if count > MAX_COUNT or count * min_bytes > cur.left:
        raise cur.fail(f"header claims {count:,} {what} but the file has room for at most "
                       f"{min(MAX_COUNT, cur.left // min_bytes):,}")


def _parse(buf, path: Path) -> GGUFHeader:
    cur = _Cursor(buf, path)
    magic = bytes(buf[cur.take(4, "the magic number"):4])
    if magic != MAGIC:
        raise cur.fail(f"magic is {magic!r}, expected {MAGIC!r}")
    version = cur.unpack("<I", "the version")
    if version not in SUPPORTED_VERSIONS:
        endian = " (a big-endian file?)" if version & 0xFFFF == 0 else ""
        raise cur.fail(f"version {version}{endian}; versions {SUPPORTED_VERSIONS} are supported")
    n_tensors = cur.unpack("<Q", "the tensor count")
    n_kv = cur.unpack("<Q", "the metadata count")
    _check_count(cur, n_kv, "metadata entries", MIN_KV_BYTES)
    metadata = _metadata(cur, n_kv)
    _check_count(cur, n_tensors, "tensors", MIN_TENSOR_INFO_BYTES)
    alignment = _alignment(cur, metadata)
    infos = [_tensor_info(cur, i, alignment) for i in range(n_tensors)]
    data_offset = -(-cur.pos // alignment) * alignment
    names: set[str] = set()
    for info, offset in infos:
        if info.name in names:
            raise cur.fail(f"tensor {info.name!r} appears twice")
        names.add(info.name)
        if data_offset + offset + info.n_bytes > cur.end:
            raise cur.fail(f"tensor {info.name!r} ({info.n_bytes:,} bytes at {data_offset + offset:,}) ends past "
                           f"the end of the file ({cur.end:,} bytes; truncated download?)")
    return GGUFHeader(path, version, metadata, tuple(i for i, _ in infos), data_offset, cur.end)


def read_gguf_header(path: Path) -> GGUFHeader:
    """The header of a GGUF file; CardError (one line) for anything that is not a well-formed GGUF."""
    path = Path(path)
    try:
        with open_regular(path, "GGUF file") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                raise CardError(path, "", "not a readable GGUF file: the file is empty")
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                return _parse(buf, path)
    except OSError as err:
        raise CardError(path, "", f"cannot read file ({err.strerror or err})") from None
