"""Roofline timing of an op list: time = max(FLOPs / (peak x eff), bytes / (bandwidth x eff)) + overheads."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from roofline.cards.hardware import HardwareCard
from roofline.cards.schema import Num
from roofline.perf.efficiency import Efficiency
from roofline.perf.ops import Op
from roofline.perf.routing import expected_experts_touched, gemv_expert_share


@dataclass
class StepTime:
    """Seconds of one step, split by what limits each op; numpy-broadcast like the step's batch/context."""

    total_s: Num
    compute_s: Num  # time of ops whose compute term dominates
    memory_s: Num  # time of ops whose memory term dominates
    overhead_s: Num  # kernel launches + the per-step fixed cost
    flops: Num
    bytes: Num
    by_class: dict[str, Num] = field(default_factory=dict)
    by_op: dict[str, Num] = field(default_factory=dict)


def _peak(hw: HardwareCard, dtype: str) -> float:
    peaks = hw.peak_flops.as_dict()
    return peaks.get(dtype) or max(peaks.values())


# Bytes per query-key score an attention core without flash attention moves: llama.cpp src/llama-graph.cpp
# build_attn_mha, its non-flash branch: kq = ggml_mul_mat(k, q) at GGML_PREC_F32 writes the fp32 scores (4), then
# ggml_soft_max_ext reads and rewrites them (4 + 4), then kqv = ggml_mul_mat(v, kq) reads them (4)
SCORE_BYTES_PER_VALUE = 16.0
SCORE_VALUE_BYTES = 4.0  # one fp32 score held between those kernels


def score_bytes(op: Op, hw: HardwareCard, eff: Efficiency) -> Num:
    """Memory bytes of the scores an attention core without flash attention writes out and reads back: those of one
    layer's score tensor beyond what the card's L2 cache holds (a card without an L2 figure keeps them on chip)."""
    if eff.flash_attention or not hw.l2_cache_bytes:
        return 0.0
    return SCORE_BYTES_PER_VALUE * np.maximum(op.scores - hw.l2_cache_bytes / SCORE_VALUE_BYTES, 0.0)


def bandwidth(op: Op, hw: HardwareCard, eff: Efficiency, tokens: Num, gemv_share: Num | None = None) -> Num:
    """Achieved bytes/s of one op: matrix-vector work (up to `gemv_max_tokens` rows) streams at `memory_gemv`, no
    faster than the card's compute units can draw (`gemv_unit_bandwidth_bytes_per_s` each), the attention core's KV
    reads at `memory_kv`, elementwise activation passes at `memory_act`, everything else at `memory` (each kernel
    kind reaches its own fraction of the bus), an activation function's pass slowed by its measured
    `activation_cost`. A MoE op's experts stream at `memory_gemv` for their matrix-vector share `gemv_share`
    (`expert_gemv_share`; None: not a MoE op)."""
    full = hw.memory.bandwidth_bytes_per_s
    if op.elementwise:
        act = eff.memory if eff.memory_act is None else eff.memory_act
        return full * act / eff.activation_cost.get(op.activation, 1.0)
    if op.op_class == "attention" and not op.gemm and eff.memory_kv is not None:
        return full * eff.memory_kv
    gemv = gemv_bandwidth(hw, eff)
    if not op.gemm or gemv == full * eff.memory:
        return full * eff.memory
    if gemv_share is not None:  # MoE: experts that see at most gemv_max_tokens tokens run matrix-vector kernels
        return gemv_share * gemv + (1 - gemv_share) * full * eff.memory
    return np.where(np.asarray(tokens) <= eff.gemv_max_tokens, gemv, full * eff.memory)


def handoff_floor_seconds(op: Op, moved: Num, hw: HardwareCard, eff: Efficiency) -> Num:
    """The least time a GEMM's `moved` bytes take at any row count where a per-unit matrix-vector cap binds
    (`gemv_unit_bandwidth_bytes_per_s`: HBM cards under llama.cpp's fitted per-SM MMVQ rate): streamed at
    `gemv_bandwidth`. Past the hand-off at `gemv_max_tokens` rows a GEMM would otherwise read the same weights (and
    more activations) sooner than at it, and step time would fall as rows are added (9 rows faster than 8; a MoE
    prompt faster as its experts pass 8 tokens each). llama.cpp hands MMVQ over to MMQ where the two meet
    (ggml-cuda/mmvq.cu ggml_cuda_should_use_mmvq: MMVQ_MAX_BATCH_SIZE 8, per-architecture crossovers), so step time
    is continuous there. Rows up to the hand-off, and cards where the cap does not bind, are unchanged."""
    if not op.gemm or not (eff.gemv_unit_bandwidth_bytes_per_s and hw.compute_units):
        return 0.0
    gemv = gemv_bandwidth(hw, eff)
    return moved / gemv if gemv < hw.memory.bandwidth_bytes_per_s * eff.memory else 0.0


def gemv_bandwidth(hw: HardwareCard, eff: Efficiency) -> float:
    """Bytes/s a matrix-vector kernel streams weights at: `memory_gemv` (else `memory`) of the bus, capped at
    compute units x `gemv_unit_bandwidth_bytes_per_s` where both are known."""
    rate = hw.memory.bandwidth_bytes_per_s * (eff.memory if eff.memory_gemv is None else eff.memory_gemv)
    if eff.gemv_unit_bandwidth_bytes_per_s and hw.compute_units:
        rate = min(rate, hw.compute_units * eff.gemv_unit_bandwidth_bytes_per_s)
    return rate


def compute_seconds(op: Op, hw: HardwareCard, eff: Efficiency, tokens: Num, gemv_share: Num | None = None) -> Num:
    """FLOPs / (peak x efficiency). GEMMs with M rows pay for rows padded to `gemm_min_tokens` and reach
    M / (M + gemm_half_tokens) of their large-GEMM efficiency (never below `gemm_floor`); up to `gemv_max_tokens`
    rows they run as matrix-vector kernels, which neither pad nor ramp. A padded GEMM runs the tile's rows, so it
    ramps as that many rows do (fewer rows never cost more than the tile). A MoE op's experts split as its
    bandwidth does: `gemv_share` of them run matrix-vector kernels, the rest GEMMs of more than `gemv_max_tokens`
    rows. Non-GEMM kernels (attention core, norms) run at the `attention` efficiency, recurrent scans at `scan`
    (default `attention`)."""
    if not op.gemm:
        scan = op.op_class == "mamba" and eff.scan is not None
        return op.flops / (_peak(hw, op.dtype) * (eff.scan if scan else eff.attention))
    m = np.maximum(tokens if op.gemm_tokens is None else op.gemm_tokens, 1e-9)
    dtype = eff.kernel_dtype(op.weight_format, op.dtype, hw.supported_dtypes)
    full_rate_s = op.flops / (_peak(hw, dtype) * eff.compute_for(dtype, op.weight_format))
    if gemv_share is not None:
        gemm_rows = np.maximum(m, np.floor(eff.gemv_max_tokens) + 1)
        return full_rate_s * (gemv_share + (1 - gemv_share) * _tile_cost(gemm_rows, eff))
    return full_rate_s * np.where(m <= eff.gemv_max_tokens, 1.0, _tile_cost(m, eff))


def _tile_cost(m: Num, eff: Efficiency) -> Num:
    """A GEMM of M rows over one at its large-GEMM rate: the rows padded to the tile, at the ramp of the rows run."""
    rows = np.maximum(m, eff.gemm_min_tokens)
    ramp = np.maximum(rows / (rows + eff.gemm_half_tokens), eff.gemm_floor) if eff.gemm_half_tokens else 1.0
    return rows / m / ramp


def time_ops(ops: list[Op], hw: HardwareCard, eff: Efficiency, tokens: Num, sequences: Num = 0,
             kernel_s: Num | None = None) -> StepTime:
    """Time every op on `hw` at efficiency `eff`; `tokens` is the step's GEMM M dimension (batch x new tokens),
    `sequences` the sequences the step schedules (each costs `sequence_overhead_s` of host work), `kernel_s` the
    cost of one kernel launch (default `kernel_overhead_s`; less in a step replayed as a CUDA graph)."""
    kernel_s = eff.kernel_overhead_s if kernel_s is None else kernel_s
    zero = np.zeros(np.broadcast(tokens, sequences, *(o.flops for o in ops), *(o.bytes for o in ops)).shape)
    fixed = zero + fixed_seconds(eff, tokens, sequences)
    st = StepTime(fixed, zero.copy(), zero.copy(), fixed.copy(), zero.copy(), zero.copy())
    for op in ops:
        if op.op_class == "comm":
            _add_link(st, op, hw, eff)
            continue
        if op.routing is not None and eff.routing_concentration:
            op = concentrated_routing(op, eff.routing_concentration, tokens, sequences)
        moved = op.bytes + score_bytes(op, hw, eff)
        # the matrix-vector share of a MoE op's experts, once for both bandwidth and the cost per expert
        share = expert_gemv_share(op, eff, tokens) if op.routing is not None else None
        c, m = compute_seconds(op, hw, eff, tokens, share), moved / bandwidth(op, hw, eff, tokens, share)
        m = np.maximum(m, handoff_floor_seconds(op, moved, hw, eff))  # no faster past the MMVQ->MMQ hand-off
        limited = np.maximum(c, m) * op.count
        ovh = launches(op, eff) * kernel_s + expert_gemm_seconds(op, eff, share)
        st.total_s = st.total_s + limited + ovh
        st.compute_s = st.compute_s + np.where(c > m, limited, 0.0)
        st.memory_s = st.memory_s + np.where(c > m, 0.0, limited)
        st.overhead_s = st.overhead_s + ovh
        st.flops = st.flops + op.flops * op.count
        st.bytes = st.bytes + moved * op.count
        st.by_class[op.op_class] = st.by_class.get(op.op_class, 0.0) + limited + ovh
        st.by_op[op.name] = st.by_op.get(op.name, 0.0) + limited + ovh
    return st


def fixed_seconds(eff: Efficiency, tokens: Num, sequences: Num = 0) -> Num:
    """The host work of a step whatever its ops: per step, per sequence scheduled and per new token."""
    return eff.step_overhead_s + eff.sequence_overhead_s * np.asarray(sequences, dtype=float) \
        + eff.token_overhead_s * np.asarray(tokens, dtype=float)


def launches(op: Op, eff: Efficiency) -> Num:
    """Kernels `op` launches in a step: its own, and more per MoE expert it touches where experts run apart."""
    return (op.kernels + eff.kernels_per_expert * op.experts_touched) * op.count


def expert_gemv_share(op: Op, eff: Efficiency, tokens: Num) -> Num:
    """Of a MoE op's touched experts, the share that runs as matrix-vector kernels: all of them in a step of at most
    `expert_gemv_max_tokens` tokens and none above, where one kernel serves every expert; else those routed at most
    `gemv_max_tokens` of the step's `tokens`."""
    if eff.expert_gemv_max_tokens is not None:
        return np.where(np.asarray(tokens, dtype=float) <= eff.expert_gemv_max_tokens, 1.0, 0.0)
    return gemv_expert_share(*op.routing, tokens, eff.gemv_max_tokens)


def expert_gemm_seconds(op: Op, eff: Efficiency, gemv_share: Num | None) -> Num:
    """The fixed cost of the MoE experts a step runs as matrix-matrix kernels: `expert_gemm_overhead_s` for each
    touched expert outside `gemv_share` (`expert_gemv_share`; None: not a MoE op), per layer (decode at small batches
    runs its experts as matrix-vector kernels and pays none)."""
    if gemv_share is None or not eff.expert_gemm_overhead_s:
        return 0.0
    return eff.expert_gemm_overhead_s * op.experts_touched * (1.0 - gemv_share) * op.count


def concentrated_routing(op: Op, concentration: float, tokens: Num, sequences: Num) -> Op:
    """The MoE experts op with the experts a step touches when each sequence's tokens favour some experts
    (`expected_experts_touched` with a concentration): fewer weights read, more tokens per expert GEMM."""
    num_experts, k = op.routing
    touched = expected_experts_touched(num_experts, k, tokens, sequences, concentration)
    scale = touched / np.maximum(op.experts_touched, 1e-12)
    return replace(op, weight_bytes=op.weight_bytes * scale, experts_touched=touched,
                   gemm_tokens=None if op.gemm_tokens is None else op.gemm_tokens / scale)


def _add_link(st: StepTime, op: Op, hw: HardwareCard, eff: Efficiency) -> None:
    """A collective: bytes over the GPU link (at `eff.link` of its datasheet rate) + per-hop latency (expected
    mode only: latency is overhead, which the ceiling leaves out)."""
    ic = hw.interconnect
    transfer = op.link_bytes / (ic.bandwidth_bytes_per_s_per_direction * eff.link)
    hops = eff.allreduce_latency_hops if _one_shot(op, ic.kind, eff) else op.link_hops
    latency = hops * ic.latency_s if eff.kernel_overhead_s or eff.step_overhead_s else 0.0
    t = op.count * (transfer + latency)
    st.total_s = st.total_s + t
    st.memory_s = st.memory_s + op.count * transfer  # bandwidth-bound, like memory traffic
    st.overhead_s = st.overhead_s + op.count * latency
    st.by_class["comm"] = st.by_class.get("comm", 0.0) + t
    st.by_op[op.name] = st.by_op.get(op.name, 0.0) + t


def _one_shot(op: Op, link_kind: str, eff: Efficiency) -> bool:
    """Whether an all-reduce runs the runtime's one-shot kernel (`allreduce_latency_hops`): each GPU reads its peers
    directly, which needs them all on NVLink/xGMI; over PCIe beyond two GPUs runtimes fall back to NCCL's ring
    (vLLM custom_all_reduce.py: "Custom allreduce is disabled because it's not supported on more than two PCIe-only
    GPUs")."""
    ring_gpus = op.link_hops // 2 + 1  # a ring all-reduce pays 2(n-1) hops
    return bool(op.name == "all_reduce" and eff.allreduce_latency_hops
                and not (link_kind.startswith("pcie") and ring_gpus > 2))


def bound_of(st: StepTime) -> Num:
    """'compute', 'memory' or 'overhead': whichever share of the step's time is largest."""
    shares = np.stack(np.broadcast_arrays(st.compute_s, st.memory_s, st.overhead_s))
    return np.array(["compute", "memory", "overhead"])[np.argmax(shares, axis=0)]
