"""The engine's chunked SSD scan (Mamba-2 prefill) equals the token-by-token recurrence it replaces."""

import pytest

torch = pytest.importorskip("torch")

from roofline.engine.model.mamba import ssd_reference, ssd_scan  # noqa: E402


def inputs(length: int, heads: int, groups: int, p: int, n: int, seed: int):
    """fp32 SSD inputs as a Mamba-2 layer makes them: dt-scaled x, negative log-decays dt*A, B, C, a start state."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(length, heads, p, generator=gen)
    a = -torch.rand(length, heads, generator=gen) * 0.5
    b, c = torch.randn(length, groups, n, generator=gen), torch.randn(length, groups, n, generator=gen)
    return x, a, b, c, torch.randn(heads, p, n, generator=gen)


@pytest.mark.parametrize("length,chunk", [(37, 8), (16, 8), (5, 8), (1, 4), (64, 64), (100, 32)])
@pytest.mark.parametrize("heads,groups", [(4, 1), (4, 2), (6, 6)])
def test_chunked_scan_equals_the_sequential_recurrence(length, chunk, heads, groups):
    x, a, b, c, h0 = inputs(length, heads, groups, 3, 5, seed=length * 7 + heads)
    y, h = ssd_scan(x, a, b, c, chunk, h0)
    y_ref, h_ref = ssd_reference(x, a, b, c, h0)
    torch.testing.assert_close(y, y_ref, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(h, h_ref, rtol=1e-4, atol=1e-4)


def test_the_scan_is_causal_and_passes_state_between_calls():
    """Scanning a prefix, then the rest from its final state, gives the whole scan (chunked prefill relies on it);
    and changing a later token never changes an earlier output."""
    x, a, b, c, h0 = inputs(29, 4, 2, 3, 5, seed=1)
    y, h = ssd_scan(x, a, b, c, 8, h0)
    y1, h1 = ssd_scan(x[:11], a[:11], b[:11], c[:11], 8, h0)
    y2, h2 = ssd_scan(x[11:], a[11:], b[11:], c[11:], 8, h1)
    torch.testing.assert_close(torch.cat([y1, y2]), y, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(h2, h, rtol=1e-4, atol=1e-4)
    x2 = x.clone()
    x2[20] += 1.0
    y_changed, _ = ssd_scan(x2, a, b, c, 8, h0)
    assert torch.equal(y_changed[:20], y[:20]) and not torch.allclose(y_changed[20:], y[20:])


@pytest.mark.parametrize("slots", [[2, 0, 1], [4, 1, 2]])  # a contiguous range in any order; a scattered set
def test_batched_decode_equals_each_sequence_alone(slots):
    """Decode tokens of several sequences step together; each slot's state and output are those of stepping it
    alone."""
    from types import SimpleNamespace

    from roofline.engine.model.attention import StepMeta
    from roofline.engine.model.mamba import Mamba2

    cfg = SimpleNamespace(num_heads=4, head_dim=3, state_size=5, n_groups=2, d_inner=12, conv_kernel=4, chunk_size=8)
    torch.manual_seed(0)
    layer = Mamba2(8, cfg, 1e-6).double()
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_(0, 0.3)
    x = torch.randn(len(slots), 8, dtype=torch.float64)

    def fresh():
        state = layer.make_state(6, "cpu", torch.float64)
        gen = torch.Generator().manual_seed(5)
        state.conv.copy_(torch.randn(state.conv.shape, generator=gen, dtype=torch.float64))
        state.ssm.copy_(torch.randn(state.ssm.shape, generator=gen, dtype=torch.float64))
        return state

    def meta(n_seqs, slot_list):
        return StepMeta(None, None, None, list(range(n_seqs)), [1] * n_seqs, [3] * n_seqs, 16, slot_list)

    together = fresh()
    with torch.inference_mode():
        y = layer(x, meta(len(slots), slots), together)
        alone = fresh()
        ys = [layer(x[i:i + 1], meta(1, [s]), alone) for i, s in enumerate(slots)]
    torch.testing.assert_close(y, torch.cat(ys))
    torch.testing.assert_close(together.ssm, alone.ssm)
    torch.testing.assert_close(together.conv, alone.conv)
