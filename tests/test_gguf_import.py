"""GGUF import: files written with gguf.GGUFWriter round-trip to cards whose weight bytes are the file's."""

from __future__ import annotations

import json
import struct
import sys

import pytest

pytest.importorskip("gguf")
import gguf  # noqa: E402
from checkpoint_files import deepseek2_gguf, gemma3_gguf, llama_gguf, qwen3moe_gguf, write_gguf  # noqa: E402
from conftest import run_cli  # noqa: E402

from roofline.cards.hardware import HardwareCard  # noqa: E402
from roofline.errors import CardError, RooflineError  # noqa: E402
from roofline.importers import open_store  # noqa: E402
from roofline.importers.gguf import card_from_gguf  # noqa: E402
from roofline.importers.gguf_header import read_gguf_header  # noqa: E402
from roofline.sizing.memory import memory_budget  # noqa: E402
from roofline.sizing.params import param_counts, weight_bytes  # noqa: E402

FILES = {"llama": llama_gguf, "qwen3moe": qwen3moe_gguf, "gemma3": gemma3_gguf, "deepseek2": deepseek2_gguf}


def _reader_bytes(path) -> int:
    """llama.cpp's own reader: the file's tensor data size."""
    return sum(int(t.n_bytes) for t in gguf.GGUFReader(str(path)).tensors)


@pytest.mark.parametrize("arch", FILES)
def test_card_weight_bytes_equal_the_files_tensor_data(tmp_path, arch):
    path = FILES[arch](tmp_path / f"{arch}.gguf")
    card = card_from_gguf(path)
    assert sum(weight_bytes(card).values()) == _reader_bytes(path)
    assert read_gguf_header(path).tensor_data_bytes == _reader_bytes(path)


@pytest.mark.parametrize("arch", FILES)
def test_every_tensor_lands_in_the_component_its_shapes_give(tmp_path, arch):
    """The file's values per component equal the parameters derived from the card's shapes: no mismatch note."""
    card = card_from_gguf(FILES[arch](tmp_path / f"{arch}.gguf"))
    assert "values, the shapes give" not in card.notes
    assert "the card's shapes do not have" not in card.notes
    assert set(card.stored_weight_bytes) == {c for c, n in param_counts(card).items() if n}


def test_q4_k_m_file_is_q4_k_and_q6_k(tmp_path):
    card = card_from_gguf(llama_gguf(tmp_path / "Llama-Tiny-Q4_K_M.gguf"))
    assert card.name == "llama-tiny-q4_k_m"
    assert card.weights == {"default": "q4_k", "norms": "fp32", "lm_head": "q6_k"}
    # attention holds Q4_K q/k/o and a Q6_K v: its bytes per parameter lie between the two formats' bits
    per_param = card.stored_weight_bytes["attention"] / param_counts(card)["attention"]
    assert 144 / 256 < per_param < 210 / 256
    assert "MOSTLY_Q4_K_M" in card.notes


def test_architecture_from_metadata(tmp_path):
    llama = card_from_gguf(llama_gguf(tmp_path / "l.gguf", layers=3, hidden=512, heads=8, kv_heads=2)).architecture
    assert (llama.num_layers, llama.hidden_size, llama.attention.num_heads, llama.attention.num_kv_heads,
            llama.attention.head_dim, llama.ffn.intermediate_size, llama.vocab_size, llama.max_context,
            llama.rope.theta, llama.tie_embeddings) == (3, 512, 8, 2, 64, 512, 512, 8192, 500000.0, False)
    moe = card_from_gguf(qwen3moe_gguf(tmp_path / "q.gguf")).architecture
    assert (moe.moe.num_experts, moe.moe.experts_per_token, moe.moe.expert_intermediate_size) == (8, 2, 256)
    assert moe.attention.qk_norm and moe.attention.head_dim == 128 and moe.ffn is None
    gemma = card_from_gguf(gemma3_gguf(tmp_path / "g.gguf")).architecture
    assert gemma.tie_embeddings and gemma.attention.sliding_window == 512 and gemma.pattern_letters() == "SSSSSA"
    ds = card_from_gguf(deepseek2_gguf(tmp_path / "d.gguf")).architecture
    assert (ds.mla.q_lora_rank, ds.mla.kv_lora_rank, ds.mla.qk_nope_head_dim, ds.mla.qk_rope_head_dim,
            ds.mla.v_head_dim) == (64, 64, 32, 32, 32)
    assert ds.moe.first_dense_layers == 1 and ds.moe.num_shared_experts == 1 and ds.moe.router_bias


def test_fits_budget_uses_the_files_bytes_and_quant_overrides_them(tmp_path):
    path = llama_gguf(tmp_path / "l.gguf")
    card = card_from_gguf(path)
    hw = open_store().hardware("rtx-5090")
    assert isinstance(hw, HardwareCard)
    native = memory_budget(card, hw, None, "fp16", 1024)
    assert native.weights_bytes == pytest.approx(_reader_bytes(path), rel=1e-12)
    forced = memory_budget(card, hw, "default=q8_0", "fp16", 1024)
    assert forced.weights_bytes == pytest.approx(sum(weight_bytes(card, "default=q8_0").values()))
    assert forced.weights_bytes > native.weights_bytes


def test_nextn_layers_are_left_out(tmp_path):
    """GLM-4.5 files count the MTP layer in block_count and name it in nextn_predict_layers."""
    path = llama_gguf(tmp_path / "l.gguf", layers=3)
    header = read_gguf_header(path)
    meta = {k.removeprefix("llama."): v for k, v in header.metadata.items() if k.startswith("llama.")}
    tensors = {}
    for t in header.tensors:
        shape = tuple(reversed(t.shape))
        tensors[t.name] = (shape, t.ggml_type)
    nextn = write_gguf(tmp_path / "n.gguf", "llama", {**meta, "nextn_predict_layers": 1}, tensors)
    card = card_from_gguf(nextn)
    layer2 = sum(t.n_bytes for t in header.tensors if t.name.startswith("blk.2."))
    assert card.architecture.num_layers == 2
    assert sum(weight_bytes(card).values()) == _reader_bytes(nextn) - layer2
    assert f"{layer2:,} bytes of next-token-prediction layers left out" in card.notes


def test_cli_predict_fits_show_import_take_a_gguf(tmp_path, isolated_home):
    path = llama_gguf(tmp_path / "tiny-Q4_K_M.gguf")
    out = run_cli("predict", "--model", str(path), "--hw", "dgx-spark", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)
    fits = run_cli("fits", "--model", str(path), "--hw", "rtx-5090", "--context", "4k", "--json")
    assert fits.returncode == 0, fits.stderr
    shown = json.loads(run_cli("models", "show", str(path), "--json").stdout)
    assert shown["derived"]["weights_bytes"] == _reader_bytes(path)
    imported = run_cli("models", "import", str(path), "--json")
    assert imported.returncode == 0, imported.stderr
    data = json.loads(imported.stdout)
    assert data["path"] == str(isolated_home / "models" / "tiny-q4_k_m.yaml")
    again = json.loads(run_cli("models", "show", "tiny-q4_k_m", "--json").stdout)
    assert again["derived"]["weights_bytes"] == _reader_bytes(path)  # the YAML keeps the exact bytes
    assert not list((isolated_home / "models").glob("*.tmp"))


def test_predict_cold_start_does_not_import_gguf():
    code = ("import sys, roofline; roofline.predict('llama-3.1-8b', 'dgx-spark'); "
            "print('gguf' in sys.modules, 'safetensors' in sys.modules)")
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False", "False"], out.stderr


def test_unsupported_architecture_is_one_line(tmp_path):
    path = write_gguf(tmp_path / "rwkv.gguf", "rwkv6", {"block_count": 1}, {"token_embd.weight": ((8, 32), "F32")})
    with pytest.raises(RooflineError, match="GGUF architecture 'rwkv6' is not supported"):
        card_from_gguf(path)
    out = run_cli("predict", "--model", str(path), "--hw", "dgx-spark")
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1


def _header(*, magic=b"GGUF", version=3, n_tensors=0, n_kv=0) -> bytes:
    return magic + struct.pack("<IQQ", version, n_tensors, n_kv)


def _kv_string(key: str, value: bytes, claimed: int | None = None) -> bytes:
    k = key.encode()
    return struct.pack("<Q", len(k)) + k + struct.pack("<IQ", 8, len(value) if claimed is None else claimed) + value


BAD = {
    "empty file": (b"", "the file is empty"),
    "truncated header": (b"GGUF\x03\x00", "truncated"),
    "wrong magic": (_header(magic=b"GGML"), "magic is b'GGML'"),
    "unsupported version": (_header(version=7), "version 7"),
    "tensor count beyond the file": (_header(n_tensors=10**12), "claims 1,000,000,000,000 tensors"),
    "metadata count beyond the file": (_header(n_kv=2**63), "metadata entries"),
    "string length beyond the file": (_header(n_kv=1) + _kv_string("general.name", b"x", claimed=2**40),
                                      "needs 1,099,511,627,776 bytes"),
    "array claiming gigabytes": (_header(n_kv=1) + b"\x01\x00\x00\x00\x00\x00\x00\x00k" + struct.pack("<IIQ", 9, 0, 2**33),
                                 "claims 8,589,934,592 items"),
    "array claiming 128 MiB": (_header(n_kv=1) + b"\x01\x00\x00\x00\x00\x00\x00\x00k" + struct.pack("<IIQ", 9, 10, 2**24),
                               "needs 134,217,728 bytes"),
    "array of zero-size items": (_header(n_kv=1) + b"\x01\x00\x00\x00\x00\x00\x00\x00k" + struct.pack("<IIQ", 9, 8, 2**60),
                                 "claims 1,152,921,504,606,846,976 items"),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_headers_are_one_line_errors(tmp_path, case):
    data, message = BAD[case]
    path = tmp_path / "bad.gguf"
    path.write_bytes(data)
    with pytest.raises(CardError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_gguf_header(path)


def _string_array(key: str, strings: list[bytes]) -> bytes:
    k = key.encode()
    return (struct.pack("<Q", len(k)) + k + struct.pack("<IIQ", 9, 8, len(strings))
            + b"".join(struct.pack("<Q", len(v)) + v for v in strings))


def test_string_arrays_are_bounded_together_and_a_truncated_one_refused(tmp_path, monkeypatch):
    """Each string of a long array is walked in Python: a header's arrays hold at most MAX_STRING_ITEMS strings
    together (16 M empty strings took 46 s), counted across arrays; one that runs past the file is refused."""
    import roofline.importers.gguf_header as gh

    monkeypatch.setattr(gh, "MAX_STRING_ITEMS", 10_000)
    path = tmp_path / "strings.gguf"
    path.write_bytes(_header(n_kv=2) + _string_array("a", [b"x"] * 6_000) + _string_array("b", [b""] * 6_000))
    with pytest.raises(CardError, match="'b' holds 6,000 strings, beyond the 10,000"):
        read_gguf_header(path)
    path.write_bytes(_header(n_kv=1) + _string_array("a", [b"xy"] * 6_000)[:-10])
    with pytest.raises(CardError, match="'a' runs past the end of the file"):
        read_gguf_header(path)
    path.write_bytes(_header(n_kv=1) + _string_array("a", [b"xy"] * 6_000))
    assert read_gguf_header(path).metadata["a"].length == 6_000


def _tensor_info(name: str, dims: tuple[int, ...], ggml_type: int, offset: int = 0) -> bytes:
    n = name.encode()
    return (struct.pack("<Q", len(n)) + n + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
            + struct.pack("<IQ", ggml_type, offset))


def test_unknown_ggml_type_and_data_past_the_end(tmp_path):
    path = tmp_path / "t.gguf"
    path.write_bytes(_header(n_tensors=1) + _tensor_info("w", (32,), 999) + bytes(64))
    with pytest.raises(CardError, match="unknown ggml type 999"):
        read_gguf_header(path)
    path.write_bytes(_header(n_tensors=1) + _tensor_info("w", (4096, 4096), 0) + bytes(64))  # 64 MiB of F32 claimed
    with pytest.raises(CardError, match="ends past the end of the file"):
        read_gguf_header(path)


def test_truncated_download_is_caught(tmp_path):
    path = llama_gguf(tmp_path / "l.gguf")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 1000])
    with pytest.raises(CardError, match="truncated download"):
        card_from_gguf(path)
    out = run_cli("models", "import", str(path))
    assert out.returncode == 2 and "truncated download" in out.stderr and "Traceback" not in out.stderr
