"""`roofline formats`: the weight and KV-cache formats table."""

from __future__ import annotations

from roofline.cards.formats import KV_FORMATS, WEIGHT_FORMATS, Format
from roofline.cli.common import JsonOpt
from roofline.cli.output import Column, emit, table


def _record(f: Format) -> dict:
    return {"name": f.name, "aliases": list(f.aliases), "bits_per_value": f.bits_per_value,
            "bytes_per_value": f.bytes_per_value, "layout": f.layout, "math_dtypes": list(f.math_chain),
            "source": f.source}


def formats(as_json: JsonOpt = False):
    data = {"weight": [_record(f) for f in WEIGHT_FORMATS], "kv": [_record(f) for f in KV_FORMATS]}

    def render():
        cols = ["format", Column("bits/value", "right"), "math runs in (first the card supports)", "layout", "source"]
        yield table("weight formats", cols, [(f.name, f"{f.bits_per_value:.4g}", " > ".join(f.math_chain), f.layout,
                                              f.source) for f in WEIGHT_FORMATS])
        yield table("KV-cache formats", ["format", Column("bits/value", "right"), "aliases", "layout", "source"],
                    [(f.name, f"{f.bits_per_value:.4g}", ", ".join(f.aliases), f.layout, f.source) for f in KV_FORMATS])

    emit(data, as_json, render)
