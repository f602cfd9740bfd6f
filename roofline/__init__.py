"""roofline: how fast, does it fit, and why — LLM inference on any hardware, from cards and measurements.

    import roofline
    p = roofline.predict("llama-3.3-70b", "dgx-spark", quant="nvfp4", prompt_tokens=500, output_tokens=200)
    df = roofline.sweep(["llama-3.1-8b"], ["h100-sxm", "dgx-spark"], batches=[1, 8, 64], prompts=[512, 4096])

The API imports its layers on first use, so `roofline --version` and the CLI start fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    from roofline.cards.hardware import HardwareCard
    from roofline.cards.model import ModelCard
    from roofline.perf.request import Prediction
    from roofline.perf.workload import Workload

__version__ = "0.1.0"

_LAZY = {"Workload": "roofline.perf.workload", "Prediction": "roofline.perf.request",
         "CardStore": "roofline.cards.store", "HardwareCard": "roofline.cards.hardware",
         "ModelCard": "roofline.cards.model", "RooflineError": "roofline.errors"}
__all__ = ["__version__", "predict", "sweep", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'roofline' has no attribute {name!r}")


def _resolve(cards: Iterable[str | Path] | None):
    """(model lookup, hardware lookup) over the bundled, user and `cards` directories; card objects pass through.
    The model lookup gives the card and the format its name carries ('nvidia/Gemma-4-31B-IT-NVFP4' ->
    'ffn=nvfp4,default=bf16', an Ollama tag's quant), else None."""
    from roofline.cards.hardware import HardwareCard
    from roofline.cards.model import ModelCard
    from roofline.importers import open_store

    st = open_store([Path(c) for c in cards or []])
    return (lambda m: (m, None) if isinstance(m, ModelCard) else st.model_and_format(m),
            lambda h: h if isinstance(h, HardwareCard) else st.hardware(h))


def _tagged_quant(fields: dict, formats: set) -> dict:
    """`fields` with the format the model names carry as `quant`, unless one is given; names carrying different
    formats need an explicit one."""
    formats.discard(None)
    if "quant" in fields or not formats:
        return fields
    if len(formats) > 1:
        from roofline.errors import RooflineError

        raise RooflineError(f"the model names carry different formats ({', '.join(sorted(formats))}); pass quant=")
    return {**fields, "quant": formats.pop()}


def predict(model: str | ModelCard, hardware: str | HardwareCard, workload: Workload | None = None, *,
            draft: str | ModelCard | None = None, cards: Iterable[str | Path] | None = None, **fields) -> Prediction:
    """`roofline.predict("llama-3.3-70b", "dgx-spark", quant="nvfp4", prompt_tokens=500)` -> Prediction.

    Pass a Workload or its fields (prompt_tokens, output_tokens, batch, quant, kv_quant, spec_tokens, accept_rate,
    context_tokens). Cards may be names, aliases, paths or card objects."""
    from roofline.perf.request import predict as _predict
    from roofline.perf.workload import make_workload

    model_of, hw_of = _resolve(cards)
    card, fmt = model_of(model)
    wl = workload or make_workload(**_tagged_quant(fields, {fmt}))
    return _predict(card, hw_of(hardware), wl, draft=model_of(draft)[0] if draft else None)


def sweep(models, hardware, batches=(1,), prompts=(500,), workload: Workload | None = None, *,
          ceiling: bool = False, cards: Iterable[str | Path] | None = None, **fields):
    """Vectorised grid over models x hardware x batches x prompt lengths -> pandas DataFrame (one row a point)."""
    from roofline.cards.hardware import HardwareCard
    from roofline.cards.model import ModelCard
    from roofline.perf.grid import sweep as _sweep
    from roofline.perf.workload import make_workload

    model_of, hw_of = _resolve(cards)
    models = [models] if isinstance(models, (str, ModelCard)) else models
    hardware = [hardware] if isinstance(hardware, (str, HardwareCard)) else hardware
    resolved = [model_of(m) for m in models]
    wl = workload or make_workload(**_tagged_quant(fields, {fmt for _, fmt in resolved}))
    return _sweep([card for card, _ in resolved], [hw_of(h) for h in hardware], batches, prompts, wl, ceiling)
