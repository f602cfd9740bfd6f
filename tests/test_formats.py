import pytest

from roofline.cards.formats import kv_format, math_dtype, weight_format
from roofline.errors import UnknownNameError

# the layouts in roofline/cards/formats.py: ggml block structs, OCP MX, NVFP4, GPTQ buffers
WEIGHT_BITS = {"fp32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "int8": 8, "int4": 4.15625, "q8_0": 8.5,
               "q6_k": 6.5625, "q5_k_m": 5.7036, "q4_k_m": 4.8944, "q4_0": 4.5, "mxfp4": 4.25, "nvfp4": 4.5}
KV_BITS = {"bf16": 16, "fp16": 16, "f16": 16, "fp8": 8, "int8": 8.5, "q8_0": 8.5, "q4_0": 4.5}


@pytest.mark.parametrize("name, bits", WEIGHT_BITS.items())
def test_weight_bits_per_value(name, bits):
    assert weight_format(name).bits_per_value == pytest.approx(bits)


@pytest.mark.parametrize("name, bits", KV_BITS.items())
def test_kv_bits_per_value(name, bits):
    assert kv_format(name).bits_per_value == pytest.approx(bits)


def test_seed_7b_weights_at_each_format():
    """Seeds 002/004: a 7B model is 28 GB in FP32, 14 GB FP16, 7 GB INT8, 3.5 GB INT4 (+ scales for real int4)."""
    n = 7e9
    assert n * weight_format("fp32").bytes_per_value == 28e9
    assert n * weight_format("fp16").bytes_per_value == 14e9
    assert n * weight_format("int8").bytes_per_value == 7e9
    assert n * weight_format("int4").bytes_per_value == pytest.approx(3.5e9 * 4.15625 / 4)  # 3.64 GB with g128 scales


def test_names_are_case_insensitive_and_aliased():
    assert weight_format("Q4_K_M").name == "q4_k_m"
    assert weight_format("AWQ").name == "int4"
    assert weight_format("F16").name == "fp16"
    assert kv_format("auto").name == "fp16"


def test_unknown_format_suggests():
    with pytest.raises(UnknownNameError, match="did you mean q4_k_m"):
        weight_format("q4_km")


HOPPER = {"fp32", "tf32", "bf16", "fp16", "fp8", "int8"}
AMPERE = {"fp32", "tf32", "bf16", "fp16", "int8"}
BLACKWELL = HOPPER | {"fp4"}


@pytest.mark.parametrize(
    "fmt, card, dtype",
    [("int4", HOPPER, "bf16"), ("fp8", HOPPER, "fp8"), ("fp8", AMPERE, "bf16"), ("nvfp4", BLACKWELL, "fp4"),
     ("nvfp4", HOPPER, "fp8"), ("mxfp4", HOPPER, "bf16"), ("q4_k_m", AMPERE, "int8"), ("bf16", {"fp32", "fp16"}, "fp16"),
     ("fp16", {"fp32"}, "fp32")],
)
def test_math_dtype_on_a_card(fmt, card, dtype):
    assert math_dtype(weight_format(fmt), card) == dtype
