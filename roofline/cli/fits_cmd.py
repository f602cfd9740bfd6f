"""`roofline fits`: the memory budget line by line, a verdict, the limits, and what would fit instead."""

from __future__ import annotations

import re
from typing import Annotated, Optional

import typer

from roofline.cards.hardware import default_key
from roofline.cards.schema import MAX_SMALL
from roofline.cards.units import QuantityError, parse_quantity
from roofline.cli.common import (
    CardsOpt,
    GpusOpt,
    JsonOpt,
    KvOpt,
    PpOpt,
    QuantOpt,
    RuntimeOpt,
    beyond_context,
    context_tokens,
    fmt_margin,
    kv_default,
    model_and_quant,
    parallel_layout,
    runtime_card,
    runtime_choice,
    runtime_label,
    runtime_policy,
    runtime_runs,
    store,
)
from roofline.cli.output import Column, emit, table
from roofline.errors import RooflineError
from roofline.perf.efficiency import check_runtime_supports
from roofline.perf.parallel import check_parallel
from roofline.perf.workload import MAX_COUNT, make_workload
from roofline.sizing.alternatives import ALL_OPTIONS, what_would_fit
from roofline.sizing.memory import (
    BLOCK_TOKENS,
    MAX_STEP_TOKENS,
    Budget,
    Deployment,
    max_concurrency,
    max_context,
    memory_budget,
    min_gpus,
    runtime_memory_view,
    slot_share_tokens,
)
from roofline.sizing.precision import Formats


def _gb(n: float) -> str:
    return f"{n / 1e9:,.2f}"


def fits_cmd(
    model: Annotated[str, typer.Option("--model", "-m", help="Model card.")],
    hw: Annotated[str, typer.Option("--hw", help="Hardware card.")],
    quant: QuantOpt = None, kv_quant: KvOpt = None,
    context: Annotated[Optional[str], typer.Option(help="Tokens each sequence holds (prompt + output): 8k, 128K, 1M "
                                                   "(default 8k; llama.cpp/Ollama: the runtime's default context).")] = None,
    concurrency: Annotated[int, typer.Option(help="Concurrent sequences.")] = 1,
    gpus: GpusOpt = 1, pp: PpOpt = 1,
    block_tokens: Annotated[Optional[int], typer.Option("--block-tokens", help=f"Paged-KV block size in tokens (default "
                                                        f"{BLOCK_TOKENS} or the runtime's).")] = None,
    max_step_tokens: Annotated[Optional[int], typer.Option("--max-step-tokens", help=f"Tokens per engine step (sizes the "
                                                           f"activation workspace; default {MAX_STEP_TOKENS} or the "
                                                           "runtime's).")] = None,
    runtime: RuntimeOpt = None,
    runtime_memory: Annotated[Optional[str], typer.Option("--runtime-memory", help="Runtime overhead per GPU, e.g. "
                                                          "'2 GB' (default by kind).")] = None,
    as_json: JsonOpt = False, cards: CardsOpt = None,
):
    """Does it fit? Weights, KV cache, activations, runtime and OS reserve against the card's memory."""
    st = store(cards)
    card, quant = model_and_quant(st, model, quant)
    hwc = st.hardware(hw)
    if runtime is not None and runtime_memory is None and _is_bytes(runtime):
        runtime, runtime_memory = None, runtime  # `--runtime 2GB`: the overhead, as before --runtime-memory existed
    choice = runtime_choice(st, runtime)
    card = runtime_card(card, choice)
    wl = make_workload(quant=quant, kv_quant=kv_default(choice, kv_quant), batch=concurrency, **parallel_layout(choice, gpus, pp),
                       flags={"batch": "--concurrency"})
    for label, value in (("--block-tokens", block_tokens), ("--max-step-tokens", max_step_tokens)):
        if value is not None and value <= 0:
            raise RooflineError(f"{label}: must be > 0, got {value}")
    if block_tokens is not None and block_tokens > MAX_SMALL:  # as a runtime profile's block_size_tokens
        raise RooflineError(f"--block-tokens: at most {MAX_SMALL} tokens a block (vLLM: 16), got {block_tokens}")
    if max_step_tokens is not None and max_step_tokens > MAX_COUNT:
        raise RooflineError(f"--max-step-tokens: at most {MAX_COUNT:,} tokens a step (vLLM: 8,192), got "
                            f"{max_step_tokens}")
    if runtime_memory is not None and not re.search(r"[a-z]", runtime_memory, re.I):  # '2' is not 2 bytes
        raise RooflineError(f"--runtime-memory {runtime_memory!r}: give a size with its unit, e.g. "
                            f"'{runtime_memory.strip() or 2} GB'")
    try:
        runtime_bytes = None if runtime_memory is None else parse_quantity(runtime_memory, "bytes")
    except QuantityError as err:
        raise RooflineError(f"--runtime-memory: {err}") from None
    check_parallel(card, hwc, wl.tp, wl.pp)
    check_runtime_supports(choice, card, hwc, wl.quant, wl.kv_quant)
    hwc, ctx, block_tokens, max_step_tokens, policy = runtime_memory_view(
        runtime_policy(choice, hwc, wl.tp * wl.pp), hwc, context_tokens(context),
        block_tokens, max_step_tokens)
    if context is None and ctx > card.architecture.max_context:
        # a default (the runtime's, or 8,192) beyond the model's trained context is cut to it (Ollama's
        # llm/server.go: "requested context size too large for model"); a --context asked for stays, with a note
        ctx, policy["context_capped_at_model"] = card.architecture.max_context, True
    ctx = _split_context(policy, ctx, context is None, wl.batch)
    dep = Deployment(wl.tp, wl.pp, block_tokens, max_step_tokens, runtime_bytes, kv_share=policy["kv_share"],
                     sampled_seqs=policy["sampled_seqs"])
    b = memory_budget(card, hwc, wl.quant, wl.kv_quant, ctx, wl.batch, dep)
    data = {"runtime": runtime_label(choice), "memory_policy": policy, "block_tokens": block_tokens,
            **_budget_data(card, hwc, wl, ctx, dep, b, runtime_runs(choice, card, hwc), _options(policy, context))}
    emit(data, as_json, lambda: render(data, b, card, hwc))


def _split_context(policy: dict, ctx: int, default: bool, sequences: int) -> int:
    """Each sequence's context where the runtime splits its own over the slots (llama-server: -c over -np): the
    default's share; a --context asked for is each sequence's, the server's -c then that times the slots."""
    if not policy.get("context_split"):
        return ctx
    policy["server_context_tokens"] = ctx * (1 if default else sequences)
    return slot_share_tokens(ctx, sequences, True) if default else ctx


def _options(policy: dict, context: str | None) -> tuple[str, ...]:
    """The changes worth suggesting: not fewer sequences where the server splits its default context over its slots
    (llama-server -c over -np holds the same KV for any slot count; a smaller --context or format is the way)."""
    split_default = policy.get("context_split") and context is None
    return tuple(o for o in ALL_OPTIONS if o != "--concurrency") if split_default else ALL_OPTIONS


def _budget_data(card, hwc, wl, ctx: int, dep: Deployment, b: Budget, runs=None, options=ALL_OPTIONS) -> dict:
    """The --json document: the budget line by line, the limits (max context, max concurrency, fewest GPUs) and what
    would fit instead (in formats the runtime runs: `runs`, and among `options`, as `what_would_fit` takes them)."""
    best = min_gpus(card, hwc, wl.quant, wl.kv_quant, ctx, wl.batch, dep)
    return {
        "model": card.name, "hardware": hwc.name, "quant": Formats(card, hwc, wl.quant, wl.kv_quant).weights_label,
        "native_formats": wl.quant is None, "kv_quant": wl.kv_quant, "context_tokens": ctx,
        "concurrency": wl.batch, "gpus": dep.gpus, "tp": dep.tp, "pp": dep.pp, "fits": bool(b.fits),
        "capacity_bytes": b.capacity_bytes, "total_bytes": float(b.total_bytes), "headroom_bytes": float(b.headroom_bytes),
        "budget": {k: round(float(v)) for k, v in (("weights", b.weights_bytes), ("kv", b.kv_bytes),
                   ("activations", b.activations_bytes), ("runtime", b.runtime_bytes), ("reserved", b.reserved_bytes))},
        "weights_by_component": {k: round(v) for k, v in b.weights_by_component.items()},
        "kv_bytes_per_token": b.kv_bytes_per_token, "kv_bytes_per_sequence": float(b.kv_bytes_per_sequence),
        "max_context": max_context(card, hwc, wl.quant, wl.kv_quant, wl.batch, dep),
        "max_concurrency": max_concurrency(card, hwc, wl.quant, wl.kv_quant, ctx, dep),
        "min_gpus": best.gpus if best else None,
        "min_gpus_layout": {"tp": best.tp, "pp": best.pp} if best else None,
        "suggestions": [f"{a.flag}: {a.detail}"
                        for a in what_would_fit(card, hwc, wl.quant, wl.kv_quant, ctx, wl.batch, dep, b,
                                                options, runs)],
        "warnings": beyond_context(card, ctx),
    }


# what the runtime line of the budget holds on each kind of card (sizing.memory.RUNTIME_BYTES)
RUNTIME_WHAT = {"gpu": "CUDA/ROCm context, framework", "accelerator": "device context, framework",
                "soc": "GPU context, framework", "apple": "Metal context, framework", "cpu": "framework"}


def _is_bytes(text: str) -> bool:
    try:
        parse_quantity(text, "bytes")
    except QuantityError:
        return False
    return True


def _policy_line(d: dict) -> str | None:
    p = d["memory_policy"]
    if p["policy"] == "preallocate" and p["gpu_memory_utilization"]:
        seqs = p.get("max_num_seqs")
        cap = f"; it runs at most {seqs:,} sequences at once (max_num_seqs), the rest wait" \
            if seqs and d["max_concurrency"] > seqs else ""
        return (f"{d['runtime']} preallocates {p['gpu_memory_utilization']:.0%} of memory for weights, activations and "
                f"its KV pool: the max concurrency is what that pool holds{cap}")
    if p["policy"] == "free_fraction":
        return (f"{d['runtime']} gives its KV pool {p['kv_share']:.0%} of the memory weights, activations and the "
                f"runtime leave: the max concurrency is what that pool holds")
    if p["policy"] == "per_slot":
        how = "its default context" if p["context_default"] else "the context asked for"
        capped = ", cut to the model's trained context" if p.get("context_capped_at_model") else ""
        if p.get("server_context_tokens"):
            total, n = p["server_context_tokens"], d["concurrency"]
            return (f"{d['runtime']} allocates {how}{capped} when the model loads, split over its slots: "
                    f"{d['context_tokens']:,} tokens each (llama-server -c {total} -np {n})")
        return f"{d['runtime']} allocates {how}{capped} ({d['context_tokens']:,} tokens) per slot when the model loads"
    return None


def kv_per_token(card, d: dict) -> str:
    """'128.0 KiB/token': the long-context marginal; with sliding windows, the in-window figure too."""
    from roofline.sizing.kv import kv_bytes_per_token_in_window, shortest_window

    window = shortest_window(card)
    short = kv_bytes_per_token_in_window(card, d["kv_quant"]) / d["gpus"]
    if window is None or abs(short - d["kv_bytes_per_token"]) < 1:
        return f"{d['kv_bytes_per_token'] / 1024:,.1f} KiB/token"
    return (f"{short / 1024:,.1f} KiB/token up to the {window:,}-token window, "
            f"{d['kv_bytes_per_token'] / 1024:,.1f} KiB beyond")


def render(d: dict, b: Budget, card, hw):
    per = " per GPU" if d["gpus"] > 1 else ""
    rows = [(f"  {c}", _gb(v)) for c, v in b.weights_by_component.items() if v >= 5e6]
    label = d["quant"]
    rows.insert(0, (f"weights ({'native: ' + label if d['native_formats'] else label})",
                    _gb(b.weights_bytes)))
    rows += [(f"KV cache: {d['concurrency']} × {d['context_tokens']:,} tokens ({d['kv_quant']}, "
              f"{kv_per_token(card, d)}, {d['block_tokens']}-token blocks)", _gb(d["budget"]["kv"])),
             ("activations (max step tokens)", _gb(d["budget"]["activations"])),
             (f"runtime ({RUNTIME_WHAT.get(default_key(hw), 'framework')})", _gb(d["budget"]["runtime"]))]
    if d["budget"]["reserved"]:
        keeper = "the OS/CPU (unified memory)" if hw.memory.unified else "the driver (firmware, ECC)"
        rows.append((f"reserved by {keeper}", _gb(d["budget"]["reserved"])))
    util = d["memory_policy"]["gpu_memory_utilization"]
    gib = d["capacity_bytes"] / 2**30
    places = 0 if gib == round(gib) else 1
    cap = _gb(d["capacity_bytes"]) + (f" ({gib:,.{places}f} GiB)" if hw.memory.capacity_binary else "")
    rows += [("total", _gb(d["total_bytes"])),
             (f"capacity{per}" + (f" ({util:.0%} the runtime takes)" if util else ""), cap)]
    title = f"{card.name} on {d['gpus']} × {hw.name}" if d["gpus"] > 1 else f"{card.name} on {hw.name}"
    yield table(f"memory budget{per}: {title} · runtime {d['runtime']} · {d['concurrency']} sequence(s) × "
                f"{d['context_tokens']:,} tokens held (--context: prompt + output per sequence)",
                ["line", Column("GB", "right")], rows)
    if d["fits"]:
        yield f"[bold green]fits[/bold green] with {fmt_margin(d['headroom_bytes'])} to spare"
    else:
        yield f"[bold red]does not fit[/bold red]: short by {fmt_margin(d['headroom_bytes'])}"
    yield (f"max context at {d['concurrency']} sequence(s): {d['max_context']:,} tokens "
           f"(model max {card.architecture.max_context:,}) · max concurrency at {d['context_tokens']:,} tokens: "
           f"{d['max_concurrency']:,} · fewest GPUs: {d['min_gpus'] or 'none of this card holds it'}")
    if line := _policy_line(d):
        yield line
    for s in d["suggestions"]:
        yield f"  would fit: {s}"
    for w in d["warnings"]:
        yield f"[yellow]note[/yellow]: {w}"
