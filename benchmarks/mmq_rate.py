"""Which peak llama.cpp's MMQ prompt kernels track on NVIDIA GPUs: the int8 tensor-core peak or the CUDA cores' int8
dot-product rate (DP4A: 8 int8 ops per INT32 lane per clock, so SMs x clock).

Reads every published row of a dense model's prompt (prefill tok/s) in a GGUF quantized format, run by an MMQ build
(llama.cpp from b3216, or Ollama) on one NVIDIA GPU at a micro-batch of 256 tokens or more, on an empty cache; prints
each row's achieved int8 ops/s (2 x parameters x tokens/s) as a fraction of both rates, and the spread of log(fraction)
over the rows (the smaller the spread, the better one efficiency carries across cards).

    PYTHONPATH=. python benchmarks/mmq_rate.py
"""

from __future__ import annotations

import math
import re
import statistics
from pathlib import Path

from roofline.calibrate.published import cards_of, read_rows, runtime_of
from roofline.cards.formats import GGUF_FORMATS, weight_format
from roofline.cards.store import CardStore
from roofline.cards.versions import version_key
from roofline.errors import RooflineError
from roofline.sizing.layers import resolve_layers

DATA = Path(__file__).parent / "data"
# DP4A's int8 ops per FP32 FLOP of the card's fp32 peak, by architecture (its description names the die): an SM's
# INT32 lanes x 8 over its FP32 lanes x 2. GA100 has 64 FP32 and 64 INT32 lanes per SM (A100 whitepaper); GA10x, AD10x
# and GH100 have 128 FP32 lanes of which 64 run INT32 (GA102, Ada and H100 whitepapers); RTX Blackwell issues INT32 on
# all 128 (RTX Blackwell whitepaper) but is counted at 64 here, the rate its MMQ rows track
DP4A_PER_FP32 = {"GA100": 4.0, "GA10": 2.0, "AD10": 2.0, "Ada Lovelace": 2.0, "GH100": 2.0, "GB20": 2.0}
MIN_UBATCH = 256  # smaller micro-batches run MMQ tiles part-empty (the -ub ramp, benchmarks/mmq_ramp.py)
MIN_PROMPT = 256


def mmq_row(row: dict, store: CardStore):
    """(model card, hardware card) of a row the comparison reads, else None."""
    choice = runtime_of(row, store)
    if row["metric"] != "prefill_tok_s" or choice is None or choice.profile.name not in ("llama.cpp", "ollama"):
        return None
    if choice.profile.name == "llama.cpp" and version_key(choice.range_start) < version_key("b3216"):
        return None  # before MMQ was the default: dequantized FP16 cuBLAS
    ub = re.search(r"-ub\s+(\d+)", row["engine"])
    isl = int(row["isl"]) if row["isl"].strip().isdecimal() else 512
    if (ub and int(ub.group(1)) < MIN_UBATCH) or isl < MIN_PROMPT or re.search(r"@ ?d\d", row["notes"]):
        return None
    card, hw, gpus = cards_of(row, store)
    fmt = weight_format(row["weight_quant"].split()[0].lower()) if row["weight_quant"].strip() else None
    if gpus != 1 or hw.vendor.lower() != "nvidia" or hw.kind != "gpu" or fmt is None or fmt.name not in GGUF_FORMATS:
        return None
    if any(layer.ffn == "moe" for layer in resolve_layers(card.architecture)):
        return None
    return card, hw


def main() -> None:
    store = CardStore(with_user_cards=False)
    spread: dict[str, list[float]] = {"int8": [], "int8_dp4a": []}
    print(f"{'row':5} {'card':14} {'model':16} {'TOPS':>6} {'/int8':>6} {'/int8_dp4a':>10}")
    for path in sorted(DATA.glob("published_*.csv")):
        for row in read_rows(path):
            try:
                cards = mmq_row(row, store)
            except (RooflineError, ValueError, KeyError):  # a row roofline cannot read is not compared
                continue
            if cards is None:
                continue
            card, hw = cards
            ops = float(row["value"]) * 2 * card.params.total
            peaks = hw.peak_flops.as_dict()
            ratio = next((r for die, r in DP4A_PER_FP32.items() if die in hw.description), None)
            if ratio is None or "int8" not in peaks:
                continue
            peaks["int8_dp4a"] = ratio * peaks["fp32"]
            for key in spread:
                spread[key].append(math.log(ops / peaks[key]))
            print(f"{row['id']:5} {hw.name:14} {card.name[:16]:16} {ops / 1e12:6.1f} {ops / peaks['int8']:6.3f} "
                  f"{ops / peaks['int8_dp4a']:10.3f}")
    for key, logs in spread.items():
        print(f"{key}: {len(logs)} rows, fraction {math.exp(min(logs)):.2f}-{math.exp(max(logs)):.2f}, "
              f"spread of log(fraction) {statistics.pstdev(logs):.2f}")


if __name__ == "__main__":
    main()
