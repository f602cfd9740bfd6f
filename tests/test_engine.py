"""The micro-engine: incremental decode vs full recompute, continuous batching vs solo, block manager invariants."""

import pytest

torch = pytest.importorskip("torch")

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from roofline.engine.engine import LLMEngine  # noqa: E402
from roofline.engine.model.attention import StepMeta  # noqa: E402
from roofline.engine.model.runner import make_caches, run_step  # noqa: E402
from roofline.engine.model.transformer import EngineError  # noqa: E402
from tiny_cards import TINY  # noqa: E402


def engine(card, **kw):
    opts = dict(dtype="fp64", num_blocks=64, block_size=4, max_step_tokens=8, seed=3)
    opts.update(kw)
    return LLMEngine(card, **opts)


def full_logits(eng: LLMEngine, tokens: list[int]) -> torch.Tensor:
    """Logits at every position from one uncached forward over the whole sequence (fresh caches)."""
    n = len(tokens)
    bs = eng.cfg.block_size
    blocks = -(-n // bs)
    caches = make_caches(eng.model, blocks, bs, 1, torch.float64, "cpu", eng.cfg.kv_dtype == "int8")
    table = torch.arange(blocks)[None]
    pos = torch.arange(n)
    meta = StepMeta(pos, table[0, pos // bs] * bs + pos % bs, table, [0], [n], [0], bs, [0])
    with torch.inference_mode():
        return eng.model.logits(eng.model(torch.tensor(tokens), meta, caches))


def stepwise(eng: LLMEngine, prompt: list[int], n: int) -> tuple[list[int], list[torch.Tensor]]:
    """Greedy generation through the scheduler (chunked prefill + paged decode), keeping each sampled logits row."""
    seq = eng.add_request(prompt, n)
    rows = []
    while not eng.scheduler.idle:
        work = eng.scheduler.schedule()
        logits = run_step(eng.model, work, eng.caches, eng.cfg.block_size, eng.device)
        sampled = {}
        if logits is not None:
            rows.append(logits[0])
            sampled[seq.seq_id] = int(logits[0].argmax())
        eng.scheduler.finish_step(work, sampled)
    return seq.output_ids, rows


@pytest.mark.parametrize("family", sorted(TINY))
def test_incremental_decode_matches_full_recompute(family):
    eng = engine(TINY[family])
    prompt = [(7 * i + 3) % 97 for i in range(19)]  # 19 tokens: 3 prefill chunks of <= 8, partial blocks
    out, rows = stepwise(eng, prompt, 12)
    full = full_logits(eng, prompt + out)
    for i, row in enumerate(rows):
        torch.testing.assert_close(row, full[len(prompt) - 1 + i], rtol=1e-9, atol=1e-9)


def test_int8_kv_stays_close():
    eng = engine(TINY["llama"], kv_dtype="int8")
    prompt = list(range(1, 30))
    _, rows = stepwise(eng, prompt, 4)
    ref = full_logits(engine(TINY["llama"]), prompt)[-1]
    assert torch.nn.functional.cosine_similarity(rows[0], ref, dim=0) > 0.999


@pytest.mark.parametrize("family", ["llama", "moe", "hybrid", "sliding"])
def test_continuous_batching_matches_each_request_alone(family):
    prompts = [[(i * 13 + j * 5) % 97 for j in range(n)] for i, n in enumerate([3, 17, 9, 30, 1, 22])]
    limits = [9, 4, 12, 6, 15, 8]
    alone = [engine(TINY[family], num_blocks=64).generate([p], m)[0] for p, m in zip(prompts, limits)]
    eng = engine(TINY[family], num_blocks=20, max_num_seqs=4)  # 80 cache slots for 180 tokens: forces preemption
    together = eng.generate(prompts, limits)
    assert together == alone
    assert any(st.prefill_tokens and st.decode_tokens for st in eng.stats)  # chunks mixed with decodes
    assert len(eng.stats) < sum(limits)  # batched: fewer steps than tokens


def test_preemption_recomputes_to_the_same_tokens():
    prompts = [[(i * 11 + j) % 97 for j in range(12)] for i in range(4)]
    eng = engine(TINY["llama"], num_blocks=9, max_num_seqs=4)  # 36 slots; 4 x (12 + 10) tokens
    seqs = [eng.add_request(p, 10) for p in prompts]
    while not eng.scheduler.idle:
        eng.step()
    assert sum(s.preemptions for s in seqs) > 0
    alone = [engine(TINY["llama"]).generate([p], 10)[0] for p in prompts]
    assert [s.output_ids for s in seqs] == alone


def test_prefix_reuse_skips_cached_blocks():
    eng = engine(TINY["llama"], max_step_tokens=64)
    shared = list(range(1, 21))
    first = eng.generate([shared + [40]], 3)[0]
    seq = eng.add_request(shared + [50], 3)
    eng.step()
    assert seq.num_computed_tokens == 21 and eng.stats[-1].prefill_tokens == 1  # 5 blocks of 4 reused
    while not eng.scheduler.idle:
        eng.step()
    assert seq.output_ids == engine(TINY["llama"]).generate([shared + [50]], 3)[0]
    assert first == engine(TINY["llama"]).generate([shared + [40]], 3)[0]


def test_temperature_sampling_is_seeded():
    eng = engine(TINY["llama"])
    a = eng.add_request([1, 2, 3], 8, temperature=1.0, seed=7)
    b = eng.add_request([1, 2, 3], 8, temperature=1.0, seed=7)
    while not eng.scheduler.idle:
        eng.step()
    assert a.output_ids == b.output_ids


def test_refusals():
    with pytest.raises(EngineError, match="MLA"):
        LLMEngine("deepseek-v3", layers=1, vocab=64)
    with pytest.raises(EngineError, match="GB free"):
        LLMEngine("llama-3.1-70b", dtype="fp32")  # 282 GB of fp32 weights
    with pytest.raises(EngineError, match="exceeds the KV pool"):
        engine(TINY["llama"], num_blocks=2).add_request([1, 2, 3], 20)


@pytest.mark.parametrize("rows", [1, 5, 8, 32, 33, 100, 257])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_linear_fast_paths_match_the_reference(rows, dtype):
    """The one-row, transposed (8-32 rows) and row-padded (bf16, >32 rows) paths give F.linear's product."""
    from roofline.engine.model.modules import linear

    g = torch.Generator().manual_seed(rows)
    x, w, b = (torch.randn(*s, generator=g) for s in ((rows, 96), (80, 96), (80,)))
    got = linear(x.to(dtype), w.to(dtype), b.to(dtype)).float()
    want = torch.nn.functional.linear(x.to(dtype).double(), w.to(dtype).double(), b.to(dtype).double())
    assert got.shape == (rows, 80)
    torch.testing.assert_close(got.double(), want, rtol=2e-2 if dtype == torch.bfloat16 else 1e-5, atol=5e-2)


@given(st.integers(1, 1 << 16))
def test_gemm_rows_pads_by_at_most_a_sixteenth_over_256_rows(m):
    from roofline.engine.model.modules import gemm_rows

    padded = gemm_rows(m)
    assert m <= padded <= max(m * 17 / 16, m + 15)
    assert padded % 16 == 0 and gemm_rows(padded) == padded


def test_gemm_rows_reuses_few_shapes():
    from roofline.engine.model.modules import gemm_rows

    assert len({gemm_rows(m) for m in range(33, 4097)}) <= 100


def test_a_card_cut_to_layers_without_attention_still_serves():
    """nemotron-3-nano's first layer is a Mamba-2 mixer: no KV at all, so the pool is a fixed count of blocks."""
    from roofline.engine.engine import BLOCKS_WITHOUT_KV

    eng = LLMEngine("nemotron-3-nano", layers=1, vocab=64, dtype="fp32")
    assert not any(lay.is_attention for lay in eng.model.layers_spec)
    assert len(eng.blocks.ref_count) == BLOCKS_WITHOUT_KV
    assert [len(out) for out in eng.generate([[1, 2, 3], [4, 5]], max_tokens=3)] == [3, 3]


def test_proportional_rope_keeps_the_full_heads_frequency_spacing():
    """Gemma 4's p-RoPE rotates a quarter of the head with the full head's spacing theta^(-2i/head_dim); the
    partial-rotary default spreads the rotated dims over the whole range theta^(-2i/rot_dim)."""
    from roofline.engine.model.rope import inv_frequencies

    p_rope, _ = inv_frequencies(128, 1e6, {"type": "proportional"}, head_dim=512)
    partial, _ = inv_frequencies(128, 1e6, None, head_dim=512)
    i = torch.arange(64, dtype=torch.float64)
    assert torch.allclose(p_rope, 1e6 ** (-2 * i / 512)) and torch.allclose(partial, 1e6 ** (-2 * i / 128))
    with pytest.raises(ValueError, match="needs a factor"):
        inv_frequencies(128, 1e6, {"type": "yarn"})


@pytest.mark.parametrize("window", [None, 5, 40])
def test_cached_chunks_in_one_call_match_chunk_by_chunk(window, monkeypatch):
    """The batched path CUDA takes for chunks on top of a cache (queries and spans padded, one attention call) gives
    what attending chunk by chunk gives: GQA heads, chunks of different lengths and contexts beside decode rows and
    a fresh prompt, with and without a sliding window."""
    from roofline.engine.model import attention
    from roofline.engine.model.attention import PagedKV, paged_attention

    torch.manual_seed(0)
    bs, kv_heads, heads, d = 4, 2, 6, 8
    cache = PagedKV(40, bs, kv_heads, d, torch.float32, "cpu")
    cache.k.normal_()
    cache.v.normal_()
    chunks = [(7, 9), (1, 13), (6, 0), (3, 2), (1, 30), (11, 21)]  # (new tokens, cached) per sequence
    tables, block = [], 1
    for n, ctx in chunks:
        need = -(-(n + ctx) // bs)
        tables.append(list(range(block, block + need)))
        block += need
    width = max(map(len, tables))
    block_tables = torch.tensor([t + [0] * (width - len(t)) for t in tables])
    starts = [sum(n for n, _ in chunks[:i]) for i in range(len(chunks))]
    positions = torch.cat([torch.arange(c, c + n) for n, c in chunks])
    meta = StepMeta(positions, torch.zeros_like(positions), block_tables, starts, [n for n, _ in chunks],
                    [c for _, c in chunks], bs, [None] * len(chunks))
    total = sum(n for n, _ in chunks)
    q, k, v = torch.randn(total, heads, d), torch.randn(total, kv_heads, d), torch.randn(total, kv_heads, d)
    for (n, c), table, q0 in zip(chunks, tables, starts):  # the new tokens' K/V in the cache, as the model writes
        slots = torch.tensor([table[p // bs] * bs + p % bs for p in range(c, c + n)])
        cache.write(slots, k[q0:q0 + n], v[q0:q0 + n])
    one_by_one = paged_attention(q, k, v, cache, meta, 0.3, window)
    monkeypatch.setattr(attention, "BATCH_CACHED_CHUNKS", True)
    meta.memo.clear()
    batched = paged_attention(q, k, v, cache, meta, 0.3, window)
    assert torch.allclose(batched, one_by_one, atol=1e-5)
    together = tuple(i for i, (n, c) in enumerate(chunks) if n > 1 and (c or window is not None and n > window))
    assert together in ((0, 3, 5), (0, 2, 3, 5)) and ("chunks", together, window) in meta.memo  # one call


def test_every_activation_the_importer_writes_runs_in_the_engine():
    """A config.json card (OPT's relu, GPT-2's gelu_new -> gelu_tanh) must be buildable by the engine."""
    from roofline.engine.model.modules import ACTIVATIONS
    from roofline.importers.hf_parts import _ACTIVATIONS

    assert set(_ACTIVATIONS.values()) <= set(ACTIVATIONS)
