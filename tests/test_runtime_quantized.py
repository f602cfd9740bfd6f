"""A quantized format a runtime's rows do not inform takes its scope's fitted quantized kernels' efficiency in the
same math dtype (Efficiency.compute_quantized), not the hardware kind's prior."""

import math

from conftest import REPO

from roofline.calibrate.published import predict_row, read_rows
from roofline.calibrate.quantized_fallback import format_dtypes, with_quantized
from roofline.calibrate.row_params import fit_rows
from roofline.calibrate.runtime_fit import MIN_SHIPPED_SOURCES, _with, fit_all
from roofline.cards.store import CardStore
from roofline.perf.efficiency import Efficiency, expected_efficiency

DATA = ("published_train.csv", "published_collected.csv", "published_more.csv", "published_extra.csv")


def _rows(*ids):
    rows = {r["id"]: r for name in DATA for r in read_rows(REPO / "benchmarks/data" / name)}
    return fit_rows([rows[i] for i in ids], CardStore())


def test_compute_for_falls_back_to_the_quantized_value_of_the_kernel_dtype():
    eff = Efficiency(compute=0.6, compute_int8=0.17, compute_by_format={"q4_0": 0.3},
                     compute_quantized={"int8": 0.25, "fp16": 0.2})
    assert eff.compute_for("int8", "q4_0") == 0.3  # its own entry first
    assert eff.compute_for("int8", "q6_k") == 0.25  # a quantized format without one: the dtype's quantized value
    assert eff.compute_for("fp16", "q6_k") == 0.2
    assert eff.compute_for("fp16", "fp16") == 0.6  # 16-bit weights run the dense GEMM: the dtype's own figure
    assert eff.compute_for("bf16", "q6_k") == 0.6  # no quantized value in bf16: the dtype's figure
    assert Efficiency(compute_int8=0.17).compute_for("int8", "q6_k") == 0.17


def test_the_fallback_is_the_geometric_mean_of_the_scopes_quantized_formats_per_dtype():
    values = {"memory": 0.9, "format:q4_0": 0.4, "format:q8_0": 0.1, "format:q6_k": 0.3, "format:fp16": 0.5}
    dtypes = {"q4_0": "fp16", "q8_0": "fp16", "q6_k": "int8", "fp16": "fp16"}
    out = with_quantized(values, dtypes)
    assert math.isclose(out["quantized:fp16"], 0.2) and math.isclose(out["quantized:int8"], 0.3)
    assert {k: v for k, v in out.items() if not k.startswith("quantized:")} == values  # fp16 weights stay out


def test_strix_halo_q4_k_s_prompts_take_the_scopes_fitted_quantized_efficiency():
    """Strix Halo (amd-soc) under ROCm: Q4_0 and Q8_0 prompts from two documents each fit their formats; a Q4_K_S
    prompt (no fit of its own) then reads far closer than under the prior the generic SoC default gives it (+129%)."""
    st = CardStore()
    rows = _rows("G001", "G025", "G036", "G040")  # Q4_0, Q8_0 (two documents each), in fp16 math on this card
    assert format_dtypes(rows, st) == {"q4_0": "fp16", "q8_0": "fp16"}
    fit = fit_all(rows, st, min_sources=MIN_SHIPPED_SOURCES)[("llama.cpp", "amd-soc")].values
    mean = math.sqrt(fit["format:q4_0"] * fit["format:q8_0"])
    assert math.isclose(fit["quantized:fp16"], mean)
    (q4ks,) = _rows("G038")
    choice = _with(q4ks.choice, "amd-soc", fit)
    hw = st.hardware("ryzen-ai-max-395")
    assert math.isclose(expected_efficiency(hw, choice).compute_for("fp16", "q4_k_s"), mean)
    before, after = predict_row(q4ks.row, st, runtime=q4ks.choice), predict_row(q4ks.row, st, runtime=choice)
    assert abs(math.log(after.predicted / after.measured)) < 0.5 * abs(math.log(before.predicted / before.measured))


def test_only_a_runtime_whose_quantized_formats_share_kernels_derives_the_fallback():
    """vLLM runs FP8, NVFP4 and Marlin on different kernels: its fitted formats say nothing of one it was not fitted
    on (an MXFP4 MoE prompt efficiency is not an NVFP4 dense one), so its fit derives no quantized fallback."""
    st = CardStore()
    assert st.runtime("llama.cpp").profile.quantized_kernel_family
    assert not st.runtime("vllm").profile.quantized_kernel_family
    fits = fit_all(_rows("G001", "G036", "N016", "V091"), st, min_sources=1)  # vLLM: MXFP4 and FP8 prompts
    assert any(k.startswith("quantized:") for k in fits[("llama.cpp", "amd-soc")].values)
    vllm = [g.values for (rt, _), g in fits.items() if rt == "vllm"]
    assert vllm and any(k.startswith("format:") for v in vllm for k in v)
    assert not any(k.startswith("quantized:") for v in vllm for k in v)
