"""Request-level prediction: TTFT, ITL, tok/s and e2e, ceiling beside expected, and why (the bound)."""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import BaseModel

from roofline.cards.hardware import HardwareCard
from roofline.cards.model import ModelCard
from roofline.cards.schema import Num
from roofline.errors import RooflineError
from roofline.perf.efficiency import Efficiency, ceiling_for, expected_efficiency
from roofline.perf.graph_buckets import padded_batch
from roofline.perf.ops import Op, Step, layer_ops, matmul, step_ops
from roofline.perf.parallel import check_parallel, collective_ops, shard_ops
from roofline.perf.timing import StepTime, bound_of, time_ops
from roofline.perf.workload import Workload, check_context
from roofline.sizing.layers import resolve_layers
from roofline.sizing.memory import Deployment, headroom, memory_budget
from roofline.sizing.precision import Formats

DECODE_SAMPLES = 16  # contexts at which the decode step is evaluated to average ITL (midpoint rule)


def decode_contexts(start, output_tokens: int):
    """Context lengths at which to evaluate decode steps: every step for short outputs, else midpoints."""
    if output_tokens <= DECODE_SAMPLES:
        offsets = np.arange(output_tokens, dtype=float)
    else:
        offsets = (np.arange(DECODE_SAMPLES) + 0.5) * output_tokens / DECODE_SAMPLES
    return np.asarray(start, dtype=float)[..., None] + offsets


def draft_ops(card: ModelCard, hw: HardwareCard, step: Step, wl: Workload, draft: ModelCard | None) -> list[Op]:
    """One draft proposal step: the draft model's decode step, or an MTP head (one layer + lm_head)."""
    if draft is not None:
        return step_ops(draft, hw, step, wl.quant, wl.kv_quant)
    f = Formats(card, hw, wl.quant, wl.kv_quant)
    last = resolve_layers(card.architecture)[-1]
    arch = card.architecture
    head = "embedding" if arch.tie_embeddings else "lm_head"
    return layer_ops(card, last, step, f, max(arch.mtp_layers, 1)) + [
        matmul("mtp_lm_head", "lm_head", head, arch.vocab_size * arch.hidden_size, step.tokens, arch.hidden_size,
               arch.vocab_size, f, 1, 2)]


def gpu_ops(card: ModelCard, hw: HardwareCard, step: Step, wl: Workload, ops: list[Op] | None = None) -> list[Op]:
    """The ops one GPU runs in `step`: its tensor-parallel share of the model's ops, plus the collectives."""
    ops = step_ops(card, hw, step, wl.quant, wl.kv_quant) if ops is None else ops
    act = Formats(card, hw, wl.quant, wl.kv_quant).act_bytes
    return shard_ops(ops, wl.tp) + collective_ops(card, step, wl.tp, wl.pp, act)


def prefill_chunks(step: Step, eff: Efficiency) -> tuple[Step, Any]:
    """A prompt the runtime splits (llama.cpp -ub, Ollama num_batch, a chunked-prefill token budget): k =
    ceil(batch x n / chunk) steps of n / k tokens per sequence, each re-reading the weights. One step at the chunks'
    mean context stands for each of them (attention is linear in the context, so k times it is the exact sum).
    Returns (the representative step, k); k = None when the runtime does not split."""
    chunk = eff.prefill_chunk_tokens
    if step.phase != "prefill" or not chunk:
        return step, None
    k = np.minimum(np.ceil(np.asarray(step.batch * step.n, dtype=float) / chunk), np.asarray(step.n, dtype=float))
    if np.all(k <= 1):
        return step, None
    k = np.maximum(k, 1.0)
    n = step.n / k
    return Step("prefill", n, step.batch, step.context + (k - 1) / 2 * n), k


def _scaled(st: StepTime, k) -> StepTime:
    """k identical steps."""
    return StepTime(*(getattr(st, f) * k for f in ("total_s", "compute_s", "memory_s", "overhead_s", "flops", "bytes")),
                    by_class={c: v * k for c, v in st.by_class.items()}, by_op={o: v * k for o, v in st.by_op.items()})


# ops over the cached context: a padding row of a replayed decode step attends one position, so these keep the
# step's real rows (and the serving simulator tabulates them by context)
CONTEXT_OPS = ("attention", "ssm_scan", "kv_b_proj")
# mixers whose decode the micro-engine runs uncaptured: they index per-sequence state slots from host lists
RECURRENT_MIXERS = ("mamba1", "mamba2", "deltanet", "parallel")


def graph_capturable(card: ModelCard) -> bool:
    """Whether the micro-engine captures the card's decode step in a CUDA graph: not where MoE routing reads expert
    counts back to the host or recurrent layers index state slots from the host (engine/model/graphs.py
    `capturable`; a test keeps the two equal)."""
    return not any(lay.ffn == "moe" or lay.mixer in RECURRENT_MIXERS for lay in resolve_layers(card.architecture))


def within_graph_limits(batch: Num, context: Num, eff: Efficiency) -> Num:
    """A decode step of `batch` sequences holding `context` cached tokens fits the captured buckets: at most
    `graph_max_batch` sequences of at most `graph_max_context` tokens (0: any)."""
    fits = np.asarray(batch) <= eff.graph_max_batch
    return fits & (np.asarray(context) + 1 <= eff.graph_max_context) if eff.graph_max_context else fits


def replays_graphs(card: ModelCard, eff: Efficiency) -> bool:
    """Whether `eff` replays the card's decode steps as CUDA graphs: a graph launch cost (a calibration's or a
    runtime's), and a card its graphs hold (every card where the runtime captures every decode step)."""
    return eff.graph_kernel_overhead_s is not None and (eff.graph_every_decode or graph_capturable(card))


def _may_replay(card: ModelCard, step: Step, eff: Efficiency) -> bool:
    """A decode step that `replays_graphs`, of one token per sequence unless the runtime captures every decode step
    (speculative verify steps too): the step replays a graph wherever it is within the graph limits."""
    one_token = np.all(np.asarray(step.n) == 1)
    return step.phase == "decode" and (one_token or eff.graph_every_decode) and replays_graphs(card, eff)


def launch_seconds(card: ModelCard, step: Step, eff: Efficiency) -> Num:
    """Seconds per kernel launch in `step`: `graph_kernel_overhead_s` where it replays a CUDA graph (per step,
    broadcast), else `kernel_overhead_s`."""
    if not _may_replay(card, step, eff):
        return eff.kernel_overhead_s
    replayed = within_graph_limits(step.batch, step.context, eff)
    return np.where(replayed, eff.graph_kernel_overhead_s, eff.kernel_overhead_s)


def replayed_rows(card: ModelCard, step: Step, eff: Efficiency) -> Num | None:
    """The rows a decode step runs where it replays a CUDA graph: its batch bucket (graph_buckets), else its batch;
    None where no step of this kind replays one."""
    if not _may_replay(card, step, eff):
        return None
    replayed = within_graph_limits(step.batch, step.context, eff)
    return np.where(replayed, padded_batch(step.batch, eff.graph_max_batch), step.batch)


def padded_ops(card: ModelCard, hw: HardwareCard, step: Step, wl: Workload, rows: Num) -> list[Op]:
    """The ops of a replayed decode step: every op at the bucket's `rows` (padding rows run the GEMMs, norms and
    lm_head) except those over the cache (CONTEXT_OPS), which the padding rows skip (they attend one position)."""
    real = step_ops(card, hw, step, wl.quant, wl.kv_quant)
    padded = step_ops(card, hw, Step("decode", step.n, rows, step.context), wl.quant, wl.kv_quant)
    return [r if r.name in CONTEXT_OPS else p for r, p in zip(real, padded)]


def timed_step(card: ModelCard, hw: HardwareCard, step: Step, wl: Workload, eff: Efficiency,
               ops: list[Op] | None = None, sequences: Num | None = None) -> StepTime:
    """One step on the workload's GPUs, timed (a prefill the runtime splits: its chunks; a decode step replayed as
    a CUDA graph: its bucket's rows): the one step pipeline every prediction, fit and plot goes through. `sequences`
    scheduled in the step: the step's batch unless given."""
    chunks, rows = None, None
    if ops is None:
        step, chunks = prefill_chunks(step, eff)
        rows = replayed_rows(card, step, eff)
    seqs = step.batch if sequences is None else sequences
    kernel_s = launch_seconds(card, step, eff)
    if rows is not None and np.any(np.asarray(rows) != np.asarray(step.batch)):  # a bucket with padding rows
        padded = Step("decode", step.n, rows, step.context)
        ops = gpu_ops(card, hw, padded, wl, padded_ops(card, hw, step, wl, rows))
        st = time_ops(ops, hw, eff, padded.tokens, seqs, kernel_s)
    else:
        st = time_ops(gpu_ops(card, hw, step, wl, ops), hw, eff, step.tokens, seqs, kernel_s)
    return st if chunks is None else _scaled(st, chunks)


def first_step(wl: Workload, phase: str) -> Step:
    """The request's prefill step, or its first decode step (one token per sequence after the prompt)."""
    if phase == "prefill":
        return Step("prefill", wl.prompt_tokens, wl.batch, wl.context_tokens)
    return Step("decode", 1, wl.batch, wl.context_tokens + wl.prompt_tokens)


def decode_step_time(card, hw, wl: Workload, eff: Efficiency, batch, context, draft: ModelCard | None = None) -> StepTime:
    """Seconds per emitted token group: one target step (k+1 tokens when speculating) plus k draft steps."""
    st = timed_step(card, hw, Step("decode", wl.spec_tokens + 1, batch, context), wl, eff)
    if wl.spec_tokens:
        dstep = Step("decode", 1, batch, context)
        d = timed_step(draft or card, hw, dstep, wl, eff, draft_ops(card, hw, dstep, wl, draft))
        for name in ("total_s", "compute_s", "memory_s", "overhead_s", "flops", "bytes"):
            setattr(st, name, getattr(st, name) + wl.spec_tokens * getattr(d, name))
        st.by_class["draft"] = wl.spec_tokens * d.total_s
    return st


class PhaseReport(BaseModel):
    time_s: float
    flops: float
    bytes: float
    arithmetic_intensity: float  # FLOP per byte moved
    ridge_flop_per_byte: float  # the card's peak / bandwidth for this phase's main dtype
    bound: str  # compute | memory | overhead: whichever share of `limit_share` is largest
    limit_share: dict[str, float]  # share of the step's time in compute-limited ops, memory-limited ops, overhead
    time_share: dict[str, float]  # by op class, and "host" for the fixed host time (the shares sum to 1)
    top_ops: list[tuple[str, float]]  # (op, seconds) largest first


class Metrics(BaseModel):
    ttft_s: float
    itl_s: float
    e2e_s: float
    prefill_tok_s: float
    decode_tok_s: float
    decode_tok_s_aggregate: float


class Prediction(Metrics):
    """Expected-mode metrics (the inherited fields), the ceiling beside them, memory, and why."""

    model: str
    hardware: str
    quant: str
    kv_quant: str
    prompt_tokens: int
    output_tokens: int
    batch: int
    spec_tokens: int
    accept_rate: float | None
    draft: str | None = None  # the draft model's card; None with spec_tokens = the model's own MTP layers
    cached_tokens: int = 0  # tokens already cached before the prompt
    gpus: int
    tp: int
    pp: int
    weights_bytes: float  # the whole model (and the draft model's), at the formats used
    kv_bytes: float  # KV cache + state of all `batch` sequences at prompt + output tokens (the draft's included)
    memory_per_gpu_bytes: float  # the full budget on one GPU: weights + KV shares, activations, runtime, OS
    memory_capacity_bytes: float  # one GPU's capacity
    # what the KV cache may still grow by on one GPU: the capacity left, or under a runtime whose pool takes a share
    # of what the rest leaves (TensorRT-LLM), that share less the KV held; negative: the memory one GPU lacks
    memory_headroom_bytes: float = 0.0
    fits_in_memory: bool
    bound: dict[str, str]
    ceiling: Metrics
    efficiency_source: str
    runtime: str = "generic"  # the runtime profile (name@version) the expected mode assumes
    phases: dict[str, PhaseReport]


def _report(st: StepTime, hw: HardwareCard, dtype: str, scale: float = 1.0) -> PhaseReport:
    total = float(np.mean(st.total_s)) * scale
    per = {k: float(np.mean(v)) * scale for k, v in st.by_class.items()}
    host = total - sum(per.values())
    if host > 1e-9 * total:
        per["host"] = host  # the fixed host time per step, sequence and token: in no op's class
    ops = sorted(((k, float(np.mean(v)) * scale) for k, v in st.by_op.items()), key=lambda kv: -kv[1])
    flops, nbytes = float(np.mean(st.flops)), float(np.mean(st.bytes))
    mean = StepTime(*(float(np.mean(getattr(st, f))) for f in
                      ("total_s", "compute_s", "memory_s", "overhead_s", "flops", "bytes")))
    bound = str(bound_of(mean))
    parts = {"compute": mean.compute_s, "memory": mean.memory_s, "overhead": mean.overhead_s}
    whole = sum(parts.values())
    return PhaseReport(time_s=total, flops=flops * scale, bytes=nbytes * scale,
                       limit_share={k: v / whole if whole else 0.0 for k, v in parts.items()},
                       arithmetic_intensity=flops / nbytes if nbytes else 0.0,
                       ridge_flop_per_byte=hw.peak_flops.as_dict().get(dtype, 0.0) / hw.memory.bandwidth_bytes_per_s,
                       bound=bound, time_share={k: v / total for k, v in per.items() if total}, top_ops=ops[:6])


def request_metrics(card, hw, wl: Workload, eff: Efficiency, draft=None, batch=None, prompt=None):
    """TTFT, ITL, tok/s, e2e for `batch` sequences of `prompt` tokens (numpy arrays of equal shape, or the
    workload's scalars). Returns (metrics dict, prefill StepTime, decode StepTime over sampled contexts)."""
    batch = wl.batch if batch is None else batch
    prompt = wl.prompt_tokens if prompt is None else prompt
    pre = timed_step(card, hw, Step("prefill", prompt, batch, wl.context_tokens), wl, eff)
    contexts = decode_contexts(np.asarray(prompt) + wl.context_tokens, wl.output_tokens)
    dec = decode_step_time(card, hw, wl, eff, np.asarray(batch)[..., None], contexts, draft)
    itl = np.mean(dec.total_s, axis=-1) / wl.tokens_per_verify
    # the prefill step samples the first token (vLLM, TensorRT-LLM, llama.cpp and the engine): TTFT is the prefill,
    # and the other output_tokens - 1 tokens take a decode step each
    return {"ttft_s": pre.total_s, "itl_s": itl, "e2e_s": pre.total_s + max(wl.output_tokens - 1, 0) * itl,
            "prefill_tok_s": batch * prompt / pre.total_s, "decode_tok_s": 1.0 / itl,
            "decode_tok_s_aggregate": batch / itl}, pre, dec


def phase_times(card, hw, wl: Workload, eff: Efficiency, draft=None) -> dict[str, StepTime]:
    """{"prefill": the prefill step, "decode": the decode step over the sampled contexts}, as predict times them."""
    _, pre, dec = request_metrics(card, hw, wl, eff, draft)
    return {"prefill": pre, "decode": dec}


def _metrics(card, hw, wl: Workload, eff: Efficiency, draft) -> tuple[Metrics, StepTime, StepTime]:
    values, pre, dec = request_metrics(card, hw, wl, eff, draft)
    return Metrics(**{k: float(v) for k, v in values.items()}), pre, dec


def check_speculation(card: ModelCard, wl: Workload, draft: ModelCard | None) -> None:
    """Speculation needs a proposer: the model's own MTP layers, or a draft model sharing its vocabulary (the
    target verifies the draft's token ids, so both must number tokens alike)."""
    if not wl.spec_tokens:
        if draft is not None:
            raise RooflineError("a draft model needs --spec-tokens K (draft tokens per verify step)")
        return
    if draft is None and card.architecture.mtp_layers == 0:
        raise RooflineError(f"--spec-tokens: {card.name} has no multi-token-prediction layers; name a draft model "
                            "with --draft (a small model of the same family)")
    if draft is not None and draft.architecture.vocab_size != card.architecture.vocab_size:
        raise RooflineError(f"--draft {draft.name}: its vocabulary ({draft.architecture.vocab_size:,} tokens) is not "
                            f"{card.name}'s ({card.architecture.vocab_size:,}); a draft must share the target's "
                            "tokenizer")


def predict(card: ModelCard, hw: HardwareCard, wl: Workload, draft: ModelCard | None = None,
            eff: Efficiency | None = None, dep: Deployment | None = None) -> Prediction:
    """Predict one request shape (batch sequences of prompt -> output tokens) on one card, both modes. `dep`: how a
    runtime sizes memory (its KV block and step tokens; `hw` then holds the share of memory it takes); default
    the generic deployment over the workload's GPUs."""
    check_parallel(card, hw, wl.tp, wl.pp)
    check_context(card.architecture.max_context, card.name, wl)
    check_speculation(card, wl, draft)
    eff = eff or expected_efficiency(hw)
    m, pre, dec = _metrics(card, hw, wl, eff, draft)
    ceil, _, _ = _metrics(card, hw, wl, ceiling_for(eff), draft)
    fmts = Formats(card, hw, wl.quant, wl.kv_quant)
    tokens = wl.context_tokens + wl.prompt_tokens + wl.output_tokens
    whole = memory_budget(card, hw, wl.quant, wl.kv_quant, tokens, wl.batch, Deployment(block_tokens=1))
    dep = dep or Deployment(wl.tp, wl.pp)
    per_gpu = memory_budget(card, hw, wl.quant, wl.kv_quant, tokens, wl.batch, dep)
    weights, kv = whole.weights_bytes, float(whole.kv_bytes)
    fixed_gpu, kv_gpu = float(per_gpu.fixed_bytes), float(per_gpu.kv_bytes)
    if draft is not None:  # the draft model is resident beside the target: its weights and its own KV cache
        d_whole = memory_budget(draft, hw, wl.quant, wl.kv_quant, tokens, wl.batch, Deployment(block_tokens=1))
        d_gpu = memory_budget(draft, hw, wl.quant, wl.kv_quant, tokens, wl.batch, dep)
        weights, kv = weights + d_whole.weights_bytes, kv + float(d_whole.kv_bytes)
        fixed_gpu, kv_gpu = fixed_gpu + d_gpu.weights_bytes, kv_gpu + float(d_gpu.kv_bytes)
    room = headroom(dep.kv_share, per_gpu.capacity_bytes, fixed_gpu, kv_gpu)
    phases = {"prefill": _report(pre, hw, fmts.dtype("ffn" if card.architecture.ffn else "experts")),
              "decode": _report(dec, hw, fmts.dtype("ffn" if card.architecture.ffn else "experts"),
                                1.0 / wl.tokens_per_verify)}
    return Prediction(
        model=card.name, hardware=hw.name, quant=fmts.weights_label,
        kv_quant=wl.kv_quant, prompt_tokens=wl.prompt_tokens, output_tokens=wl.output_tokens, batch=wl.batch,
        spec_tokens=wl.spec_tokens, accept_rate=wl.accept_rate, draft=draft.name if draft is not None else None,
        cached_tokens=wl.context_tokens, gpus=wl.tp * wl.pp, tp=wl.tp, pp=wl.pp,
        **m.model_dump(), weights_bytes=weights, kv_bytes=kv,
        memory_per_gpu_bytes=fixed_gpu + kv_gpu, memory_capacity_bytes=per_gpu.capacity_bytes,
        memory_headroom_bytes=room, fits_in_memory=bool(room >= 0),
        bound={k: v.bound for k, v in phases.items()}, ceiling=ceil, efficiency_source=eff.source, runtime=eff.runtime,
        phases=phases)
