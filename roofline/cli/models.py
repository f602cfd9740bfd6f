"""`roofline models list|show|import`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from roofline.cards.files import check_output_dir, write_atomic
from roofline.cards.model import ModelCard
from roofline.cards.store import CardStore, card_to_yaml, names_of, writable_user_dir
from roofline.cli.common import CardsOpt, JsonOpt, billions, gb, store
from roofline.cli.output import Column, emit, table, warn
from roofline.errors import RooflineError
from roofline.importers.checkpoint import assumed_notes
from roofline.sizing.kv import kv_bytes, kv_bytes_per_token, kv_bytes_per_token_in_window, shortest_window
from roofline.sizing.layers import layer_summary, resolve_layers
from roofline.sizing.params import (
    active_param_counts,
    active_params,
    component_format,
    param_counts,
    total_params,
    weight_bytes,
)

app = typer.Typer(no_args_is_help=True, add_completion=False, rich_markup_mode=None)


def model_record(card: ModelCard, origin: str | None = None) -> dict:
    """A card as JSON plus what roofline derives from its shapes (parameters, weight and KV bytes)."""
    arch = card.architecture
    data = card.model_dump(mode="json", exclude_none=True)
    data["derived"] = {
        "total_params": total_params(card),
        "active_params": active_params(card),
        "params_by_component": param_counts(card),
        "weights_bytes": sum(weight_bytes(card).values()),
        "kv_bytes_per_token_bf16": kv_bytes_per_token(card, "bf16"),
        "kv_bytes_per_token_in_window_bf16": kv_bytes_per_token_in_window(card, "bf16"),
        "shortest_window_tokens": shortest_window(card),
        "kv_bytes_at_max_context_bf16": kv_bytes(card, arch.max_context, "bf16"),
        "layers": layer_summary(resolve_layers(arch)),
    }
    if origin:
        data["origin"] = origin
    return data


def kv_label(derived: dict) -> str:
    """KV per token at long context; for sliding-window layers also what each token costs below the window
    (mistral-7b: '128.0 KiB ≤4,096 tok, then 0.0 KiB')."""
    long_ctx, short = derived["kv_bytes_per_token_bf16"], derived["kv_bytes_per_token_in_window_bf16"]
    window = derived["shortest_window_tokens"]
    if window is None or abs(short - long_ctx) < 1:
        return f"{long_ctx / 1024:,.1f} KiB"
    return f"{short / 1024:,.1f} KiB ≤{window:,} tok, then {long_ctx / 1024:,.1f} KiB"


@app.command("list", help="All model cards (bundled, user directory, --cards).")
def list_(as_json: JsonOpt = False, cards: CardsOpt = None):
    st = store(cards)
    items = sorted(st.all("models"), key=lambda c: (c.family, total_params(c)))
    for problem in st.problems("models"):
        warn(f"skipped a model card: {problem}")
    data = [model_record(c, st.origin("models", c.name)) for c in items]

    def render():
        cols = ["name", "family", Column("params", "right"), Column("active", "right"), Column("layers", "right"),
                "layer kinds", Column("KV/token bf16", "right"), Column("max ctx", "right"), "weights"]
        rows = []
        for c, d in zip(items, data):
            der = d["derived"]
            rows.append((c.name, c.family, billions(der["total_params"]),
                         billions(der["active_params"]) if c.is_moe else "", c.architecture.num_layers, der["layers"],
                         kv_label(der), f"{c.architecture.max_context:,}",
                         ", ".join(f"{k}={v}" for k, v in c.weights.items())))
        yield table(f"{len(items)} model cards", cols, rows)

    emit(data, as_json, render)


@app.command("show", help="One model card: shapes, parameters per component, weight and KV bytes.")
def show(name: Annotated[str, typer.Argument(help="Card name, alias, or path to a YAML card, config.json, .gguf file or checkpoint folder.")],
         as_json: JsonOpt = False, cards: CardsOpt = None):
    st = store(cards)
    card = st.model(name)
    data = model_record(card, st.origin_of("models", card))

    def render():
        arch, der = card.architecture, data["derived"]
        att = arch.attention
        rows = [("name", card.name), ("aliases", ", ".join(card.aliases)), ("family", card.family),
                ("source", f"{card.source.hf_repo or ''} — shapes from {card.source.shapes_from}"),
                ("published params", f"{billions(card.params.total)} total"
                 + (f", {billions(card.params.active)} active" if card.params.active else "") + f" ({card.params.source})"),
                ("derived params", f"{billions(der['total_params'])} total, {billions(der['active_params'])} active"),
                ("vocab / hidden / layers", f"{arch.vocab_size:,} / {arch.hidden_size:,} / {arch.num_layers}"),
                ("layers", der["layers"])]
        if att:
            rows.append(("attention", f"{att.num_heads} heads, {att.num_kv_heads} kv heads, head_dim {att.head_dim}"
                         + (f", window {att.sliding_window}" if att.sliding_window else "")))
        if arch.mla:
            rows.append(("MLA", ", ".join(f"{k}={v}" for k, v in arch.mla.model_dump().items())))
        if arch.moe:
            m = arch.moe
            rows.append(("MoE", f"{m.num_experts} experts, {m.experts_per_token} per token, {m.num_shared_experts} shared, "
                                f"expert FFN {m.expert_intermediate_size}, first {m.first_dense_layers} dense"))
        if arch.mamba2:
            rows.append(("Mamba-2", ", ".join(f"{k}={v}" for k, v in arch.mamba2.model_dump().items())))
        for label, section in (("compressed", arch.compressed), ("DeltaNet", arch.deltanet), ("Mamba-1", arch.mamba1)):
            if section:
                rows.append((label, ", ".join(f"{k}={v}" for k, v in section.model_dump().items())))
        rows += [(f"checkpoint {name}", f"{c.weights} ({c.source})") for name, c in card.checkpoints.items()]
        rows += [("max context", f"{arch.max_context:,} tokens"),
                 ("KV cache (bf16)", f"{kv_label(der)} per token; "
                  f"{der['kv_bytes_at_max_context_bf16'] / 2**30:,.2f} GiB at {arch.max_context:,} tokens")]
        yield table(card.name, ["field", "value"], rows, caption=card.notes or None)
        total, active, wbytes = param_counts(card), active_param_counts(card), weight_bytes(card)
        comp = [(c, f"{total[c]:,}", f"{active[c]:,.0f}", component_format(card, c), gb(wbytes[c], 2))
                for c in total if total[c]]
        comp.append(("total", f"{sum(total.values()):,}", f"{sum(active.values()):,.0f}", "", gb(sum(wbytes.values()), 2)))
        yield table("parameters by component (native formats)",
                    ["component", Column("params", "right"), Column("active/token", "right"), "format",
                     Column("GB", "right")], comp)

    emit(data, as_json, render)


@app.command("import", help="Turn a config.json, a GGUF file or a safetensors checkpoint folder (a Hugging Face cache "
                              "folder too) into a card in the user card directory.")
def import_(path: Annotated[Path, typer.Argument(help="A config.json, a .gguf file or a safetensors checkpoint folder.")],
            name: Annotated[Optional[str], typer.Option("--name", help="Card name (default: from the file).")] = None,
            force: Annotated[bool, typer.Option("--force", help="Overwrite an existing card of that name.")] = False,
            out_dir: Annotated[Optional[str], typer.Option("--to", help="Card directory (default: $ROOFLINE_HOME).")]
            = None,
            as_json: JsonOpt = False):
    from roofline.importers import import_model
    from roofline.importers.config_json import card_name

    if name is not None:
        card_name(name)  # before anything is read or written
    if out_dir is not None and not out_dir.strip():  # '' would be the current directory
        raise RooflineError("--to: empty path; name a card directory, or drop --to for $ROOFLINE_HOME")
    directory = check_output_dir((Path(out_dir) if out_dir else writable_user_dir("--to")) / "models", "--to")
    card = import_model(path, name=name)
    target = directory / f"{card.name}.yaml"
    if (target.exists() or target.is_symlink()) and not force:
        raise RooflineError(f"card '{card.name}' already exists at {target}; pass --force to overwrite or --name NEW")
    shadowed = _bundled_name(card.name)
    if shadowed and not force:
        raise RooflineError(f"'{card.name}' names the bundled card {shadowed}, which this card would hide; pass "
                            "--name NEW, or --force to hide it")
    write_atomic(target, card_to_yaml(card), "--to")
    notes = assumed_notes(card.notes)  # defaults it filled in, formats it could not model
    data = {"name": card.name, "path": str(target), **model_record(card)["derived"], "notes": notes}

    def render():
        yield f"wrote [bold]{target}[/bold]: {billions(data['total_params'])} params " \
              f"({billions(data['active_params'])} active), {data['layers']}, {gb(data['weights_bytes'], 2)} GB of weights"
        if notes:
            yield f"[yellow]notes[/yellow]: {notes}"

    emit(data, as_json, render)


def _bundled_name(name: str) -> str | None:
    """The bundled model card `name` is the name or an alias of, if any (an imported card of that name hides it)."""
    bundled = CardStore(with_user_cards=False).all("models")
    return next((c.name for c in bundled if name.lower() in (a.lower() for a in names_of(c))), None)
