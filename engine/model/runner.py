"""Runs one scheduled step: flatten the chunks, build the step metadata, forward, sample."""

from __future__ import annotations

import contextlib

import torch
from roofline.engine.core.scheduler import Scheduled
from roofline.engine.model.attention import PagedKV, StepMeta
from roofline.engine.model.mamba import Mamba2
from roofline.engine.model.transformer import Transformer
from torch.nn.attention import SDPBackend, sdpa_kernel


def make_caches(model: Transformer, num_blocks: int, block_size: int, state_slots: int, dtype, device,
                kv_int8: bool) -> list:
    """One cache per block: paged K/V for attention, recurrent state for Mamba-2, None for FFN-only layers."""
    caches = []
    for block, lay in zip(model.blocks, model.layers_spec):
        if lay.is_attention:
            att = block.mixer  # its KV heads: the card's, or this rank's share under tensor parallelism
            caches.append(PagedKV(num_blocks, block_size, att.kv_heads, att.head_dim, dtype, device, kv_int8,
                                  values=not lay.k_eq_v))
        elif isinstance(block.mixer, Mamba2):
            caches.append(block.mixer.make_state(state_slots, device, dtype))
        else:
            caches.append(None)
    return caches


def step_meta(work: list[Scheduled], block_size: int, device) -> tuple[torch.Tensor, StepMeta]:
    """Token ids [T] and metadata of a step from the scheduler's chunks."""
    ids, positions, q_starts, q_lens, ctx_lens = [], [], [], [], []
    width = max(len(w.seq.block_table) for w in work)
    tables = torch.zeros(len(work), width, dtype=torch.long)
    for i, w in enumerate(work):
        start = w.seq.num_computed_tokens
        q_starts.append(len(ids))
        q_lens.append(w.num_tokens)
        ctx_lens.append(start)
        ids.extend(w.seq.token_ids[start:start + w.num_tokens])
        positions.extend(range(start, start + w.num_tokens))
        tables[i, : len(w.seq.block_table)] = torch.tensor(w.seq.block_table)
    pos = torch.tensor(positions, dtype=torch.long)
    rows = torch.repeat_interleave(torch.arange(len(work)), torch.tensor(q_lens))
    slots = tables[rows, pos // block_size] * block_size + pos % block_size
    meta = StepMeta(pos.to(device), slots.to(device), tables.to(device), q_starts, q_lens, ctx_lens, block_size,
                    [w.seq.state_slot for w in work], tables)
    return torch.tensor(ids, dtype=torch.long, device=device), meta


def sample(logits: torch.Tensor, temperatures: list[float], generators: list[torch.Generator | None]) -> list[int]:
    """Greedy where temperature is 0, else a draw from softmax(logits / T)."""
    out = logits.argmax(dim=-1).tolist()  # one call for every row; sampled rows are replaced below
    for i, (row, t, gen) in enumerate(zip(logits, temperatures, generators)):
        if t > 0:
            probs = torch.softmax(row.float() / t, dim=-1)
            out[i] = int(torch.multinomial(probs.cpu(), 1, generator=gen))
    return out


# On CUDA, eager steps keep to attention backends without per-shape set-up: cuDNN's fused attention (one of PyTorch's
# defaults on Hopper) builds an execution plan for each new sequence length, tens of milliseconds on an H100
# (docs/calibration.md, "NVIDIA H100, a second session"), which a server's variable-length kernels never pay.
EAGER_ATTENTION = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def attention_backends(device):
    """The context eager steps run in: EAGER_ATTENTION on CUDA, PyTorch's defaults elsewhere."""
    return sdpa_kernel(EAGER_ATTENTION) if torch.device(device).type == "cuda" else contextlib.nullcontext()


@torch.inference_mode()
def run_step(model: Transformer, work: list[Scheduled], caches: list, block_size: int, device) -> torch.Tensor | None:
    """Forward the step; logits [S', vocab] for the chunks that reach their sequence's end (in `work` order)."""
    for w in work:  # a sequence (re)starting from scratch starts from a zero recurrent state
        if w.seq.state_slot is not None and w.seq.num_computed_tokens == 0:
            for cache in caches:
                if hasattr(cache, "reset"):
                    cache.reset(w.seq.state_slot)
    ids, meta = step_meta(work, block_size, device)
    with attention_backends(device):
        hidden = model(ids, meta, caches)
    last = [q0 + n - 1 for w, q0, n in zip(work, meta.q_starts, meta.q_lens) if w.samples]
    return model.logits(hidden[last]) if last else None
