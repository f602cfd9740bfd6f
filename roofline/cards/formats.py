"""Weight and KV-cache number formats: effective bits per value (scales included) and the math dtype.

Every figure cites the layout it derives from: ggml's block structs, the OCP MX and NVIDIA NVFP4 definitions, the
GPTQ/AWQ buffers, and the runtimes' KV-cache documentation.
"""

from __future__ import annotations

from dataclasses import dataclass

from roofline.errors import UnknownNameError

# dtypes a hardware card may list in `peak_flops` (dense FLOP/s); order = preference when falling back.
# fp16_acc16: FP16 tensor math accumulating in FP16, which GeForce parts run at twice their FP32-accumulate rate (the
# `fp16` peak); only a runtime whose kernels accumulate in FP16 names it (llama.cpp's cuBLAS GEMMs, `kernel_dtypes`)
MATH_DTYPES = ("fp4", "fp8", "int8", "bf16", "fp16", "fp16_acc16", "tf32", "fp32")
_WEIGHT_ONLY_CHAIN = ("bf16", "fp16", "fp32")
# GGUF blocks: int8 dot products where the card lists them (MMQ, CPU VNNI), else dequantized to 16-bit (fp16 as
# llama.cpp's CUDA path dequantizes; bf16 on a card listing no fp16), fp32 last
_GGUF_CHAIN = ("int8", "fp16", "bf16", "fp32")


@dataclass(frozen=True)
class Format:
    name: str
    bits_per_value: float  # effective bits per stored value, block scales included
    layout: str  # what one block holds
    source: str  # where the layout (and so the figure) comes from
    math_chain: tuple[str, ...] = _WEIGHT_ONLY_CHAIN  # math dtypes it can run in, best first
    aliases: tuple[str, ...] = ()
    # GGUF quantizes token_embd/output too; checkpoint formats (FP8, AWQ, NVFP4, ...) keep them in 16-bit
    quantizes_embeddings: bool = False

    @property
    def bytes_per_value(self) -> float:
        return self.bits_per_value / 8.0


WEIGHT_FORMATS: tuple[Format, ...] = (
    Format("fp32", 32.0, "IEEE float32", "IEEE 754", ("fp32",), ("f32", "float32")),
    Format("bf16", 16.0, "bfloat16", "IEEE/bfloat16", ("bf16", "fp16", "fp32"), ("bfloat16",)),
    Format("fp16", 16.0, "IEEE float16", "IEEE 754", ("fp16", "bf16", "fp32"), ("f16", "float16", "half")),
    Format("fp8", 8.0, "E4M3 + one FP32 scale per tensor (negligible)",
           "vLLM FP8 docs: E4M3 weights with an FP32 scale per tensor", ("fp8", "bf16", "fp16", "fp32"), ("f8", "fp8_e4m3", "w8a8-fp8")),
    Format("int8", 8.0, "int8 per output channel + one scale per channel (negligible); W8A8",
           "SmoothQuant W8A8 (Xiao et al. 2023): int8 per channel; the scales add < 0.01 bit", ("int8", "bf16", "fp16", "fp32"),
           ("w8a8", "i8")),
    Format("int4", 4 + (16 + 4) / 128, "4-bit weights, fp16 scale + 4-bit zero per 128 inputs (AWQ/GPTQ g128)",
           "AutoGPTQ QuantLinear buffers: fp16 scales + 4-bit qzeros per 128 inputs (4 + (16+4)/128)", _WEIGHT_ONLY_CHAIN,
           ("awq", "gptq", "int4-awq", "w4a16", "int4_awq")),
    Format("q8_0", 8.5, "GGUF block of 32: fp16 d + 32 int8 = 34 B", "ggml-common.h block_q8_0 (34*8/32)",
           _GGUF_CHAIN, quantizes_embeddings=True),
    Format("q6_k", 6.5625, "GGUF 256-weight super-block of 210 B", "ggml-common.h block_q6_K (210*8/256)",
           _GGUF_CHAIN, quantizes_embeddings=True),
    Format("q5_k_m", 5.7036, "GGUF mixed recipe, mostly Q5_K (model-level bpw on Llama-3.1-8B)",
           "llama.cpp tools/quantize/README.md, Llama-3.1-8B table", _GGUF_CHAIN,
           quantizes_embeddings=True),
    Format("q4_k_m", 4.8944, "GGUF mixed recipe, mostly Q4_K, attn_v/ffn_down higher (model-level bpw)",
           "llama.cpp tools/quantize/README.md, Llama-3.1-8B table", _GGUF_CHAIN,
           quantizes_embeddings=True),
    *(Format(name, bpw, f"GGUF mixed recipe, mostly {base} (model-level bpw on Llama-3.1-8B)",
             "llama.cpp tools/quantize/README.md, Llama-3.1-8B table", _GGUF_CHAIN, quantizes_embeddings=True)
      for name, bpw, base in (("q5_k_s", 5.5704, "Q5_K"), ("q4_k_s", 4.6672, "Q4_K"), ("q3_k_l", 4.2979, "Q3_K"),
                              ("q3_k_s", 3.6429, "Q3_K"), ("q2_k_s", 2.9697, "Q2_K"))),
    Format("q4_0", 4.5, "GGUF block of 32: fp16 d + 16 B of nibbles = 18 B", "ggml-common.h block_q4_0 (18*8/32)",
           _GGUF_CHAIN, quantizes_embeddings=True),
    Format("mxfp4", 4.25, "E2M1, block 32, one E8M0 scale per block", "OCP Microscaling Formats (MX) v1.0: block 32, E8M0 scale (4 + 8/32)",
           ("fp4", "bf16", "fp16", "fp32")),
    # MLX affine quantization (mlx.core.quantize: group_size 64; a 16-bit scale and a 16-bit bias per group). mlx-lm
    # quantizes with mlx.nn.quantize, whose default takes every module with `to_quantized`: Linear and Embedding, so
    # the embeddings and lm_head too (MLX docs, mlx.nn.quantize)
    Format("mlx_q4", 4 + 32 / 64, "MLX affine 4-bit: group of 64, fp16 scale + fp16 bias",
           "MLX docs mlx.core.quantize (group_size=64, bits=4; scales and biases per group)", _WEIGHT_ONLY_CHAIN,
           ("mlx-4bit", "mlx 4-bit", "mlx4", "mlx-q4"), quantizes_embeddings=True),
    Format("mlx_q8", 8 + 32 / 64, "MLX affine 8-bit: group of 64, fp16 scale + fp16 bias",
           "MLX docs mlx.core.quantize (group_size=64, bits=8)", _WEIGHT_ONLY_CHAIN, ("mlx-8bit", "mlx 8-bit", "mlx8"),
           quantizes_embeddings=True),
    Format("nvfp4", 4.5, "E2M1, block 16, FP8 E4M3 scale per block + FP32 per tensor",
           "NVIDIA NVFP4: block 16, E4M3 scale + FP32 per tensor (4 + 8/16)", ("fp4", "fp8", "bf16", "fp16", "fp32"), ("fp4",)),
)


# One GGUF tensor type each (a Q4_K_M file is Q4_K and Q6_K tensors): (name, weights per block, bytes per block),
# the block structs of llama.cpp ggml/src/ggml-common.h (block_q4_K: 2 fp16 + 12 B scales + 128 B nibbles = 144 B).
# GGUF imports carry exact bytes per tensor; these names give each component its format and math dtype.
_GGML_BLOCKS = (
    ("q4_1", 32, 20), ("q5_0", 32, 22), ("q5_1", 32, 24), ("q2_k", 256, 84), ("q3_k", 256, 110),
    ("q4_k", 256, 144), ("q5_k", 256, 176), ("iq2_xxs", 256, 66), ("iq2_xs", 256, 74), ("iq2_s", 256, 82),
    ("iq3_xxs", 256, 98), ("iq3_s", 256, 110), ("iq1_s", 256, 50), ("iq1_m", 256, 56), ("iq4_nl", 32, 18),
    ("iq4_xs", 256, 136), ("tq1_0", 256, 54), ("tq2_0", 256, 66),
)
WEIGHT_FORMATS += tuple(
    Format(name, 8.0 * block_bytes / block, f"GGUF block of {block}: {block_bytes} B",
           f"llama.cpp ggml/src/ggml-common.h block_{name.replace('_k', '_K')} ({block_bytes}*8/{block})",
           _GGUF_CHAIN, quantizes_embeddings=True)
    for name, block, block_bytes in _GGML_BLOCKS
)

# Every GGUF type a llama.cpp-kernel runtime loads, named `gguf` in a runtime profile's `weight_formats`: the block
# types and llama-quantize recipes above, less the ternary TQ1_0/TQ2_0 (not on every GPU backend)
GGUF_FORMATS = tuple(f.name for f in WEIGHT_FORMATS if f.layout.startswith("GGUF") and not f.name.startswith("tq"))

KV_FORMATS: tuple[Format, ...] = (
    Format("fp32", 32.0, "float32", "IEEE 754", aliases=("f32",)),
    Format("bf16", 16.0, "bfloat16 (vLLM/TensorRT-LLM default for bf16 models)", "vLLM kv_cache_dtype 'auto' = the model dtype", aliases=("bfloat16",)),
    Format("fp16", 16.0, "float16 (llama.cpp default 'f16')", "llama.cpp --cache-type-k/-v default f16",
           aliases=("f16", "float16", "half", "auto")),
    Format("fp8", 8.0, "E4M3/E5M2 + per-tensor FP32 k/v scale", "vLLM docs, quantized KV cache: kv_cache_dtype=fp8",
           aliases=("fp8_e4m3", "fp8_e5m2", "f8")),
    Format("q8_0", 8.5, "block of 32: fp16 scale + 32 int8", "llama.cpp -ctk q8_0 (ggml block_q8_0: 8.5 bits)",
           aliases=("int8", "i8")),
    Format("q4_0", 4.5, "block of 32: fp16 scale + 32 nibbles (quantized V needs flash attention)",
           "llama.cpp -ctk q4_0 (ggml block_q4_0: 4.5 bits)", aliases=("int4",)),
)


def _index(formats: tuple[Format, ...]) -> dict[str, Format]:
    table: dict[str, Format] = {}
    for fmt in formats:
        for key in (fmt.name, *fmt.aliases):
            table[key.lower()] = fmt
    return table


_WEIGHT_INDEX = _index(WEIGHT_FORMATS)
QUANTIZED_FORMATS = frozenset(f.name for f in WEIGHT_FORMATS if f.bits_per_value < 16)  # below 16-bit floats
_KV_INDEX = _index(KV_FORMATS)


def weight_format(name: str) -> Format:
    """Look a weight format up by name or alias (case-insensitive): 'Q4_K_M', 'awq', 'NVFP4'."""
    try:
        return _WEIGHT_INDEX[name.strip().lower()]
    except KeyError:
        raise UnknownNameError("weight format", name, list(_WEIGHT_INDEX), "see `roofline formats`") from None


def kv_format(name: str) -> Format:
    """Look a KV-cache format up by name or alias: 'f16', 'fp8', 'q8_0', 'int8'."""
    try:
        return _KV_INDEX[name.strip().lower()]
    except KeyError:
        raise UnknownNameError("KV-cache format", name, list(_KV_INDEX), "see `roofline formats`") from None


def card_format(name: str, kind: str = "weight") -> Format:
    """A weight (or "kv") format named in a card: an unknown name as a ValueError, which the card's schema turns
    into one line naming the file and the field."""
    try:
        return weight_format(name) if kind == "weight" else kv_format(name)
    except UnknownNameError as err:
        raise ValueError(str(err)) from None


def math_dtype(fmt: Format, supported: set[str] | frozenset[str]) -> str:
    """The dtype a matmul on weights of `fmt` runs in, given the card's supported dense dtypes.

    Weight-only formats (int4, GGUF k-quants on cards without int8 tensor paths) dequantise and run in bf16/fp16;
    fp8/fp4 run natively only where the card lists a peak for them.
    """
    return first_supported(fmt.math_chain, supported)


def first_supported(chain: tuple[str, ...] | list[str], supported: set[str] | frozenset[str]) -> str:
    """The first dtype of a preference chain the card has a peak for, else the chain's last (its fallback)."""
    return next((d for d in chain if d in supported), chain[-1])
