"""Find and load cards: bundled (in the wheel), the user directory ($ROOFLINE_HOME) and --cards directories.

A card of the same name in a later source overrides an earlier one: bundled < user dir < --cards.
`--hw`/`--model` may also be a path to a YAML card (or, for models, a transformers config.json).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

import yaml
from pydantic import BaseModel

from roofline.cards.card_file import DIRECTORY, WEIGHT_FILE_SUFFIXES, ModelLoader, load_card
from roofline.cards.hardware import HardwareCard
from roofline.cards.model import ModelCard
from roofline.cards.tags import ollama_library_format, split_format_tag
from roofline.errors import CardError, RooflineError, UnknownNameError

if TYPE_CHECKING:
    from roofline.cards.runtime import RuntimeChoice

Card = TypeVar("Card")  # HardwareCard, ModelCard or RuntimeProfile
_PKG = Path(__file__).resolve().parent.parent  # the roofline package
KINDS = ("hardware", "models", "runtimes")


def schema_of(kind: str) -> type:
    """The card schema of a kind; runtime profiles' is imported on first use (most commands never read one)."""
    if kind == "runtimes":
        from roofline.cards.runtime import RuntimeProfile

        return RuntimeProfile
    return {"hardware": HardwareCard, "models": ModelCard}[kind]
WHAT = {"hardware": "hardware", "models": "model", "runtimes": "runtime"}
LIST_CMD = {"hardware": "roofline hw list", "models": "roofline models list", "runtimes": "roofline runtimes list"}


def bundled_dir() -> Path:
    """Cards inside the installed wheel (roofline/data/) or, in a checkout, the repository root."""
    inside = _PKG / "data"
    return inside if (inside / "hardware").is_dir() else _PKG.parent


def user_dir() -> Path | None:
    """$ROOFLINE_HOME, default ~/.config/roofline; holds hardware/, models/ and runtimes/ like the bundled set. None
    where neither names a place: $ROOFLINE_HOME unset and $HOME unset, empty or relative (no user cards to read)."""
    if os.environ.get("ROOFLINE_HOME"):
        return Path(os.environ["ROOFLINE_HOME"])
    if "HOME" in os.environ and not os.environ["HOME"].strip():
        return None  # Path.home() would read an empty HOME as the filesystem root
    try:
        home = Path.home()
    except RuntimeError:  # no HOME and no password entry
        return None
    return home / ".config" / "roofline" if home.is_absolute() else None


def writable_user_dir(flag: str) -> Path:
    """The user card directory to write to, refused in one line where $HOME gives none or names no folder (a card
    written under a relative or missing home would land outside any place the user named)."""
    home = user_dir()
    if home is None or not os.environ.get("ROOFLINE_HOME") and not home.parent.parent.is_dir():
        raise RooflineError(f"no card directory to write to: $ROOFLINE_HOME is unset and $HOME "
                            f"({os.environ.get('HOME', 'unset')!r}) is not an existing folder; set ROOFLINE_HOME to a "
                            f"folder or give {flag}")
    return home


def _check_user_dir(home: Path) -> None:
    """$ROOFLINE_HOME may be absent (nothing of the user's yet), never a file where a folder belongs."""
    for path in (home, *(home / kind for kind in KINDS)):
        if path.exists() and not path.is_dir():
            raise RooflineError(f"ROOFLINE_HOME: {path} is not a folder; point ROOFLINE_HOME at a folder holding "
                                "hardware/, models/ and runtimes/ (or unset it for ~/.config/roofline)")


@dataclass
class _Entry(Generic[Card]):
    path: Path
    origin: str  # bundled | user | cards
    _card: Card | None = None
    error: RooflineError | None = None  # why the card could not be loaded (kept: asked again, raised again)


@dataclass
class CardStore:
    """All cards visible to one command. Loads each YAML lazily, once."""

    extra_dirs: list[Path | str] = field(default_factory=list)
    # suffix -> reader of a model file given by path (roofline.importers.open_store fills it: .json, ...)
    model_loaders: dict[str, ModelLoader] = field(default_factory=dict)
    _index: dict[str, dict[str, _Entry]] = field(default_factory=dict)
    with_user_cards: bool = True  # False: the bundled set (and --cards) only, as shipped

    def __post_init__(self):
        for d in self.extra_dirs:
            if isinstance(d, str) and not d.strip():  # --cards '' (the CLI passes the text; Path('') is '.')
                raise RooflineError("--cards: empty path; give the folder that holds hardware/, models/ and/or "
                                    "runtimes/ (--cards ./my-cards)")
            if not Path(d).is_dir():
                raise RooflineError(f"--cards: {d} is not a directory (it should hold hardware/, models/ and/or "
                                    "runtimes/)")
            if not any((Path(d) / kind).is_dir() for kind in KINDS):
                raise RooflineError(f"--cards: {d} has none of the folders hardware/, models/, runtimes/")
        home = user_dir() if self.with_user_cards else None
        if home is not None:
            _check_user_dir(home)

    def sources(self) -> list[tuple[str, Path]]:
        home = user_dir() if self.with_user_cards else None
        user = [("user", home)] if home is not None else []
        return [("bundled", bundled_dir())] + user + [("cards", Path(d)) for d in self.extra_dirs]

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
        """The entry's card, loaded once; a card that cannot be loaded raises its CardError every time asked."""
        if entry._card is None:
            if entry.error is not None:
                raise entry.error
            try:
                entry._card = load_card(schema_of(kind), entry.path)
            except RooflineError as err:
                entry.error = err
                raise
        return entry._card

    def all(self, kind: str) -> list:
        """Every card of `kind` that loads. One that does not is left out and kept in `problems`: a bad user card
        breaks only the commands that name it (listings show it as a warning)."""
        cards = []
        for _, entry in sorted(self._entries(kind).items()):  # by name ("llama.cpp" before "llama.cpp-vulkan")
            try:
                cards.append(self._card(kind, entry))
            except RooflineError:
                pass
        return cards

    def problems(self, kind: str) -> list[str]:
        """One line per card of `kind` that could not be loaded (after `all`)."""
        return [str(e.error) for e in self._entries(kind).values() if e.error is not None]

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
        if kind == "models" and as_path.suffix.lower() in WEIGHT_FILE_SUFFIXES and as_path.is_file():
            raise RooflineError(f"{as_path}: a weights file alone has no architecture; give its checkpoint folder "
                                "(config.json beside the *.safetensors), the config.json or a .gguf file")
        looks_like_path = name.startswith(("/", "./", "../", "~")) or as_path.suffix.lower() in (".yaml", ".yml",
                                                                                                 *self.model_loaders)
        if looks_like_path or os.sep in name and as_path.exists():
            if kind == "models" and as_path.name.endswith(".safetensors.index.json") and as_path.is_file():
                as_path = as_path.parent  # the index names the checkpoint: read its folder
            if as_path.is_dir() and kind == "models" and DIRECTORY in self.model_loaders:
                return self.model_loaders[DIRECTORY](as_path)
            if not as_path.exists():
                raise CardError(as_path, "", "no such file")
            return load_card(schema_of(kind), as_path, self.model_loaders)
        card = self._by_name(kind, name)
        if card is not None:
            return card
        if "," in name:  # a list where one card is asked for had resolved to one of its names
            raise RooflineError(f"{what} {name!r}: one name here; `roofline compare` (and `capacity` for --hw) takes "
                                "a comma-separated list")
        if kind == "hardware" and name.strip().lower() in ("host", "host-cpu"):
            from roofline.cards.host import host_card  # measured on first use

            return host_card()
        if kind == "models":
            base, fmt = split_format_tag(name)
            card = self._by_name(kind, base) if fmt else None
            if card is not None:
                return card
        if kind == "hardware":  # a datasheet's longer name: 'NVIDIA H100' and 'H100 SXM5 80GB' are the h100 card
            found = self._token_matches(kind, name, numbered=True)
            if len(found) == 1:
                return self._card(kind, self._entries(kind)[found[0]])
        known = {alias: c.name for c in self.all(kind) for alias in names_of(c)}
        bad = self.problems(kind)
        unreadable = f"{len(bad)} card file(s) could not be read, e.g. {bad[0]}" if bad else ""
        raise UnknownNameError(what, name, known, f"see `{LIST_CMD[kind]}`", unreadable)

    def _by_name(self, kind: str, name: str):
        """The card whose file stem, name or alias is `name`: exactly (case-insensitive), else with spaces, case
        and punctuation ignored ("DGX Spark" = dgx-spark, "Llama 3.3 70B" = llama-3.3-70b). None if none; an
        error if the loose spelling names two cards."""
        key = name.strip().lower()
        entries = self._entries(kind)
        if key in entries:
            return self._card(kind, entries[key])
        exact: dict[str, list] = {}
        loose: dict[str, dict[str, object]] = {}
        for card in self.all(kind):
            for alias in names_of(card):
                claim = exact.setdefault(alias.lower(), [])
                if card not in claim:  # a card may list one alias in two spellings
                    claim.append(card)
                loose.setdefault(name_key(alias), {})[card.name] = card
        if key in exact:
            return self._claimed(kind, name, exact[key])
        found = loose.get(name_key(name), {})
        if len(found) > 1:
            raise RooflineError(f"'{name}' could mean {', '.join(sorted(found))}; give one of these names")
        return next(iter(found.values()), None)

    def _claimed(self, kind: str, name: str, cards: list):
        """The card an alias names when several claim it: the one from the later source (--cards over the user
        directory over the bundled set, as a card's own name overrides); two from one source are an error."""
        rank = {origin: i for i, (origin, _) in enumerate(self.sources())}
        entries = self._entries(kind)
        top = max(rank[entries[c.name].origin] for c in cards)
        best = [c for c in cards if rank[entries[c.name].origin] == top]
        if len(best) > 1:
            raise RooflineError(f"'{name}' is an alias of {', '.join(sorted(c.name for c in best))}; give one of "
                                "these names (or drop the alias from one card)")
        return best[0]

    def model_and_format(self, name: str) -> tuple[ModelCard, str | None]:
        """A model and the weight formats its name carries, if any: a published checkpoint the card lists
        ('nvidia/Gemma-4-31B-IT-NVFP4' -> (gemma-4-31b, 'ffn=nvfp4,default=bf16')), an Ollama tag like
        'llama3.3:70b-instruct-q4_K_M' -> (llama-3.3-70b, 'q4_k_m'), a bare Ollama library tag 'qwen3:30b' -> (its card,
        the library's format: `ollama_library_format`); a plain name -> (card, None)."""
        base, fmt = split_format_tag(name)
        if fmt and self._by_name("models", name) is None and self._by_name("models", base) is not None:
            return self.get("models", base), fmt
        card = self.get("models", name)
        fmt = checkpoint_weights(card, name)
        if fmt is None and ":" in name and not Path(name).expanduser().exists():
            fmt = ollama_library_format(card)
        return card, fmt

    def match(self, kind: str, text: str):
        """The card a free-text description names ("2x NVIDIA H100 SXM 80GB" -> h100-sxm, "ggml-org/Qwen2.5-Coder-
        7B-Q8_0-GGUF" -> qwen2.5-7b): the card with a name or alias whose every token appears in the text, most
        tokens first. Raises UnknownNameError when none or two cards match equally."""
        cards = {card.name: card for card in self.all(kind)}
        found = self._token_matches(kind, text)
        if len(found) != 1:
            known = {a.lower(): c.name for c in cards.values() for a in names_of(c)}
            why = f"matches {', '.join(found)} equally" if found else "names no card"
            raise UnknownNameError(WHAT[kind], text, known, why)
        return cards[found[0]]

    def _token_matches(self, kind: str, text: str, numbered: bool = False) -> list[str]:
        """The cards with a name or alias whose every token appears in `text`, those with the most tokens;
        `numbered`: only aliases with a token holding a digit (a chip's number: 'h100', 'm2'), never a vendor or
        family word alone."""
        words = set(_tokens(text))
        sized = any(_SIZE.fullmatch(w) for w in words)
        best: dict[str, int] = {}
        for card in self.all(kind):
            for alias in names_of(card):
                toks = _tokens(alias)
                # a text that states a size ("Qwen3-4B") is not matched by a family-only alias ("qwen3")
                if sized and not any(_SIZE.fullmatch(t) for t in toks):
                    continue
                if numbered and not any(any(ch.isdigit() for ch in t) for t in toks):
                    continue
                if numbered and _another_part(card, words - set(toks)):
                    continue
                if toks and set(toks) <= words:
                    best[card.name] = max(best.get(card.name, 0), len(toks))
        top = max(best.values(), default=0)
        return [name for name, n in best.items() if n == top]

    def hardware(self, name: str) -> HardwareCard:
        return self.get("hardware", name)

    def model(self, name: str) -> ModelCard:
        return self.get("models", name)

    def runtime(self, spec: str, date: str | None = None) -> RuntimeChoice:
        """A runtime profile from `NAME[@VERSION]` ('vllm@0.11', 'llama-cpp@b6918', 'nim'); no version: the newest
        profile (or, given `date`, the version in use then)."""
        from roofline.cards.runtime import choose_version

        name, at, version = spec.strip().partition("@")
        if at and (not version.strip() or "@" in version):
            raise RooflineError(f"--runtime {spec}: give one version after '@'; write {name.strip()}@VERSION "
                                f"(e.g. vllm@0.11, llama.cpp@b6918) or {name.strip()} for the newest profile")
        profile = self.get("runtimes", name)
        self._check_lender(profile)
        try:
            return choose_version(profile, version.strip() or None, date)
        except ValueError as err:
            raise RooflineError(f"--runtime: {err}") from None

    def _check_lender(self, profile) -> None:
        """A profile's `kernels_from` names another known runtime (by name or alias), and no chain of lenders leads
        back to it: one line (CardError) otherwise."""
        seen, current = [profile.name], profile
        while current.kernels_from is not None:
            try:
                current = self.get("runtimes", current.kernels_from)
            except RooflineError:
                raise CardError(profile.name, "kernels_from", f"{current.kernels_from!r} is no runtime profile; name "
                                "one `roofline runtimes` lists") from None
            if current.name in seen:
                raise CardError(profile.name, "kernels_from", f"{' -> '.join([*seen, current.name])} lends kernels "
                                "back to itself; name the runtime whose kernels it runs") from None
            seen.append(current.name)


def names_of(card) -> tuple[str, ...]:
    """Every name a card answers to: its name, its aliases and (model cards) its published checkpoints."""
    return (card.name, *card.aliases, *getattr(card, "checkpoints", {}))


def checkpoint_weights(card: ModelCard, name: str) -> str | None:
    """The weight formats of the published checkpoint `name` names (spelt as `_by_name` matches), else None."""
    key = name_key(name)
    return next((spec.weights for checkpoint, spec in card.checkpoints.items() if name_key(checkpoint) == key), None)


def card_to_yaml(card: BaseModel) -> str:
    """Serialise a card back to YAML (SI numbers, field names as written in cards)."""
    data = card.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_defaults=True)
    for key in ("name",):
        data = {key: data.pop(key), **data}
    return yaml.safe_dump(data, sort_keys=False, width=120, allow_unicode=True)


def name_key(text: str) -> str:
    """A name with case, spaces and punctuation other than '.' dropped: 'DGX Spark' and 'dgx-spark' -> 'dgxspark',
    'Llama 3.3 70B' and 'llama3.3:70b' -> 'llama3.370b' (the dot kept: 'qwen2.5-7b' is not 'qwen25-7b')."""
    return re.sub(r"[^a-z0-9.]+", "", text.lower())


_SIZE = re.compile(r"\d+[bm]")  # a parameter-count token: "4b", "70b", "135m"


_VARIANT_WORDS = {"ti", "super", "laptop", "mobile", "notebook", "maxq", "nvl", "xt", "xtx", "gre"}
_MEMORY_SIZE = re.compile(r"(\d+)gb?")  # "8g", "24gb"


def _another_part(card, extra: set[str]) -> bool:
    """Whether words a name has beyond a card's alias name another part: a variant ("ti", "laptop", "nvl") or a
    memory size the card lacks ("rtx-3060-8g" is not the 12 GiB rtx-3060-12g)."""
    if extra & _VARIANT_WORDS:
        return True
    gib = round(card.memory.capacity_bytes / 2**30)
    return any(int(m.group(1)) != gib for w in extra if (m := _MEMORY_SIZE.fullmatch(w)))


def _tokens(text: str) -> list[str]:
    """Lower-case alphanumeric runs: "Qwen2.5-7B" -> ["qwen2", "5", "7b"]."""
    return re.findall(r"[a-z0-9]+", text.lower())
