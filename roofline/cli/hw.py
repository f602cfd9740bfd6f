"""`roofline hw list|show`."""

from __future__ import annotations

from typing import Annotated

import typer

from roofline.cards.hardware import HardwareCard
from roofline.cli.common import CardsOpt, JsonOpt, capacity_label, gb, store, tflops
from roofline.cli.output import Column, emit, table, warn

app = typer.Typer(no_args_is_help=True, add_completion=False, rich_markup_mode=None)


def hw_record(card: HardwareCard, origin: str | None = None) -> dict:
    """A card as JSON: every field in SI, plus ridge points (FLOP per byte where compute = bandwidth)."""
    data = card.model_dump(mode="json")
    bw = card.memory.bandwidth_bytes_per_s
    data["memory"]["usable_bytes"] = card.memory.usable_bytes
    data["ridge_flop_per_byte"] = {k: v / bw for k, v in card.peak_flops.as_dict().items()}
    if origin:
        data["origin"] = origin
    return data


@app.command("list", help="All hardware cards (bundled, user directory, --cards).")
def list_(as_json: JsonOpt = False, cards: CardsOpt = None):
    st = store(cards)
    items = sorted(st.all("hardware"), key=lambda c: (c.vendor, c.kind, -c.memory.bandwidth_bytes_per_s))
    for problem in st.problems("hardware"):
        warn(f"skipped a hardware card: {problem}")
    data = [hw_record(c, st.origin("hardware", c.name)) for c in items]

    def render():
        cols = ["name", "vendor", "kind", Column("memory", "right"), Column("GB/s", "right"),
                Column("bf16 TF", "right"), Column("fp8 TF", "right"), Column("fp4 TF", "right"), "unified", "origin"]
        rows = [(c.name, c.vendor, c.kind, capacity_label(c.memory.capacity_bytes, c.memory.capacity_binary), gb(c.memory.bandwidth_bytes_per_s, 0),
                 tflops(c.peak_flops.bf16 or c.peak_flops.fp16), tflops(c.peak_flops.fp8), tflops(c.peak_flops.fp4),
                 "yes" if c.memory.unified else "", st.origin("hardware", c.name)) for c in items]
        yield table(f"{len(items)} hardware cards (dense peaks, TFLOP/s)", cols, rows)

    emit(data, as_json, render)


@app.command("show", help="One hardware card with every figure and its source.")
def show(name: Annotated[str, typer.Argument(help="Card name, alias or path to a YAML card.")],
         as_json: JsonOpt = False, cards: CardsOpt = None):
    st = store(cards)
    card = st.hardware(name)
    data = hw_record(card, st.origin_of("hardware", card))

    def render():
        m, ic = card.memory, card.interconnect
        rows = [("name", card.name), ("aliases", ", ".join(card.aliases)), ("vendor / kind", f"{card.vendor} / {card.kind}"),
                ("description", card.description),
                ("memory", f"{capacity_label(m.capacity_bytes, m.capacity_binary)} {m.type or ''}"),
                ("bandwidth", f"{gb(m.bandwidth_bytes_per_s)} GB/s")]
        if m.unified:
            rows.append(("unified memory", f"yes; OS/CPU keep {gb(m.reserved_bytes)} GB, GPU can use {gb(m.usable_bytes)} GB"))
        for dtype, peak in card.peak_flops.as_dict().items():
            ridge = peak / m.bandwidth_bytes_per_s
            rows.append((f"peak {dtype}", f"{tflops(peak)} TFLOP/s dense · ridge {ridge:,.0f} FLOP/byte"))
        if ic.kind != "none":
            rows.append(("interconnect", f"{ic.kind} {gb(ic.bandwidth_bytes_per_s_per_direction)} GB/s per direction, "
                                          f"{ic.latency_s * 1e6:g} us, {ic.gpus_per_node} GPUs/node"))
        for label, value in (("compute units", card.compute_units), ("L2 cache", card.l2_cache_bytes and f"{card.l2_cache_bytes / 1e6:g} MB"),
                             ("power", card.power_watts and f"{card.power_watts:g} W"),
                             ("price", card.price_usd and f"${card.price_usd:,.0f}"),
                             ("cloud price",
                              card.cloud_usd_per_gpu_hour and f"${card.cloud_usd_per_gpu_hour:.2f} per GPU-hour")):
            if value:
                rows.append((label, value))
        yield table(card.name, ["field", "value"], rows)
        yield table("sources", ["field", "source"], sorted(card.sources.items()))
        if card.uncertain:
            yield table("uncertain values", ["field", "why"], sorted(card.uncertain.items()))

    emit(data, as_json, render)
