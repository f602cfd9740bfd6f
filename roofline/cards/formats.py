"""Weight and KV-cache number formats: effective bits per value (scales included) and the math dtype.

Every figure cites ../shared/reference/FACTS.md Part C (C.1 weights, C.2 KV cache) or the layout it derives from.
"""

from __future__ import annotations

from dataclasses import dataclass

from roofline.errors import UnknownNameError

# dtypes a hardware card may list in `peak_flops` (dense FLOP/s); order = preference when falling back
MATH_DTYPES = ("fp4", "fp8", "int8", "bf16", "fp16", "tf32", "fp32")
_WEIGHT_ONLY_CHAIN = ("bf16", "fp16", "fp32")


@dataclass(frozen=True)
class Format:
    name: str
    bits_per_value: float  # effective bits per stored value, block scales included
    layout: str  # what one block holds
    source: str  # FACTS.md row the figure comes from
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
           "FACTS C.1 'FP8 per-tensor (W8)'", ("fp8", "bf16", "fp16", "fp32"), ("f8", "fp8_e4m3", "w8a8-fp8")),
    Format("int8", 8.0, "int8 per output channel + one scale per channel (negligible); W8A8",
           "FACTS C.1 (SmoothQuant-style W8A8; per-channel scales < 0.01 bit)", ("int8", "bf16", "fp16", "fp32"),
           ("w8a8", "i8")),
    Format("int4", 4 + (16 + 4) / 128, "4-bit weights, fp16 scale + 4-bit zero per 128 inputs (AWQ/GPTQ g128)",
           "FACTS C.1 'AWQ / GPTQ int4, group 128' (4 + (16+4)/128 = 4.156)", _WEIGHT_ONLY_CHAIN,
           ("awq", "gptq", "int4-awq", "w4a16", "int4_awq")),
    Format("q8_0", 8.5, "GGUF block of 32: fp16 d + 32 int8 = 34 B", "FACTS C.1 'GGUF Q8_0' (34*8/32)",
           ("int8", "fp16", "fp32"), quantizes_embeddings=True),
    Format("q6_k", 6.5625, "GGUF 256-weight super-block of 210 B", "FACTS C.1 'GGUF Q6_K' (210*8/256)",
           ("int8", "fp16", "fp32"), quantizes_embeddings=True),
    Format("q5_k_m", 5.7036, "GGUF mixed recipe, mostly Q5_K (model-level bpw on Llama-3.1-8B)",
           "FACTS C.1 'GGUF Q5_K_M' (llama.cpp tools/quantize/README.md)", ("int8", "fp16", "fp32"),
           quantizes_embeddings=True),
    Format("q4_k_m", 4.8944, "GGUF mixed recipe, mostly Q4_K, attn_v/ffn_down higher (model-level bpw)",
           "FACTS C.1 'GGUF Q4_K_M' (llama.cpp tools/quantize/README.md, Llama-3.1-8B)", ("int8", "fp16", "fp32"),
           quantizes_embeddings=True),
    Format("q4_0", 4.5, "GGUF block of 32: fp16 d + 16 B of nibbles = 18 B", "FACTS C.1 'GGUF Q4_0' (18*8/32)",
           ("int8", "fp16", "fp32"), quantizes_embeddings=True),
    Format("mxfp4", 4.25, "E2M1, block 32, one E8M0 scale per block", "FACTS C.1 'MXFP4' (4 + 8/32)",
           ("fp4", "bf16", "fp16", "fp32")),
    # MLX affine quantization (mlx.core.quantize: group_size 64; a 16-bit scale and a 16-bit bias per group)
    Format("mlx_q4", 4 + 32 / 64, "MLX affine 4-bit: group of 64, fp16 scale + fp16 bias",
           "MLX docs mlx.core.quantize (group_size=64, bits=4; scales and biases per group)", _WEIGHT_ONLY_CHAIN,
           ("mlx-4bit", "mlx 4-bit", "mlx4", "mlx-q4")),
    Format("mlx_q8", 8 + 32 / 64, "MLX affine 8-bit: group of 64, fp16 scale + fp16 bias",
           "MLX docs mlx.core.quantize (group_size=64, bits=8)", _WEIGHT_ONLY_CHAIN, ("mlx-8bit", "mlx 8-bit", "mlx8")),
    Format("nvfp4", 4.5, "E2M1, block 16, FP8 E4M3 scale per block + FP32 per tensor",
           "FACTS C.1 'NVFP4' (4 + 8/16)", ("fp4", "fp8", "bf16", "fp16", "fp32"), ("fp4",)),
)

KV_FORMATS: tuple[Format, ...] = (
    Format("fp32", 32.0, "float32", "IEEE 754", aliases=("f32",)),
    Format("bf16", 16.0, "bfloat16 (vLLM/TensorRT-LLM default for bf16 models)", "FACTS C.2", aliases=("bfloat16",)),
    Format("fp16", 16.0, "float16 (llama.cpp default 'f16')", "FACTS C.2 (llama.cpp default f16)",
           aliases=("f16", "float16", "half", "auto")),
    Format("fp8", 8.0, "E4M3/E5M2 + per-tensor FP32 k/v scale", "FACTS C.2 (vLLM kv_cache_dtype=fp8)",
           aliases=("fp8_e4m3", "fp8_e5m2", "f8")),
    Format("q8_0", 8.5, "block of 32: fp16 scale + 32 int8", "FACTS C.2 (llama.cpp -ctk q8_0; 8.5 bits)",
           aliases=("int8", "i8")),
    Format("q4_0", 4.5, "block of 32: fp16 scale + 32 nibbles (quantized V needs flash attention)",
           "FACTS C.2 (llama.cpp -ctk q4_0; 4.5 bits)", aliases=("int4",)),
)


def _index(formats: tuple[Format, ...]) -> dict[str, Format]:
    table: dict[str, Format] = {}
    for fmt in formats:
        for key in (fmt.name, *fmt.aliases):
            table[key.lower()] = fmt
    return table


_WEIGHT_INDEX = _index(WEIGHT_FORMATS)
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


def math_dtype(fmt: Format, supported: set[str] | frozenset[str]) -> str:
    """The dtype a matmul on weights of `fmt` runs in, given the card's supported dense dtypes.

    Weight-only formats (int4, GGUF k-quants on cards without int8 tensor paths) dequantise and run in bf16/fp16;
    fp8/fp4 run natively only where the card lists a peak for them.
    """
    for dtype in fmt.math_chain:
        if dtype in supported:
            return dtype
    return fmt.math_chain[-1]
