"""`roofline runtimes list|show`: the runtime profiles (runtimes/*.yaml) and where they come from."""

from __future__ import annotations

from typing import Annotated

import typer

from roofline.cli.common import CardsOpt, JsonOpt, store
from roofline.cli.output import emit, table, warn
from roofline.errors import RooflineError

app = typer.Typer(no_args_is_help=True, add_completion=False, rich_markup_mode=None)


@app.command("list", help="Every runtime profile: versions, formats, scheduler and memory policy.")
def list_cmd(as_json: JsonOpt = False, cards: CardsOpt = None):
    st = store(cards)
    rows = [{"name": p.name, "display_name": p.display_name, "aliases": p.aliases, "versions": p.version_names(),
             "runs_on": p.runs_on, "weight_formats": p.weight_formats,
             "format_since": p.format_since, "origin": st.origin("runtimes", p.name),
             "fitted_scopes": sorted(p.fitted), **p.serving_policy()} for p in st.all("runtimes")]
    for problem in st.problems("runtimes"):  # known once every profile was read
        warn(f"skipped a runtime profile: {problem}")
    emit(rows, as_json, lambda: [table("runtime profiles (--runtime NAME or NAME@VERSION)",
                                       ["name", "aliases", "versions", "runs on", "memory", "fitted on", "origin"],
                                       [(r["name"], ", ".join(r["aliases"]), ", ".join(r["versions"]),
                                         ", ".join(r["runs_on"]), r["memory_policy"], ", ".join(r["fitted_scopes"]),
                                         r["origin"]) for r in rows])])


@app.command("show", help="One runtime profile as loaded, with its sources.")
def show_cmd(name: Annotated[str, typer.Argument(help="NAME[@VERSION]")], as_json: JsonOpt = False,
             cards: CardsOpt = None):
    if name.strip().lower() == "generic":
        raise RooflineError("generic is no profile: it is what predict assumes without --runtime (the hardware "
                            "kind's default efficiencies); see `roofline runtimes list` for the profiles")
    st = store(cards)
    choice = st.runtime(name)
    data = {"runtime": choice.label, "origin": st.origin("runtimes", choice.profile.name),
            "serving_policy": choice.profile.serving_policy(choice.version or choice.range_start),
            **choice.profile.model_dump(mode="json", exclude_defaults=True)}
    emit(data, as_json, lambda: [table(f"{choice.label}: {choice.profile.description}", ["field", "value"],
                                       flat_rows({k: v for k, v in data.items() if k != "description"}))])


def flat_rows(value, key: str = "") -> list[tuple[str, str]]:
    """(dotted key, text) rows of nested data, as a person reads a profile: lists joined, sizes in GiB/GB, no
    Python reprs ('versions.2.memory.default_context_tiers.0.below_bytes' -> '24 GiB')."""
    if isinstance(value, dict):
        return [row for k, v in value.items() if v is not None for row in flat_rows(v, f"{key}.{k}" if key else k)]
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        return [row for i, v in enumerate(value) for row in flat_rows(v, f"{key}.{i}")]
    if isinstance(value, list):
        return [(key, ", ".join(str(v) for v in value))]
    if key.endswith("_bytes") and isinstance(value, (int, float)):
        whole_gib = value >= 2**30 and value % 2**30 == 0
        return [(key, f"{value / 2**30:,.0f} GiB" if whole_gib else f"{value / 1e9:,.2f} GB")]
    if isinstance(value, bool):
        return [(key, "yes" if value else "no")]
    return [(key, f"{value:g}" if isinstance(value, float) else str(value))]
