"""The capacity search's rate search: a bracket stepped from the saturation estimate, then bisection; and the
estimate itself, which decides how many load points a configuration costs."""

import math

import pytest

from roofline.cards.store import CardStore
from roofline.perf.serving.policy import policy_for
from roofline.perf.serving.run import build_fleet
from roofline.perf.serving.workload import parse_lengths
from roofline.perf.workload import make_workload

STORE = CardStore()
CARD, HW = STORE.model("llama-3.1-8b"), STORE.hardware("h100-sxm")


@pytest.fixture
def short_points(monkeypatch):
    """Capacity load points shortened for the test (the defaults: 500 requests / 60 s of arrivals)."""
    from roofline.perf.serving import capacity

    monkeypatch.setattr(capacity, "MIN_REQUESTS", 120)
    monkeypatch.setattr(capacity, "MIN_ARRIVAL_S", 8.0)
    return capacity


def test_rate_search_brackets_then_bisects_to_the_tolerance():
    """`highest_passing` with a probe that passes below a known threshold: the answer brackets the threshold within
    RATE_TOLERANCE from a start on either side or far away; an SLO out of reach and one never failed say so."""
    from roofline.perf.serving import capacity as cap

    def search(threshold: float, start: float):
        tried = []

        def probe(rate: float) -> dict:
            tried.append(rate)
            return {"meets": rate <= threshold}
        return (*cap.highest_passing(probe, start), tried)

    for threshold, start in ((37.0, 40.0), (37.0, 36.0), (0.9, 40.0), (300.0, 40.0)):
        lo, hi, best, _, tried = search(threshold, start)
        assert lo <= threshold < hi <= lo * (1 + cap.RATE_TOLERANCE) + 1e-9 and best == {"meets": True}
        assert len(tried) < cap.MAX_POINTS, (threshold, start, tried)  # found before the cap, even 44x off
    near = search(37.0, 36.0)[-1]
    assert len(near) == 3  # an estimate within the first step: a bracket in two points, one bisection
    lo, hi, best, last, tried = search(0.0, 40.0)  # nothing passes: it stops below start/256
    assert lo == 0 and best is None and hi == min(tried) == last >= 40 / 256
    lo, hi, best, _, tried = search(math.inf, 1.0)  # nothing fails: MAX_POINTS, no top
    assert hi is None and len(tried) == cap.MAX_POINTS and lo == max(tried)


def test_saturation_estimate_is_near_the_rate_found(short_points):
    """The search starts at the step timer's saturation estimate; where the batch's throughput binds (a loose
    SLO) the simulated answer lies within a quarter of it, and a tight ITL SLO lowers it."""
    cap = short_points
    p, o, rt = parse_lengths("p", "500"), parse_lengths("o", "200"), STORE.runtime("vllm")
    fleet = build_fleet(CARD, HW, make_workload(quant="fp8", kv_quant="fp8"), policy_for(rt))
    loose = cap.Slo(20.0, 0.5)
    row = cap.search_config(CARD, cap.Config(HW, 1, "fp8", "fp8"), rt, p, o, loose)
    assert 0.8 <= row["max_rate_per_s"] / row["saturation_estimate_per_s"] <= 1.25, row
    assert cap.saturation_rate(fleet, p, o, 0.012) < cap.saturation_rate(fleet, p, o, 0.5)


def _point(preemptions: int, pool_use: float, meets: bool = True) -> dict:
    from types import SimpleNamespace

    metrics = SimpleNamespace(preemptions=preemptions, series=[(0.0, 1, 0, pool_use)])
    return {"meets": meets, "result": SimpleNamespace(metrics=metrics)}


def test_a_rate_whose_pool_binds_is_confirmed_over_a_longer_run():
    """A rate found where the KV pool filled is run again CONFIRM_SPAN times as long; failing there, the search
    steps down until a long run passes (the pool of a 4090 filling over minutes had passed a one-minute point)."""
    from roofline.perf.serving import capacity as cap

    tried = []

    def probe(rate: float, span: float) -> dict:
        tried.append((rate, span))
        return _point(3, 1.0, meets=rate < 11.5)

    rate, failed, best = cap.confirm(probe, 12.1, _point(2, 0.95))
    assert tried[0] == (12.1, cap.CONFIRM_SPAN) and len(tried) == 2
    assert rate == pytest.approx(12.1 / cap.FIRST_STEP) and failed == 12.1 and best["meets"]
    tried.clear()
    assert cap.confirm(probe, 12.1, _point(0, 0.5))[0] == 12.1 and not tried  # the pool never bound: kept as found
    never = cap.confirm(lambda rate, span: _point(9, 1.0, meets=False), 12.1, _point(1, 1.0))
    assert never[0] == 0.0 and never[2] is None
