"""Measure engine steps over a grid: the records calibration fits to.

    from engine.bench import bench
    df = bench(cards=["llama-3.1-8b"], layers=[2], phases=["prefill", "decode"], batches=[1, 8], contexts=[0, 512])

One record per (card, layers, dtype, phase, batch, context, new tokens): seconds per step (median of `repeats`),
with the device, its name and the torch version. Prefill: `batch` sequences each run `new_tokens` on top of
`context` cached tokens in one step. Decode: `batch` sequences at `context` tokens run one token each.
"""

from __future__ import annotations

import itertools
import statistics
import time
from typing import Iterable

import torch

from .engine import LLMEngine
from .runner import run_step
from .scheduler import Scheduled
from .sequence import Sequence, Status


def device_name(device: str) -> str:
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    from roofline.host import _cpuinfo

    return _cpuinfo()[0]


def _prime(eng: LLMEngine, batch: int, context: int, new_tokens: int) -> list[Sequence]:
    """`batch` sequences holding `context` computed tokens (prefilled untimed), with room for `new_tokens` more."""
    vocab = eng.card.architecture.vocab_size
    seqs = []
    for b in range(batch):
        seq = Sequence([(b * 7919 + i * 104729) % vocab for i in range(context + new_tokens + 8)], 1)
        seq.state_slot = b if eng.scheduler.uses_state else None
        eng.blocks.grow(seq, len(seq))
        seq.status = Status.RUNNING
        seqs.append(seq)
    step = max(eng.cfg.max_step_tokens, 1)
    done = 0
    while done < context:  # untimed prefill of the context, in chunks
        n = min(step, context - done)
        run_step(eng.model, [Scheduled(s, n) for s in seqs], eng.caches, eng.cfg.block_size, eng.device)
        for s in seqs:
            s.num_computed_tokens += n
        done += n
    return seqs


def _time_step(eng: LLMEngine, seqs: list[Sequence], n: int, repeats: int, advance: bool) -> float:
    times = []
    for _ in range(repeats):
        t = eng._now()
        run_step(eng.model, [Scheduled(s, n) for s in seqs], eng.caches, eng.cfg.block_size, eng.device)
        times.append(eng._now() - t)
        if advance:
            for s in seqs:
                s.num_computed_tokens += n
    return statistics.median(times)


def measure(eng: LLMEngine, phase: str, batch: int, context: int, new_tokens: int, repeats: int = 3) -> float:
    """Median seconds of one step; the engine's cache is released afterwards."""
    n = new_tokens if phase == "prefill" else 1
    seqs = _prime(eng, batch, context, n * (1 if phase == "prefill" else repeats + 1))
    try:
        _time_step(eng, seqs, n, 1, advance=phase == "decode")  # warm-up: allocator, kernels
        return _time_step(eng, seqs, n, repeats, advance=phase == "decode")
    finally:
        for s in seqs:
            eng.blocks.free_seq(s)


def bench(cards: Iterable[str], layers: Iterable[int | None] = (None,), phases=("prefill", "decode"),
          batches=(1,), contexts=(0,), new_tokens=(128,), dtypes=("fp32",), device: str = "cpu",
          vocab: int | None = None, repeats: int = 3, progress=None, **engine_options):
    """Run the grid; returns a pandas DataFrame of records (see the module docstring)."""
    import pandas as pd

    records = []
    name = device_name(device)
    for card, n_layers, dtype in itertools.product(cards, layers, dtypes):
        eng = LLMEngine(card, layers=n_layers, vocab=vocab, dtype=dtype, device=device,
                        max_num_seqs=max(batches), **engine_options)
        for phase, batch, context, chunk in itertools.product(phases, batches, contexts, new_tokens):
            if phase == "decode" and chunk != new_tokens[0]:
                continue  # decode runs one token: the chunk axis does not apply
            seconds = measure(eng, phase, batch, context, chunk, repeats)
            tokens = batch * (chunk if phase == "prefill" else 1)
            records.append({"device": device, "device_name": name, "torch": str(torch.__version__), "dtype": dtype,
                            "card": card, "model": eng.card.name, "layers": eng.card.architecture.num_layers,
                            "vocab": eng.card.architecture.vocab_size, "phase": phase, "batch": batch,
                            "context": context, "new_tokens": chunk if phase == "prefill" else 1,
                            "seconds": seconds, "tokens_per_s": tokens / seconds, "time": time.time()})
            if progress:
                progress()
        del eng
    return pd.DataFrame.from_records(records)
