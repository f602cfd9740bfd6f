"""Seconds of one simulated engine step, for what it holds: prefill chunks (n new tokens on c cached ones) and
decode sequences, each at its own context, in one forward pass.

A mixed step is the predictor's operator graph (`roofline.perf.ops.step_ops`) merged over its parts: ops whose
cost follows the step's T tokens (matmuls with their weights read once, norms, embedding, the collectives) are
taken at T; the lm_head at the S sequences that sample; the ops that depend on each sequence's context (attention
cores, Mamba scans, MLA's latent decompression: CONTEXT_OPS) sum their FLOPs and bytes over the parts. The merged
ops are timed by `timed_step` / `time_ops` as any step is. For speed, the first two are tabulated over T and S, and
the context ops' per-sequence FLOPs and bytes over a context grid (decode: exact for linear and windowed
attention, which are piecewise linear in the context) and an (n, c) grid (prefill: bilinear, within ~0.2% of the
quadratic causal term on these grids); nothing but table look-ups and the merged ops' timing runs per step.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import replace

import numpy as np

from roofline.cards.hardware import HardwareCard
from roofline.cards.model import ModelCard
from roofline.perf.efficiency import Efficiency
from roofline.perf.graph_buckets import padded_batch
from roofline.perf.ops import Op, Step, step_ops
from roofline.perf.parallel import shard_ops
from roofline.perf.request import CONTEXT_OPS, gpu_ops, replays_graphs, timed_step, within_graph_limits
from roofline.perf.timing import fixed_seconds, launches, time_ops
from roofline.perf.workload import Workload
from roofline.sizing.layers import resolve_layers

FIELDS = ("flops", "act_bytes", "kv_read_bytes", "kv_write_bytes", "scores")  # flops, then what moves bytes
K = len(FIELDS)
GRID_POINTS = 160  # geometric grid points over the context (and prefill chunk) range


def _grid(top: int, extra: list[int]) -> np.ndarray:
    """0..top: every value up to 64, geometric beyond, plus the window edges (where windowed costs bend)."""
    top = max(int(top), 2)
    pts = [np.arange(0, min(64, top) + 1), np.geomspace(64, top, GRID_POINTS) if top > 64 else np.array([top])]
    for w in extra:
        pts.append(np.array([w - 1, w, w + 1]))
    g = np.unique(np.rint(np.concatenate(pts)).clip(0, top))
    return g.astype(float)


def _locate(grid: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Left grid index and fraction for linear interpolation; x >= grid[0] = 0 (beyond the end: extrapolated from
    the last interval, which for a context past the model's maximum only happens when a card is misused)."""
    i = np.minimum(grid.searchsorted(x, side="right") - 1, len(grid) - 2)
    return i, (x - grid[i]) / (grid[i + 1] - grid[i])


def _locate1(grid: list[float], x: float) -> tuple[int, float]:
    """_locate for one value (plain Python: a step holds few prefill chunks)."""
    i = min(bisect_right(grid, x) - 1, len(grid) - 2)
    return i, (x - grid[i]) / (grid[i + 1] - grid[i])


class StepTimer:
    def __init__(self, card: ModelCard, hw: HardwareCard, wl: Workload, eff: Efficiency, max_tokens: int,
                 max_seqs: int, max_context: int):
        # tables at ordinary launches; a pure-decode step that replays a CUDA graph saves `_graph_saving_s`
        self.card, self.hw, self.wl, self.eff = card, hw, wl, replace(eff, graph_kernel_overhead_s=None)
        self._graph = eff if replays_graphs(card, eff) else None
        self._graph_saving_s = self._graph_saving(eff) if self._graph else 0.0
        self.max_tokens = max(int(max_tokens), 1)
        windows = sorted({lay.window for lay in resolve_layers(card.architecture) if lay.window})
        self._token_table_s = self._token_table(self.max_tokens)
        self._lm_s = self._lm_table(max(int(max_seqs), 1))
        probe = step_ops(card, hw, Step("prefill", 2, 1, 1), wl.quant, wl.kv_quant)
        self._ctx_index = [i for i, op in enumerate(probe) if op.name in CONTEXT_OPS]
        self._templates = [probe[i] for i in self._ctx_index]
        self.cgrid = _grid(max_context, windows)
        self._decode = self._context_table(Step("decode", 1, 1, self.cgrid))  # (fields, contexts)
        self._cgrid_list = self.cgrid.tolist()
        self._prefill_table(self.max_tokens)
        self._linear = [self._linear_cost(tpl) for tpl in self._templates]
        self._affine = self._affine_decode()

    # --- tables -----------------------------------------------------------------------------------------------

    def _prefill_table(self, top: int) -> None:
        """Context-op fields of prefill chunks of 1..top tokens at every grid context: (fields, n, contexts)."""
        self.ngrid = _grid(max(int(top), 2), [])[1:]  # n >= 1
        n, c = np.meshgrid(self.ngrid, self.cgrid, indexing="ij")
        self._prefill = self._context_table(Step("prefill", n, 1, c))
        self._ngrid_list = self.ngrid.tolist()

    def _token_table(self, top: int) -> np.ndarray:
        """Seconds of the T-token ops (with the step overhead and the collectives) for T = 0..top. Where the runtime
        runs a step as micro-batches of `prefill_chunk_tokens` (llama.cpp -ub, Ollama num_batch), a step of T tokens
        is T // ub full ones and the rest, each re-reading the weights, as `predict`'s prefill chunks are."""
        ub = int(self.eff.prefill_chunk_tokens)
        t = np.arange((min(top, ub) if ub else top) + 1, dtype=float)
        step = Step("decode", 1, np.maximum(t, 1), 0)
        ops = [op for op in step_ops(self.card, self.hw, step, self.wl.quant, self.wl.kv_quant)
               if op.name not in CONTEXT_OPS and op.name != "lm_head"]
        st = timed_step(self.card, self.hw, step, self.wl, self.eff, ops, sequences=0)  # per sequence: step_seconds
        table = np.asarray(st.total_s, dtype=float)
        if len(table) > top:
            return table
        full, rest = np.divmod(np.arange(top + 1), ub)
        return full * table[ub] + np.where(rest > 0, table[rest], 0.0)

    def _lm_table(self, top: int) -> np.ndarray:
        """Seconds of the lm_head for S = 0..top sampled sequences (no step overhead)."""
        s = np.arange(top + 1, dtype=float)
        step = Step("decode", 1, np.maximum(s, 1), 0)
        ops = [op for op in step_ops(self.card, self.hw, step, self.wl.quant, self.wl.kv_quant) if op.name == "lm_head"]
        st = time_ops(shard_ops(ops, self.wl.tp), self.hw, self.eff, step.tokens)
        return np.where(s > 0, np.asarray(st.total_s) - fixed_seconds(self.eff, s), 0.0)

    def _context_table(self, step: Step) -> np.ndarray:
        """Per-sequence FLOPs and bytes of every context op at the step's (broadcast) shapes: (K x ops, ...)."""
        ops = step_ops(self.card, self.hw, step, self.wl.quant, self.wl.kv_quant)
        shape = np.broadcast(step.n, step.context).shape
        rows = [np.broadcast_to(np.asarray(getattr(ops[i], f), dtype=float), shape)
                for i in self._ctx_index for f in FIELDS]
        return np.array(rows) if rows else np.zeros((0, *shape))

    def _affine_decode(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(intercept, slope) per field when every decode context op is affine in the context over the whole grid
        (full attention: FLOPs and KV bytes grow by the same amount per cached token), else None (windows, MLA's
        steps, ...). Then a batch's sum needs only the sum of its contexts: sum_i f(c_i) = B a + b sum_i c_i."""
        t, c = self._decode, self.cgrid
        if t.shape[0] == 0:
            return None
        slope = (t[:, -1] - t[:, 0]) / (c[-1] - c[0])
        fit = t[:, :1] + slope[:, None] * (c[None, :] - c[0])
        if not np.allclose(fit, t, rtol=1e-9, atol=1e-9 * float(np.abs(t).max() or 1.0)):
            return None
        return t[:, 0] - slope * c[0], slope

    def _graph_saving(self, eff: Efficiency) -> float:
        """Launch seconds a decode step saves when replayed as one CUDA graph (its kernel count does not depend on
        the batch: the micro-engine captures no MoE card, and a runtime that captures MoE layers runs each expert
        matmul as one fused kernel, `kernels_per_expert` 0, as every GPU profile does)."""
        ops = gpu_ops(self.card, self.hw, Step("decode", 1, 1, 1), self.wl)
        kernels = sum(float(launches(op, eff)) for op in ops if op.op_class != "comm")
        return kernels * (eff.kernel_overhead_s - eff.graph_kernel_overhead_s)

    def _replayed(self, batch: int, longest) -> np.ndarray | bool:
        """Whether a pure-decode step of `batch` sequences, the longest holding `longest` tokens, replays a graph."""
        return self._graph is not None and within_graph_limits(batch, longest, self._graph)

    # --- one step ---------------------------------------------------------------------------------------------

    def _decode_sum(self, contexts: np.ndarray) -> np.ndarray:
        """Context-op fields summed over decode sequences; `contexts` (B,) or (B, k) -> (fields,) or (fields, k)."""
        if self._affine is not None:
            a, b = self._affine
            total = contexts.sum(axis=0)
            return np.multiply.outer(b, total) + np.multiply.outer(a, np.full(np.shape(total), len(contexts)))
        i, f = _locate(self.cgrid, contexts)
        vals = self._decode[:, i] * (1 - f) + self._decode[:, i + 1] * f
        return vals.sum(axis=1)

    def _prefill_sum(self, n: list[int], c: list[int]) -> np.ndarray:
        """Context-op fields summed over prefill chunks (bilinear in the chunk and its cached context)."""
        if max(n, default=0) > self._ngrid_list[-1]:  # a whole prompt beyond the budget (chunked prefill off): its
            self._prefill_table(2 * max(n))  # attention grows with the square of the chunk, never extrapolate it
        t, total = self._prefill, 0.0
        for nk, ck in zip(n, c):
            i, fx = _locate1(self._ngrid_list, nk)
            j, fy = _locate1(self._cgrid_list, ck)
            total = total + (t[:, i, j] * ((1 - fx) * (1 - fy)) + t[:, i + 1, j] * (fx * (1 - fy))
                             + t[:, i, j + 1] * ((1 - fx) * fy) + t[:, i + 1, j + 1] * (fx * fy))
        return total

    def _token_s(self, tokens):
        tokens = np.asarray(tokens)
        if tokens.max(initial=0) >= len(self._token_table_s):  # a whole prompt beyond the budget (chunked prefill off)
            self._token_table_s = self._token_table(int(tokens.max()) * 2)
        return self._token_table_s[tokens]

    def _op_s(self, tpl: Op, values, tokens) -> np.ndarray:
        """`time_ops` of one context op carrying `values` (its FIELDS), sharded, without the step's fixed costs."""
        op = replace(tpl, **dict(zip(FIELDS, values)))
        if tpl.gemm and tpl.gemm_tokens is not None and tpl.flops:  # a GEMM's rows grow with its FLOPs (2 x rows x W)
            op = replace(op, gemm_tokens=tpl.gemm_tokens * np.asarray(values[0]) / tpl.flops)
        tokens = np.asarray(tokens, dtype=float)
        st = time_ops(shard_ops([op], self.wl.tp), self.hw, self.eff, tokens)
        return np.asarray(st.total_s) - fixed_seconds(self.eff, tokens)  # the token table holds them once

    def _linear_cost(self, tpl: Op) -> tuple[float, ...] | None:
        """For a non-GEMM op, `time_ops` is max(flops x a, bytes x b) x count + launches, with a and b fixed by
        the op's dtype and class (no tile padding or ramp): read them off `time_ops` itself (a, then b per
        field after sharding, then the launches), and check the form at a mixed point. None for GEMMs and for an
        attention core whose scores spill beyond the L2 cache (no flash attention: `timing.score_bytes`)."""
        if tpl.gemm or (not self.eff.flash_attention and np.max(tpl.scores) > 0):  # spilled scores: not linear
            return None
        base = float(self._op_s(tpl, (0.0,) * K, 1.0))
        unit = [float(self._op_s(tpl, [1e12 if j == i else 0.0 for j in range(K)], 1.0)) - base for i in range(K)]
        coef = tuple(u / 1e12 for u in unit) + (base,)
        probe = (3e11, 2e8, 5e9, 1e7, 3e8)
        want = float(self._op_s(tpl, probe, 1.0))
        got = max(probe[0] * coef[0], sum(p * c for p, c in zip(probe[1:], coef[1:K]))) + base
        assert abs(got - want) <= 1e-9 * max(want, 1e-12), f"{tpl.name}: time_ops is not max-linear"
        return coef

    def _context_s(self, totals: np.ndarray, tokens):
        seconds = 0.0
        for k, tpl in enumerate(self._templates):
            values = totals[K * k:K * k + K]
            coef = self._linear[k]
            if coef is None:
                seconds = seconds + self._op_s(tpl, values, tokens)
            else:
                moved = sum(values[i] * coef[i] for i in range(1, K))
                seconds = seconds + np.maximum(values[0] * coef[0], moved) + coef[K]
        return seconds

    def step_seconds(self, decode_contexts: list[int], prefill_n: list[int], prefill_c: list[int],
                     samples: int) -> float:
        """One step: decode sequences at `decode_contexts` cached tokens each, prefill chunks of `prefill_n`
        tokens on `prefill_c` cached ones, `samples` sequences sampling a token."""
        tokens = len(decode_contexts) + sum(prefill_n)
        totals = np.zeros(len(self._templates) * K)
        if decode_contexts:
            totals = totals + self._decode_sum(np.asarray(decode_contexts, dtype=float))
        if prefill_n:
            totals = totals + self._prefill_sum(prefill_n, prefill_c)
        replayed = bool(decode_contexts) and not prefill_n and self._replayed(len(decode_contexts),
                                                                             max(decode_contexts))
        rows = self._bucket(tokens) if replayed else tokens  # a replayed step runs its bucket's rows
        seconds = self._token_s(rows) + self._lm(rows if replayed else samples) + self._context_s(totals, rows)
        if replayed:
            seconds = seconds - self._graph_saving_s
        return float(seconds + self.eff.sequence_overhead_s * (len(decode_contexts) + len(prefill_n)))

    def decode_run_seconds(self, contexts: np.ndarray, steps: int) -> np.ndarray:
        """Seconds of each of `steps` pure-decode steps of the sequences at `contexts` (each step one token more)."""
        b = len(contexts)
        if self._affine is not None:  # only the batch's context sum matters: it grows by b per step
            a, slope = self._affine
            total = float(np.sum(contexts)) + b * np.arange(steps, dtype=float)
            totals = np.multiply.outer(slope, total) + (a * b)[:, None]
        else:
            ctx = np.asarray(contexts, dtype=float)[:, None] + np.arange(steps)[None, :]
            totals = self._decode_sum(ctx)  # (fields, steps)
        replayed = self._replayed(b, float(np.max(contexts)) + np.arange(steps)) if b else False
        if self._graph is None:  # one per step even where nothing depends on the context (no KV layers: a scalar)
            return np.zeros(steps) + (self._token_s(b) + self._lm(b) + self._context_s(totals, np.full(steps, float(b)))
                                      + self.eff.sequence_overhead_s * b)
        rows = np.where(replayed, self._bucket(b), b).astype(int)  # a replayed step runs its bucket's rows
        return (self._token_s(rows) + self._lm_rows(rows) + self._context_s(totals, rows.astype(float))
                + self.eff.sequence_overhead_s * b - np.where(replayed, self._graph_saving_s, 0.0))

    def _lm(self, samples: int) -> float:
        if samples >= len(self._lm_s):
            self._lm_s = self._lm_table(samples * 2)
        return self._lm_s[samples]

    def _lm_rows(self, rows: np.ndarray) -> np.ndarray:
        """`_lm` of each step's sampled rows."""
        self._lm(int(np.max(rows, initial=0)))
        return self._lm_s[rows]

    def _bucket(self, batch: int) -> int:
        """The rows of a replayed decode step of `batch` sequences (its graph bucket)."""
        return int(padded_batch(batch, self._graph.graph_max_batch))
