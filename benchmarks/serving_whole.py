"""`validate --serving` with every engine step logged: on a GPU its CUDA spec (whole qwen2.5-7b, 28 layers, full
vocabulary, longer prompts), as the CLI serves on CUDA; `--cut` its CPU spec (two layers, vocab 3000). The engine
serves a Poisson trace and a closed loop for real and the serving simulator predicts both with the calibrated card.

    HW=h100-sxm PYTHONPATH=. python benchmarks/serving_whole.py [--device cuda] [--dtype bf16] [--cut]

Prints one JSON document (the CLI's --json layout, each step with its host and device seconds and its chunks, so
the simulator's step times can be checked offline: benchmarks/serving_replay.py) and a line per trace on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from roofline.calibrate.serving_validation import GPU_SPEC, SPEC, serving_validation
from roofline.cards.store import CardStore



def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default=None, help="default: the card's calibration dtype")
    ap.add_argument("--layers", type=int, default=GPU_SPEC["layers"], help="fewer for a quick check on a CPU")
    ap.add_argument("--vocab", type=int, default=GPU_SPEC["vocab"])
    ap.add_argument("--cut", action="store_true", help="validate --serving's spec (2 layers, vocab 3000)")
    args = ap.parse_args()
    spec = {**SPEC} if args.cut else {**GPU_SPEC, "layers": args.layers, "vocab": args.vocab}
    spec["step_log"] = True
    st = CardStore()
    card = st.hardware(os.environ.get("HW", "host"))
    dtype = args.dtype or (card.calibration or {}).get("dtype", "fp32")
    rows = serving_validation(card, st, args.device, dtype, spec)
    for r in rows:
        errors = ", ".join(f"{k} {v:+.1f}%" for k, v in r["error_pct"].items())
        print(f"{r['trace']}: {errors}", file=sys.stderr)
    print(json.dumps({"hardware": card.name, "spec": spec, "dtype": dtype, "traces": rows}, indent=1))


if __name__ == "__main__":
    main()
