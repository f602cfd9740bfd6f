"""safetensors checkpoint import: folders written with safetensors.numpy.save_file; only the headers are read."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

pytest.importorskip("safetensors")

from checkpoint_files import llama_config, llama_tensors, write_checkpoint  # noqa: E402
from conftest import run_cli  # noqa: E402

from roofline.errors import CardError  # noqa: E402
from roofline.importers.safetensors import card_from_checkpoint, read_safetensors_header  # noqa: E402
from roofline.sizing.params import param_counts, weight_bytes  # noqa: E402


def _file_tensor_bytes(folder) -> int:
    return sum(t.n_bytes for f in folder.glob("*.safetensors") for t in read_safetensors_header(f))


def _data_bytes(folder) -> int:
    """Bytes after each file's header: what the tensors occupy, measured from the file sizes."""
    total = 0
    for f in folder.glob("*.safetensors"):
        n = struct.unpack("<Q", f.read_bytes()[:8])[0]
        total += f.stat().st_size - 8 - n
    return total


@pytest.mark.parametrize("shards", [1, 3])
def test_bf16_checkpoint_weight_bytes_equal_the_files(tmp_path, shards):
    cfg = llama_config()
    folder = write_checkpoint(tmp_path / "tiny-llama", cfg, llama_tensors(cfg), shards=shards)
    card = card_from_checkpoint(folder)
    assert card.name == "tiny-llama"
    assert sum(weight_bytes(card).values()) == _file_tensor_bytes(folder) == _data_bytes(folder)
    # 2-byte values: every component's stored bytes are twice its derived parameters
    assert card.stored_weight_bytes == {c: 2 * n for c, n in param_counts(card).items() if n}


def _fp8(o: int, i: int) -> dict:
    """DeepSeek-style FP8: E4M3 weights (stored as uint8 bytes, relabelled below) + fp32 128x128 block scales."""
    return {"weight": np.zeros((o, i), np.uint8), "weight_scale_inv": np.zeros((-(-o // 128), -(-i // 128)), np.float32)}


def _relabel(folder, dtypes: dict[str, str]) -> None:
    """Relabel U8 tensors whose names end with a key (numpy has no F8_E4M3): same byte sizes, so the data and
    its offsets stay valid; the header is rewritten with its new length."""
    for f in folder.glob("*.safetensors"):
        raw = f.read_bytes()
        n = struct.unpack("<Q", raw[:8])[0]
        header = json.loads(raw[8:8 + n])
        for name, entry in header.items():
            for suffix, dtype in dtypes.items():
                if name.endswith(suffix) and entry["dtype"] == "U8":
                    entry["dtype"] = dtype
        text = json.dumps(header, separators=(",", ":")).encode()
        f.write_bytes(struct.pack("<Q", len(text)) + text + raw[8 + n:])


def test_fp8_checkpoint_counts_its_scales(tmp_path):
    cfg = llama_config(hidden=256, ffn=512, quantization_config={"quant_method": "fp8"})
    tensors = llama_tensors(cfg, linear=_fp8)
    folder = write_checkpoint(tmp_path / "fp8", cfg, tensors)
    _relabel(folder, {".weight": "F8_E4M3"})
    card = card_from_checkpoint(folder)
    assert card.weights == {"default": "fp8", "embedding": "fp16", "lm_head": "fp16", "norms": "fp16"}
    scales = sum(a.nbytes for n, a in tensors.items() if n.endswith("weight_scale_inv"))
    assert scales > 0
    assert sum(weight_bytes(card).values()) == _file_tensor_bytes(folder)
    n_att = param_counts(card)["attention"]
    att_scales = sum(a.nbytes for n, a in tensors.items() if "self_attn" in n and n.endswith("weight_scale_inv"))
    assert card.stored_weight_bytes["attention"] == n_att + att_scales  # 1 byte per value plus the scales


def _nvfp4(o: int, i: int) -> dict:
    """NVFP4 (ModelOpt layout): two E2M1 values per byte, an E4M3 scale per 16 values, an fp32 global scale."""
    return {"weight": np.zeros((o, i // 2), np.uint8), "weight_scale": np.zeros((o, i // 16), np.uint8),
            "weight_scale_2": np.zeros((), np.float32), "input_scale": np.zeros((), np.float32)}


def _mxfp4(o: int, i: int) -> dict:
    """MXFP4 (gpt-oss layout): 16-byte blocks of 32 E2M1 values, one E8M0 (U8) scale per block."""
    return {"weight_blocks": np.zeros((o, i // 32, 16), np.uint8), "weight_scales": np.zeros((o, i // 32), np.uint8)}


@pytest.mark.parametrize("linear, fmt, bits", [(_nvfp4, "nvfp4", 4.5), (_mxfp4, "mxfp4", 4.25)])
def test_fp4_checkpoints_include_scales(tmp_path, linear, fmt, bits):
    cfg = llama_config(hidden=256, ffn=512)
    folder = write_checkpoint(tmp_path / fmt, cfg, llama_tensors(cfg, linear=linear))
    if fmt == "nvfp4":
        _relabel(folder, {".weight_scale": "F8_E4M3"})
    card = card_from_checkpoint(folder)
    assert card.weights["default"] == fmt
    assert sum(weight_bytes(card).values()) == _file_tensor_bytes(folder)
    # the FFN holds only block-quantized matrices: its stored bits per parameter are the format's, scales included
    assert 8 * card.stored_weight_bytes["ffn"] / param_counts(card)["ffn"] == pytest.approx(bits, rel=1e-3)


def test_hugging_face_cache_folder(tmp_path):
    cfg = llama_config()
    root = tmp_path / "hub" / "models--acme--Tiny-Llama-1B"
    commit = "0123456789abcdef0123456789abcdef01234567"
    snapshot = write_checkpoint(root / "snapshots" / commit, cfg, llama_tensors(cfg))
    write_checkpoint(root / "snapshots" / ("f" * 40), cfg, llama_tensors(cfg, layers=range(1)))  # an older one
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text(commit)
    card = card_from_checkpoint(root)
    assert card.name == "tiny-llama-1b" and "acme/Tiny-Llama-1B" in card.aliases
    assert sum(weight_bytes(card).values()) == _file_tensor_bytes(snapshot)


def test_mtp_and_vision_tensors_are_left_out(tmp_path):
    cfg = llama_config()
    tensors = llama_tensors(cfg, layers=range(3))  # layer 2 is beyond num_hidden_layers: an MTP layer
    tensors["vision_tower.patch_embed.weight"] = np.zeros((64, 64), np.float16)
    folder = write_checkpoint(tmp_path / "m", cfg, tensors)
    card = card_from_checkpoint(folder)
    assert sum(weight_bytes(card).values()) == sum(a.nbytes for n, a in tensors.items()
                                                   if ".layers.2." not in n and "vision" not in n)
    assert "bytes of next-token-prediction layers left out" in card.notes
    assert f"{64 * 64 * 2:,} bytes of vision/audio towers left out" in card.notes


def test_cli_takes_a_checkpoint_folder(tmp_path, isolated_home):
    cfg = llama_config()
    folder = write_checkpoint(tmp_path / "tiny-ckpt", cfg, llama_tensors(cfg), shards=2)
    out = run_cli("predict", "--model", str(folder), "--hw", "h100-sxm", "--json")
    assert out.returncode == 0, out.stderr
    imported = run_cli("models", "import", str(folder), "--name", "my-tiny", "--json")
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout)["weights_bytes"] == _file_tensor_bytes(folder)
    bad_name = run_cli("models", "import", str(folder), "--name", "../escape")
    assert bad_name.returncode == 2 and "a card name needs letters or digits" in bad_name.stderr
    assert not (isolated_home / "escape.yaml").exists()


def test_a_lone_weights_file_points_to_its_folder(tmp_path, isolated_home):
    cfg = llama_config()
    folder = write_checkpoint(tmp_path / "tiny-ckpt", cfg, llama_tensors(cfg), shards=1)
    shard = next(folder.glob("*.safetensors"))
    out = run_cli("predict", "--model", str(shard), "--hw", "h100-sxm")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "give its checkpoint folder" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_missing_shard_and_config(tmp_path):
    cfg = llama_config()
    folder = write_checkpoint(tmp_path / "c", cfg, llama_tensors(cfg), shards=2)
    next(folder.glob("model-00002-*.safetensors")).unlink()
    with pytest.raises(CardError, match="shard model-00002-of-00002.safetensors is missing"):
        card_from_checkpoint(folder)
    (folder / "config.json").unlink()
    with pytest.raises(CardError, match="no config.json"):
        card_from_checkpoint(folder)


def _file(tmp_path, header: bytes, length: int | None = None, tail: bytes = b"") -> object:
    path = tmp_path / "x.safetensors"
    path.write_bytes(struct.pack("<Q", len(header) if length is None else length) + header + tail)
    return path


@pytest.mark.parametrize("header, length, tail, message", [
    (b"", 0, b"", "not UTF-8 JSON"),
    (b"{}", 10**9, b"", "header claims 1,000,000,000 bytes"),
    (b"{}", 20_000_000, b"", "header claims 20,000,000 bytes"),  # a 100 MB header of [] parsed into 2.6 GB
    (b"{}", 5000, b"", "truncated download"),
    (b"[1]", None, b"", "not a JSON object"),
    (b'{"w": {"dtype": "Q9", "shape": [1], "data_offsets": [0, 1]}}', None, b"\0", "unknown dtype 'Q9'"),
    (b'{"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}', None, b"\0" * 8, "truncated download"),
    (b'{"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 8]}}', None, b"\0" * 8, "needs 16"),
    (b'{"w": {"dtype": "F32", "shape": [-4], "data_offsets": [0, 8]}}', None, b"\0" * 8, "not a list of sizes"),
    (b'{"w": {"dtype": "F32", "shape": [4], "data_offsets": [9, 8]}}', None, b"\0" * 8, "not \\[begin, end\\]"),
])
def test_bad_safetensors_headers_are_one_line(tmp_path, header, length, tail, message):
    with pytest.raises(CardError, match=message):
        read_safetensors_header(_file(tmp_path, header, length, tail))


def test_shards_whose_headers_claim_too_much_together_are_refused_before_parsing(tmp_path, monkeypatch):
    """Each shard's header is bounded alone; 100,000 shards of 16 MB would still parse for hours, so their stated
    lengths are summed first."""
    import roofline.importers.safetensors as st

    cfg = llama_config()
    folder = write_checkpoint(tmp_path / "ck", cfg, llama_tensors(cfg), shards=3)
    monkeypatch.setattr(st, "MAX_CHECKPOINT_HEADER_BYTES", 100)
    with pytest.raises(CardError, match="3 shards' headers claim more than 100 bytes together"):
        card_from_checkpoint(folder)
