"""The first call of PyTorch's attention at a sequence length it has not seen, per backend, beside the calls after
it; and the same for a GEMM of a new row count (needs a CUDA GPU). Why the micro-engine's eager steps keep to the
flash / memory-efficient / math backends (engine/model/runner.py EAGER_ATTENTION): docs/calibration.md.

    python benchmarks/sdpa_first_call.py   # prints one line per call; ~10 s on an H100

Shapes are qwen2.5-7b's attention (28 query heads, 4 KV heads, head dim 128, bf16) and its MLP up-projection.
"""

from __future__ import annotations

import contextlib
import random
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {"default": None,
            "no cuDNN": [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH],
            "cuDNN only": [SDPBackend.CUDNN_ATTENTION], "flash only": [SDPBackend.FLASH_ATTENTION]}
HEADS, KV_HEADS, HEAD_DIM, HIDDEN, INTERMEDIATE = 28, 4, 128, 3584, 18944


def ms(f) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    f()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


def main() -> None:
    dev, bf = "cuda", torch.bfloat16
    for i, (label, backends) in enumerate(BACKENDS.items()):
        for n in random.Random(i).sample(range(200 + 300 * i, 500 + 300 * i), 5):  # lengths no backend saw before
            q = torch.randn(1, HEADS, n, HEAD_DIM, device=dev, dtype=bf)
            k = torch.randn(1, KV_HEADS, n, HEAD_DIM, device=dev, dtype=bf)
            with sdpa_kernel(backends) if backends else contextlib.nullcontext():
                call = lambda: F.scaled_dot_product_attention(q, k, k, is_causal=True, enable_gqa=True)  # noqa: E731
                first, second, third = ms(call), ms(call), ms(call)
            print(f"attention {label:10s} {n:4d} tokens: first {first:8.2f} ms, then {second:.3f} / {third:.3f} ms")
    w = torch.randn(HIDDEN, INTERMEDIATE, device=dev, dtype=bf)
    for n in random.Random(9).sample(range(1700, 2000), 4):
        x = torch.randn(n, HIDDEN, device=dev, dtype=bf)
        print(f"GEMM {n:4d} x {HIDDEN} x {INTERMEDIATE}: first {ms(lambda: x @ w):8.2f} ms, "
              f"then {ms(lambda: x @ w):.3f} ms")


if __name__ == "__main__":
    main()
