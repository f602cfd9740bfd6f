"""The all-reduce fit: link efficiency and per-hop latency recovered from synthetic measurements, written to a card
the predictor then times its collectives with."""

import random

import pytest

from roofline.calibrate.collectives import fit_all_reduce, with_collectives
from roofline.cards.hardware import HardwareCard
from roofline.cards.store import CardStore
from roofline.errors import RooflineError
from roofline.perf.efficiency import expected_efficiency
from roofline.perf.ops import Step
from roofline.perf.parallel import ring_all_reduce
from roofline.perf.request import timed_step
from roofline.perf.workload import Workload
from roofline.sizing.precision import Formats

SIZES = [1 << k for k in range(12, 26, 2)]  # 4 KiB .. 16 MiB


def synthetic(tp, link, latency_s, bw, noise=0.0, seed=0):
    rng = random.Random(seed)
    out = []
    for m in SIZES:
        link_bytes, hops = ring_all_reduce(m, tp)
        t = hops * latency_s + link_bytes / (bw * link)
        out.append({"bytes": m, "seconds": t * (1 + rng.uniform(-noise, noise))})
    return out


@pytest.mark.parametrize("tp, link, latency_s, bw", [(2, 0.6, 5e-6, 450e9), (4, 0.3, 40e-6, 10e9),
                                                     (8, 0.9, 2e-6, 900e9)])
def test_exact_measurements_give_back_the_link_and_latency(tp, link, latency_s, bw):
    fit = fit_all_reduce(synthetic(tp, link, latency_s, bw), tp, bw)
    assert fit["link"] == pytest.approx(link, rel=1e-6)
    assert fit["latency_s"] == pytest.approx(latency_s, rel=1e-6)
    assert fit["median_ape_pct"] < 1e-6


def test_noisy_measurements_land_close():
    fit = fit_all_reduce(synthetic(2, 0.5, 20e-6, 20e9, noise=0.05, seed=3), 2, 20e9)
    assert fit["link"] == pytest.approx(0.5, rel=0.1)
    assert fit["latency_s"] == pytest.approx(20e-6, rel=0.2)


def test_no_latency_fits_through_the_origin_and_link_is_capped_at_one():
    fit = fit_all_reduce(synthetic(2, 1.0, 0.0, 10e9), 2, 5e9)  # twice the card's rate: capped
    assert fit["latency_s"] == pytest.approx(0.0, abs=1e-12) and fit["link"] == 1.0


def test_one_size_or_flat_times_are_refused():
    with pytest.raises(RooflineError, match="two message sizes"):
        fit_all_reduce([{"bytes": 4096, "seconds": 1e-4}] * 3, 2, 1e9)
    with pytest.raises(RooflineError, match="did not grow"):
        fit_all_reduce([{"bytes": m, "seconds": 1e-3 - m * 1e-12} for m in SIZES], 2, 1e9)


def test_the_fitted_card_times_all_reduces_as_measured():
    """A linkless card (a CPU) gets the measured link rate, the latency and `link`; predict's all-reduce op then costs
    what the synthetic measurements say for the step's message."""
    base = CardStore().hardware("h100-sxm").model_dump(mode="json", by_alias=True, exclude_none=True)
    base["interconnect"] = {}
    base["calibration"] = {"values": {}}
    bw, link, latency = 8e9, 0.4, 30e-6
    fit = fit_all_reduce(synthetic(2, link, latency, bw), 2, bw)
    hw = HardwareCard.model_validate(with_collectives(base, fit, bw, measured_link=True))
    assert hw.interconnect.latency_s == pytest.approx(latency) and hw.interconnect.kind == "shared-memory"
    eff = expected_efficiency(hw)
    assert eff.link == pytest.approx(link)
    card = CardStore().model("llama-3.1-8b")
    step = Step("decode", 1, 8, 512)
    wl = Workload(prompt_tokens=1, quant="default=fp32", kv_quant="fp32", tp=2)
    comm = timed_step(card, hw, step, wl, eff).by_class["comm"]
    message = 8 * card.architecture.hidden_size * Formats(card, hw, wl.quant, wl.kv_quant).act_bytes  # 8 tokens
    per_reduce = 2 * latency + ring_all_reduce(message, 2)[0] / (bw * link)  # 2 hops at tp 2
    assert comm == pytest.approx(2 * card.architecture.num_layers * per_reduce, rel=1e-6)
