"""`roofline runtimes list|show`: the runtime profiles (runtimes/*.yaml) and where they come from."""

from __future__ import annotations

from typing import Annotated

import typer

from roofline.cli.common import CardsOpt, JsonOpt, store
from roofline.cli.output import emit, table

app = typer.Typer(no_args_is_help=True, add_completion=False, rich_markup_mode=None)


@app.command("list", help="Every runtime profile: versions, formats, scheduler and memory policy.")
def list_cmd(as_json: JsonOpt = False, cards: CardsOpt = None):
    st = store(cards)
    rows = [{"name": p.name, "display_name": p.display_name, "aliases": p.aliases, "versions": p.version_names(),
             "runs_on": p.runs_on, "weight_formats": p.weight_formats, "origin": st.origin("runtimes", p.name),
             "fitted_scopes": sorted(p.fitted), **p.serving_policy()} for p in st.all("runtimes")]
    emit(rows, as_json, lambda: [table("runtime profiles (--runtime NAME or NAME@VERSION)",
                                       ["name", "aliases", "versions", "runs on", "memory", "fitted on"],
                                       [(r["name"], ", ".join(r["aliases"]), ", ".join(r["versions"]),
                                         ", ".join(r["runs_on"]), r["memory_policy"], ", ".join(r["fitted_scopes"]))
                                        for r in rows])])


@app.command("show", help="One runtime profile as loaded, with its sources.")
def show_cmd(name: Annotated[str, typer.Argument(help="NAME[@VERSION]")], as_json: JsonOpt = False,
             cards: CardsOpt = None):
    choice = store(cards).runtime(name)
    data = {"runtime": choice.label, "serving_policy": choice.profile.serving_policy(choice.version or choice.range_start),
            **choice.profile.model_dump(mode="json", exclude_defaults=True)}
    emit(data, as_json, lambda: [table(f"{choice.label}: {choice.profile.description}", ["field", "value"],
                                       [(k, v) for k, v in data.items() if k not in ("description",)])])
