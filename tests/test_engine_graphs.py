"""Static-buffer decode (the CUDA-graph path, run eagerly on the CPU): buckets, padding, and equality with the
engine's ordinary eager path."""

import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from conftest import REPO  # noqa: E402
from roofline.engine.core.scheduler import Scheduled  # noqa: E402
from roofline.engine.core.sequence import Sequence  # noqa: E402
from roofline.engine.engine import LLMEngine  # noqa: E402
from roofline.engine.model.graphs import batch_buckets, bucket_for, host_inputs  # noqa: E402
from tiny_cards import TINY  # noqa: E402


@pytest.mark.parametrize("max_batch, expected", [
    (1, [1]), (3, [1, 2, 3]), (8, [1, 2, 4, 8]), (20, [1, 2, 4, 8, 16, 20]), (32, [1, 2, 4, 8, 16, 24, 32]),
])
def test_buckets(max_batch, expected):
    assert batch_buckets(max_batch) == expected


@pytest.mark.parametrize("batch", range(1, 42))
def test_a_batch_takes_the_smallest_bucket_that_holds_it(batch):
    buckets = batch_buckets(32)
    b = bucket_for(batch, buckets)
    if batch > 32:
        assert b is None
    else:
        assert b >= batch and all(x < batch for x in buckets if x < b)


def test_host_inputs_pad_to_the_bucket_with_scratch_writes():
    seqs = [Sequence(list(range(10)), 4), Sequence(list(range(21)), 4)]
    seqs[0].block_table, seqs[0].num_computed_tokens = [5, 2, 7], 9
    seqs[1].block_table, seqs[1].num_computed_tokens = [1, 3, 4, 6, 8, 9], 20
    x = host_inputs([Scheduled(s, 1) for s in seqs], 4, 8, 4, scratch_slot=40)
    assert x["ids"].tolist() == [9, 20, 0, 0]
    assert x["positions"].tolist() == [9, 20, 0, 0]
    assert x["kv_lens"].tolist() == [10, 21, 1, 1]
    assert x["slots"].tolist() == [7 * 4 + 1, 9 * 4 + 0, 40, 40]  # block of position p = table[p // 4]
    assert x["block_tables"].shape == (4, 8)
    assert x["block_tables"][1].tolist() == [1, 3, 4, 6, 8, 9, 0, 0] and not x["block_tables"][2:].any()


def _engine(card, graphs, **kw):
    return LLMEngine(card, dtype="fp32", num_blocks=64, graphs=graphs, **kw)


PROMPTS = [[1, 2, 3], [4, 5, 6, 7, 8], [9] * 20, [3, 3], [5, 6, 7, 8, 9, 10]]


@pytest.mark.parametrize("family", ["llama", "qwen2", "moe", "sliding", "gemma"])
def test_static_decode_gives_the_eager_tokens(family):
    eager, static = _engine(TINY[family], False), _engine(TINY[family], True, graph_max_batch=8, graph_max_context=64)
    assert eager.mode == "eager" and static.mode == "static"
    assert static.generate(PROMPTS, [12, 3, 9, 15, 6]) == eager.generate(PROMPTS, [12, 3, 9, 15, 6])
    modes = {s.mode for s in static.stats}
    assert modes == {"static", "eager"}  # decode steps static, prefill steps eager


def test_static_logits_match_eager_and_padding_rows_are_sliced_off():
    """Three sequences in a bucket of 4: the logits rows equal the eager step's; the padding's K/V went to the
    scratch block (the live blocks read the same afterwards)."""
    card = TINY["llama"]
    eager, static = _engine(card, False), _engine(card, True, graph_max_batch=4, graph_max_context=64)
    logits = {}
    for name, eng in (("eager", eager), ("static", static)):
        seqs = [eng.add_request(p, 4) for p in PROMPTS[:3]]
        eng.step()  # prefill, eager on both
        work = [Scheduled(s, 1) for s in seqs]
        logits[name] = eng._forward(work)
        assert eng.last_mode == name
    assert logits["static"].shape == (3, card.architecture.vocab_size)
    torch.testing.assert_close(logits["static"], logits["eager"], rtol=1e-5, atol=1e-5)
    live = slice(0, 64 * 16)
    for a, b in zip(eager.caches, static.caches):
        torch.testing.assert_close(a.k[live], b.k[live])


def test_beyond_the_largest_bucket_or_context_decode_runs_eagerly():
    eng = _engine(TINY["llama"], True, graph_max_batch=2, graph_max_context=16)
    eng.generate([[1, 2], [3, 4], [5, 6]], 3)  # 3 sequences > bucket 2
    assert {s.mode for s in eng.stats} == {"eager"}
    eng.stats.clear()
    eng.generate([[1] * 14], 6)  # passes the 16 tokens the tables address after two tokens
    assert [s.mode for s in eng.stats] == ["eager", "static", "static", "eager", "eager", "eager"]


def test_device_time_is_host_time_on_the_cpu():
    eng = _engine(TINY["llama"], True, graph_max_batch=4)
    eng.generate([[1, 2, 3]], 3)
    assert all(s.device_seconds == s.seconds > 0 for s in eng.stats)


TRITON_CHECK = """
import torch
from roofline.engine.model import paged_kernel
from roofline.engine.model.attention import PagedKV, static_decode_attention
assert paged_kernel.triton is not None
torch.manual_seed(0)
cache = PagedKV(12, 4, 2, 16, torch.float32, "cpu")
cache.k.normal_(); cache.v.normal_()
q, tables, lens = torch.randn(3, 8, 16), torch.randint(0, 12, (3, 5)), torch.tensor([1, 9, 20])
for window, min_blocks, fixed in ((None, 4, None), (6, 4, None), (None, 1, None), (6, 1, None), (None, 2, None),
                                  (3, 2, None), (None, 4, 2), (6, 4, 3)):
    paged_kernel.MIN_PARTITION_BLOCKS = min_blocks  # 1, 5 or 2 partitions of the 5 table entries
    paged_kernel.PARTITION_BLOCKS = fixed  # or fixed: 3 partitions of 2 blocks, 2 of 3
    out = paged_kernel.paged_decode(q, cache.k, cache.v, tables, lens, 4, 0.25, window)
    k, v = cache.read_blocks(tables)
    pos = torch.arange(20)
    for s in range(3):
        seen = (pos < lens[s]) & (pos >= (lens[s] - window if window else 0))
        kk, vv = k[s][seen].repeat_interleave(4, 1), v[s][seen].repeat_interleave(4, 1)  # [L, H, D]
        att = torch.softmax(torch.einsum("hd,lhd->hl", q[s], kk) * 0.25, -1)
        torch.testing.assert_close(out[s], torch.einsum("hl,lhd->hd", att, vv), rtol=1e-5, atol=1e-5)
print("ok")
"""


def test_triton_paged_kernel_under_the_interpreter():
    """The Triton kernel against a per-sequence softmax, on CPU tensors through TRITON_INTERPRET=1, with the context
    in one partition and split over several (some of them holding no visible position)."""
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join([str(REPO), *sys.path])}
    run = subprocess.run([sys.executable, "-c", TRITON_CHECK], capture_output=True, text=True, timeout=300,
                         cwd=REPO, env=env)
    assert run.returncode == 0 and "ok" in run.stdout, run.stderr[-2000:]


@pytest.mark.parametrize("family", sorted(TINY))
def test_the_predictor_knows_which_cards_the_engine_captures(family):
    """perf.request.graph_capturable (the predictor's rule, torch-free) says what graphs.capturable says of the
    built model: MoE routing and recurrent layers keep decode uncaptured."""
    from roofline.engine.model.graphs import capturable

    from roofline.perf.request import graph_capturable

    eng = _engine(TINY[family], True, graph_max_batch=4)
    assert graph_capturable(eng.card) == capturable(eng.model)


def test_timing_more_sequences_than_the_pool_holds_names_the_fix():
    from roofline.engine.measure.bench import measure_both
    from roofline.engine.model.transformer import EngineError

    eng = _engine(TINY["llama"], True, graph_max_batch=4)  # 64 blocks of 16 tokens
    with pytest.raises(EngineError, match="max_kv_bytes"):
        measure_both(eng, "decode", 8, 200, 1, repeats=2)  # 8 x 14 blocks
    assert eng.blocks.num_free == 64  # nothing was taken


@pytest.mark.parametrize("sequences, kv_heads, max_blocks, expected", [
    (1, 8, 256, (64, 4)),  # batch 1: the context split into 64 partitions of 4 blocks
    (16, 4, 256, (32, 8)),  # 64 programs: more partitions wanted than of 8 blocks, none shorter than 4
    (32, 8, 256, (32, 8)),  # 256 programs already: partitions as long as a program walks, 8 blocks
    (512, 8, 256, (32, 8)),  # more programs than the target: still no program walks more than 8 blocks
    (1, 8, 3, (1, 3)),  # fewer blocks than a partition's minimum
    (1, 4, 5, (1, 5)),  # between the minimum and the maximum: one partition
])
def test_partitions_fill_the_gpu_without_splitting_too_fine(sequences, kv_heads, max_blocks, expected):
    from roofline.engine.model import paged_kernel

    parts, per_part = paged_kernel.partitions(sequences, kv_heads, max_blocks)
    assert (parts, per_part) == expected and parts * per_part >= max_blocks


@pytest.mark.parametrize("fixed, sequences, max_blocks, expected", [
    (8, 1, 256, (32, 8)), (8, 32, 256, (32, 8)),  # the same partitions at any batch
    (8, 1, 20, (3, 8)), (8, 1, 3, (1, 3)),  # the last partition short; fewer blocks than one partition
])
def test_fixed_partitions_do_not_grow_with_the_batch(fixed, sequences, max_blocks, expected, monkeypatch):
    from roofline.engine.model import paged_kernel

    monkeypatch.setattr(paged_kernel, "PARTITION_BLOCKS", fixed)
    parts, per_part = paged_kernel.partitions(sequences, 4, max_blocks)
    assert (parts, per_part) == expected and parts * per_part >= max_blocks > (parts - 1) * per_part


class _StepClock:
    """An engine whose every step takes `seconds`: counts the steps a timing runs."""
    last_device_seconds = 0.0

    def __init__(self, seconds: float):
        self.seconds, self.steps = seconds, 0

    def execute(self, scheduled):
        self.steps += 1
        return self.seconds, {}


@pytest.mark.parametrize("seconds, span, steps", [
    (0.0015, True, 14),  # a replayed graph step of 1.5 ms: repeated until 20 ms
    (1e-5, True, 24),  # ... but never more than GRAPH_MAX_REPEATS
    (0.05, True, 3),  # a step longer than the span: the asked repeats
    (0.0015, False, 3),  # an eager or CPU step: the asked repeats
])
def test_short_graph_steps_are_repeated_until_they_span_the_window(seconds, span, steps):
    from roofline.engine.measure import bench

    clock = _StepClock(seconds)
    host, _ = bench._time_step(clock, [], 1, 3, advance=False, span_s=bench.GRAPH_SPAN_S if span else 0.0)
    assert clock.steps == steps and host == seconds
    assert bench.GRAPH_SPAN_S == 0.02 and bench.GRAPH_MAX_REPEATS == 24


def test_padding_every_row_points_its_writes_at_the_scratch_block():
    eng = _engine(TINY["llama"], True, graph_max_batch=4)
    runner = eng.decode_runner
    eng.generate([[1, 2, 3], [4, 5]], 3)  # the buffers now hold live rows
    runner.pad_inputs()
    assert runner.inputs.slots.tolist() == [runner.scratch_slot] * 4 and runner.inputs.kv_lens.tolist() == [1] * 4
    assert runner.inputs.block_tables.abs().sum() == 0 and runner.inputs.ids.abs().sum() == 0
    eng.capture_graphs()  # the CPU captures nothing: its steps stay static, uncaptured
    assert runner.graphs == {} and eng.mode == "static"


def test_warm_up_runs_one_step_of_the_whole_budget_and_leaves_the_engine_idle():
    eng = _engine(TINY["llama"], True, graph_max_batch=4, max_step_tokens=96)
    eng.warm_up()
    totals = [s.prefill_tokens + s.decode_tokens for s in eng.stats]
    assert max(totals) == 96 and eng.stats[0].sequences == 5  # the long prompt's chunk beside four short ones
    assert eng.scheduler.idle and eng.blocks.num_free == len(eng.blocks.ref_count)
