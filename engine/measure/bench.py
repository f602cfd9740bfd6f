"""Measure engine steps over a grid: the records calibration fits to.

    from roofline.engine.measure.bench import bench
    df = bench(cards=["llama-3.1-8b"], layers=[2], phases=["prefill", "decode"], batches=[1, 8], contexts=[0, 512])

One record per (card, layers, dtype, phase, batch, context, new tokens): seconds per step (median of `repeats`),
with the device, its name and the torch version. Prefill: `batch` sequences each run `new_tokens` on top of
`context` cached tokens in one step. Decode: `batch` sequences at `context` tokens run one token each.
"""

from __future__ import annotations

import itertools
import random
import statistics
import time
from typing import Iterable

import torch
from roofline.engine.core.records import RequestTiming, StepRecord
from roofline.engine.core.scheduler import Scheduled
from roofline.engine.core.sequence import Sequence, Status
from roofline.engine.device import name as device_name
from roofline.engine.engine import DTYPES, LLMEngine
from roofline.engine.model.modules import matrix_vector_rows as _rows
from roofline.engine.model.transformer import EngineError


def _prime(eng: LLMEngine, batch: int, context: int, new_tokens: int, room: int) -> list[Sequence]:
    """`batch` sequences holding `context` cached tokens and `new_tokens` to run (so the step ends each sequence and
    samples, as a served step does), with blocks for `room` tokens. The context is marked computed without running
    it: a step's cost does not depend on the cached K/V values (the pool holds whatever it held), and priming
    batch 32 x 2048 tokens would cost more than the grid itself."""
    vocab = eng.card.architecture.vocab_size
    if eng.blocks.blocks_needed(room) * batch > eng.blocks.num_free:
        pool = len(eng.blocks.ref_count) * eng.cfg.block_size
        raise EngineError(f"{batch} sequences of {room} tokens need more than the KV pool's {pool} tokens; build the "
                          f"engine with a larger max_kv_bytes")
    seqs = []
    for b in range(batch):
        seq = Sequence([(b * 7919 + i * 104729) % vocab for i in range(context + new_tokens)], 1)
        seq.state_slot = b if eng.scheduler.uses_state else None
        eng.blocks.grow(seq, room)
        seq.status = Status.RUNNING
        seq.num_computed_tokens = context
        seqs.append(seq)
    return seqs


def _time_step(eng: LLMEngine, seqs: list[Sequence], n: int, repeats: int, advance: bool,
               span_s: float = 0.0) -> tuple[float, float]:
    """Median host and device seconds of `repeats` steps of `n` tokens per sequence, or of more until they span
    `span_s` seconds (at most GRAPH_MAX_REPEATS), each run and sampled as `LLMEngine.step` does; `advance` appends
    the sampled tokens (decode), else the same step repeats (prefill)."""
    times, device = [], []
    while len(times) < repeats or (sum(times) < span_s and len(times) < GRAPH_MAX_REPEATS):
        seconds, sampled = eng.execute([Scheduled(s, n) for s in seqs])
        times.append(seconds)
        device.append(eng.last_device_seconds)
        if advance:
            for s in seqs:
                s.num_computed_tokens += n
                s.token_ids.append(sampled[s.seq_id])
    return statistics.median(times), statistics.median(device)


# A step at least this long is timed once after its warm-up, and in one pass only: it spans hundreds of scheduler
# ticks, so a burst of a shared machine moves it little, while repeating the largest points dominated the quick
# grid's time (docs/engine.md).
LONG_STEP_S = 0.3
# A decode step replayed as a CUDA graph (~1 ms on an H200) is repeated until its steps span GRAPH_SPAN_S, up to
# GRAPH_MAX_REPEATS: the median of three such steps disagreed by up to 25% between neighbouring grid points of one
# calibration, in CUDA-event time as in host time (docs/calibration.md, "NVIDIA H200"); an eager or CPU step of tens
# of ms keeps its three.
GRAPH_SPAN_S = 0.02
GRAPH_MAX_REPEATS = 24
# The grid's KV pool, at most (the engine sizes it from free memory below that): a GPU grid's whole-depth card holds
# 32 decode sequences of 512 + 26 tokens, 2.0 GB for llama-3.2-3b's 28 layers in bf16 (114,688 bytes per token).
GRID_KV_BYTES = {"cpu": 2e9, "cuda": 8e9}


def measure(eng: LLMEngine, phase: str, batch: int, context: int, new_tokens: int, repeats: int = 3) -> float:
    """Median host seconds of `repeats` steps (one, if the warm-up step took LONG_STEP_S or more; more for a decode
    step replayed as a CUDA graph, GRAPH_SPAN_S); the engine's cache is released afterwards."""
    return measure_both(eng, phase, batch, context, new_tokens, repeats)[0]


def measure_both(eng: LLMEngine, phase: str, batch: int, context: int, new_tokens: int,
                 repeats: int = 3) -> tuple[float, float, str]:
    """`measure`'s host seconds, the device seconds of the same steps (CUDA events; the host's on the CPU) and the
    mode the steps ran in (graphs / static / eager)."""
    n = new_tokens if phase == "prefill" else 1
    steps = max(repeats, GRAPH_MAX_REPEATS) if eng.device.type == "cuda" else repeats  # decode tokens to hold
    seqs = _prime(eng, batch, context, n, context + n * (1 if phase == "prefill" else steps + 2))
    try:
        warm, _ = _time_step(eng, seqs, n, 1, advance=phase == "decode")  # allocator, kernels, graph capture
        span = GRAPH_SPAN_S if eng.last_mode == "graphs" else 0.0
        host, device = _time_step(eng, seqs, n, 1 if warm >= LONG_STEP_S else repeats, advance=phase == "decode",
                                  span_s=span)
        return host, device, eng.last_mode
    finally:
        for s in seqs:
            eng.blocks.free_seq(s)


def measure_request(eng: LLMEngine, prompt: int, output: int, batch: int, seed: int = 0) -> RequestTiming:
    """Serve `batch` requests of `prompt` random tokens -> `output` tokens together through the scheduler.
    TTFT = the prefill step(s), which sample the first token; ITL = mean decode step; in host seconds, and in device
    seconds under `device` (CUDA events; the host's figures on the CPU). `tokens`: the generated ids per request;
    `decode_modes`: decode steps per mode (graphs / static / eager)."""
    rng = random.Random(seed)
    vocab = eng.card.architecture.vocab_size
    eng.stats.clear()
    seqs = [eng.add_request([rng.randrange(vocab) for _ in range(prompt)], output) for _ in range(batch)]
    while not eng.scheduler.idle:
        eng.step()
    prefill = [s for s in eng.stats if s.prefill_tokens]
    decode = [s for s in eng.stats if not s.prefill_tokens]
    modes: dict[str, int] = {}
    for s in decode:
        modes[s.mode] = modes.get(s.mode, 0) + 1
    return RequestTiming(**_request_times(prefill, decode, batch * prompt, "seconds"),
                         device=RequestTiming(**_request_times(prefill, decode, batch * prompt, "device_seconds")),
                         tokens=[s.output_ids for s in seqs], decode_modes=modes)


def _request_times(prefill: list, decode: list, prompt_tokens: int, key: str) -> dict:
    """TTFT, ITL (s) and rates (tokens/s) from the steps' `key` seconds."""
    t_pre = sum(getattr(s, key) for s in prefill)
    itl = sum(getattr(s, key) for s in decode) / max(len(decode), 1)
    return {"ttft_s": t_pre, "itl_s": itl,
            "prefill_tok_s": prompt_tokens / t_pre, "decode_tok_s": 1.0 / itl if itl else float("nan")}


def run_grid(points: list[dict], vocab: int, device: str, dtype: str, advance=None, store=None,
             repeats: int = 3, passes: int = 1, pass_log: dict | None = None,
             graphs: bool | None = None) -> list[StepRecord]:
    """Measure each grid point {card, layers, phase, batch, context, new_tokens}: the median of `repeats` steps after
    a warm-up step (`measure`), in each of `passes` passes over the whole grid; a point keeps its fastest pass. A
    point's passes are a whole pass apart, so a slow spell of the host has to last a pass to move it (eager GPU
    steps are host-bound: docs/calibration.md, "NVIDIA H200, a whole-depth card"). One engine per card and layer
    count at a time, built again in each pass."""
    by_model: dict[tuple, list[int]] = {}
    for i, p in enumerate(points):
        by_model.setdefault((p["card"], p["layers"]), []).append(i)
    records: dict[int, StepRecord] = {}
    for pass_ in range(passes):
        for (card, layers), indices in by_model.items():
            todo = [i for i in indices if not pass_ or records[i].seconds < LONG_STEP_S]
            if todo:
                _measure_model(records, points, todo, store.model(card) if store is not None else card, layers,
                               vocab, device, dtype, repeats, graphs, pass_log)
            if advance:
                for _ in indices:
                    advance()
    return [records[i] for i in range(len(points))]


def _measure_model(records: dict, points: list[dict], todo: list[int], card, layers: int, vocab: int, device: str,
                   dtype: str, repeats: int, graphs: bool | None, pass_log: dict | None) -> None:
    """One pass over one model's points `todo`: each keeps its fastest pass in `records`; `pass_log` gets every
    pass's seconds per point (calibrate compares the passes)."""
    eng = LLMEngine(card, layers=layers, vocab=vocab, dtype=dtype, device=device, max_num_seqs=64,
                    max_step_tokens=2048, graphs=graphs,
                    max_kv_bytes=GRID_KV_BYTES["cuda" if device.startswith("cuda") else "cpu"])
    for i in todo:
        p = points[i]
        seconds, device_s, mode = measure_both(eng, p["phase"], p["batch"], p["context"], p["new_tokens"], repeats)
        if pass_log is not None:
            pass_log.setdefault(i, []).append(seconds)
        if i not in records or seconds < records[i].seconds:
            records[i] = StepRecord(**p, vocab=vocab, dtype=dtype, seconds=seconds, device_seconds=device_s,
                                    mode=mode, device=device, device_name=device_name(device),
                                    torch=str(torch.__version__))


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
            seconds, device_s, mode = measure_both(eng, phase, batch, context, chunk, repeats)
            tokens = batch * (chunk if phase == "prefill" else 1)
            records.append({"device": device, "device_name": name, "torch": str(torch.__version__), "dtype": dtype,
                            "card": card, "model": eng.card.name, "layers": eng.card.architecture.num_layers,
                            "vocab": eng.card.architecture.vocab_size, "phase": phase, "batch": batch,
                            "context": context, "new_tokens": chunk if phase == "prefill" else 1,
                            "seconds": seconds, "device_seconds": device_s, "mode": mode,
                            "tokens_per_s": tokens / seconds, "time": time.time()})
            if progress:
                progress()
        del eng
    return pd.DataFrame.from_records(records)


def matrix_vector_rows(device: str, dtype: str) -> int:
    """Rows up to which the engine's linears stream like a matrix-vector product on `device` in `dtype`."""
    return _rows(device, DTYPES[dtype])
