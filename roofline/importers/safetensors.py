"""A ModelCard from a safetensors checkpoint folder: shapes from its config.json, exact bytes from the headers.

A safetensors file is an 8-byte little-endian header length, a JSON header {name: {dtype, shape, data_offsets}},
then the data (huggingface/safetensors README, "Format"). Only the headers are read, each bounded by
MAX_HEADER_BYTES and by the file's size. A sharded checkpoint lists its files in model.safetensors.index.json.
Quantized checkpoints keep their scale tensors beside the weights (FP8 `weight_scale_inv`, NVFP4 U8-packed values
+ F8_E4M3 `weight_scale`, MXFP4 `_blocks` + `_scales`); their bytes count toward the module they scale, so the
card's weight bytes are the checkpoint's. A Hugging Face cache folder (models--org--name) is read the same way.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import struct
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from roofline.cards.files import open_regular
from roofline.cards.model import ModelCard
from roofline.errors import CardError
from roofline.importers.checkpoint import MAX_DIMENSION, attach_stored_bytes, slug
from roofline.importers.config_json import card_from_config, read_config_file

# The safetensors library refuses headers above 100 MB (safetensors/src/tensor.rs MAX_HEADER_SIZE); parsed, a header
# of empty lists grows 26x in Python (100 MB: 2.6 GB, 29 s). A tensor's entry is about 130 bytes, so 16 MB holds
# 120,000 tensors, more than any released checkpoint puts in one file (DeepSeek-V3 splits 91,000 over 163 shards)
MAX_HEADER_BYTES = 16_000_000
HEADER_LENGTH_BYTES = 8
INDEX_FILE = "model.safetensors.index.json"
MAX_SHARDS = 100_000
# every shard's header together: DeepSeek-V3's 163 shards hold 91,000 tensors in about 12 MB of headers
MAX_CHECKPOINT_HEADER_BYTES = 64_000_000
# bits per stored value of each safetensors dtype (safetensors/src/tensor.rs Dtype); F4 and F6 pack several
# values per byte
DTYPE_BITS = {"BOOL": 8, "U8": 8, "I8": 8, "F8_E4M3": 8, "F8_E5M2": 8, "F8_E8M0": 8, "F4": 4, "F6_E2M3": 6,
              "F6_E3M2": 6, "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32,
              "C64": 64, "I64": 64, "U64": 64, "F64": 64}
# unquantized dtypes -> weight formats
_PLAIN_FORMATS = {"BF16": "bf16", "F16": "fp16", "F32": "fp32", "F64": "fp32", "F8_E4M3": "fp8", "F8_E5M2": "fp8",
                  "I8": "int8"}
# tensors of other modalities (vision towers, audio encoders, projectors): not part of the text decoder
_OTHER_MODALITY = re.compile(r"vision|visual|multi_modal_projector|mm_projector|audio|image_newline")


@dataclass(frozen=True)
class Tensor:
    name: str
    dtype: str
    shape: tuple[int, ...]
    n_bytes: int


def _fail(path: Path, problem: str) -> CardError:
    return CardError(path, "", f"not a readable safetensors file: {problem}")


def _header_json(path: Path) -> tuple[dict, int, int]:
    """(the parsed JSON header, where the data starts, the file size), reading only the header bytes."""
    try:
        with open_regular(path, "safetensors file") as f:
            size = os.fstat(f.fileno()).st_size
            raw = f.read(HEADER_LENGTH_BYTES)
            if len(raw) < HEADER_LENGTH_BYTES:
                raise _fail(path, f"the file has {size} bytes, too short for the 8-byte header length")
            n = struct.unpack("<Q", raw)[0]
            if n > MAX_HEADER_BYTES:
                raise _fail(path, f"header claims {n:,} bytes (limit {MAX_HEADER_BYTES:,})")
            if HEADER_LENGTH_BYTES + n > size:
                raise _fail(path, f"header claims {n:,} bytes but the file has {size:,} (truncated download?)")
            text = f.read(n)
    except OSError as err:
        raise CardError(path, "", f"cannot read file ({err.strerror or err})") from None
    try:
        header = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _fail(path, "the header is not UTF-8 JSON") from None
    if not isinstance(header, dict):
        raise _fail(path, "the header is not a JSON object")
    return header, HEADER_LENGTH_BYTES + n, size


def _tensor(path: Path, name: str, entry: object, data_bytes: int) -> Tensor:
    """One header entry, checked: a known dtype, a shape of sane integers, offsets that fit the data and match
    the dtype and shape."""
    if not isinstance(entry, dict):
        raise _fail(path, f"tensor {name!r} is not a JSON object")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if dtype not in DTYPE_BITS:
        raise _fail(path, f"tensor {name!r} has unknown dtype {dtype!r}")
    ints = (lambda xs: isinstance(xs, list) and all(type(x) is int and 0 <= x for x in xs))
    if not ints(shape) or len(shape) > 8 or any(x >= MAX_DIMENSION for x in shape):
        raise _fail(path, f"tensor {name!r} shape {shape!r} is not a list of sizes")
    if not ints(offsets) or len(offsets) != 2 or offsets[0] > offsets[1]:
        raise _fail(path, f"tensor {name!r} data_offsets {offsets!r} is not [begin, end]")
    if offsets[1] > data_bytes:
        raise _fail(path, f"tensor {name!r} ends at byte {offsets[1]:,} of the data but the file holds "
                    f"{data_bytes:,} (truncated download?)")
    n_values = 1
    for x in shape:
        n_values *= x
    n_bytes = offsets[1] - offsets[0]
    if n_values * DTYPE_BITS[dtype] != n_bytes * 8:
        raise _fail(path, f"tensor {name!r} is {n_bytes:,} bytes but {dtype} x {shape} needs "
                    f"{n_values * DTYPE_BITS[dtype] / 8:,.0f}")
    return Tensor(name, dtype, tuple(shape), n_bytes)


def _check_header_total(folder: Path, files: list[Path]) -> None:
    """Refuse a checkpoint whose shards' headers together claim more than MAX_CHECKPOINT_HEADER_BYTES, before any is
    parsed (a header's stated length is its first 8 bytes)."""
    total = 0
    for path in files:
        with contextlib.suppress(OSError), open_regular(path, "safetensors file") as f:
            raw = f.read(HEADER_LENGTH_BYTES)
            total += struct.unpack("<Q", raw)[0] if len(raw) == HEADER_LENGTH_BYTES else 0
        if total > MAX_CHECKPOINT_HEADER_BYTES:
            raise _fail(folder, f"its {len(files):,} shards' headers claim more than {MAX_CHECKPOINT_HEADER_BYTES:,} "
                                "bytes together")


def read_safetensors_header(path: Path) -> list[Tensor]:
    """The tensors a safetensors file holds (name, dtype, shape, exact bytes), from its header only."""
    path = Path(path)
    header, data_start, size = _header_json(path)
    header.pop("__metadata__", None)
    return [_tensor(path, str(name), entry, size - data_start) for name, entry in header.items()]


# ------------------------------------------------------------------------------------------------ the folder


def _snapshot(folder: Path) -> Path:
    """A Hugging Face cache folder (models--org--name, or its snapshots/) -> the snapshot refs/main names, else the
    only (or newest) one; any other folder is itself."""
    root = folder.parent if folder.name == "snapshots" else folder
    snapshots = root / "snapshots"
    if not snapshots.is_dir() or (folder / "config.json").is_file():
        return folder
    ref = root / "refs" / "main"
    if ref.is_file():
        with open(ref, "rb") as f:  # a commit hash, 40 hex digits: what else it holds is not read
            commit = f.read(64).decode("ascii", "replace").strip()
        if re.fullmatch(r"[0-9a-f]{40}", commit) and (snapshots / commit).is_dir():
            return snapshots / commit
    found = sorted((p for p in snapshots.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
    if not found:
        raise CardError(folder, "", "a Hugging Face cache folder with no snapshot; download the model first")
    return found[-1]


def _repo_from_cache(folder: Path) -> str | None:
    """'models--Qwen--Qwen3-8B/snapshots/<hash>' -> 'Qwen/Qwen3-8B'."""
    for part in reversed(folder.parts):
        m = re.fullmatch(r"models--([^/]+?)--(.+)", part)
        if m:
            return f"{m[1]}/{m[2].replace('--', '/')}"
    return None


def shard_files(folder: Path) -> list[Path]:
    """The checkpoint's safetensors files: those the index lists (all must exist), else every *.safetensors."""
    index = folder / INDEX_FILE
    if index.is_file():
        data = read_config_file(index)
        weight_map = data.get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise CardError(index, "weight_map", "must map tensor names to shard files")
        names = sorted({str(v) for v in weight_map.values()})
        if len(names) > MAX_SHARDS or any(Path(n).name != n for n in names):
            raise CardError(index, "weight_map", "shard names must be file names in the same folder")
        missing = [n for n in names if not (folder / n).is_file()]
        if missing:
            raise CardError(index, "weight_map", f"shard {missing[0]} is missing (incomplete download?)")
        return [folder / n for n in names]
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise CardError(folder, "", "no *.safetensors files (and no model.safetensors.index.json)")
    _check_numbered_shards(folder, files)
    return files


_NUMBERED_SHARD = re.compile(r"(.*)-(\d+)-of-(\d+)\.safetensors")  # model-00001-of-00004.safetensors


def _check_numbered_shards(folder: Path, files: list[Path]) -> None:
    """Without an index, shards named 'N-of-M' must all be there: sized from some of them, the model would read as
    a fraction of itself."""
    present: dict[tuple[str, int], set[int]] = {}
    for f in files:
        m = _NUMBERED_SHARD.fullmatch(f.name)
        if m:
            present.setdefault((m[1], int(m[3])), set()).add(int(m[2]))
    for (stem, total), have in present.items():
        if total > MAX_SHARDS:
            raise CardError(folder, "", f"{stem}: {total:,} shards named; a checkpoint has at most {MAX_SHARDS:,}")
        missing = total - len(have & set(range(1, total + 1)))
        if missing:
            first = next(n for n in range(1, total + 1) if n not in have)
            raise CardError(folder, "", f"{missing} of {total} shards of {stem} are missing (e.g. "
                                        f"{stem}-{first:05d}-of-{total:05d}.safetensors): finish the download")


# ------------------------------------------------------------------------------------------------ components


def _layer_index(name: str) -> int | None:
    m = re.search(r"\.(?:layers|h|blocks)\.(\d+)\.", name)
    return int(m[1]) if m else None


def component_of(name: str) -> str:
    """The card component a Hugging Face tensor name belongs to (Llama/Qwen/Mixtral/DeepSeek/gpt-oss naming)."""
    if "embed_tokens" in name or name.endswith("wte.weight"):
        return "embedding"
    if "lm_head" in name:
        return "lm_head"
    if re.search(r"\.(self_attn|attention|attn)\.", name):
        return "attention"  # q/k/v/o, QK-norm, sinks, MLA latents and their norms
    if re.search(r"shared_expert", name):
        return "shared_experts"
    if re.search(r"\.experts\.", name):
        return "experts"
    if re.search(r"\.(mlp|block_sparse_moe|feed_forward)\.(gate|router)\.", name):
        return "router"
    if re.search(r"\.(mlp|feed_forward)\.", name):
        return "ffn"
    if re.search(r"\.(mixer|mamba)\.", name):
        return "mamba"
    return "norms"


def _module_formats(tensors: list[Tensor]) -> dict[str, str]:
    """Format of each module (a tensor name up to its last '.'), from its weight's dtype and its scales:
    U8-packed FP4 values with F8_E4M3 scales are NVFP4, with U8/E8M0 scales MXFP4; F8 weights are FP8; I32
    `qweight` is AWQ/GPTQ int4."""
    leaves: dict[str, dict[str, str]] = {}
    for t in tensors:
        module, _, leaf = t.name.rpartition(".")
        leaves.setdefault(module, {})[leaf] = t.dtype
    out = {}
    for module, by_leaf in leaves.items():
        scales = {d for leaf, d in by_leaf.items() if "scale" in leaf and "input" not in leaf}
        packed = [d for leaf, d in by_leaf.items() if leaf.endswith(("_blocks", "weight_packed", "weight"))]
        if "qweight" in by_leaf:
            out[module] = "int4"
        elif any(d in ("U8", "F4") for d in packed):
            out[module] = "nvfp4" if "F8_E4M3" in scales else "mxfp4"
        elif any(d in ("F8_E4M3", "F8_E5M2") for d in packed):
            out[module] = "fp8"
    return out


def _stored(tensors: list[Tensor], layers: int) -> tuple[Counter, Counter, dict[str, int]]:
    """Bytes per component and per (component, format); bytes left out by reason (MTP layers, other modalities)."""
    modules = _module_formats(tensors)
    nbytes, by_format = Counter(), Counter()
    left_out: Counter = Counter()
    for t in tensors:
        layer = _layer_index(t.name)
        if _OTHER_MODALITY.search(t.name):
            left_out["vision/audio towers"] += t.n_bytes
            continue
        if layer is not None and layer >= layers:
            left_out["next-token-prediction layers"] += t.n_bytes
            continue
        component = component_of(t.name)
        fmt = modules.get(t.name.rpartition(".")[0]) or _PLAIN_FORMATS.get(t.dtype)
        nbytes[component] += t.n_bytes
        if fmt:
            by_format[(component, fmt)] += t.n_bytes
    return nbytes, by_format, dict(left_out)


def card_from_checkpoint(folder: Path, name: str | None = None) -> ModelCard:
    """A ModelCard from a safetensors checkpoint folder (config.json + one or more .safetensors files)."""
    folder = _snapshot(Path(folder).expanduser())
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise CardError(folder, "", "no config.json in the folder; a safetensors checkpoint needs its config.json")
    config = read_config_file(config_path)
    repo = _repo_from_cache(folder)
    if repo and not config.get("_name_or_path"):
        config["_name_or_path"] = repo
    files = shard_files(folder)
    default_name = slug(name or (repo or "").split("/")[-1] or folder.name) or "checkpoint"
    source = f"{folder.name} (config.json + safetensors headers)"
    card = card_from_config(config, name=default_name, source=source)
    _check_header_total(folder, files)
    tensors = [t for f in files for t in read_safetensors_header(f)]
    nbytes, by_format, left_out = _stored(tensors, card.architecture.num_layers)
    notes = [f"weights as stored in {len(files)} safetensors file(s) ({sum(nbytes.values()):,} bytes)"]
    notes += [f"{n:,} bytes of {why} left out" for why, n in left_out.items()]
    return attach_stored_bytes(card, nbytes, None, by_format, notes, source)
