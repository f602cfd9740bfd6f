"""`roofline validate --engine-shapes`: serve shapes the calibration never ran in the engine, predict the same
shapes, and report the error per metric and per layer family.

The prediction replays the engine's own schedule (`served_steps`): a batch whose prompts exceed the step budget
prefills in several chunked steps, some of which already decode the first sequences, and the engine's ITL is the
mean of the pure decode steps that follow (whose batch shrinks as sequences finish). Each replayed step is timed
by the one step pipeline (`timed_step`).
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import replace

from roofline.calibrate.calibration import engine_quant
from roofline.calibrate.fit import error_summary
from roofline.calibrate.grids import FINE_EXPERTS, QUICK
from roofline.cards.hardware import HardwareCard
from roofline.cards.model import ModelCard
from roofline.cards.store import CardStore
from roofline.engine.core.block_manager import BlockManager
from roofline.engine.core.mixers import ENGINE_MIXERS
from roofline.engine.core.records import RequestTiming
from roofline.engine.core.scheduler import Scheduler
from roofline.engine.core.sequence import Sequence
from roofline.perf.efficiency import expected_efficiency
from roofline.perf.ops import Step, step_ops
from roofline.perf.request import timed_step
from roofline.perf.workload import make_workload
from roofline.sizing.layers import resolve_layers
from roofline.sizing.params import weight_bytes
from roofline.sizing.reduce import reduce_card

STEP_TOKENS = 2048  # the engine's chunked-prefill budget, as serving engines run (calibrate measures up to 2048)
KV_POOL_BYTES = 2e9  # each validation engine's KV pool: room for batch 32 x the longest prompt on one layer
METRICS = {"ttft": "ttft_s", "itl": "itl_s", "prefill_tok_s": "prefill_tok_s", "decode_tok_s": "decode_tok_s"}
# Shapes never used by `calibrate` (other cards, vocab and request sizes): dense with QKV bias, MoE, sliding window
# with sandwich norms, sliding window on every layer.
FRESH = dict(cards=["qwen2.5-7b", "mixtral-8x7b", "gemma-3-27b", "mistral-7b"], layers=1, vocab=3000,
             batches=[1, 4, 16, 32], prompts=[48, 160], output=8, repeats=3, passes=2)
# `--random N`: batch and prompt drawn log-uniformly over these ranges (as many shapes per doubling at small sizes,
# where steps are overhead- and bandwidth-bound, as at large, where they are compute-bound)
RANDOM_BATCHES = (1, 32)
RANDOM_PROMPTS = (16, 1024)
# a drawn card's engine weights (at the engine dtype) stay under this: the 2-core / 23 GB CPU hosts this runs on
# hold it beside the KV pool and the calibration's headroom; larger cards are left out of the draw
MAX_WEIGHT_BYTES = 7e9
RECURRENT = ("mamba1", "mamba2", "deltanet", "parallel")


def family(card: ModelCard) -> str:
    """The layer family a card's layers belong to: hybrid (any recurrent mixer: Mamba / DeltaNet), moe-fine /
    moe-coarse (any MoE FFN), sliding (any sliding or chunked attention), else dense."""
    layers = resolve_layers(card.architecture)
    if any(lay.mixer in RECURRENT for lay in layers):
        return "hybrid"
    if any(lay.ffn == "moe" for lay in layers):
        return "moe-fine" if card.architecture.moe.num_experts >= FINE_EXPERTS else "moe-coarse"
    if any(lay.mixer in ("sliding", "chunked") for lay in layers):
        return "sliding"
    return "dense"


def engine_runs(card: ModelCard) -> bool:
    """The engine builds this card (no MLA, every mixer one it implements)."""
    arch = card.architecture
    return arch.mla is None and {lay.mixer for lay in resolve_layers(arch)} <= ENGINE_MIXERS


def covering_layers(card: ModelCard) -> int:
    """1, or for a recurrent hybrid the fewest leading layers that hold every (mixer, FFN) kind of its pattern (a
    hybrid cut to one layer may be Mamba alone)."""
    layers = resolve_layers(card.architecture)
    if not any(lay.mixer in RECURRENT for lay in layers):
        return 1
    kinds, seen = {(lay.mixer, lay.ffn) for lay in layers}, set()
    for lay in layers:
        seen.add((lay.mixer, lay.ffn))
        if seen == kinds:
            return lay.index + 1
    return len(layers)


def grid_cards() -> set[str]:
    """Cards the quick calibration runs: never drawn, so validation judges on cards the fit never saw."""
    return {m[0] for m in QUICK["models"]}


def candidate_cards(st: CardStore, vocab: int, dtype: str) -> dict[str, list[tuple[str, int]]]:
    """family -> [(card, layers)] over the bundled cards the engine runs, outside the quick grid, whose reduced
    weights fit MAX_WEIGHT_BYTES; in name order (the draw is reproducible)."""
    out: dict[str, list[tuple[str, int]]] = {}
    skip = grid_cards()
    for card in sorted(st.all("models"), key=lambda c: c.name):
        if card.name in skip or st.origin("models", card.name) != "bundled" or not engine_runs(card):
            continue
        layers = covering_layers(card)
        small = reduce_card(card, layers, vocab)
        if sum(weight_bytes(small, dtype).values()) > MAX_WEIGHT_BYTES:
            continue
        out.setdefault(family(small), []).append((card.name, layers))
    return out


def _log_uniform(rng: random.Random, lo: int, hi: int) -> int:
    return min(hi, int(math.exp(rng.uniform(math.log(lo), math.log(hi + 1)))))


def random_shapes(st: CardStore, n: int, seed: int, vocab: int, dtype: str) -> list[dict]:
    """`n` shapes drawn with `seed`: a family uniformly (so each family gets about n / families shapes), a card of
    it uniformly, batch and prompt log-uniformly over RANDOM_BATCHES / RANDOM_PROMPTS."""
    rng = random.Random(seed)
    pool = candidate_cards(st, vocab, dtype)
    families = sorted(pool)
    shapes: list[dict] = []
    seen: set[tuple] = set()
    while len(shapes) < n:
        card, layers = rng.choice(pool[rng.choice(families)])
        shape = dict(card=card, layers=layers, batch=_log_uniform(rng, *RANDOM_BATCHES),
                     prompt=_log_uniform(rng, *RANDOM_PROMPTS))
        key = tuple(shape.values())
        if key not in seen:  # a repeated shape would be served (and counted) once
            seen.add(key)
            shapes.append(shape)
    return shapes


def grid_shapes(spec: dict) -> list[dict]:
    """Every (card, batch, prompt) of a fixed spec, at spec["layers"] layers."""
    return [dict(card=c, layers=spec["layers"], batch=b, prompt=p)
            for c in spec["cards"] for b in spec["batches"] for p in spec["prompts"]]


def engine_points(hw: HardwareCard, st: CardStore, device: str, dtype: str, spec: dict, advance,
                  shapes: list[dict] | None = None) -> list[dict]:
    """Serve each shape (default: `grid_shapes(spec)`) in the engine in each of `spec["passes"]` passes over a
    card's shapes; predict the same shape on `hw`. One dict per shape: card, family, measured_* and predicted_*
    per METRICS key."""
    from roofline.engine import load

    eng_mod = load()
    shapes = grid_shapes(spec) if shapes is None else shapes
    by_card: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for s in shapes:
        by_card.setdefault((s["card"], s["layers"]), []).append((s["batch"], s["prompt"]))
    points = []
    eff = expected_efficiency(hw)
    for (name, layers), pairs in by_card.items():
        full = st.model(name)  # a card with a smaller vocabulary keeps its own (it is not enlarged)
        card = reduce_card(full, layers, min(spec["vocab"], full.architecture.vocab_size))
        try:
            eng = eng_mod.engine.LLMEngine(card, dtype=dtype, device=device, max_num_seqs=max(b for b, _ in pairs),
                                           max_step_tokens=STEP_TOKENS, max_kv_bytes=KV_POOL_BYTES)
        except eng_mod.EngineError as err:
            from roofline.errors import RooflineError

            raise RooflineError(str(err)) from None
        got = _serve_shapes(eng_mod.bench, eng, pairs, spec, advance)
        for (batch, prompt), run in got.items():
            p = predict_served(card, hw, batch, prompt, spec["output"], dtype, eff)
            points.append({"card": name, "layers": layers, "family": family(card), "batch": batch, "prompt": prompt,
                           "output": spec["output"],
                           **{f"measured_{k}": getattr(run, v) for k, v in METRICS.items()},
                           **{f"predicted_{k}": getattr(p, v) for k, v in METRICS.items()}})
        del eng
    return points


def served_steps(batch: int, prompt: int, output: int, step_tokens: int = STEP_TOKENS) -> list[list[tuple[int, int]]]:
    """The engine scheduler's steps for `batch` requests of `prompt` -> `output` tokens, replayed without a model:
    per step, (new tokens, cached context) of each scheduled sequence."""
    blocks = BlockManager(batch * -(-(prompt + output) // 16) + 1, 16, prefix_caching=False)
    sched = Scheduler(blocks, max_num_seqs=batch, max_step_tokens=step_tokens)
    for _ in range(batch):
        sched.add(Sequence([0] * prompt, output))
    steps = []
    while not sched.idle:
        work = sched.schedule()
        steps.append([(w.num_tokens, w.seq.num_computed_tokens) for w in work])
        sched.finish_step(work, {w.seq.seq_id: 0 for w in work if w.samples})
    return steps


def step_seconds(card: ModelCard, hw: HardwareCard, work: list[tuple[int, int]], prompt: int, dtype: str,
                 eff) -> float:
    """Predicted seconds of one replayed step: the weight matmuls over all its T tokens as one GEMM (the engine
    flattens the step), each sequence's attention core / scan over its own (new tokens, context), and the lm_head
    over the sequences that sample."""
    wl = make_workload(prompt_tokens=prompt, output_tokens=2, quant=engine_quant(dtype), kv_quant=dtype)
    tokens = sum(n for n, _ in work)
    prefill = any(ctx < prompt for _, ctx in work)
    phase = "prefill" if prefill else "decode"
    whole = step_ops(card, hw, Step(phase, tokens, 1, 0), wl.quant, wl.kv_quant)
    per_seq = [step_ops(card, hw, Step("prefill" if ctx < prompt else "decode", n, 1, ctx), wl.quant, wl.kv_quant)
               for n, ctx in work]
    samplers = sum(1 for n, ctx in work if ctx + n >= prompt)
    head = [o for o in step_ops(card, hw, Step("decode", 1, max(samplers, 1), 0), wl.quant, wl.kv_quant)
            if o.op_class == "lm_head"]
    ops = []
    for i, op in enumerate(whole):
        if op.op_class == "lm_head":
            continue
        if not op.gemm and op.op_class in ("attention", "mamba"):  # per-sequence work, summed over the step
            parts = [seq_ops[i] for seq_ops in per_seq]
            op = replace(op, flops=sum(o.flops for o in parts), act_bytes=sum(o.act_bytes for o in parts),
                         kv_read_bytes=sum(o.kv_read_bytes for o in parts),
                         kv_write_bytes=sum(o.kv_write_bytes for o in parts), scores=sum(o.scores for o in parts),
                         kernels=_kernels(parts, work))
        ops.append(op)
    # a decode step as itself (one token on each sequence's cache), so the launch cost follows what the engine
    # replays as a CUDA graph; its T tokens are the batch either way
    step = Step("decode", 1, len(work), max(ctx for _, ctx in work)) if not prefill and tokens == len(work) \
        else Step(phase, tokens, 1, 0)
    return float(timed_step(card, hw, step, wl, eff, ops + (head if samplers else []), sequences=len(work)).total_s)


def _kernels(parts: list, work: list[tuple[int, int]]) -> int:
    """Launches of a per-sequence op in the engine: each prefill chunk runs its own; one-token sequences run
    together in one batched call."""
    chunks = sum(o.kernels for o, (n, _) in zip(parts, work) if n > 1)
    singles = [o.kernels for o, (n, _) in zip(parts, work) if n == 1]
    return chunks + (singles[0] if singles else 0)


def predict_served(card: ModelCard, hw: HardwareCard, batch: int, prompt: int, output: int, dtype: str,
                   eff=None) -> RequestTiming:
    """TTFT, ITL and tok/s as `bench.measure_request` reads them off the engine: TTFT = every step that runs
    prompt tokens (the last samples the first token); ITL = the mean pure decode step."""
    eff = eff or expected_efficiency(hw)
    pre, dec = [], []
    for work in served_steps(batch, prompt, output):
        seconds = step_seconds(card, hw, work, prompt, dtype, eff)
        (pre if any(n > 1 or ctx < prompt for n, ctx in work) else dec).append(seconds)
    t_pre = sum(pre)
    itl = sum(dec) / max(len(dec), 1)
    return RequestTiming(ttft_s=t_pre, itl_s=itl, prefill_tok_s=batch * prompt / t_pre,
                         decode_tok_s=1.0 / itl if itl else float("nan"))


def _serve_shapes(bench, eng, pairs: list[tuple[int, int]], spec: dict, advance) -> dict[tuple[int, int], RequestTiming]:
    """(batch, prompt) -> its timing, each phase from its faster pass."""
    got: dict[tuple[int, int], RequestTiming] = {}
    for pass_ in range(spec["passes"]):
        for batch, prompt in pairs:
            run = median_request(bench, eng, prompt, spec["output"], batch, spec["repeats"], pass_)
            got[batch, prompt] = faster(got.get((batch, prompt)), run)
            advance()
    return got


def median_request(bench, eng, prompt: int, output: int, batch: int, repeats: int, pass_: int) -> RequestTiming:
    """Median per metric over `repeats` served runs, or one run where a step averages bench.LONG_STEP_S or more (as
    calibration times long steps); the first pass serves one warm-up request before them (kernels for these
    shapes). Every run has its own random prompts, so none is served from the prefix cache."""
    seed = ((batch * 1000 + prompt) * 10 + pass_) * 100
    first = bench.measure_request(eng, prompt, output, batch, seed=seed)
    long = (first.ttft_s + (output - 1) * first.itl_s) / output >= bench.LONG_STEP_S
    runs = [] if pass_ == 0 else [first]  # the first pass's first run is its warm-up
    runs += [bench.measure_request(eng, prompt, output, batch, seed=seed + r + 1)
             for r in range((1 if long else repeats) - len(runs))]
    return RequestTiming(**{k: statistics.median(getattr(run, k) for run in runs)
                            for k in ("ttft_s", "itl_s", "prefill_tok_s", "decode_tok_s")})


def faster(kept: RequestTiming | None, run: RequestTiming) -> RequestTiming:
    """Each phase from the pass that ran it faster (prefill: TTFT, prefill tok/s; decode: ITL, decode tok/s), as
    calibration keeps each grid point's faster pass: a slow spell of a shared CPU must recur on every pass to move
    a point."""
    if kept is None:
        return run
    pre = min(kept, run, key=lambda r: r.ttft_s)
    dec = min(kept, run, key=lambda r: r.itl_s)
    return RequestTiming(ttft_s=pre.ttft_s, prefill_tok_s=pre.prefill_tok_s, itl_s=dec.itl_s,
                         decode_tok_s=dec.decode_tok_s)


def summarize_points(points: list[dict]) -> dict:
    """Per METRICS key: n, median and p90 absolute % error, bias."""
    return {k: error_summary([p[f"predicted_{k}"] for p in points], [p[f"measured_{k}"] for p in points])
            for k in METRICS}


def summarize_families(points: list[dict]) -> dict[str, dict]:
    """family -> summarize_points over that family's points."""
    fams = sorted({p["family"] for p in points})
    return {f: summarize_points([p for p in points if p["family"] == f]) for f in fams}
