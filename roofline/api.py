"""The Python API: names or cards in, pydantic predictions or DataFrames out."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from .cards import CardStore
from .grid import sweep as _sweep
from .hardware import HardwareCard
from .modelcard import ModelCard
from .request import Prediction
from .request import predict as _predict
from .workload import Workload, make_workload


def _store(cards: Iterable[str | Path] | None) -> CardStore:
    return CardStore(extra_dirs=[Path(c) for c in cards or []])


def _model(st: CardStore, m: str | ModelCard) -> ModelCard:
    return m if isinstance(m, ModelCard) else st.model(m)


def _hw(st: CardStore, h: str | HardwareCard) -> HardwareCard:
    return h if isinstance(h, HardwareCard) else st.hardware(h)


def predict(model: str | ModelCard, hardware: str | HardwareCard, workload: Workload | None = None, *,
            draft: str | ModelCard | None = None, cards: Iterable[str | Path] | None = None, **fields) -> Prediction:
    """`roofline.predict("llama-3.3-70b", "dgx-spark", quant="nvfp4", prompt_tokens=500)` -> Prediction.

    Pass a Workload or its fields (prompt_tokens, output_tokens, batch, quant, kv_quant, spec_tokens, accept_rate,
    context_tokens). Cards may be names, aliases, paths or card objects."""
    st = _store(cards)
    wl = workload or make_workload(**fields)
    return _predict(_model(st, model), _hw(st, hardware), wl, draft=_model(st, draft) if draft else None)


def sweep(models, hardware, batches=(1,), prompts=(500,), workload: Workload | None = None, *,
          ceiling: bool = False, cards: Iterable[str | Path] | None = None, **fields):
    """Vectorised grid over models x hardware x batches x prompt lengths -> pandas DataFrame (one row a point)."""
    st = _store(cards)
    models = [models] if isinstance(models, (str, ModelCard)) else models
    hardware = [hardware] if isinstance(hardware, (str, HardwareCard)) else hardware
    wl = workload or make_workload(**fields)
    return _sweep([_model(st, m) for m in models], [_hw(st, h) for h in hardware], batches, prompts, wl, ceiling)
