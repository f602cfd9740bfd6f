"""llama.cpp's Vulkan backend as a profile of its own (runtimes/llama.cpp-vulkan.yaml): rows map to it from their
engine text, and its prompt GEMMs run on the matrix engines only where ggml-vulkan enables cooperative matrices."""

import json

import pytest
from conftest import run_cli

from roofline.calibrate.published import engine_runtime, runtime_of
from roofline.cards.formats import GGUF_FORMATS
from roofline.cards.runtime import EfficiencyOverrides
from roofline.cards.store import CardStore
from roofline.perf.efficiency import expected_efficiency


@pytest.mark.parametrize("text,expected", [
    ("llama.cpp Vulkan build 7548 (7ac890213); -ngl 100", ("llama.cpp-vulkan", "b7548")),
    ("llama.cpp Vulkan, PR #18749 branch (Jan 2026; build not printed), Mesa RADV", ("llama.cpp-vulkan", None)),
    ("llama.cpp ROCm/HIP build 9187 (0253fb21f)", ("llama.cpp", "b9187")),
    ("llama.cpp CUDA build 6918 (2f68ce7cf); llama-bench", ("llama.cpp", "b6918")),
])
def test_the_vulkan_backend_maps_to_its_own_profile(text, expected):
    assert engine_runtime(text) == expected


def test_a_vulkan_row_without_a_build_takes_the_range_of_its_date():
    """March 2025 is before PR #14001 (b5589): the oldest range, without cooperative matrices on Intel."""
    row = {"engine": "llama.cpp Vulkan (upstream release, build not printed)", "date": "2025-03"}
    assert runtime_of(row, CardStore()).range_start == "b1786"


def test_the_gguf_key_stands_for_every_gguf_type_and_an_explicit_one_wins():
    over = EfficiencyOverrides(kernel_dtypes={"gguf": ["fp16", "fp32"], "q8_0": ["int8"]})
    assert set(GGUF_FORMATS) <= set(over.kernel_dtypes) and "gguf" not in over.kernel_dtypes
    assert over.kernel_dtypes["q4_k_m"] == ["fp16", "fp32"] and over.kernel_dtypes["q8_0"] == ["int8"]


def _prefill_ceiling(hw: str, runtime: str) -> float:
    run = run_cli("predict", "-m", "llama-2-7b", "--hw", hw, "--quant", "q4_0", "--runtime", runtime,
                  "--prompt", "512", "--output", "16", "--json")
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)["ceiling"]["prefill_tok_s"]


def test_intel_prompts_reach_the_matrix_engines_only_on_xe2_from_b5589():
    """ggml-vulkan enables cooperative matrices on Intel Xe2 only, from PR #14001: a B580 prompt's ceiling jumps by
    about its XMX-fp16 / vector-fp32 peak ratio (116.7 / 13.7) at b5589, an A770's (Xe-HPG) never does."""
    b580_old, b580_new = _prefill_ceiling("arc-b580", "llama.cpp-vulkan@b5000"), _prefill_ceiling(
        "arc-b580", "llama.cpp-vulkan@b9000")
    a770_old, a770_new = _prefill_ceiling("arc-a770", "llama.cpp-vulkan@b5000"), _prefill_ceiling(
        "arc-a770", "llama.cpp-vulkan@b9000")
    assert b580_new / b580_old > 5
    assert a770_new == pytest.approx(a770_old, rel=0.05)
    st = CardStore()
    a770 = expected_efficiency(st.hardware("arc-a770"), st.runtime("llama.cpp-vulkan@b9000"))
    assert a770.kernel_dtypes["q4_k_m"] == ("fp32",)


def test_every_intel_gpu_and_igpu_waits_for_b5589_and_alchemist_never_gets_there():
    """The rule is Intel's, integrated GPUs included (Lunar Lake's Arc 140V is Xe2); every Alchemist card stays on
    the vector units."""
    st = CardStore()
    dtypes = {(hw, v): expected_efficiency(st.hardware(hw), st.runtime(f"llama.cpp-vulkan@{v}")).kernel_dtypes["q4_0"]
              for hw in ("arc-140v", "arc-a750", "arc-a580") for v in ("b5000", "b9000")}
    assert dtypes[("arc-140v", "b5000")] == ("fp32",) and dtypes[("arc-140v", "b9000")][0] == "fp16"
    assert all(dtypes[(hw, v)] == ("fp32",) for hw in ("arc-a750", "arc-a580") for v in ("b5000", "b9000"))


@pytest.mark.parametrize("hw", ["xeon-6980p", "apple-m3-max", "gaudi3"])
def test_vulkan_runs_on_gpus_and_igpus_only(hw):
    """runs_on names vendor-kinds: an Intel CPU or accelerator and Apple silicon are one line and exit 2."""
    run = run_cli("predict", "-m", "llama-3.1-8b", "--hw", hw, "--quant", "q4_k_m", "--runtime", "llama.cpp-vulkan")
    assert run.returncode == 2 and "does not run on" in run.stderr and len(run.stderr.strip().splitlines()) == 1


def test_the_cuda_profile_keeps_its_int8_kernels_on_the_same_card():
    st = CardStore()
    cuda = expected_efficiency(st.hardware("rtx-4090"), st.runtime("llama.cpp"))
    vulkan = expected_efficiency(st.hardware("rtx-4090"), st.runtime("llama.cpp-vulkan"))
    assert cuda.kernel_dtypes["q4_k_m"][0] == "int8"  # MMQ on int8 tensor cores since b3216
    assert vulkan.kernel_dtypes["q4_k_m"] == ("fp16", "fp32")
