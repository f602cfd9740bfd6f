"""Tensor parallel over torch.distributed: one engine per rank (process), NCCL on GPUs, gloo on the CPU.

Every rank builds the whole model from the same seed, then keeps its shard (`shard_model`):
- attention: column-parallel QKV (its 1/tp of the query heads and of the KV heads), row-parallel O;
- dense FFN: column-parallel gate/up, row-parallel down;
- MoE: every rank holds every expert, each expert's intermediate dim split tp ways (gate/up column-, down
  row-parallel, shared experts likewise); the router and the latent projections are replicated;
- lm_head: vocab-parallel (rows split, the last shard zero-padded), the shards' logits all-gathered;
- embedding and norms replicated.
One all-reduce (sum) after each attention and each FFN output; row-parallel biases are added by rank 0 only.
Ranks run the same deterministic scheduler on the same requests and see the same gathered logits, so they sample
the same tokens without exchanging them. Mamba-2 layers are refused.
"""

from __future__ import annotations

import os
import signal
import socket
from dataclasses import dataclass

import torch
import torch.distributed as dist
from roofline.engine.device import check_world
from roofline.engine.model.mamba import Mamba2
from roofline.engine.model.modules import MLP, Attention, MoE, linear
from roofline.engine.model.transformer import EngineError, Transformer
from torch import nn


def _slice(t: torch.Tensor, dim: int, rank: int, world: int) -> torch.Tensor:
    """The rank's 1/world of `t` along `dim` (which world divides)."""
    n = t.shape[dim] // world
    return t.narrow(dim, rank * n, n)


def _halves(t: torch.Tensor, dim: int, rank: int, world: int) -> torch.Tensor:
    """A fused [gate; up] tensor along `dim`: the rank's slice of each half, fused again."""
    return torch.cat([_slice(h, dim, rank, world) for h in t.chunk(2, dim=dim)], dim=dim)


def _param(t: torch.Tensor) -> nn.Parameter:
    return nn.Parameter(t.contiguous(), requires_grad=False)


def _row_bias(bias: nn.Parameter | None, rank: int) -> nn.Parameter | None:
    """A row-parallel layer's bias is added once: by rank 0 (zeros elsewhere), before the all-reduce sums."""
    return None if bias is None else _param(bias if rank == 0 else torch.zeros_like(bias))


def _set_linear(lin: nn.Linear, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
    lin.weight, lin.bias = _param(weight), None if bias is None else _param(bias)
    lin.out_features, lin.in_features = weight.shape


def _shard_attention(att: Attention, rank: int, world: int) -> None:
    """QKV rows [q heads | k heads | v heads] x head_dim: the rank's heads of each; O columns: its query heads."""
    if att.heads % world or att.kv_heads % world:
        raise EngineError(f"--tp {world}: {att.heads} query / {att.kv_heads} KV heads do not split {world} ways; "
                          f"use a divisor of both")
    d = att.head_dim
    parts = [att.heads * d, att.kv_heads * d] + ([] if att.k_eq_v else [att.kv_heads * d])

    def cut(t: torch.Tensor) -> torch.Tensor:
        return torch.cat([_slice(p, 0, rank, world) for p in t.split(parts, dim=0)], dim=0)

    _set_linear(att.qkv, cut(att.qkv.weight), None if att.qkv.bias is None else cut(att.qkv.bias))
    _set_linear(att.o, _slice(att.o.weight, 1, rank, world), _row_bias(att.o.bias, rank))
    att.heads, att.kv_heads = att.heads // world, att.kv_heads // world


def _shard_mlp(mlp: MLP, rank: int, world: int) -> None:
    cut = _halves if mlp.gated else _slice
    _set_linear(mlp.up, cut(mlp.up.weight, 0, rank, world),
                None if mlp.up.bias is None else cut(mlp.up.bias, 0, rank, world))
    _set_linear(mlp.down, _slice(mlp.down.weight, 1, rank, world), _row_bias(mlp.down.bias, rank))


def _shard_moe(moe: MoE, rank: int, world: int) -> None:
    """Each expert's intermediate dim: w_up [E, (2x)I, w] rows, w_down [E, w, I] columns."""
    if moe.w_down.shape[2] % world:
        raise EngineError(f"--tp {world}: the expert intermediate size {moe.w_down.shape[2]} does not split "
                          f"{world} ways")
    cut = _halves if moe.gated else _slice
    moe.w_up = _param(cut(moe.w_up, 1, rank, world))
    moe.b_up = None if moe.b_up is None else _param(cut(moe.b_up, 1, rank, world))
    moe.w_down = _param(_slice(moe.w_down, 2, rank, world))
    moe.b_down = _row_bias(moe.b_down, rank)
    if moe.shared is not None:
        _shard_mlp(moe.shared, rank, world)


def _all_reduce_output(module: nn.Module, inputs, output: torch.Tensor) -> torch.Tensor:
    """Forward hook: the partial sums of every rank, summed in place."""
    dist.all_reduce(output)
    return output


class VocabParallelHead(nn.Module):
    """lm_head rows split over ranks: x [T, h] -> logits [T, vocab], each rank's [T, vocab/tp] all-gathered."""

    def __init__(self, weight: torch.Tensor, rank: int, world: int):
        super().__init__()
        self.vocab = weight.shape[0]
        rows = -(-self.vocab // world)
        padded = torch.cat([weight, weight.new_zeros(rows * world - self.vocab, weight.shape[1])])
        self.weight = _param(padded[rank * rows:(rank + 1) * rows])  # [vocab/tp, h]
        self.world = world

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        local = linear(x, self.weight).contiguous()
        parts = [torch.empty_like(local) for _ in range(self.world)]
        dist.all_gather(parts, local)
        return torch.cat(parts, dim=-1)[..., :self.vocab]


def shard_model(model: Transformer, rank: int, world: int) -> None:
    """Keep rank `rank`'s shard of every layer (in place) and add the all-reduces. The KV cache is built after,
    from each attention's (now local) KV heads."""
    for block in model.blocks:
        if isinstance(block.mixer, Mamba2):
            raise EngineError(f"--tp {world}: Mamba-2 layers do not run tensor parallel; use --tp 1")
        if isinstance(block.mixer, Attention):
            _shard_attention(block.mixer, rank, world)
            block.mixer.register_forward_hook(_all_reduce_output)
        if isinstance(block.ffn, MLP):
            _shard_mlp(block.ffn, rank, world)
        elif isinstance(block.ffn, MoE):
            _shard_moe(block.ffn, rank, world)
        if block.ffn is not None:
            block.ffn.register_forward_hook(_all_reduce_output)
    head = model.embed.weight if model.lm_head is None else model.lm_head.weight
    model.lm_head = VocabParallelHead(head.detach(), rank, world)


# --- processes ---------------------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world: int, port: int, device: str, fn, args: tuple, results) -> None:
    """One rank: join the group (NCCL on CUDA, gloo on the CPU), run fn(rank, world, device, *args), report
    (rank, result) through `results` (rank 0's result, None from the others) once every rank is done."""
    backend = "nccl" if device == "cuda" else "gloo"
    if device == "cuda":
        torch.cuda.set_device(rank)
        device = f"cuda:{rank}"
    else:  # the ranks share the CPU: each gets its share of the cores
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    code = 0
    try:
        out = fn(rank, world, device, *args)
        dist.barrier()  # every rank done before any tears the group down (gloo aborts a peer still connected)
        results.put((rank, out if rank == 0 else None))
    except EngineError as err:  # the parent reports it in one line (raised, torch would write a traceback file)
        results.put((rank, RankError(str(err))))
        code = 1
    finally:
        dist.destroy_process_group()
    os._exit(code)  # skip the interpreter's teardown: gloo's threads can abort a process on the way out


@dataclass(frozen=True)
class RankError:
    """A rank's EngineError, sent to the parent as its result."""

    message: str


def check_tp(card, world: int) -> None:
    """Refuse, before any process starts, a card that does not split `world` ways (the ranks would refuse it)."""
    from roofline.sizing.layers import resolve_layers

    arch = card.architecture
    for lay in resolve_layers(arch):
        if lay.mixer == "mamba2":
            raise EngineError(f"--tp {world}: Mamba-2 layers do not run tensor parallel; use --tp 1")
        if lay.is_attention and (lay.num_heads % world or lay.num_kv_heads % world):
            raise EngineError(f"--tp {world}: {card.name} has {lay.num_heads} query / {lay.num_kv_heads} KV heads, "
                              f"which do not split {world} ways; use a divisor of both")
    sizes = [arch.ffn.intermediate_size if arch.ffn else 0, arch.moe.expert_intermediate_size if arch.moe else 0]
    if any(n % world for n in sizes):
        raise EngineError(f"--tp {world}: the FFN sizes {sizes} of {card.name} do not split {world} ways")


def run_ranks(world: int, device: str, fn, *args):
    """fn(rank, world, device, *args) in `world` spawned processes; rank 0's result. `fn` must be picklable (a
    module-level function). A rank killed by a signal after every rank reported its result crashed in the
    group's teardown, not in the work: the result stands; killed before that, the run fails."""
    check_world(world, device)
    import torch.multiprocessing as mp

    results = mp.get_context("spawn").SimpleQueue()
    ranks = mp.start_processes(_worker, args=(world, free_port(), device, fn, args, results), nprocs=world,
                               join=False, start_method="spawn")
    got: dict = {}
    term = signal.signal(signal.SIGTERM, _terminated)  # a SIGTERM to the parent stops the ranks too
    try:
        while not ranks.join(timeout=0.05):
            _drain(results, got)  # read while the ranks run: a report larger than the pipe's buffer blocks its put
    except mp.ProcessExitedException:
        _raise_rank_error(_drain(results, got))
        if len(got) < world:
            raise
    finally:
        signal.signal(signal.SIGTERM, term)
        for proc in ranks.processes:  # none outlives the parent's run (an interrupt, a failed peer)
            if proc.is_alive():
                proc.terminate()
    _raise_rank_error(_drain(results, got))
    return got[0]


def _terminated(signum, frame):
    raise SystemExit(128 + signum)


def _raise_rank_error(got: dict) -> None:
    errors = [out for out in got.values() if isinstance(out, RankError)]
    if errors:
        raise EngineError(errors[0].message)


def _drain(results, got: dict) -> dict:
    """`got` (rank -> result) with the reports waiting in `results` added."""
    while not results.empty():
        rank, out = results.get()
        got[rank] = out
    return got


def serve(rank: int, world: int, device: str, card, options: dict, prompt: int, output: int, batch: int) -> dict:
    """A rank of `engine run --tp`: build the engine's shard, warm up, serve the measured requests (bench)."""
    from roofline.engine.engine import LLMEngine
    from roofline.engine.measure.bench import measure_request

    eng = LLMEngine(card, device=device, tp=world, rank=rank, **options)
    measure_request(eng, prompt, min(output, 2), batch, seed=1)  # warm-up: allocator, kernels per shape
    return {**measure_request(eng, prompt, output, batch, seed=0).to_dict(), "mode": eng.mode}


def measure_steps(rank: int, world: int, device: str, card, options: dict, points: list[dict], repeats: int) -> list:
    """A rank timing engine steps (bench.measure_both) at `points` [{phase, batch, context, new_tokens}]:
    [(host seconds, device seconds, mode)] per point."""
    from roofline.engine.engine import LLMEngine
    from roofline.engine.measure.bench import measure_both

    eng = LLMEngine(card, device=device, tp=world, rank=rank, **options)
    return [measure_both(eng, p["phase"], p["batch"], p["context"], p["new_tokens"], repeats) for p in points]
