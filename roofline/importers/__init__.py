"""Model cards from the files users have: a transformers config.json (and, next, GGUF and safetensors headers).

`open_store` is the card store every command uses: the YAML cards plus these importers for model files given by path.
"""

from __future__ import annotations

from pathlib import Path

from roofline.cards.model import ModelCard
from roofline.cards.store import CardStore


def _config_json(path: Path) -> ModelCard:
    from roofline.importers.config_json import (
        card_from_config_file,  # imported when a config.json is named
    )

    return card_from_config_file(path)


MODEL_LOADERS = {".json": _config_json}


def open_store(extra_dirs: list[Path] | None = None) -> CardStore:
    """Bundled, user and `extra_dirs` cards; a model may also be a file an importer reads."""
    return CardStore(extra_dirs=list(extra_dirs or []), model_loaders=dict(MODEL_LOADERS))
