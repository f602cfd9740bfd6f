"""Tensor parallel over torch.distributed with gloo on the CPU: `--tp 2` generates exactly the greedy tokens of one
process (the ranks' partial sums differ from one process's sums only in rounding)."""

import json
import os

import pytest
from conftest import run_cli

torch = pytest.importorskip("torch")

from roofline.engine.engine import LLMEngine  # noqa: E402
from roofline.engine.measure.bench import measure_request  # noqa: E402
from roofline.engine.model.transformer import EngineError  # noqa: E402
from tiny_cards import TINY  # noqa: E402
from tiny_cards import card as card_of  # noqa: E402

from roofline.engine import parallel  # noqa: E402

RUN = ("engine", "run", "--model", "qwen2.5-3b", "--layers", "1", "--vocab", "256", "--prompt", "12", "--output", "5",
       "--batch", "2", "--json")


def test_engine_run_tp2_gives_the_tp1_tokens():
    one, two = run_cli(*RUN), run_cli(*RUN, "--tp", "2")
    assert one.returncode == 0 and two.returncode == 0, one.stderr[-800:] + two.stderr[-800:]
    a, b = json.loads(one.stdout), json.loads(two.stdout)
    assert b["tp"] == 2 and len(a["tokens"]) == 2 and all(len(t) == 5 for t in a["tokens"])
    assert a["tokens"] == b["tokens"]
    assert b["measured"]["itl_s"] > 0 and b["measured_device"]["itl_s"] == b["measured"]["itl_s"]  # CPU: device = host


def test_moe_with_biases_and_a_shared_expert_shards_to_the_same_tokens():
    """Expert intermediate dims split, router replicated, row-parallel biases added once, vocab-parallel head; each
    rank caches its 2 of the 4 KV heads."""
    card = card_of("tiny-moe-bias", vocab_size=101,  # not a multiple of 2: the last vocab shard is padded
                   attention={"num_heads": 8, "num_kv_heads": 4, "head_dim": 8, "qkv_bias": True, "o_bias": True},
                   moe={"num_experts": 8, "experts_per_token": 2, "expert_intermediate_size": 32, "expert_bias": True,
                        "num_shared_experts": 1, "shared_expert_intermediate_size": 48})
    options = dict(dtype="fp32", max_num_seqs=3, max_step_tokens=64, num_blocks=64)
    two = parallel.run_ranks(2, "cpu", parallel.serve, card, options, 12, 6, 3)
    one = measure_request(LLMEngine(card, **options), 12, 6, 3, seed=0).to_dict()
    assert two["tokens"] == one["tokens"]


@pytest.mark.parametrize("family, tp, message", [("sliding", 2, "KV heads"), ("llama", 3, "heads"),
                                                 ("hybrid", 2, "Mamba-2")])
def test_cards_that_do_not_split_are_refused_before_any_process_starts(family, tp, message):
    with pytest.raises(EngineError, match=message):
        parallel.check_tp(TINY[family], tp)


def _rank_one_aborts(rank: int, world: int, device: str) -> int:
    if rank == 1:
        os.abort()
    return rank


def test_a_rank_killed_before_it_reports_fails_the_run():
    with pytest.raises(Exception, match="SIGABRT"):
        parallel.run_ranks(2, "cpu", _rank_one_aborts)


def _rank_one_refuses(rank: int, world: int, device: str) -> int:
    if rank == 1:
        raise EngineError("rank 1 cannot hold its shard; use fewer --layers")
    return rank


def test_a_rank_engine_error_reaches_the_parent_as_one_error_without_files(tmp_path, monkeypatch):
    """An EngineError inside a rank (its memory guard, say) is the run's EngineError, one line, with no traceback
    file left behind and no rank left running (it had surfaced as torch's ProcessRaisedException, an internal
    error, and left /tmp/pytorch-errorfile-*.pickle)."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    with pytest.raises(EngineError, match="^rank 1 cannot hold its shard; use fewer --layers$"):
        parallel.run_ranks(2, "cpu", _rank_one_refuses)
    assert not list(tmp_path.glob("pytorch-errorfile*"))
