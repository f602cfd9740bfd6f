"""Cold-process wall time of `roofline predict ... --json` (target: <= 0.4 s on a 2-core machine), and what it imports.

    python benchmarks/cold_start.py [--runs 10]
"""

import argparse
import statistics
import subprocess
import sys
import time

CMD = [sys.executable, "-m", "roofline", "predict", "--model", "llama-3.3-70b", "--hw", "dgx-spark", "--json"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    runs = ap.parse_args().runs
    subprocess.run(CMD, capture_output=True, check=True)  # warm the OS file cache, as a user's second run would
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(CMD, capture_output=True, check=True)
        times.append(time.perf_counter() - t)
    imports = subprocess.run([sys.executable, "-X", "importtime", *CMD[1:]], capture_output=True, text=True).stderr
    heavy = [m for m in ("torch", "pandas", "matplotlib", "scipy") if f" {m}\n" in imports or f" {m}." in imports]
    print(f"roofline predict --json, cold process: median {statistics.median(times):.3f} s, "
          f"max {max(times):.3f} s over {runs} runs (target <= 0.4 s)")
    print(f"heavy modules imported: {', '.join(heavy) or 'none'}")


if __name__ == "__main__":
    main()
