"""The batch sizes a decode step is captured at as a CUDA graph (the micro-engine's ladder, vLLM's default
cudagraph capture sizes too): 1, 2, 4, 8, then every 8 up to the largest. A step of B sequences replays the
smallest bucket holding B, so its GEMMs and lm_head run the bucket's rows (the rest padding). Torch-free: the
engine captures these buckets, the predictor times a replayed step at them."""

from __future__ import annotations

import numpy as np

from roofline.cards.schema import Num

SMALL_BUCKETS = (1, 2, 4, 8)
BUCKET_STEP = 8  # above 8 sequences, a bucket every 8 (vLLM's cudagraph_capture_sizes: 1, 2, 4, then 8, 16, ...)


def batch_buckets(max_batch: int) -> list[int]:
    """Bucket sizes up to `max_batch` (included): 1, 2, 4, 8, 16, 24, ... ; max_batch itself is the last bucket."""
    if max_batch < 1:
        raise ValueError(f"max_batch must be >= 1, got {max_batch}")
    sizes = [b for b in SMALL_BUCKETS if b < max_batch]
    sizes += list(range(2 * BUCKET_STEP, max_batch, BUCKET_STEP))
    return sorted(set(sizes) | {max_batch})


def bucket_for(batch: int, buckets: list[int]) -> int | None:
    """The smallest bucket holding `batch` sequences; None beyond the largest (that step runs eagerly)."""
    return next((b for b in buckets if b >= batch), None)


def padded_batch(batch: Num, max_batch: float) -> Num:
    """The bucket a replayed step of `batch` sequences runs (broadcast); `batch` itself beyond the largest bucket."""
    buckets = np.asarray(batch_buckets(max(int(max_batch), 1)), dtype=float)
    b = np.asarray(batch, dtype=float)
    i = np.minimum(np.searchsorted(buckets, b), len(buckets) - 1)
    return np.where(b <= buckets[-1], np.maximum(buckets[i], b), b)
