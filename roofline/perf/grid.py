"""Vectorised sweeps: every (batch, prompt) point of a (model, hardware) pair in one numpy evaluation."""

from __future__ import annotations

from typing import Iterable

import numpy as np

from roofline.cards.hardware import HardwareCard
from roofline.cards.model import ModelCard
from roofline.perf.efficiency import Efficiency, ceiling_for, expected_efficiency
from roofline.perf.request import request_metrics
from roofline.perf.workload import Workload
from roofline.sizing.memory import Deployment, memory_budget

METRICS = ("ttft_s", "itl_s", "e2e_s", "prefill_tok_s", "decode_tok_s", "decode_tok_s_aggregate")


def sweep_arrays(card: ModelCard, hw: HardwareCard, wl: Workload, batch, prompt, ceiling: bool = False,
                 eff: Efficiency | None = None, dep: Deployment | None = None) -> dict:
    """Metrics and memory at every point of equal-shape `batch` and `prompt` arrays (one numpy pass); `eff`: a
    runtime's efficiency (default: the card's generic one); `dep`: its memory sizing, as `predict` takes it."""
    batch = np.asarray(batch, dtype=float)
    prompt = np.asarray(prompt, dtype=float)
    eff = eff or expected_efficiency(hw)
    eff = ceiling_for(eff) if ceiling else eff
    values, _, _ = request_metrics(card, hw, wl, eff, batch=batch, prompt=prompt)
    budget = memory_budget(card, hw, wl.quant, wl.kv_quant, prompt + wl.context_tokens + wl.output_tokens, batch,
                           dep or Deployment(wl.tp, wl.pp))
    # per GPU, as the memory verdict counts them (predict's weights_bytes and kv_bytes are the whole model's)
    values.update(weights_bytes_per_gpu=np.full(batch.shape, budget.weights_bytes), kv_bytes_per_gpu=budget.kv_bytes,
                  memory_per_gpu_bytes=budget.total_bytes, fits_in_memory=budget.fits)
    return values


def sweep(models: Iterable[ModelCard], hardware: Iterable[HardwareCard], batches, prompts, wl: Workload | None = None,
          ceiling: bool = False):
    """A pandas DataFrame over models x hardware x batches x prompts (vectorised per model/hardware pair)."""
    import pandas as pd

    wl = wl or Workload()
    b, p = (a.ravel() for a in np.meshgrid(np.asarray(batches, float), np.asarray(prompts, float), indexing="ij"))
    frames = []
    for card in models:
        for hw in hardware:
            values = sweep_arrays(card, hw, wl, b, p, ceiling)
            frames.append(pd.DataFrame({"model": card.name, "hardware": hw.name, "batch": b.astype(int),
                                        "prompt_tokens": p.astype(int), **values}))
    return pd.concat(frames, ignore_index=True)
