"""The serving pool counts what a sequence really holds: sliding-window layers capped at their window (vLLM v1 frees
the blocks that leave it) and a recurrent layer's state once per sequence, from the one KV formula (`kv_bytes`)."""

import pytest

from roofline.cards.store import CardStore
from roofline.cli.serve_cmd import run_serve
from roofline.perf.efficiency import expected_efficiency
from roofline.perf.serving.policy import policy_for
from roofline.perf.serving.replica import UNBOUNDED_BLOCKS, ReplicaSetup, kv_pool_blocks
from roofline.perf.workload import make_workload
from roofline.sizing.kv import block_costs, kv_bytes, kv_bytes_per_token, state_bytes

STORE = CardStore()
BLOCK = 16


@pytest.mark.parametrize("name", [c.name for c in STORE.all("models")])
def test_a_sequence_holds_the_blocks_its_kv_bytes_fill(name):
    """Every bundled card: the blocks a sequence holds cover its KV bytes (windows capped, state added) with at
    most one part-filled block per kind of layer, at short, window-long and long contexts (whole blocks)."""
    card = STORE.model(name)
    costs = block_costs(card, "bf16", BLOCK)
    assert costs.unit_bytes > 0
    for tokens in (BLOCK, 112, 4096, 5008, min(40_000, card.architecture.max_context) // BLOCK * BLOCK):
        held = costs.blocks(tokens, BLOCK) * costs.unit_bytes
        need = kv_bytes(card, tokens, "bf16", BLOCK)
        assert need * (1 - 1e-9) <= held <= need + 2 * costs.unit_bytes, (name, tokens)


def test_a_full_attention_model_keeps_one_block_per_position():
    costs = block_costs(STORE.model("llama-3.1-8b"), "bf16", BLOCK)
    assert costs.extra is None and costs.table_costs
    assert costs.unit_bytes == kv_bytes_per_token(STORE.model("llama-3.1-8b"), "bf16") * BLOCK
    assert costs.blocks(20_000, BLOCK) == 1250


def _setup(model: str) -> ReplicaSetup:
    hw = STORE.hardware("h100-sxm")
    wl = make_workload(kv_quant="bf16")
    return ReplicaSetup.build(STORE.model(model), hw, wl, policy_for(STORE.runtime("vllm"), hw), expected_efficiency(hw))


def test_an_all_sliding_model_has_a_bounded_pool_and_a_capped_sequence():
    """Mistral-7B attends over a 4,096-token window in every layer: its pool is what the memory holds of one block
    per 16 tokens of all 32 layers (2 MiB), not unbounded, and a sequence past the window holds 256 blocks."""
    card, hw = STORE.model("mistral-7b"), STORE.hardware("h100-sxm")
    policy = policy_for(STORE.runtime("vllm"), hw)
    blocks = kv_pool_blocks(card, hw, make_workload(kv_quant="bf16"), policy)
    assert 10_000 < blocks < UNBOUNDED_BLOCKS
    costs = block_costs(card, "bf16", BLOCK)
    assert costs.unit_bytes == 2 * 2**20 and not costs.table_costs
    assert costs.blocks(4096, BLOCK) == costs.blocks(30_000, BLOCK) == 256
    assert _setup("mistral-7b").max_request_tokens == card.architecture.max_context


def test_a_hybrid_model_holds_its_recurrent_state_per_sequence():
    """Granite-4.0-H's Mamba-2 layers keep a fixed state per sequence (77 MB): a one-token sequence already holds
    the state's blocks, and the longest request leaves room for it."""
    card = STORE.model("granite-4.0-h-small")
    costs = block_costs(card, "bf16", BLOCK)
    state_blocks = costs.blocks(1, BLOCK) - 1
    assert state_blocks == pytest.approx(state_bytes(card, "bf16") / costs.unit_bytes, abs=1)
    setup = _setup("granite-4.0-h-small")
    assert setup.max_request_tokens <= (setup.num_blocks - state_blocks) * BLOCK


def test_serving_long_requests_on_a_sliding_model_runs_what_the_pool_holds():
    """256 clients of 6,000 + 500 tokens on Mistral-7B: no more run at once than the pool holds at 256 blocks each
    (all 256 ran, 137 GB of KV on an 80 GB card, when the pool was unbounded), and the pool is never over-full."""
    result = run_serve(STORE, "mistral-7b", "h100-sxm", "vllm", 256, None, None, 300, "6000", "500", None, None,
                       None, 0, None, "bf16", 1, 1)
    setup = result.fleet.setup
    most = setup.num_blocks // setup.costs.blocks(6500, BLOCK)
    series = result.metrics.series
    peak = max(p[1] for p in series)
    assert most <= peak <= most + 2  # a sequence still in its first chunks holds fewer
    assert max(p[3] for p in series) <= 1.0
