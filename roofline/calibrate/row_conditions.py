"""Conditions a published row states beyond its columns, read from its `engine` and `notes` texts: flags that change
the kernels (llama.cpp's `-ub`, Marlin), the most sequences an offline max-load run holds, and whether the row was
measured under a request stream (the serving simulator's, not one static batch's)."""

from __future__ import annotations

import re
from dataclasses import replace

from roofline.cards.runtime import RuntimeChoice
from roofline.perf.efficiency import Efficiency

# trtllm-bench offline runs at "max" batch: the scheduler's cap (TensorRT-LLM perf-overview, max_batch_size 2048)
# or the largest batch whose KV fits, whichever is smaller; under a runtime profile its `max_num_seqs` is the cap.
MAX_LOAD_BATCH_CAP = 2048

# an open-loop request rate as benchmark notes state it ("QPS=16", "request rate 4 req/s")
REQUEST_RATE = re.compile(r"QPS\s*=\s*([\d.]+)|request rate\s+([\d.]+)\s*req/s", re.I)
CLOSED_LOOP = re.compile(r"closed[- ]loop", re.I)
# the requests a run sent, as notes state it ("500 requests sent at once", "1500 prompts", "--num-prompt 100")
REQUESTS_SENT = re.compile(r"(\d+)\s+(?:requests|prompts)\b|--num-prompts?\s+(\d+)")


def requests_sent(row: dict) -> int | None:
    """The requests the row's notes say the run sent, else None."""
    m = REQUESTS_SENT.search(row.get("notes", ""))
    return int(m.group(1) or m.group(2)) if m else None


def under_load(row: dict) -> str | None:
    """Why a row measured under a request stream (an open-loop rate, or a closed loop of N > 1 clients) is not
    predicted by one static batch: its requests meet a running batch and its queue (benchmarks/serving_published.py
    simulates them); None for other rows."""
    notes, batch = row.get("notes", ""), row.get("batch", "").strip()
    rate = REQUEST_RATE.search(notes)
    if rate:
        return f"requests at {rate.group(1) or rate.group(2)} req/s: the serving simulator's (benchmarks/serving_published.py)"
    if CLOSED_LOOP.search(notes) and batch.isdecimal() and int(batch) > 1:
        return f"a closed loop of {batch} clients: the serving simulator's (benchmarks/serving_published.py)"
    return None


def max_load_batch(row: dict, runtime: RuntimeChoice | None) -> int:
    """The most sequences an offline max-load row (`batch` max) runs at once: the runtime's `max_num_seqs` (else
    MAX_LOAD_BATCH_CAP), and no more than the requests it states ("500 requests sent at once")."""
    cap = MAX_LOAD_BATCH_CAP
    if runtime is not None:
        cap = runtime.profile.serving_policy(runtime.version or runtime.range_start)["max_num_seqs"] or cap
    sent = requests_sent(row)
    return min(cap, sent) if sent else cap


# Marlin (vLLM/SGLang `--*-backend marlin`, `gptq_marlin`) is a mixed-precision kernel: 4-bit weights dequantised
# in registers into 16-bit tensor-core math (W4A16; github.com/IST-DASLab/marlin README), whatever FP4 units the card has;
# vLLM's gptq_marlin also runs 8-bit weights the same way (W8A16: vLLM quantization/utils/marlin_utils.py, 4 and 8 bits)
MARLIN_KERNEL_DTYPES = {fmt: ("bf16", "fp16", "fp32") for fmt in ("nvfp4", "mxfp4", "int4", "int8")}


# llama.cpp's flash-attention switch as engine texts state it: "-fa 1", "fa off", "flash-attn on", "-fa)", "no FA"
_FA = r"(?:-fa|\bfa|flash-attn)\s+"
FLASH_OFF = re.compile(_FA + r"(?:0|off)\b|\(no FA\)", re.I)
FLASH_ON = re.compile(_FA + r"(?:1|on)\b|flash attention enabled|-fa(?=[),]|$)", re.I)


def row_flags(row: dict, eff: Efficiency) -> Efficiency:
    """Conditions the row's `engine` text states over the runtime's defaults: llama.cpp's `-ub N` prefill
    micro-batch and flash attention (`-fa 1`, `fa off`, "no FA"); Marlin kernels for 4-bit weights."""
    if eff.runtime == "generic":
        return eff
    engine = row.get("engine", "")
    m = re.search(r"-ub\s+(\d+)", engine)
    if m:
        eff = replace(eff, prefill_chunk_tokens=float(m.group(1)))
    flash_off = bool(FLASH_OFF.search(engine))
    if flash_off or FLASH_ON.search(engine):
        eff = replace(eff, flash_attention=not flash_off)
    if "marlin" in engine.lower():  # nor does the format's own fitted efficiency (its FP4/INT8 kernels') apply
        by_format = {f: v for f, v in eff.compute_by_format.items() if f not in MARLIN_KERNEL_DTYPES}
        eff = replace(eff, kernel_dtypes={**eff.kernel_dtypes, **MARLIN_KERNEL_DTYPES}, compute_by_format=by_format)
    return eff
