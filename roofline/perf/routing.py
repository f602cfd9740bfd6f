"""How MoE tokens spread over experts: the distinct experts a step touches and how many of them see few enough
tokens to run as matrix-vector kernels. Pure numpy; the op graph and the timing share these formulas."""

from __future__ import annotations

import math

import numpy as np

from roofline.cards.schema import Num

_lgamma = np.vectorize(math.lgamma, otypes=[float])  # elementwise over token counts


def expected_experts_touched(num_experts: int, k: int, tokens: Num, sequences: Num = 1,
                             concentration: float = 0.0) -> Num:
    """Distinct experts hit when `tokens` tokens each route to k of E. Uniform routing (`concentration` 0):
    E * (1 - (1 - k/E)^T). Routers that favour some experts for a whole sequence (tokens of one prompt share a
    direction): each of the `sequences` draws each expert's per-token chance q ~ Beta(c k/E, c (1 - k/E)) and its
    T/S tokens miss that expert with E[(1 - q)^(T/S)] = Gamma(b + n) Gamma(c) / (Gamma(b) Gamma(c + n)); smaller
    c, fewer experts (the beta-binomial); one token per sequence (decode) is uniform whatever c."""
    if not concentration:
        return num_experts * (1.0 - (1.0 - k / num_experts) ** tokens)
    c, b = concentration, concentration * (1.0 - k / num_experts)
    n = np.asarray(tokens, dtype=float) / np.maximum(sequences, 1)
    miss = np.exp(_lgamma(b + n) + math.lgamma(c) - math.lgamma(b) - _lgamma(c + n))
    return num_experts * (1.0 - miss ** np.maximum(sequences, 1))


def gemv_expert_share(num_experts: int, k: int, tokens: Num, max_rows: float) -> Num:
    """Of the experts T tokens touch, the expected share that at most `max_rows` tokens route to (they run as
    matrix-vector kernels): P(1 <= X <= max_rows) / P(X >= 1), X ~ Binomial(T, p = k / E)."""
    p, t = k / num_experts, np.asarray(tokens, dtype=float)
    if p >= 1.0:  # every expert sees every token
        return np.where(t <= max_rows, 1.0, 0.0)
    term = none = (1.0 - p) ** t  # P(X = 0)
    few = np.zeros_like(term)
    for j in range(1, int(max_rows) + 1):  # P(X = j) from P(X = j - 1)
        term = term * np.maximum(t - j + 1, 0.0) / j * p / (1.0 - p)
        few = few + term
    return np.minimum(few / np.maximum(1.0 - none, 1e-12), 1.0)
