"""`fits`' fewest GPUs tries every tensor/pipeline split of each count that the layout checks accept, so no smaller
power-of-two count holds the model in any accepted layout (MLA's latent is copied whole on every tensor-parallel
GPU: DeepSeek-V3 can fit in pipeline stages where tensor parallel does not; a PCIe card runs tensor parallel over
PCIe)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from roofline.cards.store import CardStore
from roofline.errors import RooflineError
from roofline.perf.parallel import check_parallel
from roofline.sizing.memory import GPU_COUNTS, Deployment, memory_budget, min_gpus

STORE = CardStore()


def _fits_somehow(card, hw, n: int, concurrency: int) -> bool:
    for tp in (t for t in GPU_COUNTS if n % t == 0):
        try:
            check_parallel(card, hw, tp, n // tp)
        except RooflineError:
            continue
        layout = Deployment(tp=tp, pp=n // tp)
        if memory_budget(card, hw, None, "bf16", 8192, concurrency, layout).fits:
            return True
    return False


@pytest.mark.parametrize("model, hw, concurrency", [
    ("gpt-oss-20b", "arc-a580", 1), ("deepseek-v3", "b100", 32), ("gemma-3-27b", "a10", 32),
    ("llama-3.3-70b", "h100-sxm", 1), ("llama-3.1-405b", "h100-sxm", 8), ("mixtral-8x7b", "rtx-4090", 4),
])
def test_no_fewer_gpus_hold_the_model_in_any_accepted_layout(model, hw, concurrency):
    card, hwc = STORE.model(model), STORE.hardware(hw)
    found = min_gpus(card, hwc, None, "bf16", 8192, concurrency)
    assert found is not None
    n = found.tp * found.pp
    check_parallel(card, hwc, found.tp, found.pp)
    assert memory_budget(card, hwc, None, "bf16", 8192, concurrency, replace(found)).fits
    assert n == 1 or not _fits_somehow(card, hwc, n // 2, concurrency)
