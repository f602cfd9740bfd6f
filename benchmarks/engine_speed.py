"""How close the micro-engine gets to this machine's own limits, measured in one run.

    python benchmarks/engine_speed.py                  # llama-3.1-8b cut to 2 layers, vocab 32000
    python benchmarks/engine_speed.py --layers 3 --prefill 1024

1. The machine: read bandwidth (the better of a torch sum over a >= 1 GB buffer and a one-token F.linear over
   a >= 1 GB weight, best of several each) and large-GEMM FLOP/s
   (2048x4096 @ 4096x4096, fp32 and bf16).
2. Decode at batch 1, fp32, on a card shape whose weights exceed the last-level cache: weight (+ KV) bytes read per
   token x tokens/s vs the read bandwidth. Target >= 85 %.
3. Prefill of --prefill tokens in one step, per dtype: useful FLOPs (2 x layer params x tokens + causal attention
   + the lm_head row that is sampled) / seconds vs the GEMM rate of that dtype. Target >= 70 %.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
from roofline.engine.engine import DTYPES, LLMEngine  # noqa: E402
from roofline.engine.measure.microbench import Contention, undisturbed  # noqa: E402

DECODE_TARGET, PREFILL_TARGET = 0.85, 0.70
DISCARDED = [0]  # runs thrown away because other processes used the CPU meanwhile


def report(load: Contention) -> str:
    note = f"; {DISCARDED[0]} disturbed runs discarded and repeated" if DISCARDED[0] else ""
    DISCARDED[0] = 0
    return load.report() + note




def best(fn, repeats: int, tries: int | None = None) -> float:
    """Fastest of `repeats` undisturbed runs (engine.microbench.undisturbed), counting the discarded ones."""
    seconds, _, discarded = undisturbed(fn, repeats, tries or 3 * repeats, pause_s=5.0)
    DISCARDED[0] += discarded
    return seconds


def read_bandwidth(gbytes: float, repeats: int) -> float:
    """Bytes/s of a full read of a gbytes buffer (x.sum(): one pass, no writes), best of `repeats`."""
    x = torch.ones(int(gbytes * 1e9) // 4, dtype=torch.float32)
    x.sum()
    bw = x.numel() * 4 / best(x.sum, repeats)
    del x
    return bw


def gemm_rate(dtype: torch.dtype, m: int, k: int, n: int, repeats: int) -> float:
    a, b = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
    a @ b
    return 2 * m * k * n / best(lambda: a @ b, repeats)


def gemv_bandwidth(dtype: torch.dtype, rows: int, cols: int, repeats: int) -> float:
    """Bytes/s of F.linear at one token over a [rows, cols] weight: the bandwidth a decode matmul gets."""
    w, x = torch.randn(rows, cols).to(dtype), torch.randn(1, cols).to(dtype)
    torch.nn.functional.linear(x, w)
    return w.numel() * w.element_size() / best(lambda: torch.nn.functional.linear(x, w), repeats)


def layer_params(eng: LLMEngine) -> int:
    return sum(p.numel() for p in eng.model.blocks.parameters())


def decode_bytes_per_token(eng: LLMEngine, context: int) -> float:
    """Bytes a batch-1 decode step must read: every block weight, the final norm, the lm_head (the embedding only
    for its one row) and the K/V of `context` cached tokens."""
    m = eng.model
    size = m.embed.weight.element_size()
    weights = layer_params(eng) + m.norm.weight.numel() + (m.lm_head or m.embed).weight.numel()
    kv = sum(c.bytes() for c in eng.caches if c is not None) / (len(eng.blocks.ref_count) * eng.cfg.block_size)
    return weights * size + m.embed.weight.shape[1] * size + kv * context


def attention_flops(eng: LLMEngine, t: int) -> float:
    """Causal attention over t new tokens from scratch: QK^T and PV, 2 x heads x head_dim x t(t+1)/2 each."""
    return sum(4 * lay.num_heads * lay.head_dim * t * (t + 1) / 2 for lay in eng.model.layers_spec if lay.is_attention)


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--prefill", type=int, default=1024, help="prompt tokens of the prefill measurement (>= 512)")
    ap.add_argument("--decode-tokens", type=int, default=32)
    ap.add_argument("--prefill-dtypes", default="fp32,bf16")
    ap.add_argument("--bandwidth-gb", type=float, default=2.0)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} CPUs")
    bw, gemm = machine_limits(args)
    decode_vs_bandwidth(args, bw)
    for name in args.prefill_dtypes.split(","):
        gc.collect()  # one engine in memory at a time
        prefill_vs_gemm(args, name, gemm[name])


def engine_for(args, dtype: str) -> LLMEngine:
    return LLMEngine(args.model, layers=args.layers, vocab=args.vocab, dtype=dtype, block_size=16,
                     num_blocks=-(-args.prefill // 16) + 8, prefix_caching=False,
                     max_step_tokens=max(512, args.prefill))


def machine_limits(args) -> tuple[float, dict]:
    """(read bandwidth bytes/s, large-GEMM FLOP/s per dtype), measured now."""
    load = Contention()
    sum_bw = read_bandwidth(args.bandwidth_gb, args.repeats)
    rows = int(args.bandwidth_gb * 1e9 / 2 / (4096 * 4))
    gemv_bw = gemv_bandwidth(torch.float32, rows, 4096, args.repeats)
    bw = max(sum_bw, gemv_bw)
    print(f"read bandwidth, best of {args.repeats}: x.sum() over {args.bandwidth_gb:.1f} GB {sum_bw / 1e9:.1f} GB/s, "
          f"F.linear at 1 token over a {rows}x4096 fp32 weight ({rows * 4096 * 4 / 1e9:.1f} GB) {gemv_bw / 1e9:.1f} GB/s"
          f" -> {bw / 1e9:.1f} GB/s")
    gemm = {}
    for name in ("fp32", "bf16"):
        gemm[name] = gemm_rate(DTYPES[name], 2048, 4096, 4096, args.repeats)
        print(f"GEMM 2048x4096 @ 4096x4096 {name}: {gemm[name] / 1e9:8.1f} GFLOP/s")
    print(f"  [{report(load)}]")
    return bw, gemm


def decode_vs_bandwidth(args, bw: float) -> None:
    """Batch-1 fp32 decode: bytes read per token x tokens/s against the measured read bandwidth."""
    eng = engine_for(args, "fp32")
    prompt = torch.randint(0, args.vocab, (16,), generator=torch.Generator().manual_seed(0)).tolist()
    n = args.decode_tokens
    eng.generate([prompt], 4)  # warm-up
    load = Contention()
    t_n = best(lambda: eng.generate([prompt], n), 2)
    t_1 = best(lambda: eng.generate([prompt], 1), 3)
    per_token = (t_n - t_1) / (n - 1)
    nbytes = decode_bytes_per_token(eng, len(prompt) + n // 2)
    achieved = nbytes / per_token
    print(f"\ndecode {eng.card.name} fp32, batch 1: {nbytes / 1e9:.2f} GB read per token (weights "
          f"{layer_params(eng) / 1e6:,.0f}M layer params + lm_head), {1 / per_token:.2f} tok/s "
          f"({per_token * 1e3:.1f} ms/token)")
    print(f"  achieved {achieved / 1e9:.1f} GB/s = {achieved / bw:.0%} of measured read bandwidth "
          f"(target >= {DECODE_TARGET:.0%}): {verdict(achieved >= DECODE_TARGET * bw)}")
    print(f"  [{report(load)}]")


def prefill_vs_gemm(args, name: str, gemm: float) -> None:
    """One prefill step of --prefill tokens in `name`: useful FLOPs / seconds against that dtype's GEMM rate."""
    eng, t = engine_for(args, name), args.prefill
    long = torch.randint(0, args.vocab, (t,), generator=torch.Generator().manual_seed(1)).tolist()
    eng.generate([long], 1)  # warm-up
    load = Contention()
    seconds = best(lambda: eng.generate([long], 1), 3)
    lm_head = 2 * eng.model.embed.weight.numel()  # one row of logits is sampled
    flops = 2 * layer_params(eng) * t + attention_flops(eng, t) + lm_head
    rate = flops / seconds
    print(f"\nprefill {eng.card.name} {name}, {t} tokens in one step: {seconds:.2f} s = {t / seconds:,.0f} tok/s, "
          f"{flops / 1e12:.2f} TFLOP ({attention_flops(eng, t) / flops:.1%} attention)")
    print(f"  achieved {rate / 1e9:.1f} GFLOP/s = {rate / gemm:.0%} of the {name} GEMM rate "
          f"(target >= {PREFILL_TARGET:.0%}): {verdict(rate >= PREFILL_TARGET * gemm)}")
    print(f"  [{report(load)}]")


if __name__ == "__main__":
    main()
