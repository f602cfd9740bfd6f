"""What a serving run measured: latency distributions in fixed log-spaced histograms (memory stays bounded for a
trace of any length; percentiles within half a bin, 0.25%), exact means, throughput, goodput, a decimated time
series of the running batch, the queue and the KV pool's use."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from roofline.errors import RooflineError

LOW_S, HIGH_S = 1e-7, 1e6  # histogram range: 0.1 us .. 11.6 days (values outside land in the end bins)
BIN_RATIO = 1.005  # each bin 0.5% wide: a percentile is read within 0.25% of the sample
NBINS = int(math.ceil(math.log(HIGH_S / LOW_S) / math.log(BIN_RATIO)))
PERCENTILES = (50, 90, 95, 99)
SERIES_POINTS = 4000  # the time series keeps at most this many points (halved by decimation when full)


BUFFER = 1 << 16  # samples held before they are binned (binning in bulk is ~50x cheaper than one at a time)


@dataclass
class Histogram:
    counts: np.ndarray = field(default_factory=lambda: np.zeros(NBINS + 1))
    total: float = 0.0
    weight: float = 0.0
    # samples beyond HIGH_S, kept whole (an overloaded run's days of queueing): a percentile among them is exact
    _beyond: list = field(default_factory=list)
    _values: list = field(default_factory=list)
    _weights: list = field(default_factory=list)

    def add(self, seconds, weight: float = 1.0) -> None:
        """One sample or a sequence of samples, each of weight `weight`."""
        if isinstance(seconds, list):
            self._values.extend(seconds)
            self._weights.extend([weight] * len(seconds))
        elif np.ndim(seconds) == 0:
            self._values.append(float(seconds))
            self._weights.append(weight)
        else:
            self._values.extend(seconds)
            self._weights.extend([weight] * len(seconds))
        if len(self._values) >= BUFFER:
            self._flush()

    def _flush(self) -> None:
        if not self._values:
            return
        v, w = np.asarray(self._values, dtype=float), np.asarray(self._weights, dtype=float)
        idx = np.minimum((np.log(np.maximum(v, LOW_S) / LOW_S) / math.log(BIN_RATIO)).astype(int), NBINS)
        self.counts += np.bincount(idx, w, minlength=NBINS + 1)
        self.total += float(v @ w)
        self.weight += float(w.sum())
        self._beyond.extend(zip(v[idx == NBINS].tolist(), w[idx == NBINS].tolist()))
        self._values, self._weights = [], []

    def percentile(self, q: float) -> float:
        self._flush()
        if not self.weight:
            return float("nan")
        cum = np.cumsum(self.counts)
        rank = q / 100 * self.weight
        i = int(np.searchsorted(cum, rank))
        if i == 0:
            return 0.0  # bin 0 holds the zeros (no wait at all) and anything under LOW_S
        if i < NBINS:
            return LOW_S * BIN_RATIO ** (i + 0.5)
        beyond = sorted(self._beyond)
        below = cum[NBINS - 1]
        seen = np.cumsum([w for _, w in beyond])
        return beyond[min(int(np.searchsorted(seen, rank - below)), len(beyond) - 1)][0]

    def summary(self) -> dict:
        self._flush()
        mean = self.total / self.weight if self.weight else float("nan")
        return {"mean": mean, **{f"p{q}": self.percentile(q) for q in PERCENTILES}}


class SloMissed(Exception):
    """More requests missed the SLO than `Collector.abort_after_misses`: the load point has failed, stop early."""


def check_slos(ttft_s: float | None, itl_s: float | None) -> None:
    """One line for an SLO that is not a finite number of seconds above 0 (None: not given)."""
    for name, v in (("--slo-ttft", ttft_s), ("--slo-itl", itl_s)):
        if v is not None and not (0 < v and math.isfinite(v)):
            raise RooflineError(f"{name}: must be a finite number of seconds above 0, got {v}")


@dataclass
class Collector:
    slo_ttft_s: float | None = None
    slo_itl_s: float | None = None
    warmup_s: float = 0.0  # requests arriving before this are served but not counted (the pool filling up)
    abort_after_misses: int | None = None  # raise SloMissed once this many counted requests miss the SLO
    warmup_requests: int = 0
    ttft: Histogram = field(default_factory=Histogram)
    itl: Histogram = field(default_factory=Histogram)  # every inter-token gap (vLLM's ITL)
    tpot: Histogram = field(default_factory=Histogram)  # per request: (e2e - ttft) / (output - 1)
    e2e: Histogram = field(default_factory=Histogram)
    queue: Histogram = field(default_factory=Histogram)  # arrival -> first scheduled
    finished: int = 0
    good: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0
    preemptions: int = 0
    first_arrival_s: float = math.inf
    last_arrival_s: float = 0.0
    last_finish_s: float = 0.0
    steps: int = 0
    series: list = field(default_factory=list)  # (time s, running, waiting, kv blocks used / pool)
    series_every: int = 1
    _tick: int = 0
    _latest: dict = field(default_factory=dict)  # replica -> its last (running, waiting, kv use)

    def request_done(self, arrival_s, first_token_s, finish_s, queued_s, prompt, output, preemptions) -> None:
        if arrival_s < self.warmup_s:
            self.warmup_requests += 1
            return
        ttft, e2e = first_token_s - arrival_s, finish_s - arrival_s
        tpot = (e2e - ttft) / (output - 1) if output > 1 else 0.0
        self.ttft.add(ttft)
        self.e2e.add(e2e)
        self.queue.add(queued_s)
        if output > 1:
            self.tpot.add(tpot)
        self.finished += 1
        self.prompt_tokens += prompt
        self.output_tokens += output
        self.preemptions += preemptions
        self.first_arrival_s = min(self.first_arrival_s, arrival_s)
        self.last_arrival_s = max(self.last_arrival_s, arrival_s)
        self.last_finish_s = max(self.last_finish_s, finish_s)
        # DistServe's attainment: TTFT within its SLO and TPOT (the request's mean time per output token) within
        # the ITL SLO; vLLM's `bench serve --goodput` counts requests per second the same way
        if (self.slo_ttft_s is None or ttft <= self.slo_ttft_s) and (self.slo_itl_s is None or tpot <= self.slo_itl_s):
            self.good += 1
        elif self.abort_after_misses is not None and self.finished - self.good > self.abort_after_misses:
            raise SloMissed

    def sample(self, t: float, running: int, waiting: int, kv_use: float | None, source: object = 0) -> None:
        """A point of the fleet's time series, every `series_every`-th call (doubling whenever the series fills):
        replica `source` reports its own batch and queue (a KV link its queued hand-offs, kv_use None); the point
        sums every source's latest (KV use: the replicas' mean)."""
        self._latest[source] = (running, waiting, kv_use)
        self._tick += 1
        if self._tick % self.series_every:
            return
        now = self._latest.values()
        pools = [v[2] for v in now if v[2] is not None]
        self.series.append((t, sum(v[0] for v in now), sum(v[1] for v in now), sum(pools) / max(len(pools), 1)))
        if len(self.series) >= SERIES_POINTS:
            self.series = self.series[::2]
            self.series_every *= 2

    @property
    def duration_s(self) -> float:
        return max(self.last_finish_s - self.first_arrival_s, 1e-12) if self.finished else 0.0

    def summary(self) -> dict:
        d = self.duration_s
        rate = (lambda x: x / d) if d else (lambda x: 0.0)
        slo = self.slo_ttft_s is not None or self.slo_itl_s is not None  # goodput means nothing without one
        return {
            "requests": self.finished, "duration_s": d,
            "ttft_s": self.ttft.summary(), "itl_s": self.itl.summary(), "tpot_s": self.tpot.summary(),
            "e2e_s": self.e2e.summary(), "queue_wait_s": self.queue.summary(),
            "requests_per_s": rate(self.finished), "output_tok_s": rate(self.output_tokens),
            "total_tok_s": rate(self.output_tokens + self.prompt_tokens),
            "goodput_requests_per_s": rate(self.good) if slo else None,
            "slo_attainment": (self.good / self.finished if self.finished else 0.0) if slo else None,
            "preemptions": self.preemptions, "steps": self.steps,
            "output_tokens_per_request": self.output_tokens / self.finished if self.finished else 0.0,
        }
