"""`roofline hw list|show`."""

from __future__ import annotations

from typing import Annotated

import typer

from roofline.cards.hardware import HardwareCard
from roofline.cards.store import name_key
from roofline.cli.common import CardsOpt, JsonOpt, capacity_label, gb, store, tflops
from roofline.cli.output import Column, emit, table, warn
from roofline.errors import RooflineError

app = typer.Typer(no_args_is_help=True, add_completion=False, rich_markup_mode=None)


def hw_record(card: HardwareCard, origin: str | None = None) -> dict:
    """A card as JSON: every field in SI, plus ridge points (FLOP per byte where compute = bandwidth)."""
    data = card.model_dump(mode="json")
    bw = card.memory.bandwidth_bytes_per_s
    data["memory"]["usable_bytes"] = card.memory.usable_bytes
    data["peak_flop_per_s"] = data.pop("peak_flops")  # dense, per math dtype (int8: op/s); the key says the unit
    data["ridge_flop_per_byte"] = {k: v / bw for k, v in card.peak_flops.as_dict().items()}
    if origin:
        data["origin"] = origin
    return data


def bandwidth_label(bytes_per_s: float) -> str:
    """A memory bandwidth as datasheets print it: '3.35 TB/s (3,350 GB/s)' from 1 TB/s up, else '273 GB/s'."""
    if bytes_per_s >= 1e12:
        return f"{bytes_per_s / 1e12:.4g} TB/s ({bytes_per_s / 1e9:,.0f} GB/s)"
    return f"{bytes_per_s / 1e9:,.4g} GB/s"


def sixteen_bit(card: HardwareCard) -> str:
    """The bf16 peak in TFLOP/s; a card without bf16 (Turing, older) shows its fp16 peak, marked as such."""
    p = card.peak_flops
    return tflops(p.bf16) if p.bf16 or not p.fp16 else f"{tflops(p.fp16)} fp16"


def matches(card: HardwareCard, query: str) -> bool:
    """Whether every word of `query` ('4070', 'm3 max', 'MI300') is in the card's name, an alias or its description
    (case, spaces and punctuation ignored, as card names are resolved)."""
    texts = [name_key(t) for t in (card.name, card.description or "", *card.aliases)]
    return all(any(name_key(word) in t for t in texts) for word in query.split())


def _choice(option: str, value: str | None, allowed: set[str]) -> str | None:
    if value is not None and value.lower() not in allowed:
        raise RooflineError(f"{option}: {value!r} is none of {', '.join(sorted(allowed))}")
    return value and value.lower()


def cache_label(n_bytes: float | None) -> str | None:
    """A cache size as vendors state it: '32 MiB' where it is a whole number of KiB (device queries and datasheets
    count caches in binary units), else MB."""
    if not n_bytes:
        return None
    return f"{n_bytes / 2**20:g} MiB" if n_bytes % 2**10 == 0 else f"{n_bytes / 1e6:g} MB"


@app.command("list", help="All hardware cards (bundled, user directory, --cards), or those matching a query.")
def list_(query: Annotated[str | None, typer.Argument(help="Words every listed card's name, an alias or its "
                                                         "description must contain, e.g. '4070' or 'm3 max'.")] = None,
          vendor: Annotated[str | None, typer.Option(help="Only this vendor's cards: nvidia, amd, ...")] = None,
          kind: Annotated[str | None, typer.Option(help="Only this kind: gpu, soc, cpu, accelerator.")] = None,
          as_json: JsonOpt = False, cards: CardsOpt = None):
    st = store(cards)
    every = st.all("hardware")
    vendor = _choice("--vendor", vendor, {c.vendor for c in every})
    kind = _choice("--kind", kind, {c.kind for c in every})
    items = sorted((c for c in every if (not vendor or c.vendor == vendor) and (not kind or c.kind == kind)
                    and (not query or matches(c, query))),
                   key=lambda c: (c.vendor, c.kind, -c.memory.bandwidth_bytes_per_s))
    for problem in st.problems("hardware"):
        warn(f"skipped a hardware card: {problem}")
    data = [hw_record(c, st.origin("hardware", c.name)) for c in items]

    def render():
        cols = ["name", "vendor", "kind", Column("memory", "right"), Column("GB/s", "right"),
                Column("bf16 TF", "right"), Column("fp8 TF", "right"), Column("fp4 TF", "right"), "unified", "origin"]
        rows = [(c.name, c.vendor, c.kind, capacity_label(c.memory.capacity_bytes, c.memory.capacity_binary), gb(c.memory.bandwidth_bytes_per_s, 0),
                 sixteen_bit(c), tflops(c.peak_flops.fp8), tflops(c.peak_flops.fp4),
                 "yes" if c.memory.unified else "", st.origin("hardware", c.name)) for c in items]
        picked = ", ".join(f"{k} {v!r}" for k, v in (("matching", query), ("vendor", vendor), ("kind", kind)) if v)
        title = f"{len(items)} hardware cards{' ' + picked if picked else ''} (dense peaks, TFLOP/s)"
        yield table(title, cols, rows) if items else "no hardware card matches; `roofline hw list` shows them all"

    emit(data, as_json, render)


@app.command("show", help="One hardware card with every figure and its source.")
def show(name: Annotated[str, typer.Argument(help="Card name, alias or path to a YAML card.")],
         as_json: JsonOpt = False, cards: CardsOpt = None):
    st = store(cards)
    card = st.hardware(name)
    data = hw_record(card, st.origin_of("hardware", card))

    def render():
        m, ic = card.memory, card.interconnect
        rows = [("name", card.name), ("origin", data.get("origin", "")), ("aliases", ", ".join(card.aliases)),
                ("vendor / kind", f"{card.vendor} / {card.kind}"),
                ("description", card.description),
                ("memory", f"{capacity_label(m.capacity_bytes, m.capacity_binary)} {m.type or ''}"),
                ("bandwidth", bandwidth_label(m.bandwidth_bytes_per_s))]
        unit, scale = ("GiB", 2**30) if m.capacity_binary else ("GB", 1e9)
        if m.unified:
            rows.append(("unified memory", f"yes; OS/CPU keep {m.reserved_bytes / scale:,.1f} {unit}, GPU can use "
                                           f"{m.usable_bytes / scale:,.1f} {unit}"))
        elif m.reserved_bytes:
            rows.append(("reported", f"{m.usable_bytes / scale:,.2f} {unit} ({gb(m.usable_bytes)} GB): the driver "
                                     f"keeps {m.reserved_bytes / 2**20:,.0f} MiB"))
        for dtype, peak in card.peak_flops.as_dict().items():
            ridge = peak / m.bandwidth_bytes_per_s
            unit, op = ("TOPS", "op") if dtype.startswith("int") else ("TFLOP/s", "FLOP")
            rows.append((f"peak {dtype}", f"{tflops(peak)} {unit} dense · ridge {ridge:,.0f} {op}/byte"))
        if ic.kind != "none":
            rows.append(("interconnect", f"{ic.kind} {gb(ic.bandwidth_bytes_per_s_per_direction)} GB/s per direction, "
                                          f"{ic.latency_s * 1e6:g} us, {ic.gpus_per_node} GPUs/node"))
        for label, value in (("compute units", card.compute_units), ("compute capability", card.compute_capability),
                             ("L2 cache", cache_label(card.l2_cache_bytes)),
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
