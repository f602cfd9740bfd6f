"""Find and load cards: bundled (in the wheel), the user directory ($ROOFLINE_HOME) and --cards directories.

A card of the same name in a later source overrides an earlier one: bundled < user dir < --cards.
`--hw`/`--model` may also be a path to a YAML card (or, for models, a transformers config.json).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Generic, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from roofline.cards.hardware import HardwareCard
from roofline.cards.model import ModelCard
from roofline.cards.runtime import RuntimeChoice, RuntimeProfile, choose_version
from roofline.cards.schema import first_problem
from roofline.errors import CardError, RooflineError, UnknownNameError

Card = TypeVar("Card", HardwareCard, ModelCard, RuntimeProfile)
_PKG = Path(__file__).resolve().parent.parent  # the roofline package
KINDS = {"hardware": HardwareCard, "models": ModelCard, "runtimes": RuntimeProfile}
WHAT = {"hardware": "hardware", "models": "model", "runtimes": "runtime"}
LIST_CMD = {"hardware": "roofline hw list", "models": "roofline models list", "runtimes": "roofline runtimes list"}


def bundled_dir() -> Path:
    """Cards inside the installed wheel (roofline/data/) or, in a checkout, the repository root."""
    inside = _PKG / "data"
    return inside if (inside / "hardware").is_dir() else _PKG.parent


def user_dir() -> Path:
    """$ROOFLINE_HOME, default ~/.config/roofline; holds hardware/, models/ and runtimes/ like the bundled set."""
    return Path(os.environ.get("ROOFLINE_HOME") or Path.home() / ".config" / "roofline")


def _loader():
    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(path: Path) -> dict:
    try:
        data = yaml.load(path.read_text(), Loader=_loader())
    except OSError as err:
        raise CardError(path, "", f"cannot read file ({err.strerror})") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "file"
        raise CardError(path, where, f"not valid YAML ({getattr(err, 'problem', err)})") from None
    if not isinstance(data, dict):
        raise CardError(path, "", "a card must be a YAML mapping of fields (name: ..., ...)")
    return data


def validate_card(schema: type[Card], data: dict, path: object) -> Card:
    """Validate a mapping into a card; the first problem becomes one line naming file, field and fix."""
    try:
        return schema.model_validate(data)
    except ValidationError as err:
        loc, msg, first = first_problem(err)
        loc = loc or "card"
        if first["type"] == "extra_forbidden":
            msg = "unknown field (check the spelling; see `roofline hw show h100-sxm` for a complete card)"
        raise CardError(path, loc, msg) from None


ModelLoader = Callable[[Path], ModelCard]
DIRECTORY = "/"  # the model_loaders key of the reader of a folder (a safetensors checkpoint)


def load_card(schema: type[Card], path: Path, model_loaders: dict[str, ModelLoader] | None = None) -> Card:
    """A card from a YAML file, or a model from a file an importer reads (config.json, ...) by its suffix."""
    key = DIRECTORY if path.is_dir() else path.suffix.lower()
    loader = (model_loaders or {}).get(key) if schema is ModelCard else None
    if loader is not None:
        return loader(path)
    return validate_card(schema, read_yaml(path), path)


@dataclass
class _Entry(Generic[Card]):
    path: Path
    origin: str  # bundled | user | cards
    _card: Card | None = None


@dataclass
class CardStore:
    """All cards visible to one command. Loads each YAML lazily, once."""

    extra_dirs: list[Path] = field(default_factory=list)
    # suffix -> reader of a model file given by path (roofline.importers.open_store fills it: .json, ...)
    model_loaders: dict[str, ModelLoader] = field(default_factory=dict)
    _index: dict[str, dict[str, _Entry]] = field(default_factory=dict)

    def sources(self) -> list[tuple[str, Path]]:
        return [("bundled", bundled_dir()), ("user", user_dir())] + [("cards", Path(d)) for d in self.extra_dirs]

    def _entries(self, kind: str) -> dict[str, _Entry]:
        if kind not in self._index:
            entries: dict[str, _Entry] = {}
            for origin, root in self.sources():
                folder = root / kind
                for path in sorted(folder.glob("*.y*ml")) if folder.is_dir() else []:
                    entries[path.stem.lower()] = _Entry(path, origin)  # later sources override
            self._index[kind] = entries
        return self._index[kind]

    def _card(self, kind: str, entry: _Entry):
        if entry._card is None:
            entry._card = load_card(KINDS[kind], entry.path)
            if entry._card.name != entry.path.stem.lower():
                raise CardError(entry.path, "name", f"'{entry._card.name}' must match the file name '{entry.path.stem}'")
        return entry._card

    def all(self, kind: str) -> list:
        return [self._card(kind, e) for e in self._entries(kind).values()]

    def origin(self, kind: str, name: str) -> str:
        return self._entries(kind)[name].origin

    def origin_of(self, kind: str, card) -> str:
        """Where a loaded card came from: bundled, user, cards — or path when it was given as a file."""
        entry = self._entries(kind).get(card.name)
        return entry.origin if entry is not None and entry._card is card else "path"

    def get(self, kind: str, name: str):
        """A card by name, alias (case-insensitive) or file path."""
        what = WHAT[kind]
        if not name or not name.strip():
            raise RooflineError(f"no {what} given; pass a name (see `{LIST_CMD[kind]}`)")
        as_path = Path(name).expanduser()
        if as_path.suffix in (".yaml", ".yml", *self.model_loaders) or os.sep in name and as_path.exists():
            if as_path.is_dir() and kind == "models" and DIRECTORY in self.model_loaders:
                return self.model_loaders[DIRECTORY](as_path)
            if not as_path.is_file():
                raise CardError(as_path, "", "no such file")
            return load_card(KINDS[kind], as_path, self.model_loaders)
        key = name.strip().lower()
        entries = self._entries(kind)
        if key in entries:
            return self._card(kind, entries[key])
        aliases = {}
        for card in self.all(kind):
            for alias in (card.name, *card.aliases):
                aliases.setdefault(alias.lower(), card)
        if key in aliases:
            return aliases[key]
        if kind == "hardware" and key in ("host", "host-cpu"):
            from roofline.cards.host import host_card  # measured on first use

            return host_card()
        known = {alias: card.name for alias, card in aliases.items()}
        raise UnknownNameError(what, name, known, f"see `{LIST_CMD[kind]}`")

    def match(self, kind: str, text: str):
        """The card a free-text description names ("2x NVIDIA H100 SXM 80GB" -> h100-sxm, "ggml-org/Qwen2.5-Coder-
        7B-Q8_0-GGUF" -> qwen2.5-7b): the card with a name or alias whose every token appears in the text, most
        tokens first. Raises UnknownNameError when none or two cards match equally."""
        words = set(_tokens(text))
        cards = {card.name: card for card in self.all(kind)}
        best: dict[str, int] = {}
        for card in cards.values():
            for alias in (card.name, *card.aliases):
                toks = _tokens(alias)
                if toks and set(toks) <= words:
                    best[card.name] = max(best.get(card.name, 0), len(toks))
        top = max(best.values(), default=0)
        found = [name for name, n in best.items() if n == top]
        if len(found) != 1:
            known = {a.lower(): c.name for c in cards.values() for a in (c.name, *c.aliases)}
            why = f"matches {', '.join(found)} equally" if found else "names no card"
            raise UnknownNameError(WHAT[kind], text, known, why)
        return cards[found[0]]

    def hardware(self, name: str) -> HardwareCard:
        return self.get("hardware", name)

    def model(self, name: str) -> ModelCard:
        return self.get("models", name)

    def runtime(self, spec: str, date: str | None = None) -> RuntimeChoice:
        """A runtime profile from `NAME[@VERSION]` ('vllm@0.11', 'llama-cpp@b6918', 'nim'); no version: the newest
        profile (or, given `date`, the version in use then)."""
        name, _, version = spec.strip().partition("@")
        profile = self.get("runtimes", name)
        try:
            return choose_version(profile, version.strip() or None, date)
        except ValueError as err:
            raise RooflineError(f"--runtime {spec}: {err}") from None


def card_to_yaml(card: BaseModel) -> str:
    """Serialise a card back to YAML (SI numbers, field names as written in cards)."""
    data = card.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_defaults=True)
    for key in ("name",):
        data = {key: data.pop(key), **data}
    return yaml.safe_dump(data, sort_keys=False, width=120, allow_unicode=True)


def _tokens(text: str) -> list[str]:
    """Lower-case alphanumeric runs: "Qwen2.5-7B" -> ["qwen2", "5", "7b"]."""
    return re.findall(r"[a-z0-9]+", text.lower())
