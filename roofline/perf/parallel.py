"""Tensor and pipeline parallelism: shard a step's ops over GPUs and add the collectives they need.

Tensor parallel (tp): matmul FLOPs and weights split tp ways; KV splits by kv heads (replicated once tp > kv_heads;
the MLA latent never splits); two all-reduces per layer (after attention and after the FFN; one for single-block
layers) of T x hidden activations, ring cost = latency x hops + 2(tp-1)/tp x bytes / link bandwidth.
Pipeline parallel (pp): each token still passes every layer in turn, so a step's time is unchanged but for one
point-to-point send of T x hidden activations per stage boundary.
"""

from __future__ import annotations

from dataclasses import replace

from roofline.cards.hardware import HardwareCard
from roofline.cards.model import ModelCard
from roofline.errors import RooflineError
from roofline.perf.ops import Op, Step
from roofline.sizing.kv import shard_share
from roofline.sizing.layers import resolve_layers


def _kv_share(op: Op, tp: int) -> float:
    return shard_share(op.kv_shards, tp) if op.kv_shards else 1.0 / tp


def shard_ops(ops: list[Op], tp: int) -> list[Op]:
    """Each GPU's share of every op under `tp`-way tensor parallelism (the hidden-state norms and the router
    replicate; q/k norms split with their heads)."""
    if tp == 1:
        return ops
    out = []
    for op in ops:
        if op.name in ("norms", "router"):
            out.append(op)
            continue
        kv = _kv_share(op, tp)
        out.append(replace(op, flops=op.flops / tp, weight_bytes=op.weight_bytes / tp, act_bytes=op.act_bytes / tp,
                           kv_read_bytes=op.kv_read_bytes * kv, kv_write_bytes=op.kv_write_bytes * kv,
                           scores=op.scores / tp, gemm_tokens=op.gemm_tokens))
    return out


def ring_all_reduce(message_bytes: float, tp: int) -> tuple[float, int]:
    """(bytes each GPU sends over its link, latency hops) of a ring all-reduce of `message_bytes` over `tp` GPUs:
    a reduce-scatter and an all-gather of tp - 1 steps each, every step moving message / tp bytes."""
    return 2.0 * (tp - 1) / tp * message_bytes, 2 * (tp - 1)


def collective_ops(card: ModelCard, step: Step, tp: int, pp: int, act_bytes: float) -> list[Op]:
    """All-reduces (tp) and stage-boundary sends (pp) of one step, as link-bound ops."""
    message = step.tokens * card.architecture.hidden_size * act_bytes
    ops = []
    if tp > 1:
        layers = resolve_layers(card.architecture)
        count = sum(lay.blocks for lay in layers)  # one all-reduce after each residual block
        link_bytes, hops = ring_all_reduce(message, tp)
        ops.append(Op("all_reduce", "comm", "bf16", 0.0, count=count, kernels=1, gemm=False,
                      link_bytes=link_bytes, link_hops=hops))
    if pp > 1:
        ops.append(Op("pipeline_send", "comm", "bf16", 0.0, count=pp - 1, kernels=1, gemm=False, link_bytes=message,
                      link_hops=1))
    return ops


def check_parallel(card: ModelCard, hw: HardwareCard, tp: int, pp: int) -> None:
    """Refuse layouts no engine runs: tp must divide the attention heads; more than one GPU needs a link; tensor
    parallel stays within the card's scale-up domain where it states one (`gpus_per_node` > 1)."""
    heads = card.architecture.attention.num_heads if card.architecture.attention else None
    if tp > 1 and heads and heads % tp:
        raise RooflineError(f"--gpus {tp}: {card.name} has {heads} attention heads, which {tp} GPUs cannot split "
                            f"evenly; use a divisor of {heads}")
    if tp * pp > 1 and hw.interconnect.bandwidth_bytes_per_s_per_direction <= 0:
        raise RooflineError(f"{hw.name} has no GPU-to-GPU link in its card (interconnect.bandwidth_per_direction); "
                            f"multi-GPU needs one")
    node, layers = hw.interconnect.gpus_per_node, card.architecture.num_layers
    if node > 1 and tp > node:  # a card that states its scale-up domain (NVLink, xGMI): TP stays inside it
        split = tp * pp % node == 0 and tp * pp // node <= layers  # the split it names must run
        raise RooflineError(f"--gpus {tp}: tensor parallel spans {hw.name}'s GPU link domain of {node} GPUs; across "
                            f"nodes, split the layers: --gpus {node} --pp {tp * pp // node}" if split
                            else f"--gpus {tp}: tensor parallel spans {hw.name}'s GPU link domain of {node} GPUs; "
                            f"use at most --gpus {node} (--pp for more GPUs)")
    if pp > card.architecture.num_layers:
        raise RooflineError(f"--pp {pp}: {card.name} has only {card.architecture.num_layers} layers")
