"""`roofline validate --serving`: the micro-engine serves a Poisson trace and a closed loop for real (wall-clock
arrivals into LLMEngine), the simulator predicts the same traces with the same scheduler limits and pool; the
error of TTFT and ITL p50/p90 and of throughput."""

from __future__ import annotations

import random
import time

import numpy as np

from roofline.calibrate.calibration import engine_quant
from roofline.perf.efficiency import expected_efficiency
from roofline.perf.serving.deployment import Fleet
from roofline.perf.serving.policy import ServingPolicy
from roofline.perf.serving.replica import ReplicaSetup
from roofline.perf.serving.simulator import ClosedLoop, simulate
from roofline.perf.serving.workload import Request, open_loop, parse_lengths
from roofline.perf.workload import make_workload
from roofline.sizing.reduce import reduce_card

# 64 requests per trace: with 24, the p90 is the third-slowest request, a single slow step moves it. Cut to two
# layers and a 3,000-token vocabulary so that a CPU serves it in a minute or two.
SPEC = dict(model="qwen2.5-7b", layers=2, vocab=3000, max_num_seqs=16, step_tokens=256, requests=64,
            prompt="uniform:32,192", output="uniform:8,24", clients=6, seed=0)
# On a GPU the cut's steps are a millisecond or two of host-bound launches, nothing a served model looks like
# (docs/serving.md, "validate --serving on an H100"): the whole model (None: every layer, its own vocabulary) with
# longer requests, under a budget of 2,048 tokens per step; ~40 s on an H100.
GPU_SPEC = {**SPEC, "layers": None, "vocab": None, "step_tokens": 2048, "prompt": "uniform:128,768",
            "output": "uniform:32,128", "clients": 8}


def spec_for(device: str) -> dict:
    """validate --serving's spec on `device`: the whole model on CUDA, the two-layer cut elsewhere."""
    return GPU_SPEC if device.startswith("cuda") else SPEC


def _serve_real(eng, reqs: list[Request], clients: int | None) -> dict:
    """Serve `reqs` in real time (arrivals by the wall clock; a closed loop's next request when one completes)."""
    rng = random.Random(0)
    vocab = eng.card.architecture.vocab_size
    pending = list(reqs) if clients is None else []
    sizes = iter(reqs)
    if clients is not None:
        pending = [Request(0.0, r.prompt_tokens, r.output_tokens) for r in (next(sizes) for _ in range(clients))]
    t0, live, ttft, gaps, e2e, done_tokens = time.perf_counter(), {}, [], [], [], 0
    while pending or not eng.scheduler.idle:
        now = time.perf_counter() - t0
        while pending and pending[0].arrival_s <= now:
            r = pending.pop(0)
            seq = eng.add_request([rng.randrange(vocab) for _ in range(r.prompt_tokens)], r.output_tokens)
            live[seq.seq_id] = [seq, r.arrival_s, None, None]
        if eng.scheduler.idle:
            time.sleep(max(0.0, pending[0].arrival_s - now))
            continue
        finished = eng.step()
        end = time.perf_counter() - t0
        for rec in live.values():
            if rec[2] is None and rec[0].output_ids:  # first token this step
                rec[2] = rec[3] = end
                ttft.append(end - rec[1])
                rec.append(len(rec[0].output_ids))
        for rec in live.values():  # a later token emitted this step: the output grew
            n = len(rec[0].output_ids)
            if len(rec) == 5 and n > rec[4]:
                gaps.append(end - rec[3])
                rec[3], rec[4] = end, n
        for seq in finished:
            rec = live.pop(seq.seq_id)
            e2e.append(end - rec[1])
            done_tokens += len(seq.output_ids)
            if clients is not None:
                nxt = next(sizes, None)
                if nxt is not None:
                    pending.append(Request(end, nxt.prompt_tokens, nxt.output_tokens))
    total = time.perf_counter() - t0
    return {**_stats(ttft, gaps, done_tokens / total), "wall_s": total}


def _stats(ttft, gaps, tok_s) -> dict:
    return {"ttft_p50_s": float(np.percentile(ttft, 50)), "ttft_p90_s": float(np.percentile(ttft, 90)),
            "itl_p50_s": float(np.percentile(gaps, 50)), "itl_p90_s": float(np.percentile(gaps, 90)),
            "output_tok_s": tok_s}


def serving_validation(hw, st, device: str, dtype: str, spec: dict = SPEC) -> list[dict]:
    from roofline.engine.engine import LLMEngine

    card = reduce_card(st.model(spec["model"]), spec["layers"], spec["vocab"])
    eng = LLMEngine(card, dtype=dtype, device=device, max_num_seqs=spec["max_num_seqs"],
                    max_step_tokens=spec["step_tokens"], max_kv_bytes=1e9, prefix_caching=False)
    setup = simulator_setup(card, hw, spec, dtype, eng.cfg.block_size, len(eng.blocks.ref_count))
    eng.warm_up()  # a full-budget step and every decode graph, as a server starts: no request waits on either
    # the Poisson rate: ~70% of what the simulator says one replica sustains in a closed loop of `clients`
    probe = simulate(Fleet(setup), closed=ClosedLoop(spec["clients"], trace(spec, 1.0)))
    rate = 0.7 * probe.summary()["requests_per_s"]
    rows = []
    poisson = trace(spec, rate)
    for name, clients in (("poisson", None), ("closed_loop", spec["clients"])):
        first = len(eng.stats)
        measured = _serve_real(eng, poisson, clients)
        wall_s = measured.pop("wall_s")
        predicted, sim_steps = simulated(setup, poisson, clients)
        rows.append({"trace": name, "rate_per_s": rate if clients is None else None, "clients": clients,
                     "kv_blocks": setup.num_blocks, "measured": measured, "predicted": predicted,
                     "error_pct": errors(predicted, measured),
                     "steps": step_report(eng.stats[first:], wall_s, setup.timer, sim_steps, spec.get("step_log"))})
    return rows


def simulator_setup(card, hw, spec: dict, dtype: str, block_size: int, kv_blocks: int | None) -> ReplicaSetup:
    """The replica the simulator runs for `spec`: the engine's scheduler limits and block size, its KV pool of
    `kv_blocks` blocks (None: sized by the memory budget), timed on `hw`."""
    policy = ServingPolicy(name="engine", max_num_batched_tokens=spec["step_tokens"], max_num_seqs=spec["max_num_seqs"],
                           block_size_tokens=block_size, prefix_caching=False, min_sim_block_tokens=1)
    wl = make_workload(quant=engine_quant(dtype), kv_quant=dtype)
    return ReplicaSetup.build(card, hw, wl, policy, expected_efficiency(hw), kv_blocks)


def trace(spec: dict, rate_per_s: float) -> list[Request]:
    """`spec`'s requests arriving as a Poisson stream at `rate_per_s` (the closed loop takes their sizes)."""
    prompt, output = parse_lengths("--prompt", spec["prompt"]), parse_lengths("--output", spec["output"])
    return list(open_loop(rate_per_s, spec["requests"], prompt, output, spec["seed"]))


def simulated(setup: ReplicaSetup, reqs: list[Request], clients: int | None) -> tuple[dict, int]:
    """The simulator's figures for `reqs` (open loop by their arrivals, or a closed loop of `clients`) and its
    step count."""
    sim = simulate(Fleet(setup), reqs, None) if clients is None else \
        simulate(Fleet(setup), closed=ClosedLoop(clients, reqs))
    return _stats_from(sim.metrics), sim.metrics.steps


def errors(predicted: dict, measured: dict) -> dict:
    return {k: 100 * (predicted[k] - measured[k]) / measured[k] for k in measured}


def step_report(stats: list, wall_s: float, timer, simulated_steps: int, keep_log: bool = False) -> dict:
    """Where the served run's time went, and the simulator's step times on the engine's own steps: per mode (graph
    replay / static / eager) and kind (decode / prefill / mixed) the steps, their measured median host and device
    seconds and the median predicted seconds of the same composition; busy against wall time (the rest is the host
    loop and idle waits for arrivals).
    `keep_log`: every step as [host s, device s, mode, [[new tokens, cached, samples] ...]] too."""
    by_mode: dict[str, list] = {}
    for st in stats:
        row = (st.seconds, st.device_seconds, predicted_step_s(timer, st.chunks))
        by_mode.setdefault(f"{st.mode} {step_kind(st.chunks)}", []).append(row)
    modes = {mode: {"steps": len(v), "host_s_p50": float(np.median([x[0] for x in v])),
                    "device_s_p50": float(np.median([x[1] for x in v])),
                    "predicted_s_p50": float(np.median([x[2] for x in v])),
                    "busy_s": float(sum(x[0] for x in v)), "predicted_busy_s": float(sum(x[2] for x in v))}
             for mode, v in by_mode.items()}
    report = {"steps": len(stats), "simulated_steps": simulated_steps, "wall_s": wall_s,
              "busy_s": float(sum(st.seconds for st in stats)), "by_mode": modes}
    if keep_log:
        report["log"] = [[st.seconds, st.device_seconds, st.mode, [list(c) for c in st.chunks]] for st in stats]
    return report


def step_kind(chunks) -> str:
    """decode (every chunk one token), prefill (none is) or mixed."""
    ones = sum(1 for n, *_ in chunks if n == 1)
    return "decode" if ones == len(chunks) else "prefill" if ones == 0 else "mixed"


def predicted_step_s(timer, chunks) -> float:
    """The simulator's seconds for a step of `chunks` ((new tokens, cached, samples) per sequence), split as the
    replica splits one: a one-token chunk is a decode row, a longer one a prefill chunk."""
    decode = [c for n, c, _ in chunks if n == 1]
    pre = [(n, c) for n, c, _ in chunks if n > 1]
    return timer.step_seconds(decode, [n for n, _ in pre], [c for _, c in pre], sum(s for *_, s in chunks))


def _stats_from(m) -> dict:
    s = m.summary()
    return {"ttft_p50_s": s["ttft_s"]["p50"], "ttft_p90_s": s["ttft_s"]["p90"], "itl_p50_s": s["itl_s"]["p50"],
            "itl_p90_s": s["itl_s"]["p90"], "output_tok_s": s["output_tok_s"]}
