"""Is a calibration run trustworthy? Contention (another process sharing the cores or the memory bus) shows three
ways: the bandwidth microbenchmark disagrees with its own repeat, the passes over the same grid point disagree, and
the fit cannot predict its held-out points. `assess` turns those into ok / warn / refuse with the numbers, and
`versus_existing` says when the card already on disk is better than the new one (never overwritten silently).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

# An idle 2-core EPYC VM measured held-out median step errors of decode 2.9-5.6% and prefill 11.7-14.3% over three
# `calibrate --quick` runs (README, 2026-11-23). Twice the worst idle figure is suspicious; beyond 50% the fit is
# predicting a different machine than the one the user will run on.
HELD_OUT_WARN_PCT = 30.0
HELD_OUT_REFUSE_PCT = 50.0
# The read-bandwidth microbenchmark is the best of 5 samples, measured before the grid and again after it: on an idle
# machine the two agree within a few percent (a bus ceiling is only ever under-measured, and best-of-5 removes most
# scheduling noise). A 20% gap means something else used the bus during one of them; 40% (the reported failure:
# half the usual bandwidth) means the card's bandwidth figure is wrong.
BANDWIDTH_GAP_WARN = 0.20
BANDWIDTH_GAP_REFUSE = 0.40
# Each grid point is measured in two passes; the median over points of (slower pass / faster pass - 1). Passes on
# an idle machine differ by timer noise; a 25% median gap means slow spells hit many points.
PASS_GAP_WARN = 0.25


@dataclass
class Quality:
    verdict: str = "ok"  # ok | warn | refuse
    reasons: list[str] = field(default_factory=list)
    held_out_median_pct: float = math.nan  # the worst phase's held-out median |error|
    bandwidth_gap: float | None = None
    pass_gap: float | None = None

    def _raise_to(self, level: str, reason: str) -> None:
        order = ("ok", "warn", "refuse")
        if order.index(level) > order.index(self.verdict):
            self.verdict = level
        self.reasons.append(reason)


def worst_held_out_pct(residuals: dict) -> float:
    """The larger held-out median |error| of the two phases (NaN when neither has points)."""
    values = [s.get("median_ape_pct", math.nan) for s in (residuals.get("held_out") or {}).values()]
    values = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    return max(values) if values else math.nan


def gap(a: float, b: float) -> float:
    """How far apart two positive measurements are: larger / smaller - 1."""
    lo, hi = sorted((a, b))
    return hi / lo - 1 if lo > 0 else math.inf


def assess(summary: dict, bandwidth_reads: list[float], pass_seconds: dict[str, list[float]] | None = None) -> Quality:
    """Judge one run from its fit summary (`held_out` per phase), its read-bandwidth measurements (before and after
    the grid, bytes/s) and, where points ran in several passes, each point's seconds per pass."""
    q = Quality(held_out_median_pct=worst_held_out_pct(summary))
    if math.isfinite(q.held_out_median_pct):
        if q.held_out_median_pct > HELD_OUT_REFUSE_PCT:
            q._raise_to("refuse", f"held-out step error {q.held_out_median_pct:.0f}% median (an idle machine gives "
                                  f"under {HELD_OUT_WARN_PCT:.0f}%)")
        elif q.held_out_median_pct > HELD_OUT_WARN_PCT:
            q._raise_to("warn", f"held-out step error {q.held_out_median_pct:.0f}% median (an idle machine gives "
                                f"under {HELD_OUT_WARN_PCT:.0f}%)")
    if len(bandwidth_reads) >= 2:
        q.bandwidth_gap = gap(min(bandwidth_reads), max(bandwidth_reads))
        text = (f"read bandwidth {min(bandwidth_reads) / 1e9:,.1f} vs {max(bandwidth_reads) / 1e9:,.1f} GB/s in two "
                f"measurements ({q.bandwidth_gap:.0%} apart)")
        if q.bandwidth_gap > BANDWIDTH_GAP_REFUSE:
            q._raise_to("refuse", text)
        elif q.bandwidth_gap > BANDWIDTH_GAP_WARN:
            q._raise_to("warn", text)
    gaps = [gap(min(s), max(s)) for s in (pass_seconds or {}).values() if len(s) >= 2]
    if gaps:
        q.pass_gap = statistics.median(gaps)
        if q.pass_gap > PASS_GAP_WARN:
            q._raise_to("warn", f"two passes over the same shapes differ by {q.pass_gap:.0%} (median over "
                                f"{len(gaps)} points)")
    return q


def versus_existing(new: Quality, existing: dict | None) -> str | None:
    """Why the card already on disk should be kept (its held-out error is lower than this run's), or None."""
    cal = (existing or {}).get("calibration") or {}
    if not isinstance(cal, dict) or not isinstance(cal.get("residuals"), dict):
        return None
    old = worst_held_out_pct(cal["residuals"])
    if math.isfinite(old) and (not math.isfinite(new.held_out_median_pct) or old < new.held_out_median_pct):
        return (f"the existing card (calibrated {cal.get('date', '?')}) predicts its held-out steps better: "
                f"{old:.1f}% median error vs {new.held_out_median_pct:.1f}% now")
    return None


def should_write(q: Quality, keep_reason: str | None, force: bool) -> tuple[bool, str | None]:
    """(write the card?, why not / what was overridden). A refused run or a better existing card is only written
    with --force, and the message says what was overridden."""
    blockers = ([f"measurements look contended: {'; '.join(q.reasons)}"] if q.verdict == "refuse" else []) + \
               ([keep_reason] if keep_reason else [])
    if not blockers:
        return True, None
    if force:
        return True, "written because of --force although " + "; and ".join(blockers)
    return False, "; and ".join(blockers) + ". Nothing written: re-run on an idle machine, or pass --force to write it"
