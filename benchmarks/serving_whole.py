"""`validate --serving` on a whole model (needs a GPU): the engine serves whole qwen2.5-7b (28 layers, full vocabulary)
with longer prompts for real, a Poisson trace and a closed loop, and the serving simulator predicts both with the
calibrated card. The CLI's spec cuts the model to 2 layers so that it runs on a CPU in seconds.

    HW=h100-sxm PYTHONPATH=. python benchmarks/serving_whole.py [--device cuda] [--dtype bf16] [--cut]

Prints one JSON document (the CLI's --json layout, with every engine step logged: its host and device seconds and
its chunks, so the simulator's step times can be checked offline) and a line per trace on stderr. --cut: the CLI's
own two-layer spec.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from roofline.calibrate.serving_validation import SPEC, serving_validation
from roofline.cards.store import CardStore

WHOLE = {**SPEC, "layers": 28, "vocab": None, "step_tokens": 2048, "prompt": "uniform:128,768",
         "output": "uniform:32,128", "clients": 8}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default=None, help="default: the card's calibration dtype")
    ap.add_argument("--layers", type=int, default=WHOLE["layers"], help="fewer for a quick check on a CPU")
    ap.add_argument("--vocab", type=int, default=WHOLE["vocab"])
    ap.add_argument("--cut", action="store_true", help="validate --serving's spec (2 layers, vocab 3000)")
    args = ap.parse_args()
    spec = {**SPEC} if args.cut else {**WHOLE, "layers": args.layers, "vocab": args.vocab}
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
