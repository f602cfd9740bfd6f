"""Pictures: the roofline chart, the concurrency sweep, the memory budget, a serving run over time. matplotlib is
imported only here."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from roofline.cards.files import write_atomic
from roofline.cards.hardware import HardwareCard
from roofline.cards.model import ModelCard
from roofline.perf.efficiency import Efficiency, expected_efficiency
from roofline.perf.grid import sweep_arrays
from roofline.perf.request import first_step, gpu_ops, phase_times
from roofline.perf.timing import fixed_seconds, time_ops
from roofline.perf.workload import Workload
from roofline.sizing.memory import Deployment, max_concurrency, memory_budget

COLORS = {"prefill": "tab:blue", "decode": "tab:red"}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def roofline_points(card: ModelCard, hw: HardwareCard, wl: Workload, phase: str,
                    eff: Efficiency | None = None) -> tuple[dict, list[dict]]:
    """(the whole step, its largest ops) as {label, intensity FLOP/B, attained FLOP/s, time_s} at expected
    efficiency (a runtime's when given). The whole step is predict's own (decode: averaged over the request's
    contexts); the ops are one GPU's share in the phase's first step, collectives included."""
    eff = eff or expected_efficiency(hw)
    whole = phase_times(card, hw, wl, eff)[phase]
    step = first_step(wl, phase)
    per_op = []
    for op in gpu_ops(card, hw, step, wl):
        t = float(time_ops([op], hw, eff, step.tokens).total_s - fixed_seconds(eff, step.tokens))
        if op.flops * op.count > 0 and t > 0:
            per_op.append({"label": op.name, "intensity": op.flops / op.bytes, "attained": op.flops * op.count / t,
                           "time_s": t})
    per_op.sort(key=lambda p: -p["time_s"])
    flops, seconds = float(np.mean(whole.flops)), float(np.mean(whole.total_s))
    total = {"label": f"{phase} step", "intensity": flops / float(np.mean(whole.bytes)), "attained": flops / seconds,
             "time_s": seconds}
    return total, per_op[:5]


def merged_roofs(peaks: dict[str, float]) -> list[tuple[float, list[str]]]:
    """Roofs of equal peak (within 0.5%) merged into one legend entry: [(peak, [dtypes...])], highest first
    (bf16 and fp16 share a roof on most parts; one line and one label for them)."""
    out: list[tuple[float, list[str]]] = []
    for dtype, peak in sorted(peaks.items(), key=lambda kv: -kv[1]):
        if out and abs(out[-1][0] - peak) <= 0.005 * peak:
            out[-1][1].append(dtype)
        else:
            out.append((peak, [dtype]))
    return out


LABEL_STEP_PT = 9  # one 7-pt label line plus spacing, in points
NEAR_DECADES = 0.12  # labels whose points lie closer than this (log10 units, both axes) would overlap


def label_offset(placed: list[tuple[float, float]], x: float, y: float) -> float:
    """A vertical text offset (points) for an op label at (x, y) that keeps it off labels already placed near it:
    each nearby label pushes this one one line further down. Records the anchor."""
    lx, ly = np.log10(x), np.log10(y)
    near = sum(1 for px, py in placed if abs(px - lx) < NEAR_DECADES * 4 and abs(py - ly) < NEAR_DECADES)
    placed.append((lx, ly))
    return -LABEL_STEP_PT * (1 + near)


def plot_roofline(card: ModelCard, hw: HardwareCard, wl: Workload, path: Path, eff: Efficiency | None = None) -> dict:
    """Log-log roofline: compute roofs per dtype, the bandwidth slope, ridge points; prefill/decode and ops."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 6), dpi=110)
    bw = hw.memory.bandwidth_bytes_per_s
    x = np.logspace(-1, 5, 400)
    ax.loglog(x, bw * x, color="black", lw=1.5, label=f"memory {bw / 1e9:,.0f} GB/s")
    data = {"roofs": {}, "points": []}
    for peak, dtypes in merged_roofs(hw.peak_flops.as_dict()):
        ridge = peak / bw
        ax.loglog(x[x >= ridge], np.full((x >= ridge).sum(), peak), lw=1.2,
                  label=f"{'/'.join(dtypes)} {peak / 1e12:,.0f} TFLOP/s")
        ax.plot([ridge], [peak], "k.", ms=5)
        for dtype in dtypes:
            data["roofs"][dtype] = {"peak_flop_per_s": peak, "ridge_flop_per_byte": ridge}
    placed: list[tuple[float, float]] = []  # label anchors already used, in log10 display units
    for phase in ("prefill", "decode"):
        total, ops = roofline_points(card, hw, wl, phase, eff)
        ax.plot(total["intensity"], total["attained"], marker="*", ms=16, color=COLORS[phase], ls="none",
                label=f"{phase} step ({total['time_s'] * 1e3:,.1f} ms)")
        for p in ops:
            ax.plot(p["intensity"], p["attained"], marker="o", ms=6, color=COLORS[phase], alpha=0.6, ls="none")
            dy = label_offset(placed, p["intensity"], p["attained"])
            ax.annotate(p["label"], (p["intensity"], p["attained"]), fontsize=7, xytext=(4, dy),
                        textcoords="offset points", color=COLORS[phase])
        data["points"] += [{"phase": phase, **total}] + [{"phase": phase, **p} for p in ops]
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
    ax.set_ylabel("attained FLOP/s (expected mode)")
    ax.set_title(f"{card.name} on {hw.name} ({(eff or expected_efficiency(hw)).runtime}): {wl.prompt_tokens}-token "
                 f"prefill and decode, batch {wl.batch}")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8, loc="lower right")
    _save(fig, path, plt)
    return data


def plot_sweep(card: ModelCard, hw: HardwareCard, wl: Workload, levels: list[int], path: Path,
               eff: Efficiency | None = None, dep: Deployment | None = None) -> dict:
    """Aggregate and per-request decode tok/s against concurrency, with the memory limit marked (`dep`: the
    runtime's memory sizing, as `predict` takes it)."""
    plt = _pyplot()
    b = np.array(levels, float)
    dep = dep or Deployment(wl.tp, wl.pp)
    v = sweep_arrays(card, hw, wl, b, np.full_like(b, wl.prompt_tokens), eff=eff, dep=dep)
    limit = max_concurrency(card, hw, wl.quant, wl.kv_quant, wl.prompt_tokens + wl.output_tokens, dep)
    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=110)
    ok = v["fits_in_memory"]
    ax.plot(b[ok], v["decode_tok_s_aggregate"][ok], "o-", color="tab:blue", label="aggregate tok/s")
    ax.plot(b[~ok], v["decode_tok_s_aggregate"][~ok], "o--", color="tab:blue", alpha=0.3, label="(does not fit)")
    ax2 = ax.twinx()
    ax2.plot(b[ok], v["decode_tok_s"][ok], "s-", color="tab:red", label="per-request tok/s")
    if limit and b.min() <= limit <= b.max():
        ax.axvline(limit, color="gray", ls=":", lw=1.5)
        ax.annotate(f"memory limit: {limit} requests", (limit, ax.get_ylim()[1] * 0.9), fontsize=8, rotation=90,
                    ha="right", color="gray")
    ax.set_xscale("log", base=2)
    ax.set_xlim(b.min() / 1.25, b.max() * 1.25)  # the data's span: the memory-limit line never stretches the axis
    ax.set_xlabel("concurrent requests")
    ax.set_ylabel("aggregate decode tok/s", color="tab:blue")
    ax2.set_ylabel("per-request decode tok/s", color="tab:red")
    ax2.set_ylim(bottom=0)
    ax.set_title(f"{card.name} on {hw.name} ({(eff or expected_efficiency(hw)).runtime}): {wl.prompt_tokens}-token "
                 f"prompts → {wl.output_tokens} tokens")
    ax.grid(True, alpha=0.25)
    handles = ax.get_legend_handles_labels()
    more = ax2.get_legend_handles_labels()
    ax.legend(handles[0] + more[0], handles[1] + more[1], fontsize=8, loc="center left")
    _save(fig, path, plt)
    return {"concurrency": levels, "aggregate_tok_s": v["decode_tok_s_aggregate"].tolist(),
            "per_request_tok_s": v["decode_tok_s"].tolist(), "fits": ok.tolist(), "max_concurrency": limit}


def plot_memory(card: ModelCard, hws: list[HardwareCard], wl: Workload, context: int, path: Path,
                deps: list[Deployment] | None = None) -> dict:
    """A stacked budget bar per hardware card against its capacity; `deps`: each card's memory sizing under the
    runtime (the cards then hold the share of memory it takes), as `predict` takes them."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(hws) + 3), 5.5), dpi=110)
    parts = ("weights", "kv", "activations", "runtime", "reserved")
    colors = ("tab:blue", "tab:orange", "tab:green", "tab:gray", "tab:brown")
    out = {}
    for i, (hw, dep) in enumerate(zip(hws, deps or [Deployment(wl.tp, wl.pp)] * len(hws))):
        b = memory_budget(card, hw, wl.quant, wl.kv_quant, context, wl.batch, dep)
        values = dict(zip(parts, (b.weights_bytes, float(b.kv_bytes), float(b.activations_bytes), b.runtime_bytes,
                                  b.reserved_bytes)))
        bottom = 0.0
        for (name, value), color in zip(values.items(), colors):
            ax.bar(i, value / 1e9, bottom=bottom, color=color, label=name if i == 0 else None, width=0.6)
            bottom += value / 1e9
        ax.hlines(b.capacity_bytes / 1e9, i - 0.4, i + 0.4, colors="black", lw=2.5,
                  label="capacity" if i == 0 else None)
        out[hw.name] = {**values, "capacity": b.capacity_bytes, "fits": bool(b.fits)}
    ax.set_xticks(range(len(hws)), [f"{h.name}\n{'fits' if out[h.name]['fits'] else 'does NOT fit'}" for h in hws],
                  fontsize=8)
    ax.set_ylabel("GB per GPU")
    ax.set_title(f"{card.name}: {wl.batch} × {context:,} tokens, weights {wl.quant or 'native'}, KV {wl.kv_quant}")
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.25)
    _save(fig, path, plt)
    return out


def plot_serve(series: list[tuple[float, int, int, float]], path: Path, title: str) -> dict:
    """A simulated serving run over time: the running batch, the queue and the KV pool's use (one point per engine
    step or pure-decode stretch, decimated; `series` as the serving metrics keep it: time s, running, waiting,
    used share of the pool)."""
    plt = _pyplot()
    t, running, waiting, kv = (np.array(col, float) for col in zip(*series)) if series else ([], [], [], [])
    fig, axes = plt.subplots(3, 1, figsize=(9, 7), dpi=110, sharex=True)
    panels = ((running, "running batch", "tab:blue"), (waiting, "queue (waiting)", "tab:orange"),
              (np.asarray(kv) * 100, "KV pool used (%)", "tab:green"))
    for ax, (values, label, color) in zip(axes, panels):
        ax.step(t, values, where="post", color=color, lw=1)
        ax.fill_between(t, values, step="post", color=color, alpha=0.2)
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.25)
    axes[2].set_ylim(0, 100)
    axes[2].set_xlabel("simulated time (s)")
    axes[0].set_title(title, fontsize=9)
    _save(fig, path, plt)
    return {"points": len(series), "peak_running": int(max(running, default=0)),
            "peak_waiting": int(max(waiting, default=0)), "peak_kv_use": float(max(kv, default=0.0))}


def _save(fig, path: Path, plt) -> None:
    """Render to memory, then write through the one safe-write helper (exclusive temp file, os.replace)."""
    import io

    path = Path(path)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format=path.suffix.lstrip(".").lower() or "png")
    plt.close(fig)
    write_atomic(path, buf.getvalue(), "-o")


def plot_validation(points: list[dict], metrics: list[str], path: Path, title: str) -> None:
    """Predicted against measured, one log-log panel per metric, with the y = x line."""
    plot_scatter({key: ([p[f"measured_{key}"] for p in points], [p[f"predicted_{key}"] for p in points])
                  for key in metrics}, path, title)


def plot_scatter(series: dict[str, tuple[list[float], list[float]]], path: Path, title: str) -> None:
    """One log-log panel per metric of (measured, predicted) values, with the y = x line."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(series), figsize=(4 * len(series), 4), dpi=100, squeeze=False)
    for ax, (key, (m, q)) in zip(axes[0], series.items()):
        ax.loglog(m, q, "o", alpha=0.7)
        lo, hi = min(m + q), max(m + q)
        ax.plot([lo, hi], [lo, hi], "k--", lw=1)
        ax.set(title=key, xlabel="measured", ylabel="predicted")
    fig.suptitle(title)
    _save(fig, path, plt)
