"""The memory budget of a deployment, per GPU: the one function the predictor, `fits`, the sweep and the engine use.

Lines: weights by component at their formats (tied embeddings once), the KV cache and recurrent state of every
sequence (paged: whole blocks), activations/workspace at the engine's max tokens per step, the runtime (CUDA
context and framework), and on unified-memory parts what the OS and CPU keep.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from roofline.cards.hardware import HardwareCard, default_key
from roofline.cards.model import ModelCard
from roofline.cards.schema import Num
from roofline.sizing.kv import kv_bytes, kv_bytes_per_token
from roofline.sizing.params import mlp_activation_width, param_counts
from roofline.sizing.precision import Formats

# Engine runtime per GPU beyond weights, KV and activations: CUDA context (~0.3-0.5 GB on Hopper) + cuBLAS/NCCL
# workspaces, allocator slack and CUDA graphs (~1 GB). Engineering defaults, not datasheet figures: override with
# --runtime, or measure with `roofline calibrate`.
RUNTIME_BYTES = {"gpu": 1.5e9, "accelerator": 1.5e9, "soc": 1.5e9, "apple": 0.5e9, "cpu": 0.2e9}
# Tokens per engine step the activation workspace is sized for (vLLM's chunked-prefill budget is 2048-8192;
# llama.cpp's -ub default is 512). Override with --max-step-tokens.
MAX_STEP_TOKENS = 2048
BLOCK_TOKENS = 16  # paged-KV block size (vLLM default block_size 16)
LOGIT_BYTES = 4.0  # logits are materialised in fp32


@dataclass(frozen=True)
class Deployment:
    tp: int = 1  # tensor-parallel GPUs
    pp: int = 1  # pipeline stages
    block_tokens: int = BLOCK_TOKENS
    max_step_tokens: int = MAX_STEP_TOKENS
    runtime_bytes: float | None = None  # None: RUNTIME_BYTES for the card's kind
    # share of the memory left after weights, activations and the runtime that the KV cache may take (a runtime
    # that sizes its pool so: TensorRT-LLM's free_gpu_memory_fraction); 1: all of it
    # a per-slot runtime (llama.cpp -c, Ollama num_ctx) allocates at least this context per sequence, whatever the
    # request holds
    slot_tokens: int = 0
    kv_share: float = 1.0
    # a pool sized once at start-up is sized beside the logits of the most sequences a step samples, however many
    # run (vLLM's profile run samples max_num_seqs dummy requests; TensorRT-LLM's engine holds max_batch_size
    # logits): that count; 0: the sequences asked
    sampled_seqs: int = 0

    @property
    def gpus(self) -> int:
        return self.tp * self.pp


@dataclass
class Budget:
    """Bytes per GPU. `kv_bytes` and the totals broadcast over concurrency/context arrays."""

    capacity_bytes: float
    reserved_bytes: float
    runtime_bytes: float
    activations_bytes: Num
    weights_bytes: float
    kv_bytes: Num
    kv_bytes_per_token: float
    kv_bytes_per_sequence: Num
    weights_by_component: dict[str, float] = field(default_factory=dict)
    kv_share: float = 1.0  # Deployment.kv_share: the KV cache may take this share of what the rest leaves

    @property
    def fixed_bytes(self) -> Num:
        """Everything but the KV cache."""
        return self.reserved_bytes + self.runtime_bytes + self.activations_bytes + self.weights_bytes

    @property
    def total_bytes(self) -> Num:
        return self.fixed_bytes + self.kv_bytes

    @property
    def kv_room_bytes(self) -> Num:
        """What the KV cache may take: `kv_share` of the memory the rest leaves."""
        return self.kv_share * (self.capacity_bytes - self.fixed_bytes)

    @property
    def headroom_bytes(self) -> Num:
        """What the KV cache may still grow by; negative: the memory the device lacks (`headroom`)."""
        return headroom(self.kv_share, self.capacity_bytes, self.fixed_bytes, self.kv_bytes)

    @property
    def fits(self) -> Num:
        return self.kv_bytes <= self.kv_room_bytes


def headroom(kv_share: float, capacity_bytes: float, fixed_bytes: Num, kv_bytes: Num) -> Num:
    """Room the KV cache has left (`kv_share` of what the rest leaves, less the KV held); where it is short, the
    memory the device lacks, which is that shortfall over `kv_share` (a pool taking 90% of the free memory needs
    1/0.9 bytes of device per byte of KV)."""
    room = kv_share * (capacity_bytes - np.asarray(fixed_bytes, dtype=float)) - kv_bytes
    if np.ndim(room):
        return np.where(room >= 0, room, room / kv_share)
    return float(room) if room >= 0 else float(room) / kv_share


def resident_weight_bytes(card: ModelCard, fmts: Formats, tp: int = 1, pp: int = 1) -> dict[str, float]:
    """Bytes per component per GPU: matmul weights shard over tp x pp; norms (and the tiny router) replicate."""
    out = {}
    for component, n in param_counts(card).items():
        split = pp * (1 if component in ("norms", "router") else tp)
        out[component] = n * fmts.wbytes(component) / split
    return out


def activation_bytes(card: ModelCard, fmts: Formats, dep: Deployment, concurrency: Num = 1) -> Num:
    """Peak live activations of one step of `max_step_tokens`: residual + norm + QKV + FFN intermediates, and
    fp32 logits for the sequences sampled in that step."""
    arch = card.architecture
    inner = mlp_activation_width(arch.ffn.intermediate_size, arch.ffn.gated) if arch.ffn else 0
    if arch.moe:
        e = arch.moe
        inner = max(inner, mlp_activation_width(e.expert_intermediate_size, e.gated) * e.experts_per_token,
                    mlp_activation_width(e.shared_expert_intermediate_size or 0, e.gated))
    if arch.mamba2:
        m = arch.mamba2
        inner = max(inner, 2 * m.d_inner + 2 * m.n_groups * m.state_size + m.num_heads)
    att = arch.attention
    qkv = (att.num_heads + 2 * att.num_kv_heads) * att.head_dim if att else 0
    per_token = (2 * arch.hidden_size + (qkv + inner) / dep.tp) * fmts.act_bytes
    logits = np.minimum(dep.sampled_seqs or concurrency, dep.max_step_tokens) * arch.vocab_size / dep.tp * LOGIT_BYTES
    return dep.max_step_tokens * per_token + logits


def memory_budget(card: ModelCard, hw: HardwareCard, quant: str | None, kv_quant: str, context_tokens: Num,
                  concurrency: Num = 1, dep: Deployment = Deployment()) -> Budget:
    """Per-GPU budget for `concurrency` sequences of `context_tokens` each (numpy arrays broadcast)."""
    fmts = Formats(card, hw, quant, kv_quant)
    weights = resident_weight_bytes(card, fmts, dep.tp, dep.pp)
    held = np.maximum(context_tokens, dep.slot_tokens) if dep.slot_tokens else context_tokens
    per_seq = kv_bytes(card, held, kv_quant, dep.block_tokens, dep.tp, dep.pp)
    runtime = dep.runtime_bytes if dep.runtime_bytes is not None else RUNTIME_BYTES[default_key(hw)]
    return Budget(capacity_bytes=hw.memory.capacity_bytes, reserved_bytes=hw.memory.reserved_bytes,
                  runtime_bytes=runtime, activations_bytes=activation_bytes(card, fmts, dep, concurrency),
                  weights_bytes=sum(weights.values()), kv_bytes=concurrency * per_seq,
                  kv_bytes_per_token=kv_bytes_per_token(card, kv_quant, dep.tp, dep.pp), kv_bytes_per_sequence=per_seq,
                  weights_by_component=weights, kv_share=dep.kv_share)


MAX_SEQUENCES = 10**9  # the most `max_concurrency` counts: sequences that hold no KV, or a card of absurd capacity


def max_concurrency(card: ModelCard, hw: HardwareCard, quant: str | None, kv_quant: str, context_tokens: int,
                    dep: Deployment = Deployment()) -> int:
    """Most sequences of `context_tokens` that fit beside everything else (0 when even one does not)."""
    one = memory_budget(card, hw, quant, kv_quant, context_tokens, 1, dep)
    if not one.fits:
        return 0
    per_seq = float(one.kv_bytes_per_sequence)
    if per_seq <= 0:
        return MAX_SEQUENCES
    # at most what the KV of one sequence divides into the room (activations and logits grow with n)
    most = min(max(1, int((one.capacity_bytes - float(one.fixed_bytes)) // per_seq)), MAX_SEQUENCES)
    return _largest(1, most, lambda n: memory_budget(card, hw, quant, kv_quant, context_tokens, n, dep).fits)


def max_context(card: ModelCard, hw: HardwareCard, quant: str | None, kv_quant: str, concurrency: int,
                dep: Deployment = Deployment()) -> int:
    """Longest context (tokens, up to the model's max_context) that `concurrency` sequences can each hold."""
    return _largest(0, card.architecture.max_context,
                    lambda n: memory_budget(card, hw, quant, kv_quant, n, concurrency, dep).fits)


def _largest(lo: int, hi: int, fits) -> int:
    """The largest n in [lo, hi] with fits(n), `fits` true at lo and turning false once (memory only grows with
    sequences and context): bisection."""
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


GPU_COUNTS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def min_gpus(card: ModelCard, hw: HardwareCard, quant: str | None, kv_quant: str, context_tokens: int,
             concurrency: int, dep: Deployment = Deployment()) -> Deployment | None:
    """The fewest GPUs of this card that hold the model at this context and concurrency, and at that count the
    widest tensor parallel that fits (tp within a node, dividing the attention heads; pipeline stages for the rest:
    MLA's latent, copied whole on every tensor-parallel GPU, can fit 4 stages where tp 4 does not). None if no
    layout fits."""
    if hw.interconnect.bandwidth_bytes_per_s_per_direction <= 0:
        candidates = (1,)  # no GPU-to-GPU link on the card: one device only
    else:
        candidates = GPU_COUNTS
    heads = card.architecture.attention.num_heads if card.architecture.attention else 0
    node = hw.interconnect.gpus_per_node  # TP within a stated scale-up domain; over PCIe (1) any width
    for n in candidates:
        widest = min(n, node) if node > 1 else n
        for tp in (t for t in GPU_COUNTS[::-1] if t <= widest and not (heads and heads % t)):
            if n // tp > card.architecture.num_layers:
                continue
            layout = replace(dep, tp=tp, pp=n // tp, slot_tokens=0)
            if memory_budget(card, hw, quant, kv_quant, context_tokens, concurrency, layout).fits:
                return layout
        if n > card.architecture.num_layers:
            break
    return None


def slot_share_tokens(context_tokens: int, slots: int, split: bool) -> int:
    """The context one slot holds of a per-slot runtime's `context_tokens`: a share of it where the runtime splits
    its context over its slots (llama-server: n_ctx_seq = n_ctx / n_parallel), else all of it (Ollama's num_ctx)."""
    return max(1, context_tokens // max(slots, 1)) if split else context_tokens


def preallocated_bytes(hw: HardwareCard, util: float) -> float:
    """Bytes per GPU a preallocating runtime takes for weights, activations and its KV pool: `util` of the memory
    the device reports, which is the card's capacity less its reserve (vLLM multiplies gpu_memory_utilization by
    torch's total_memory: 81,559 MiB on an 80 GiB H100; on a unified part, what the OS leaves the GPU)."""
    return util * hw.memory.usable_bytes


STARTUP_POOLS = ("preallocate", "free_fraction")  # memory policies that size the KV pool once, at start-up
DEFAULT_CONTEXT_TOKENS = 8192  # what `fits` sizes without --context and without a runtime default


def runtime_memory_view(policy: dict | None, hw: HardwareCard, ctx: int | None, block_tokens: int | None,
                        max_step_tokens: int | None):
    """(hardware card as the runtime sees it, context, block tokens, step tokens, policy summary) under a runtime's
    memory policy (`RuntimeProfile.serving_policy()`). preallocate (vLLM gpu_memory_utilization, SGLang
    mem_fraction_static): weights, activations and the KV pool live in that fraction of memory, so the max
    concurrency is what the pool holds. free_fraction (TensorRT-LLM free_gpu_memory_fraction): the KV pool takes that
    fraction of what weights, activations and the runtime leave (`Deployment.kv_share`; the summary's "kv_share").
    per_slot (llama.cpp, Ollama): the context asked for is allocated per slot, the runtime's default context when
    none is given. None: the whole memory."""
    policy = policy or {}
    default_ctx = policy.get("default_context_tokens") if policy.get("memory_policy") == "per_slot" else None
    context = ctx if ctx is not None else default_ctx or DEFAULT_CONTEXT_TOKENS
    blocks = block_tokens or policy.get("block_size_tokens") or BLOCK_TOKENS
    step = max_step_tokens or policy.get("max_num_batched_tokens") or MAX_STEP_TOKENS
    util = policy.get("gpu_memory_utilization") if policy.get("memory_policy") == "preallocate" else None
    if util and util < 1:  # the reserve lies outside the share: the runtime multiplies what the device reports
        memory = hw.memory.model_copy(update={"capacity_bytes": preallocated_bytes(hw, util), "reserved_bytes": 0.0})
        hw = hw.model_copy(update={"memory": memory})
    share = policy.get("gpu_memory_utilization") if policy.get("memory_policy") == "free_fraction" else None
    pooled = policy.get("memory_policy") in STARTUP_POOLS
    return hw, context, blocks, step, {"policy": policy.get("memory_policy") or "generic",
                                       "sampled_seqs": (policy.get("max_num_seqs") or 0) if pooled else 0,
                                       "gpu_memory_utilization": util, "kv_share": share or 1.0,
                                       "context_default": ctx is None and default_ctx is not None,
                                       "context_split": bool(policy.get("context_split")),
                                       "max_num_seqs": policy.get("max_num_seqs")}
