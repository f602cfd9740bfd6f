"""One card file read and validated: a hardware card, a model card or a runtime profile from YAML, or a model from a
file an importer reads (config.json, GGUF, a safetensors folder), each problem one line naming file, field and fix."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, TypeVar

from pydantic import ValidationError

from roofline.cards.files import open_regular, read_yaml_file
from roofline.cards.model import ModelCard
from roofline.cards.schema import first_problem
from roofline.errors import CardError

Card = TypeVar("Card")  # HardwareCard, ModelCard or RuntimeProfile


def read_yaml(path: Path) -> dict:
    """A card file's mapping, read through the bounded loader (size, depth, aliases, duplicate keys)."""
    data = read_yaml_file(path)
    if not isinstance(data, dict):
        raise CardError(path, "", "a card must be a YAML mapping of fields (name: ..., ...)")
    return data


# a complete card of each kind, shown where a card has a field its schema lacks
_EXAMPLE = {"HardwareCard": "roofline hw show h100-sxm", "ModelCard": "roofline models show llama-3.1-8b",
            "RuntimeProfile": "roofline runtimes show vllm"}


# a field only one kind of card has -> (that kind, what to do with such a card)
_KIND_MARKS = {"peak_flops": ("HardwareCard", "a hardware card: give it to --hw"),
               "architecture": ("ModelCard", "a model card: give it to --model"),
               "runs_on": ("RuntimeProfile", "a runtime profile: put it in a runtimes/ folder, name it in --runtime")}


def validate_card(schema: type[Card], data: dict, path: object) -> Card:
    """Validate a mapping into a card; the first problem becomes one line naming file, field and fix."""
    for mark, (kind, use) in _KIND_MARKS.items():
        if mark in data and kind != schema.__name__:
            raise CardError(path, "", f"this is {use}")
    try:
        return schema.model_validate(data)
    except ValidationError as err:
        loc, msg, first = first_problem(err)
        loc = loc or "card"
        if first["type"] == "extra_forbidden" and "suggestion" not in first:
            example = _EXAMPLE.get(schema.__name__, _EXAMPLE["HardwareCard"])
            msg = f"unknown field (check the spelling; see `{example}` for a complete card)"
        raise CardError(path, loc, msg) from None


ModelLoader = Callable[[Path], ModelCard]
# weight files that hold tensors but not the architecture: their folder (or config.json) is the model
WEIGHT_FILE_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt")
DIRECTORY = "/"  # the model_loaders key of the reader of a folder (a safetensors checkpoint)


def _has_gguf_magic(path: Path) -> bool:
    """Whether a regular file starts with GGUF's magic (never blocks: a FIFO or device is not read here, and the
    YAML reader then refuses it in one line)."""
    try:
        with open_regular(path) as f:
            return f.read(4) == b"GGUF"
    except (OSError, CardError):
        return False


def load_card(schema: type[Card], path: Path, model_loaders: dict[str, ModelLoader] | None = None) -> Card:
    """A card from a YAML file, or a model from a file an importer reads (config.json, ...) by its suffix."""
    key = DIRECTORY if path.is_dir() else path.suffix.lower()
    if schema is ModelCard and key not in (model_loaders or {}) and _has_gguf_magic(path):
        key = ".gguf"  # a GGUF file saved without its extension
    loader = (model_loaders or {}).get(key) if schema is ModelCard else None
    if loader is not None:
        return loader(path)
    card = validate_card(schema, read_yaml(path), path)
    if card.name != path.stem.lower():  # the same rule for a card found in a directory and one given by path
        raise CardError(path, "name", f"'{card.name}' must match the file name '{path.stem}' "
                                      f"(rename the file to {card.name}{path.suffix} or change name:)")
    return card
