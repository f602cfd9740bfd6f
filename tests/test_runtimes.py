"""Runtime profiles (runtimes/*.yaml): schema, lookup by NAME[@VERSION], sources, the fitted values, --runtime on
every command, the engine-text mapping and the memory policy of `fits`."""

import json
from dataclasses import fields, replace
from pathlib import Path

import pytest
import yaml
from conftest import REPO, run_cli

from roofline.calibrate.published import engine_runtime, predict_row, read_rows, runtime_of, source_document
from roofline.cards.runtime import (FLOOR_FIELDS, FRACTION_FIELDS, NUMBER_FIELDS, EfficiencyOverrides, RuntimeProfile,
                                   version_key)
from roofline.cards.store import CardStore
from roofline.errors import RooflineError, UnknownNameError
from roofline.perf.efficiency import FLOORS, FRACTIONS, Efficiency, expected_efficiency

PROFILES = sorted((REPO / "runtimes").glob("*.yaml"))
CONTRACT = {"max_num_batched_tokens", "max_num_seqs", "chunked_prefill", "chunked_prefill_above_context",
            "block_size_tokens", "parallel_slots",
            "slot_context_tokens", "memory_policy", "gpu_memory_utilization", "default_context_tokens",
            "default_context_tiers", "context_split"}


def test_every_issue_runtime_is_bundled():
    names = {p.stem for p in PROFILES}
    assert {"llama.cpp", "ollama", "vllm", "sglang", "trtllm", "lmdeploy", "mlx", "tgi", "roofline-engine"} <= names
    assert [r.name for r in CardStore().all("runtimes")] == sorted(names)


@pytest.mark.parametrize("spelling,name", [("llama-cpp", "llama.cpp"), ("llamacpp", "llama.cpp"), ("LLAMA.CPP", "llama.cpp"),
                                           ("trt-llm", "trtllm"), ("tensorrt-llm", "trtllm"), ("nim", "trtllm"),
                                           ("mlx-lm", "mlx"), ("vllm", "vllm"), ("sglang", "sglang")])
def test_aliases(spelling, name):
    assert CardStore().runtime(spelling).profile.name == name


@pytest.mark.parametrize("spec,label,start", [("llama.cpp@b6918", "llama.cpp@b6918", "b6918"),
                                              ("llama.cpp@b7941", "llama.cpp@b7941", "b6918"),
                                              ("llama.cpp@b2000", "llama.cpp@b2000", "b1786"),
                                              ("vllm@0.11", "vllm@0.11", "0.8.0"), ("vllm@0.6.3", "vllm@0.6.3", "0.6.0"),
                                              ("trtllm@1.0", "trtllm@1.0", "1.0"), ("vllm", "vllm@0.8.0+", "0.8.0"),
                                              ("vllm@0.6", "vllm@0.6", "0.6.0"), ("trtllm@1", "trtllm@1", "1.0")])
def test_versions_as_users_write_them(spec, label, start):
    choice = CardStore().runtime(spec)
    assert (choice.label, choice.range_start) == (label, start)
    assert choice.described == (label if label.endswith(start) or label.endswith("+") else
                                f"{label} (the {start}+ profile)")


def test_version_order():
    assert version_key("0.9.0.1") < version_key("0.10.1") < version_key("0.11") and version_key("b1786") < version_key("b6918")
    # trailing zeros name the same release; pre-releases come before it and post-releases after
    assert version_key("0.6") == version_key("0.6.0") == version_key("v0.6.0.0")
    assert version_key("1.0rc2.dev3") < version_key("1.0rc2") < version_key("1.0") < version_key("1.0.post1") \
        < version_key("1.0.1") < version_key("1.1")


def test_date_picks_the_version_in_use():
    assert CardStore().runtime("llama.cpp", "2024-05").range_start == "b1786"
    assert CardStore().runtime("llama.cpp", "2025-12").range_start == "b6918"


@pytest.mark.parametrize("spec,match", [("vlm", "did you mean vllm"), ("vllm@0.1", "older than every profiled"),
                                        ("vllm@abc", "not a version"), ("llama.cpp@", "one version after '@'"),
                                        ("vllm@0.11@1", "one version after '@'")])
def test_unknown_runtime_or_version_is_one_line_exit_2(spec, match):
    run = run_cli("predict", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--runtime", spec)
    assert run.returncode == 2 and match in run.stderr and len(run.stderr.strip().splitlines()) == 1


def _bad_profile(tmp_path: Path, change) -> Path:
    data = yaml.safe_load((REPO / "runtimes" / "vllm.yaml").read_text())
    change(data)
    folder = tmp_path / "runtimes"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vllm.yaml").write_text(yaml.safe_dump(data))
    return tmp_path


@pytest.mark.parametrize("change,match", [
    (lambda d: d.update(speed=3), "unknown field"),
    (lambda d: d.update(efficiency={"nvidia-gpu": {"memory": -0.5}}), "not a fraction"),
    (lambda d: d.update(efficiency={"nvidia-gpu": {"step_overhead_s": -1}}), "step_overhead_s"),
    (lambda d: d.update(weight_formats=["fp16", "q9_z"]), "unknown weight format"),
    (lambda d: d.update(fitted={"intel-cpu": {"memory": 0.9}}), "fitted_from"),
    (lambda d: d.update(efficiency={"mars": {"memory": 0.9}, "marsian-gpu-x": {}}), "scope"),
    (lambda d: d.update(kernels_from="llama.cpp"), "kernels_from"),
    (lambda d: d.update(shared_gemm_kernel=["apple-soc"]), "shared_gemm_kernel"),
    (lambda d: d.update(shared_gemm_kernel=["metal"], sources={**d["sources"], "shared_gemm_kernel": "x"}),
     "shared_gemm_kernel.metal"),
    (lambda d: d.update(efficiency={"nvidia-gpu": {"gemv_unit_bandwidth_bytes_per_s": -1}}),
     "gemv_unit_bandwidth_bytes_per_s"),
    (lambda d: d["versions"][-1].update(refits={"nvidia-gpu": ["attention"]}), "refits"),
    (lambda d: d.update(fit_policy="best"), "fit_policy"),
    (lambda d: d.update(fit_policy={"nvidia-gpu": "versions"}), "fit_policy.nvidia-gpu"),
    (lambda d: d.update(fit_policy={"memory": {"nvidia-gpu": "versions"}}), "fit_policy"),
    (lambda d: d.update(efficiency={"nvidia": {"kernel_dtypes": {"mxfp4": ["int3"]}}}), "kernel_dtypes"),
    (lambda d: d.update(efficiency={"nvidia": {"kernel_dtypes": {"mxfp4": []}}}), "kernel_dtypes"),
    (lambda d: d.update(efficiency={"nvidia": {"compute_quantized": {"int3": 0.2}}}), "compute_quantized.int3"),
    (lambda d: d.update(quantized_kernel_family=True), "quantized_kernel_family"),
    (lambda d: d.update(expert_gemm_tiles=True), "expert_gemm_tiles"),
    (lambda d: d.update(windows_ignored=["mistral"]), "windows_ignored"),
    (lambda d: d["versions"][-1].update(windows_ignored=["*"]), "windows_ignored"),
    (lambda d: d.update(efficiency={"nvidia": {"expert_gemm_overhead_s": -1e-6}}), "expert_gemm_overhead_s"),
    (lambda d: d.update(efficiency={"nvidia": {"expert_gemv_max_tokens": 0}}), "expert_gemv_max_tokens"),
    (lambda d: d.update(efficiency={"nvidia": {"expert_gemv_max_tokens": True}}), "expert_gemv_max_tokens"),
    (lambda d: d.update(efficiency={"nvidia": {"compute_quantized": {"int8": 1.5}}}), "compute_quantized.int8"),
    (lambda d: d["memory"].update(default_context_tiers=[{"tokens": 4096}, {"below": "24 GiB", "tokens": 8192}]),
     "default_context_tiers"),
])
def test_bad_profiles_are_one_line_exit_2(tmp_path, change, match):
    cards = _bad_profile(tmp_path, change)
    run = run_cli("predict", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--runtime", "vllm", "--cards", str(cards))
    assert run.returncode == 2, run.stderr
    assert match in run.stderr and "vllm.yaml" in run.stderr and len(run.stderr.strip().splitlines()) == 1


def test_cards_dir_overrides_bundled_profile(tmp_path):
    cards = _bad_profile(tmp_path, lambda d: d["memory"].update(gpu_memory_utilization=0.5))
    assert CardStore([cards]).runtime("vllm").profile.memory.gpu_memory_utilization == 0.5
    assert CardStore().runtime("vllm").profile.memory.gpu_memory_utilization == 0.9


def _numbers(node, path=""):
    """Dotted paths of every number (bools excluded) in a mapping."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _numbers(v, f"{path}.{k}" if path else str(k))
    elif isinstance(node, list):
        for item in node:
            key = item.get("version", "") if isinstance(item, dict) else ""
            yield from _numbers({k: v for k, v in item.items() if k != "version"} if key else item, f"{path}.{key}")
    elif isinstance(node, (int, float)) and not isinstance(node, bool):
        yield path


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.stem)
def test_every_profile_number_has_a_source(path):
    data = yaml.safe_load(path.read_text())
    sources = data["sources"]
    for section in ("efficiency", "scheduler", "memory", "versions"):
        for number in _numbers(data.get(section, {}), section):
            parts = number.split(".")
            assert any(".".join(parts[:i]) in sources for i in range(1, len(parts) + 1)), f"{path.name}: {number}"
    for scope in data.get("fitted", {}):
        assert "fitted on rows" in data["fitted_from"][scope] and "benchmarks/fit_runtimes.py" in data["fitted_from"][scope]


def test_schema_fields_match_efficiency():
    # activation_cost is measured per device by calibrate (its calibration section), not a profile's figure
    names = {f.name for f in fields(Efficiency)} - {"source", "runtime", "compute_by_format", "compute_quantized",
                                                    "kernel_dtypes", "activation_cost", "flash_attention",
                                                    "graph_every_decode"}
    assert set(FRACTION_FIELDS) | set(FLOOR_FIELDS) | set(NUMBER_FIELDS) == names
    assert (set(FRACTIONS), set(FLOORS)) == (set(FRACTION_FIELDS), set(FLOOR_FIELDS))


def test_the_gemm_floor_may_be_zero_but_not_above_one():
    # 0 is the GPU default (no floor), which a GPU calibration keeps when no trial beats it
    assert EfficiencyOverrides(gemm_floor=0.0).gemm_floor == 0.0
    with pytest.raises(ValueError, match="gemm_floor"):
        EfficiencyOverrides(gemm_floor=1.5)
    with pytest.raises(ValueError, match="memory"):
        EfficiencyOverrides(memory=0.0)
    assert "flash_attention" in EfficiencyOverrides.model_fields  # a switch, neither a fraction nor a number


@pytest.mark.parametrize("name", [p.stem for p in PROFILES])
def test_serving_policy_has_the_contract_fields(name):
    policy = CardStore().runtime(name).profile.serving_policy()
    assert set(policy) == CONTRACT


def test_serving_policy_follows_the_version():
    vllm = CardStore().runtime("vllm").profile
    assert vllm.serving_policy("0.6.0")["max_num_batched_tokens"] == 512
    assert vllm.serving_policy()["max_num_batched_tokens"] == 8192
    assert CardStore().runtime("ollama").profile.serving_policy("0.5.0")["default_context_tokens"] == 2048


@pytest.mark.parametrize("version, gib, tokens", [
    (None, 22.35, 4096), (None, 29.8, 32768), (None, 48, 262144), (None, None, 4096), ("0.6.4", 119.7, 4096)])
def test_ollama_default_context_follows_the_gpu_memory(version, gib, tokens):
    """Ollama 0.15.5 on: 4k below 24 GiB, 32k to 48 GiB, 256k above; before it (or no device named): 4096."""
    policy = CardStore().runtime("ollama").profile.serving_policy(version, gib and gib * 2**30)
    assert policy["default_context_tokens"] == tokens



def test_profile_applies_on_top_of_the_kind_defaults():
    st = CardStore()
    spark, h100 = st.hardware("dgx-spark"), st.hardware("h100-sxm")
    generic = expected_efficiency(spark)
    llama = expected_efficiency(spark, st.runtime("llama.cpp@b6918"))
    assert generic.runtime == "generic" and llama.runtime == "llama.cpp@b6918"
    assert llama.prefill_chunk_tokens == 512 and generic.prefill_chunk_tokens == 0
    gpu = st.hardware("rtx-4090")
    assert expected_efficiency(gpu, st.runtime("llama.cpp")).compute_for("int8", "q4_k_m") \
        != expected_efficiency(gpu).compute_for("int8", "q4_k_m")  # fitted MMQ prompt kernels
    assert expected_efficiency(h100, st.runtime("vllm")).compute_for("bf16") == expected_efficiency(h100).compute_for("bf16")


@pytest.mark.parametrize("args,match", [
    (("--hw", "h100-sxm", "--runtime", "trtllm", "--quant", "q4_k_m"), "TensorRT-LLM cannot run q4_k_m"),
    (("--hw", "apple-m3-max", "--runtime", "mlx", "--quant", "nvfp4"), "MLX-LM cannot run nvfp4"),
    (("--hw", "apple-m3-max", "--runtime", "trtllm"), "does not run on apple-m3-max"),
    (("--hw", "h100-sxm", "--runtime", "ollama", "--kv-quant", "fp8"), "no fp8 KV cache"),
])
def test_a_format_or_device_the_runtime_cannot_run_is_one_line(args, match):
    run = run_cli("predict", "-m", "llama-3.1-8b", *args)
    assert run.returncode == 2 and match in run.stderr and len(run.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("runtime", ["llama.cpp", "ollama"])
def test_every_gguf_type_and_recipe_runs_on_the_gguf_runtimes(runtime):
    """A GGUF file of any block type or llama-quantize recipe (IQ4_XS, Q3_K_S, Q4_K_S ...) runs on llama.cpp and
    Ollama: no "cannot run" refusal for a format their kernels load; a Q4_K_S file weighs between Q4_0 and Q4_K_M."""
    from roofline.cards.formats import WEIGHT_FORMATS

    prof = CardStore().runtime(runtime).profile
    gguf = [f.name for f in WEIGHT_FORMATS if "GGUF" in f.layout and not f.name.startswith("tq")]
    assert set(gguf) <= set(prof.weight_formats), sorted(set(gguf) - set(prof.weight_formats))
    assert len(prof.weight_formats) == len(set(prof.weight_formats))  # `gguf` expands once, beside named formats
    run = run_cli("predict", "-m", "llama-3.1-8b", "--hw", "rtx-4090", "--runtime", runtime, "--quant", "Q4_K_S",
                  "--json")
    assert run.returncode == 0, run.stderr
    sizes = {q: json.loads(run_cli("predict", "-m", "llama-3.1-8b", "--hw", "arc-a770", "--quant", q, "--json").stdout)
             for q in ("q4_0", "q4_k_s", "q4_k_m")}
    weights = [sizes[q]["weights_bytes"] for q in ("q4_0", "q4_k_s", "q4_k_m")]
    assert weights[0] < weights[1] < weights[2]


COMMANDS = [
    ("predict", "-m", "llama-3.1-8b", "--hw", "rtx-4090", "--quant", "q4_k_m"),
    ("sweep", "-m", "llama-3.1-8b", "--hw", "rtx-4090", "--quant", "q4_k_m", "--concurrency", "1,2"),
    ("compare", "-m", "llama-3.1-8b", "--hw", "rtx-4090,h100-sxm", "--quant", "q4_k_m"),
    ("fits", "-m", "llama-3.1-8b", "--hw", "rtx-4090", "--quant", "q4_k_m"),
]


@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: c[0])
def test_runtime_on_every_command_is_stated(cmd):
    with_rt = run_cli(*cmd, "--runtime", "llama.cpp@b6918", "--json")
    plain = run_cli(*cmd, "--json")
    assert with_rt.returncode == 0 and plain.returncode == 0, with_rt.stderr + plain.stderr
    a, b = json.loads(with_rt.stdout), json.loads(plain.stdout)
    first = (lambda d: d[0] if isinstance(d, list) else d)
    assert first(a)["runtime"] == "llama.cpp@b6918" and first(b)["runtime"] == "generic"
    table = run_cli(*cmd, "--runtime", "llama.cpp@b6918")
    assert "llama.cpp@b6918" in table.stdout


@pytest.mark.parametrize("kind", ["roofline", "sweep", "memory"])
def test_runtime_on_plot(kind, tmp_path):
    run = run_cli("plot", kind, "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--runtime", "vllm@0.11",
                  "-o", str(tmp_path / "x.png"), "--json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["runtime"] == "vllm@0.11" and (tmp_path / "x.png").stat().st_size > 0


def test_runtime_changes_the_prediction():
    st = CardStore()
    h100 = st.hardware("h100-sxm")
    import roofline
    from roofline.perf.request import predict
    from roofline.perf.workload import make_workload

    wl = make_workload(prompt_tokens=32768, quant="bf16")
    card = st.model("llama-3.1-8b")
    chunked = predict(card, h100, wl, eff=expected_efficiency(h100, st.runtime("vllm")))
    generic = roofline.predict("llama-3.1-8b", "h100-sxm", wl)
    assert chunked.runtime == "vllm@0.8.0+" and generic.runtime == "generic"
    assert chunked.ttft_s != pytest.approx(generic.ttft_s, rel=1e-3)  # 4 chunks of 8192 tokens re-read the weights


def test_fits_vllm_concurrency_comes_from_the_preallocated_pool():
    args = ("fits", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--context", "32k", "--json")
    generic, vllm = (json.loads(run_cli(*args, *extra).stdout) for extra in ((), ("--runtime", "vllm")))
    assert vllm["memory_policy"] == {"policy": "preallocate", "gpu_memory_utilization": 0.9, "kv_share": 1.0,
                                     "context_default": False, "context_split": False, "max_num_seqs": 256,
                                     "sampled_seqs": 256}
    assert generic["capacity_bytes"] == 80 * 2**30  # the datasheet's 80 GB of HBM3 is binary
    assert vllm["capacity_bytes"] == pytest.approx(0.9 * 81559 * 2**20)  # of what nvidia-smi reports on an H100
    assert vllm["max_concurrency"] < generic["max_concurrency"]


def test_fits_ollama_allocates_its_default_context_unless_asked():
    base = ("fits", "-m", "llama-3.1-8b", "--hw", "rtx-4080", "--quant", "q4_k_m", "--runtime", "ollama", "--json")
    default, asked = json.loads(run_cli(*base).stdout), json.loads(run_cli(*base, "--context", "32k").stdout)
    assert default["context_tokens"] == 4096 and default["memory_policy"]["context_default"]
    assert asked["context_tokens"] == 32768 and asked["kv_quant"] == "fp16"


def test_fits_runtime_bytes_still_accepted():
    run = run_cli("fits", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--runtime", "3 GB", "--json")
    assert run.returncode == 0 and json.loads(run.stdout)["budget"]["runtime"] == 3e9


@pytest.mark.parametrize("text,expected", [
    ("llama.cpp CUDA build 7941", ("llama.cpp", "b7941")), ("vLLM 0.10.1", ("vllm", "0.10.1")),
    ("TensorRT-LLM 0.17 (trtllm-bench throughput)", ("trtllm", "0.17")), ("SGLang 0.3.0", ("sglang", "0.3.0")),
    ("MLX-LM", ("mlx", None)), ("MLX-LM 0.20.4 (MLX 0.21.1)", ("mlx", "0.20.4")), ("Ollama (version not stated)", ("ollama", None)),
    ("NVIDIA NIM 1.3 for LLMs", ("trtllm", None)), ("lmdeploy 0.0.3 TurboMind", ("lmdeploy", "0.0.3")),
    ("MLC-LLM (version not stated; Aug 2023), as measured by lmdeploy", (None, None)),
    ("Intel Gaudi software (SynapseAI) 1.18.0", (None, None)), ("TGI (version not stated)", ("tgi", None)),
    ("TGI 2.4.0", ("tgi", "2.4.0")), ("text-generation-inference 1.3.4", ("tgi", "1.3.4")),
    # as people write them: aliases, a build without the word, the backend first, pip pins, a version in brackets
    ("llama.cpp b4400", ("llama.cpp", "b4400")), ("llama-cpp b7941", ("llama.cpp", "b7941")),
    ("ROCm llama.cpp b6000", ("llama.cpp", "b6000")), ("Vulkan llama.cpp build 7548", ("llama.cpp-vulkan", "b7548")),
    ("llama-bench b3216", ("llama.cpp", "b3216")), ("llama.cpp on 8x B200", ("llama.cpp", None)),
    ("vllm==0.10.1", ("vllm", "0.10.1")), ("vLLM (v0.9.2)", ("vllm", "0.9.2")), ("vLLM 0.10.1+cu128", ("vllm", "0.10.1")),
    ("mlx_lm 0.26", ("mlx", "0.26")), ("MLX CUDA backend", (None, None)), ("TensorRT LLM 1.0", ("trtllm", "1.0")),
    ("Ollama 0.5.7 (llama.cpp b4500)", ("ollama", "0.5.7")), ("LM Studio (llama.cpp backend)", (None, None)),
    ("llm-awq (version not stated; Aug 2023), as measured by lmdeploy", (None, None)),
])
def test_engine_text_maps_to_a_profile(text, expected):
    assert engine_runtime(text) == expected


def test_row_maps_by_date_when_no_version():
    row = {"engine": "llama.cpp (May 2024, build not stated), llama-bench defaults"}
    assert runtime_of(row, CardStore()).range_start == "b1786"


def test_source_document_groups_tables_of_one_document():
    a = "github.com/NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md @258c7540 (v0.17 tables), 'Throughput'"
    b = "github.com/NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md @258c7540, 'Online Serving'"
    assert source_document(a) == source_document(b)


# Training rows the fitted profiles reproduce (in-sample; the held-out error is in docs/runtimes.md):
# (id, tolerance): H035/H042 llama.cpp 2024 decode on the RTX 4090 / M2 Ultra, C098 llama.cpp b1786 prefill on the
# RTX 3090 Ti, C123 mlx-lm decode on the M3 Max (16k context), C001/C002 TensorRT-LLM 0.17 max-load on H200/H100. (The Spark's
# llama.cpp rows come from one document, so no fitted value ships for that scope: MIN_SHIPPED_SOURCES.)
QUOTED = [("H035", 0.10), ("H042", 0.10), ("C098", 0.10), ("C123", 0.10), ("C001", 0.10), ("C002", 0.10)]


@pytest.mark.parametrize("row_id,tol", QUOTED)
def test_fitted_profiles_reproduce_quoted_training_rows(row_id, tol):
    rows = {r["id"]: r for r in read_rows(REPO / "benchmarks/data/published_train.csv")
            + read_rows(REPO / "benchmarks/data/published_collected.csv")}
    st = CardStore()
    p = predict_row(rows[row_id], st, runtime=runtime_of(rows[row_id], st))
    assert p.runtime != "generic"
    assert p.predicted == pytest.approx(p.measured, rel=tol)


def test_sglang_replays_decode_steps_as_cuda_graphs_from_0_4_on_nvidia_gpus():
    """The graph launch cost of benchmarks/fit_graph_launch.py (docs/graph_launch.md): SGLang 0.4+ on an NVIDIA GPU
    replays decode steps of up to 160 sequences, MoE cards included; 0.3.0 and other vendors launch eagerly. In
    sample, the batch-1 decode of a Qwen3-30B-A3B GPTQ on the RTX 5090 (V026, 241 tok/s) comes within 10%, where
    eager launches put it at half (117 tok/s)."""
    st = CardStore()
    new, old = (expected_efficiency(st.hardware("h100-sxm"), st.runtime(r)) for r in ("sglang", "sglang@0.3.0"))
    assert new.graph_kernel_overhead_s < new.kernel_overhead_s and new.graph_every_decode and new.graph_max_batch == 160
    assert old.graph_kernel_overhead_s is None
    assert expected_efficiency(st.hardware("mi300x"), st.runtime("sglang")).graph_kernel_overhead_s is None
    row = {r["id"]: r for r in read_rows(REPO / "benchmarks/data/published_extra.csv")}["V026"]
    p = predict_row(row, st, runtime=runtime_of(row, st))
    assert p.predicted == pytest.approx(p.measured, rel=0.10)


def test_llama_cpp_runs_mxfp4_prompts_on_int8_where_the_format_says_fp4():
    """kernel_dtypes: the same MXFP4 GEMM runs at the card's int8 peak under llama.cpp (MMQ) and at its fp4 peak
    under a runtime without an override, so on the DGX Spark (fp4 peak 500, int8 214 TFLOP/s) llama.cpp's prompt
    of a MXFP4 model is slower than the generic prediction; on a card without fp4 or int8 (Apple) it is fp16."""
    from roofline.perf.ops import Op
    from roofline.perf.timing import compute_seconds

    st = CardStore()
    spark, mac = st.hardware("dgx-spark"), st.hardware("apple-m2-ultra")
    eff = expected_efficiency(spark, st.runtime("llama.cpp"))
    assert eff.kernel_dtype("mxfp4", "fp4", spark.supported_dtypes) == "int8"
    assert eff.kernel_dtype("mxfp4", "bf16", mac.supported_dtypes) == "fp16"
    assert eff.kernel_dtype("q4_k_m", "int8", spark.supported_dtypes) == "int8"  # no override: the op's own dtype
    op = Op("experts", "moe", "fp4", 1e12, weight_bytes=1e6, weight_format="mxfp4")
    eff = replace(eff, compute_by_format={"mxfp4": 0.2})  # the same kernel efficiency: only the peak differs
    plain = replace(eff, kernel_dtypes={})
    ratio = compute_seconds(op, spark, eff, 2048) / compute_seconds(op, spark, plain, 2048)
    assert ratio == pytest.approx(spark.peak("fp4") / spark.peak("int8"))


def test_a_scope_policy_overrides_the_runtime_policy():
    from roofline.calibrate.runtime_fit import scope_policy

    given = {"memory": "none", "compute_by_format": "none", "amd-gpu": {"compute_by_format": "versions"}}
    assert scope_policy(given, "compute_by_format", "amd-gpu") == "versions"
    assert scope_policy(given, "memory", "amd-gpu") == "none"  # a kind the scope does not name: the runtime's
    assert scope_policy(given, "compute_by_format", "nvidia-gpu") == "none"
    assert scope_policy("runtime", "memory", "nvidia-gpu") == "runtime" and scope_policy(None, "memory", None) is None


def test_unknown_profile_names_are_unknown_name_errors():
    with pytest.raises(UnknownNameError):
        CardStore().runtime("llama.cp")
    with pytest.raises(RooflineError):
        CardStore().runtime("llama.cpp@b10")


def test_profiles_validate_strictly():
    data = yaml.safe_load((REPO / "runtimes" / "llama.cpp.yaml").read_text())
    assert RuntimeProfile.model_validate(data).name == "llama.cpp"


def _synthetic_calibration(hw_name: str, memory: float) -> dict:
    """A calibrated card as `calibrated_card` returns it, with made-up fitted values (no engine run)."""
    data = CardStore().hardware(hw_name).model_dump(mode="json", by_alias=True, exclude_none=True)
    data["calibration"] = {"date": "2025-01-01", "device": "synthetic test device", "points": {"fit": 12, "held_out": 5},
                           "values": {"memory": memory, "compute": 0.31, "kernel_overhead_s": 2.5e-5,
                                      "gemm_min_tokens": 8.0, "gemv_max_tokens": 4}}
    return data


def test_calibrate_writes_the_engine_profile_for_that_device(tmp_path):
    from roofline.calibrate.calibration import ENGINE_RUNTIME, engine_profile, write_card_atomic

    store = CardStore()
    first = engine_profile(store.get("runtimes", ENGINE_RUNTIME), _synthetic_calibration("rtx-4090", 0.55))
    path = write_card_atomic(tmp_path, first, kind="runtimes")
    assert path == tmp_path / "runtimes" / "roofline-engine.yaml"
    # a second device calibrated later keeps the first one's entry
    second = engine_profile(CardStore([tmp_path]).get("runtimes", ENGINE_RUNTIME), _synthetic_calibration("l40s", 0.6))
    write_card_atomic(tmp_path, second, kind="runtimes")
    prof = CardStore([tmp_path]).runtime("roofline-engine").profile
    assert set(prof.devices) == {"rtx-4090", "l40s"} and "synthetic test device" in prof.sources["devices.rtx-4090"]
    # the card itself is NOT calibrated here: the profile alone carries "this hardware under the engine"
    eff = expected_efficiency(store.hardware("rtx-4090"), CardStore([tmp_path]).runtime("roofline-engine"))
    assert (eff.memory, eff.compute, eff.kernel_overhead_s, eff.gemv_max_tokens) == (0.55, 0.31, 2.5e-5, 4)
    assert eff.runtime.startswith("roofline-engine")
    other = expected_efficiency(store.hardware("h100-sxm"), CardStore([tmp_path]).runtime("roofline-engine"))
    assert other.memory != 0.55  # a device that was not calibrated keeps the kind's defaults


def test_predict_runtime_roofline_engine_uses_the_calibrated_profile(tmp_path):
    from roofline.calibrate.calibration import ENGINE_RUNTIME, engine_profile, write_card_atomic

    write_card_atomic(tmp_path, engine_profile(CardStore().get("runtimes", ENGINE_RUNTIME),
                                               _synthetic_calibration("rtx-4090", 0.25)), kind="runtimes")
    args = ("predict", "-m", "llama-3.1-8b", "--hw", "rtx-4090", "--quant", "bf16", "--json")
    slow = json.loads(run_cli(*args, "--runtime", "roofline-engine", env={"ROOFLINE_HOME": str(tmp_path)}).stdout)
    plain = json.loads(run_cli(*args, "--runtime", "roofline-engine", env={"ROOFLINE_HOME": str(tmp_path / "none")}).stdout)
    assert slow["runtime"].startswith("roofline-engine")
    assert slow["decode_tok_s"] < 0.5 * plain["decode_tok_s"]  # a quarter of the datasheet bandwidth: decode well below the defaults'


def test_a_device_entry_needs_a_source():
    data = yaml.safe_load((REPO / "runtimes/roofline-engine.yaml").read_text())
    data["devices"] = {"rtx-4090": {"memory": 0.5}}
    with pytest.raises(ValueError, match="devices.rtx-4090"):
        RuntimeProfile(**data)
