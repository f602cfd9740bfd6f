"""Model cards from the files users have: a transformers config.json, a GGUF file, a safetensors checkpoint folder.

`open_store` is the card store every command uses: the YAML cards plus these importers for model files given by path.
"""

from __future__ import annotations

from pathlib import Path

from roofline.cards.model import ModelCard
from roofline.cards.store import DIRECTORY, CardStore
from roofline.errors import CardError, RooflineError


def _config_json(path: Path) -> ModelCard:
    from roofline.importers.config_json import (
        card_from_config_file,  # imported when a config.json is named
    )

    return card_from_config_file(path)


def _gguf(path: Path) -> ModelCard:
    from roofline.importers.gguf import card_from_gguf  # imports the gguf package: only when a .gguf is named

    return card_from_gguf(path)


def _checkpoint_dir(path: Path) -> ModelCard:
    from roofline.importers.safetensors import card_from_checkpoint

    return card_from_checkpoint(path)


# suffix -> reader of a model file given by path; DIRECTORY reads a folder (a safetensors checkpoint)
MODEL_LOADERS = {".json": _config_json, ".gguf": _gguf, DIRECTORY: _checkpoint_dir}


def import_model(path: Path, name: str | None = None) -> ModelCard:
    """A card from a config.json, a GGUF file or a safetensors checkpoint folder (`roofline models import`)."""
    path = Path(path).expanduser()
    if path.is_dir():
        from roofline.importers.safetensors import card_from_checkpoint

        return card_from_checkpoint(path, name=name)
    if path.suffix.lower() == ".gguf":
        from roofline.importers.gguf import card_from_gguf

        return card_from_gguf(path, name=name)
    if path.suffix.lower() == ".json":
        from roofline.importers.config_json import card_from_config_file

        return card_from_config_file(path, name=name)
    if not path.exists():
        raise CardError(path, "", "cannot read file (no such file or folder)")
    raise RooflineError(f"{path}: cannot import a '{path.suffix}' file; give a config.json, a .gguf file or a "
                        "safetensors checkpoint folder")


def open_store(extra_dirs: list[Path] | None = None) -> CardStore:
    """Bundled, user and `extra_dirs` cards; a model may also be a file an importer reads."""
    return CardStore(extra_dirs=list(extra_dirs or []), model_loaders=dict(MODEL_LOADERS))
