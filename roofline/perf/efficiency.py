"""How close a real run gets to the datasheet: the `expected` mode's efficiencies and overheads.

Precedence without a runtime (`generic`): built-in defaults per hardware kind < the card's `efficiency` section <
its `calibration` section. With a runtime profile (runtimes/*.yaml): the kind's defaults < the card's `efficiency`
section < the profile's scopes (default < kind < vendor < vendor-kind), its version entries up to the chosen one,
then its fitted values; the micro-engine's profile (`roofline-engine`) keeps the card's calibration, which measured it.
The defaults are fitted by `benchmarks/fit_defaults.py` to benchmarks/data/published_train.csv.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from roofline.cards.formats import QUANTIZED_FORMATS, first_supported, weight_format
from roofline.cards.hardware import HardwareCard, default_key, nvidia_architecture
from roofline.cards.model import ModelCard
from roofline.cards.runtime import chunking_for
from roofline.cards.schema import MIN_FRACTION, efficiency_number_problem
from roofline.cards.versions import compute_capability_key
from roofline.errors import CardError, RooflineError
from roofline.sizing.params import param_counts
from roofline.sizing.precision import Formats

if TYPE_CHECKING:
    from roofline.cards.runtime import RuntimeChoice, RuntimeProfile


@dataclass(frozen=True)
class Efficiency:
    memory: float = 1.0  # achieved / datasheet bandwidth when streaming weights and KV
    memory_gemv: float | None = None  # the same for one-row (matrix-vector) matmuls; None = `memory`
    memory_kv: float | None = None  # the same for the KV cache read by the attention core (paged); None = `memory`
    memory_act: float | None = None  # the same for elementwise activation passes (norms, residual adds, activation
    # functions, MoE gather/scatter): eager CPU kernels convert bf16 through fp32 and reach a fraction; None = `memory`
    compute: float = 1.0  # achieved / dense peak on large GEMMs, any dtype without its own figure below
    compute_fp32: float | None = None
    compute_bf16: float | None = None  # also used for fp16
    compute_fp8: float | None = None
    compute_int8: float | None = None  # GGUF k-quant kernels (llama.cpp MMQ) run here
    compute_fp4: float | None = None
    attention: float = 1.0  # achieved / dense peak in the attention core (flash kernels) and other non-GEMM kernels
    scan: float | None = None  # the same for recurrent scans (Mamba, DeltaNet: fp32 chunked products and state
    # updates, a different kernel from attention's); None = `attention`
    gemm_min_tokens: float = 1.0  # GEMMs pad M (tokens) up to this tile: small batches waste the rest
    gemm_half_tokens: float = 0.0  # M at which a GEMM reaches half of `compute` (0: no ramp); CPUs ramp slowly
    gemm_floor: float = 0.0  # the ramp never drops below this fraction (vector units still run thin GEMMs)
    gemv_max_tokens: float = 1.0  # GEMMs of at most this many rows run as (batched) matrix-vector kernels: they
    # stream the weight at `memory_gemv` with no ramp (llama.cpp's MMVQ takes up to 8 rows, the engine's CPU path 32)
    gemv_unit_bandwidth_bytes_per_s: float = 0.0  # bytes/s one compute unit (SM, CU, GPU core) draws in a matrix-
    # vector kernel: its loads in flight over the memory latency (Little's law). A card with more bandwidth per unit
    # than this cannot fill its bus with such kernels (HBM parts under llama.cpp's MMVQ); 0 = no such limit
    link: float = 1.0  # achieved / datasheet GPU-link bandwidth in all-reduces
    allreduce_latency_hops: float = 0.0  # link latencies one all-reduce pays; 0: the ring's 2(n-1). Serving runtimes'
    # custom all-reduce (one-/two-shot over NVLink/xGMI peers) pays 1-2 for the small messages of decode
    kernel_overhead_s: float = 0.0  # fixed cost per kernel launch
    graph_kernel_overhead_s: float | None = None  # the same inside a decode step replayed as one CUDA graph (no
    # host launch; the gap between kernels on the device). None: no step is replayed (every runtime's default;
    # a calibration of the micro-engine on CUDA fits it from the steps it captured)
    graph_max_batch: float = 0.0  # decode steps of up to this many sequences replay a graph (the largest bucket)
    graph_max_context: float = 0.0  # ... whose sequences hold at most this many tokens (the static block tables'
    # reach); 0: any context
    graph_every_decode: bool = False  # the runtime's graphs hold every decode step: MoE and recurrent layers (SGLang's
    # fused MoE and state kernels) and speculative verify steps of k+1 tokens per sequence (its EAGLE/MTP graphs).
    # False: one-token steps of the cards the micro-engine captures (request.graph_capturable)
    kernels_per_expert: float = 0.0  # extra launches per touched MoE expert (0: one fused/grouped MoE kernel)
    expert_gemm_overhead_s: float = 0.0  # fixed time per MoE expert a step touches, per layer, when that expert's
    # GEMMs run as matrix-matrix kernels (more than `gemv_max_tokens` tokens): the per-expert tile passes that a prompt
    # of a few dozen tokens per expert cannot amortise; fitted per runtime on MoE prompt rows (0: none)
    expert_gemv_max_tokens: float | None = None  # where one kernel serves all of a MoE matmul's experts (ggml's
    # mul_mat_id): every expert runs matrix-vector up to this many tokens in the step, tiles above. None: each
    # expert's own token count decides against `gemv_max_tokens` (a grouped kernel sized per expert)
    routing_concentration: float = 0.0  # how evenly a sequence's tokens spread over the experts (the Beta
    # concentration of routing.expected_experts_touched; smaller = fewer experts per prompt). 0: uniform routing, the
    # default for trained routers (no published per-prompt counts to fit); the engine's random routers are fitted
    step_overhead_s: float = 0.0  # fixed cost per forward step (sampling, scheduling, host sync)
    sequence_overhead_s: float = 0.0  # host work per sequence a step schedules (its block-table row, positions,
    # sampling and bookkeeping in the engine's Python loop): what makes a big decode batch host-bound
    token_overhead_s: float = 0.0  # host work per new token a step schedules (its id and position gathered into the
    # step's inputs, the engine's Python lists): a few tenths of a microsecond that a 2,048-token step adds up
    flash_attention: bool = True  # False: the attention core writes its scores out and reads them back
    # (SCORE_BYTES_PER_VALUE each; llama.cpp without -fa), a memory cost that grows with prompt x context
    prefill_chunk_tokens: float = 0.0  # prompt tokens per prefill step (llama.cpp -ub, Ollama num_batch, a chunked-
    # prefill budget); each chunk re-reads the weights. 0: the whole prompt in one step
    # weight format -> large-GEMM efficiency of its kernels, over the math dtype's (llama.cpp MMQ per k-quant)
    compute_by_format: dict[str, float] = field(default_factory=dict)
    # kernel math dtype -> large-GEMM efficiency of a quantized weight format (below 16 bits) with no entry above, in
    # that dtype: a runtime profile's fitted value for the formats it has too few rows of (their scope's fitted
    # formats in that dtype, geometric mean); absent = the dtype's `compute_<dtype>`
    compute_quantized: dict[str, float] = field(default_factory=dict)
    # weight format -> the math dtypes the runtime's kernels run it in, first the card supports (absent: the format's
    # own chain, `roofline formats`)
    kernel_dtypes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # activation function -> its elementwise pass's time over SiLU's at the same bytes (calibrate measures it: eager
    # CPU kernels run tanh-GELU ~2-3x slower than SiLU); absent = 1 (fused or bandwidth-bound kernels)
    activation_cost: dict[str, float] = field(default_factory=dict)
    source: str = "datasheet peaks, no overhead (ceiling)"
    runtime: str = "generic"  # the runtime profile (name@version) these figures assume

    def compute_for(self, dtype: str, fmt: str = "") -> float:
        """Large-GEMM efficiency of one weight format's kernels, else of its math dtype (fp16 at either accumulation
        shares bf16's; tf32 shares fp32's)."""
        if fmt in self.compute_by_format:
            return self.compute_by_format[fmt]
        if fmt in QUANTIZED_FORMATS and dtype in self.compute_quantized:
            return self.compute_quantized[dtype]
        key = {"fp16": "bf16", "fp16_acc16": "bf16", "tf32": "fp32"}.get(dtype, dtype)
        value = getattr(self, f"compute_{key}", None)
        return self.compute if value is None else value

    def kernel_dtype(self, fmt: str, dtype: str, supported: frozenset[str]) -> str:
        """The math dtype a GEMM on `fmt` weights runs in under this runtime: its kernels' first dtype the card
        supports, else `dtype` (the format's own chain)."""
        chain = self.kernel_dtypes.get(fmt)
        return first_supported(chain, supported) if chain else dtype


CEILING = Efficiency()


def ceiling_for(eff: Efficiency) -> Efficiency:
    """Datasheet peaks and no overhead, in the math dtypes `eff`'s kernels run (a runtime's `kernel_dtypes`: llama.cpp
    runs F16 at a GeForce card's FP16-accumulate peak), so a runtime's ceiling is never below its expected figures."""
    return replace(CEILING, kernel_dtypes=dict(eff.kernel_dtypes))

# Fitted by benchmarks/fit_defaults.py (see its printed report; rows of published_train.csv quoted there).
DEFAULTS: dict[str, Efficiency] = {
    # 29 rows: llama.cpp 2024 (S4, H033-H057) and TensorRT-LLM max-load (S8, H093-H104) on NVIDIA GPUs
    # link 0.8: NCCL all-reduce bus bandwidth reaches ~80% of NVLink's per-direction rate (nccl-tests); unfitted
    "gpu": Efficiency(link=0.8, memory=0.954, compute=0.567, compute_int8=0.168, compute_fp4=0.390, attention=0.975,
                      gemm_min_tokens=16, kernel_overhead_s=13.2e-6, step_overhead_s=2.8e-4,
                      source="default for discrete GPUs, fitted to published_train.csv (29 rows)"),
    # 28 rows: llama.cpp build 6918 on DGX Spark (S1, H001-H022) and Ollama decode (S13); Ollama prefill left out.
    # attention 0.15 is measured, not fitted: the same pp2048 prefill at depth 0 and at depth 32768 (llama.cpp
    # benches/dgx-spark.md @4c7e9893, rows H012/H013 qwen2.5-7b 2276 -> 1283 tok/s, H001/H002 gpt-oss-120b 1938 ->
    # 1155 tok/s) differ only by the attention core over the 32k cached tokens: 2.69e13 FLOP in 0.70 s (38 TFLOP/s,
    # 18% of the bf16 peak) and 1.98e13 FLOP in 0.72 s (28 TFLOP/s, 13%). The joint fit had put it at 0.077, half
    # of that, using it to absorb depth-0 prefill errors elsewhere (it then predicted a 2.2x depth slowdown where
    # llama.cpp shows 1.8x; 0.15 gives 1.6x).
    "soc": Efficiency(link=0.8, memory=0.78, compute=0.60, compute_int8=0.098, attention=0.15, gemm_min_tokens=16,
                      kernel_overhead_s=4.1e-6, step_overhead_s=1.7e-4,
                      source="default for NVIDIA unified-memory SoCs, fitted to published_train.csv (28 rows)"),
    # 8 rows: llama.cpp Metal 2024 on M1 Max / M2 Ultra / M3 Max (S4, H041-H056)
    "apple": Efficiency(memory=0.81, compute=0.52, attention=0.93, gemm_min_tokens=1, kernel_overhead_s=20.3e-6,
                        step_overhead_s=7.9e-4, source="default for Apple silicon (Metal), fitted to published_train.csv (8 rows)"),
    "cpu": Efficiency(memory=0.7, compute=0.9, attention=0.3, gemm_min_tokens=1, gemm_half_tokens=64, gemm_floor=0.05,
                      kernel_overhead_s=2e-6, kernels_per_expert=6,
                      step_overhead_s=1e-4, source="default for CPUs (no published rows; run roofline calibrate)"),
}
DEFAULTS["accelerator"] = DEFAULTS["gpu"]


_KNOWN = {f.name for f in fields(Efficiency)} - {"source", "runtime", "compute_by_format", "compute_quantized",
                                                 "kernel_dtypes", "activation_cost", "flash_attention",
                                                 "graph_every_decode"}
# cards.runtime's FRACTION_FIELDS and FLOOR_FIELDS (a test keeps them equal; that module loads only with --runtime)
FRACTIONS = ("memory", "memory_gemv", "memory_kv", "memory_act", "compute", "compute_fp32", "compute_bf16",
             "compute_fp8", "compute_int8", "compute_fp4", "attention", "scan", "link")  # in [MIN_FRACTION, 1]
FLOORS = ("gemm_floor",)  # in [0, 1]: 0 = no floor


def _value_problem(key: str, value: object) -> str | None:
    """Why `value` cannot be efficiency field `key`: a fraction of a peak in (0, 1], a floor in [0, 1], any other
    field a bounded finite number (cards.schema.efficiency_number_problem); None when it can."""
    if key not in FRACTIONS and key not in FLOORS:
        return efficiency_number_problem(key, value)
    floor = key in FLOORS  # 0: no floor
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if number and (MIN_FRACTION <= value <= 1 or floor and 0 <= value <= 1):
        return None
    return f"{value!r} is not a fraction in {'[0, 1]' if floor else f'[{MIN_FRACTION:g}, 1]'}"


def _overrides(hw: HardwareCard, section: dict[str, Any], where: str) -> dict[str, float]:
    values = section.get("values", section)
    if not isinstance(values, dict):
        raise CardError(hw.name, f"{where}.values", f"{values!r} is not a mapping of efficiency fields to numbers")
    if not isinstance(section.get("source", ""), str):
        raise CardError(hw.name, f"{where}.source", "give where these figures came from as text")
    out = {}
    for key, value in values.items():
        if key in ("source", "date", "device", "points", "residuals", "versions", "notes", "activation_cost"):
            continue
        if key not in _KNOWN:
            raise CardError(hw.name, f"{where}.{key}", f"unknown efficiency field; use one of {', '.join(sorted(_KNOWN))}")
        problem = _value_problem(key, value)
        if problem:
            raise CardError(hw.name, f"{where}.{key}", problem)
        out[key] = float(value)
    return out


def _activation_cost(hw: HardwareCard, section: dict[str, Any], where: str,
                     base: dict[str, float] | None = None) -> dict[str, float]:
    """A section's cost per activation function (time over SiLU's; calibrate measures it) over `base`, checked."""
    costs = section.get("activation_cost", {})
    if not isinstance(costs, dict) or not all(isinstance(k, str) and isinstance(v, (int, float)) and 0 < v < 1e3
                                              for k, v in costs.items()):
        raise CardError(hw.name, f"{where}.activation_cost", f"{costs!r} is not a mapping of activation names to "
                        "positive time ratios (e.g. {silu: 1.0, gelu_tanh: 2.3}); rerun roofline calibrate")
    return {**(base or {}), **{k: float(v) for k, v in costs.items()}}


def expected_efficiency(hw: HardwareCard, runtime: RuntimeChoice | None = None,
                        max_context: int | None = None) -> Efficiency:
    """The efficiency `expected` mode uses on this card under `runtime` (None: generic), with its provenance in
    `source` and the runtime in `runtime`; `max_context`, the model's, where the runtime chunks prefill by it."""
    eff = DEFAULTS[default_key(hw)]
    if hw.efficiency:
        eff = replace(eff, **_overrides(hw, hw.efficiency, "efficiency"),
                      activation_cost=_activation_cost(hw, hw.efficiency, "efficiency"),
                      source=hw.efficiency.get("source", f"{hw.name} card's efficiency section"))
    if runtime is not None and runtime.profile.name != "roofline-engine":
        return runtime_efficiency(eff, hw, runtime, max_context)
    if runtime is not None:
        eff = replace(runtime_efficiency(eff, hw, runtime, max_context), runtime=runtime.label)
    if hw.calibration:
        cal = hw.calibration
        eff = replace(eff, **_overrides(hw, cal, "calibration"),
                      activation_cost=_activation_cost(hw, cal, "calibration", eff.activation_cost),
                      source=f"calibrated on {cal.get('date', '?')} on {cal.get('device', '?')}")
    return eff


def scopes(hw: HardwareCard) -> list[str]:
    """A profile's efficiency scopes that apply to `hw`, least specific first: default, kind, vendor, vendor-kind."""
    kind, vendor = default_key(hw), hw.vendor.lower()
    return list(dict.fromkeys(["default", kind, vendor, f"{vendor}-{hw.scope_kind}"]))


def runtime_layers(hw: HardwareCard, runtime: RuntimeChoice) -> list[tuple[str, Any]]:
    """(where, EfficiencyOverrides) in the order they apply: the profile's scopes, its version entries in effect,
    its fitted scopes, its fitted scope@version entries, then the entry measured on this very card (`devices`)."""
    prof, order = runtime.profile, scopes(hw)
    entries = prof.versions_up_to(runtime.version or runtime.range_start)
    layers = [(f"efficiency.{s}", prof.efficiency[s]) for s in order if s in prof.efficiency]
    for v in entries:
        layers += [(f"versions.{v.version}.efficiency.{s}", v.efficiency[s]) for s in order if s in v.efficiency]
    layers += [(f"fitted.{s}", prof.fitted[s]) for s in order if s in prof.fitted]
    for v in entries:
        layers += [(f"fitted.{s}@{v.version}", prof.fitted[f"{s}@{v.version}"]) for s in order
                   if f"{s}@{v.version}" in prof.fitted]
    if hw.name in prof.devices:
        layers.append((f"devices.{hw.name}", prof.devices[hw.name]))
    return layers


def runtime_efficiency(base: Efficiency, hw: HardwareCard, runtime: RuntimeChoice,
                       max_context: int | None = None) -> Efficiency:
    """`base` (the hardware kind's defaults) with the profile's layers applied; the prefill chunk defaults to the
    scheduler's token budget where the runtime chunks prefill (for a model of `max_context`: `chunking_for`)."""
    values: dict[str, Any] = {}
    by_format, dtypes = dict(base.compute_by_format), dict(base.kernel_dtypes)
    quantized = dict(base.compute_quantized)
    layers = runtime_layers(hw, runtime)
    for _, layer in layers:
        values.update(layer.values())
        by_format.update(layer.compute_by_format)
        quantized.update(layer.compute_quantized)
        dtypes.update({fmt: tuple(chain) for fmt, chain in layer.kernel_dtypes.items()})
    policy = chunking_for(runtime.profile.serving_policy(runtime.version or runtime.range_start), max_context)
    if "prefill_chunk_tokens" not in values and policy["chunked_prefill"] and policy["max_num_batched_tokens"]:
        values["prefill_chunk_tokens"] = float(policy["max_num_batched_tokens"])
    source = f"runtime profile {runtime.described} on {default_key(hw)} ({hw.vendor})"
    if not any(where.startswith(("fitted.", "devices.")) for where, _ in layers):  # say what stands in for a fit
        source += f"; nothing fitted for {hw.vendor.lower()}-{hw.scope_kind}: {base.source}"
    if graph_s := values.get("graph_kernel_overhead_s"):  # a launch cost fitted apart (fit_graph_launch.py)
        source += f"; decode steps replayed as CUDA graphs at {graph_s * 1e6:.2f} us a kernel"
    return replace(base, **values, compute_by_format=by_format, compute_quantized=quantized, kernel_dtypes=dtypes,
                   runtime=runtime.label, source=source)


def check_compute_capability(prof: RuntimeProfile, hw: HardwareCard) -> None:
    """One line and exit 2 when the runtime's kernels need a newer GPU generation than the card's (vLLM builds for
    compute capability 7.0 and up: a Pascal P40 is 6.1). A card or runtime that states none passes."""
    vendor = hw.vendor.lower()
    need = prof.min_compute_capability.get(vendor)
    have = hw.compute_capability
    if need is None or have is None or compute_capability_key(have) >= compute_capability_key(need):
        return
    maker = "an NVIDIA" if vendor == "nvidia" else f"a {hw.vendor}"
    raise RooflineError(f"{prof.display_name} needs {maker} GPU of compute capability {need} or newer; {hw.name} is "
                        f"{generation(hw)}: use --runtime llama.cpp there, or leave --runtime out")


def generation(hw: HardwareCard) -> str:
    """'6.1 (Pascal)': the card's compute capability, with its NVIDIA architecture where known, for messages."""
    arch = nvidia_architecture(hw.compute_capability) if hw.vendor.lower() == "nvidia" else None
    return f"{hw.compute_capability}{f' ({arch})' if arch else ''}"


def check_format_generation(prof: RuntimeProfile, hw: HardwareCard, used: set[str]) -> None:
    """One line and exit 2 when a weight format needs a newer NVIDIA generation under this runtime than the card's
    (TensorRT-LLM runs FP8 from Ada, NVFP4 from Blackwell); a card that states no compute capability passes."""
    if hw.vendor.lower() != "nvidia" or hw.compute_capability is None:
        return
    have = compute_capability_key(hw.compute_capability)

    def runs_here(fmt: str) -> bool:
        need = prof.format_min_compute_capability.get(fmt)
        return need is None or have >= compute_capability_key(need)

    for fmt in sorted(f for f in used if not runs_here(f)):
        ok = [f for f in prof.weight_formats if runs_here(f)]
        raise RooflineError(f"{prof.display_name} runs {fmt} weights from compute capability "
                            f"{prof.format_min_compute_capability[fmt]}; {hw.name} is {generation(hw)}: pick --quant "
                            f"{' or '.join(smallest(ok))}")


def check_format_version(runtime: RuntimeChoice, used: set[str]) -> None:
    """One line and exit 2 when a weight format came after the runtime version asked for (vllm@0.6.0 and NVFP4,
    ModelOpt's from 0.8.0); no version asked: the newest, which loads them all."""
    prof, ok = runtime.profile, runtime.profile.formats_at(runtime.version)
    for fmt in sorted(used - set(ok)):
        first = prof.first_version(fmt)
        raise RooflineError(f"{prof.display_name} loads {fmt} weights from {first} on; {runtime.label} is older: "
                            f"ask for --runtime {prof.name}@{first} or newer, or pick --quant "
                            f"{' or '.join(nearest(ok, fmt))}")


def nearest(formats: list[str], fmt: str, most: int = 3) -> list[str]:
    """The `most` formats of `formats` whose bits per weight come closest to `fmt`'s (what to suggest instead)."""
    bits = weight_format(fmt).bits_per_value
    return sorted(formats, key=lambda f: abs(weight_format(f).bits_per_value - bits))[:most]


def smallest(formats: list[str], most: int = 4) -> list[str]:
    """The `most` formats of `formats` that store the fewest bits per weight, fewest first (what to suggest)."""
    return sorted(formats, key=lambda f: weight_format(f).bits_per_value)[:most]


def check_runtime_supports(runtime: RuntimeChoice | None, card: ModelCard, hw: HardwareCard, quant: str | None,
                           kv_quant: str) -> None:
    """One line and exit 2 when the runtime cannot run this: hardware it does not support, a weight format it
    cannot load (a GGUF k-quant on TensorRT-LLM, NVFP4 on Apple), or a KV format it lacks."""
    if runtime is None:
        return
    prof = runtime.profile
    vendor = hw.vendor.lower()
    # a bare vendor names its GPUs (discrete and integrated), never its CPUs or accelerators (Intel's Gaudi, Google's
    # TPU): those need their kind ('cpu') or their vendor-kind ('intel-cpu', 'intel-accelerator') in runs_on
    targets = {hw.kind, default_key(hw), f"{vendor}-{hw.kind}", f"{vendor}-{hw.scope_kind}"} | \
        ({vendor} if hw.kind in ("gpu", "soc") else set())
    if not targets & {t.lower() for t in prof.runs_on}:
        raise RooflineError(f"{prof.display_name} does not run on {hw.name} ({hw.vendor} {hw.kind}); it runs on "
                            f"{', '.join(prof.runs_on)}")
    check_compute_capability(prof, hw)
    fmts = Formats(card, hw, quant, kv_quant)
    used = {fmts.component_format(c) for c, n in param_counts(card).items() if n and c != "norms"}  # norms stay 16/32-bit
    missing = sorted(used - set(prof.weight_formats))
    if missing:
        raise RooflineError(f"{prof.display_name} cannot run {'/'.join(missing)} weights; it loads "
                            f"{', '.join(prof.weight_formats)} (pick one with --quant)")
    check_format_version(runtime, used)
    check_format_generation(prof, hw, used)
    if kv_quant not in prof.kv_formats:
        raise RooflineError(f"{prof.display_name} has no {kv_quant} KV cache; use --kv-quant "
                            f"{' or '.join(prof.kv_formats)}")
