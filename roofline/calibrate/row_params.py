"""Which free parameter of a runtime profile each published row informs (roofline/calibrate/runtime_fit.py fits
them): latency-bound decode rows the bandwidth fraction `memory`, MoE steps too narrow for a GEMM tile per expert the
fixed cost per expert `expert_gemm_overhead_s` (runtimes whose profile says `expert_gemm_tiles`; elsewhere they are
predicted but enter no fit), the others their weight format's large-GEMM efficiency; Marlin-run rows are predicted
but enter no fit."""

from __future__ import annotations

import math
from dataclasses import dataclass

from roofline.calibrate.published import cards_of, predict_row, quant_text, row_quant, runtime_of
from roofline.calibrate.row_conditions import MARLIN_KERNEL_DTYPES, row_flags
from roofline.cards.formats import weight_format
from roofline.cards.runtime import RuntimeChoice
from roofline.cards.store import CardStore
from roofline.errors import RooflineError
from roofline.perf.efficiency import expected_efficiency
from roofline.sizing.params import active_param_counts, component_format

LATENCY_BOUND_BATCH = 8  # decode at up to this many sequences streams the weights (memory-bound on every card here)
DECODE_METRICS = ("decode_tok_s", "agg_decode_tok_s", "itl_ms", "tpot_ms")
PROMPT_METRICS = ("prefill_tok_s", "ttft_ms")
# A MoE row whose step gives each expert fewer tokens than one GEMM tile informs the fixed cost per touched expert
# (EXPERT_PARAM), not its format's large-GEMM efficiency: its expert GEMMs run far below the efficiency
# `compute_by_format` stands for (llama.cpp's MoE prompts at -ub 512: 32 tokens per expert on Qwen3-30B-A3B, 16 on
# gpt-oss-120b), and fitted as that efficiency they dragged it to a tenth (q4_k_m 0.24 -> 0.04, every dense Q4_K_M
# prompt then read 5x slow). A fixed cost per expert, not a lower efficiency: the miss is largest on the fastest cards
# (at the same efficiencies llama.cpp's Qwen3-30B-A3B prompt read +131% on an RTX PRO 6000, its gpt-oss-120b prompts
# +4% to +8% on the DGX Spark).
EXPERT_TILE_TOKENS = 128  # ggml-cuda mmq.cuh get_mmq_x_max_host: 128-token tiles on tensor-core GPUs
EXPERT_PARAM = "expert_gemm_overhead_s"  # named as its Efficiency field


@dataclass
class FitRow:
    row: dict
    choice: RuntimeChoice
    scope: str  # vendor-kind of the row's hardware
    param: str  # "memory", EXPERT_PARAM or "format:<weight format>"
    source: str
    range: str | None = None  # the version starting this row's fitting range (a `refits` entry), None: no split
    fitted: bool = True  # False: predicted, never fitted on (Marlin; narrow MoE steps without `expert_gemm_tiles`)


def fit_rows(rows: list[dict], store: CardStore) -> list[FitRow]:
    """The rows a runtime profile can be fitted on: a mapped runtime, cards roofline knows, a metric it predicts."""
    out = []
    for row in rows:
        choice = _unfitted(runtime_of(row, store))
        pred = predict_row(row, store, runtime=choice) if choice else None
        if pred is None or pred.predicted is None:
            continue
        card, hw, _ = cards_of(row, store)
        scope = f"{hw.vendor.lower()}-{hw.scope_kind}"
        param = _param(row, scope in choice.profile.shared_gemm_kernel, card)
        fitted = param == "memory" or not marlin_prompt(row, param)
        if fitted and param != "memory" and narrow_expert_gemms(row, card, hw, choice):
            tiles = choice.profile.expert_gemm_tiles and not copied_sequences(row)
            param, fitted = (EXPERT_PARAM, True) if tiles else (param, False)
        out.append(FitRow(row, choice, scope, param, pred.source, fitting_range(choice, scope, param), fitted))
    return out


def narrow_expert_gemms(row: dict, card, hw, choice: RuntimeChoice) -> bool:
    """Whether a MoE row's steps give each expert fewer than EXPERT_TILE_TOKENS tokens: the prompt micro-batch (the
    runtime's prefill chunk, the row's `-ub`) for prompt metrics, the batch for the others, times experts per token
    over experts (a max-load row's batch is full)."""
    moe = card.architecture.moe
    if moe is None:
        return False
    if row["metric"] in PROMPT_METRICS:
        prompt = float(row.get("isl") or 512)
        chunk = row_flags(row, expected_efficiency(hw, choice, card.architecture.max_context)).prefill_chunk_tokens
        tokens = min(prompt, chunk) if chunk else prompt
    else:
        batch = str(row.get("batch") or "1").strip()
        tokens = float(batch) if batch.replace(".", "", 1).isdecimal() else math.inf  # "max": a full batch
    return tokens * moe.experts_per_token / moe.num_experts < EXPERT_TILE_TOKENS


def copied_sequences(row: dict) -> bool:
    """Whether a batched row's sequences are copies of one: llama-batched-bench fills every sequence's prompt and
    every decode input with token 0 (examples/batched-bench/batched-bench.cpp), so a MoE step routes its sequences
    to one sequence's experts, not to the spread the cost per expert is priced under (gpt-oss-120b at 32 sequences
    on the DGX Spark decodes 5.5x its one-sequence rate, beyond the ceiling of independent routing)."""
    batch = str(row.get("batch") or "1").strip()
    return "llama-batched-bench" in row.get("engine", "") and batch != "1" and row["metric"] not in PROMPT_METRICS


def prefixed(values: dict[str, float], prefix: str) -> dict[str, float]:
    """The fitted values named "<prefix>:<name>" ("format:q4_k_m", "quantized:int8"), keyed by name."""
    return {k.split(":", 1)[1]: v for k, v in values.items() if k.startswith(prefix + ":")}


def param_format(param: str) -> str:
    """The weight format a fitted parameter stands for ("format:q4_k_m" -> "q4_k_m"), else ""."""
    return param.split(":", 1)[1] if param.startswith("format:") else ""


def marlin_prompt(row: dict, param: str) -> bool:
    """Whether a row ran its 4-bit format's GEMMs on Marlin (W4A16, its engine text says so): its efficiency is
    Marlin's 16-bit math, not that of the kernels the format runs by default, which its `compute_by_format` entry
    stands for (vLLM's NVFP4 rows on the DGX Spark all ran Marlin; a default NVFP4 run is FP4 math)."""
    return param_format(param) in MARLIN_KERNEL_DTYPES and "marlin" in row.get("engine", "").lower()


def fitting_range(choice: RuntimeChoice, scope: str, param: str) -> str | None:
    """The version whose kernels a row ran, for a parameter whose kernels changed between versions (`refits` of the
    profile's version entries): the newest such entry at or below the row's version, else the oldest entry (the
    range before the first change). None: no change recorded for this scope and parameter."""
    prof, kind = choice.profile, "memory" if param == "memory" else "compute_by_format"
    starts = [v.version for v in prof.versions if kind in v.refits.get(scope, [])]
    if not starts:
        return None
    in_effect = {v.version for v in prof.versions_up_to(choice.version or choice.range_start)}
    before = [s for s in starts if s in in_effect]
    return before[-1] if before else prof.versions[0].version


def _unfitted(choice: RuntimeChoice | None) -> RuntimeChoice | None:
    """The choice with its profile's stored fitted values removed: a fit (and a held-out prediction) starts from the
    profile's documented priors, never from values fitted on the rows being judged."""
    if choice is None:
        return None
    return choice.model_copy(update={"profile": choice.profile.model_copy(update={"fitted": {}, "fitted_from": {}})})


def _param(row: dict, shared_kernel: bool = False, card=None) -> str:
    """Which free parameter a row informs: latency-bound decode -> memory; the rest -> its weight format's kernels,
    or `compute` where every format runs one GEMM kernel (`shared_kernel`: the profile's `shared_gemm_kernel`).
    A row stating formats per component ("default=nvfp4,attention=bf16") informs the format of its largest active
    component, the one most of its GEMM FLOPs run in."""
    batch = row.get("batch", "").strip()
    small = batch.isdecimal() and int(batch) <= LATENCY_BOUND_BATCH
    if row["metric"] in DECODE_METRICS and (small or not batch):
        return "memory"
    try:
        fmt = weight_format(_bulk_format(row, card)).name
    except RooflineError:
        return "memory"
    return "compute" if shared_kernel else "format:" + fmt


def _bulk_format(row: dict, card) -> str:
    """The weight format a row's GEMMs mostly run in: its one stated format, or with per-component formats the
    format of the model's largest active component (its FFN or experts) under them."""
    if "=" not in row["weight_quant"] or card is None:
        return quant_text(row["weight_quant"])
    counts = active_param_counts(card)
    largest = max(counts, key=counts.get)
    return component_format(card, largest, row_quant(row, card))
