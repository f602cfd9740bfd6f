"""Memory policies of the runtimes that size the KV pool from what the weights leave (TensorRT-LLM, lmdeploy), as
`fits`, `serve` and the published max-load rows all count them."""

import json

import pytest
from conftest import run_cli

from roofline.calibrate.published import MaxLoad, _at_max_load, max_load_memory
from roofline.cards.store import CardStore
from roofline.perf.serving.policy import policy_for
from roofline.perf.serving.replica import kv_pool_blocks
from roofline.perf.workload import Workload, make_workload

STORE = CardStore()


@pytest.mark.parametrize("runtime, share", [("trtllm", 0.9), ("lmdeploy", 0.8)])
def test_fits_a_free_fraction_runtime_gives_its_pool_that_share_of_what_is_left(runtime, share):
    """TensorRT-LLM (free_gpu_memory_fraction 0.9) and lmdeploy (cache_max_entry_count 0.8) size the KV pool as a
    share of the memory left after the weights load, not of the whole GPU: with Llama-3.3-70B FP8 filling most of
    an H100, vLLM's 90% of the device leaves no 8k sequence room while TensorRT-LLM's pool holds two (beside the
    logits of its 2,048-sequence batch, 1.05 GB). The pool is exactly the share of what the rest leaves, and serve's
    pool is the same, to a block."""
    args = ("fits", "-m", "llama-3.3-70b", "--hw", "h100-sxm", "--quant", "fp8", "--json")
    free, vllm = (json.loads(run_cli(*args, "--runtime", r).stdout) for r in (runtime, "vllm"))
    assert free["memory_policy"]["policy"] == "free_fraction" and free["memory_policy"]["kv_share"] == share
    left = free["capacity_bytes"] - sum(v for k, v in free["budget"].items() if k != "kv")
    per_seq = free["kv_bytes_per_sequence"]
    assert free["max_concurrency"] == int(share * left // per_seq)
    if runtime == "trtllm":
        assert free["max_concurrency"] == 2 and vllm["max_concurrency"] == 0
    choice = STORE.runtime(runtime)
    hw, card = STORE.hardware("h100-sxm"), STORE.model("llama-3.3-70b")
    policy = policy_for(choice, hw)
    blocks = kv_pool_blocks(card, hw, make_workload(quant="fp8", kv_quant=choice.profile.default_kv_format), policy)
    tokens = blocks * policy.sim_block_tokens
    # both size the activations beside the pool for the runtime's whole batch (its max_num_seqs logits)
    assert share * left - policy.sim_block_tokens * free["kv_bytes_per_token"] <= tokens * free["kv_bytes_per_token"] \
        <= share * left * 1.001


def test_a_max_load_row_is_sized_under_its_runtime_memory_policy():
    """An offline max-load row's batch is the most sequences the runtime's own pool holds (as `fits --runtime`
    counts it): vLLM's 90% of the device, TensorRT-LLM's 90% of what the weights leave; generic rows keep all of
    the memory. Llama-3.3-70B FP8 at 1,000 + 1,000 tokens on one H100 runs about three times the sequences under
    TensorRT-LLM that it runs under vLLM (the rows had all been sized with the whole memory)."""
    hw, card = STORE.hardware("h100-sxm"), STORE.model("llama-3.3-70b")
    wl = Workload(prompt_tokens=1000, output_tokens=1000, batch=1, quant="fp8", kv_quant="fp8")
    batch = {}
    for name in ("trtllm", "vllm", None):
        runtime = STORE.runtime(name) if name else None
        view, dep = max_load_memory(hw, runtime)
        batch[name] = _at_max_load(card, wl, MaxLoad(10_000, view, dep)).batch
        if name == "vllm":
            assert view.memory.capacity_bytes == pytest.approx(0.9 * hw.memory.usable_bytes) and dep.kv_share == 1
        if name == "trtllm":
            assert view is hw and dep.kv_share == 0.9 and dep.block_tokens == 32
    assert batch["vllm"] < batch["trtllm"] < batch[None]
    assert batch["trtllm"] > 2.5 * batch["vllm"]


def test_predict_gives_the_verdict_fits_gives_under_a_free_fraction_runtime():
    """predict compared the whole budget with the whole card and said 'fits' at batch 56-61 where TensorRT-LLM's
    pool (90% of what the rest leaves) holds 55 sequences of 8,320 tokens, as fits and sweep count; it now judges
    the KV against that pool, and its margin is the pool's."""
    base = ("-m", "llama-3.1-8b", "--hw", "h100-sxm", "--runtime", "trtllm", "--json")
    most = json.loads(run_cli("fits", *base, "--context", "8320").stdout)["max_concurrency"]
    for batch, fits in ((most, True), (most + 1, False)):
        p = json.loads(run_cli("predict", *base, "--batch", str(batch), "--prompt", "8192", "--output", "128").stdout)
        assert p["fits_in_memory"] is fits and (p["memory_headroom_bytes"] >= 0) is fits


def test_token_granular_pages_are_simulated_in_16_token_blocks_of_the_same_pool():
    """SGLang pages one token at a time; the simulator books its pool in 16-token blocks (SIM_MIN_BLOCK_TOKENS):
    the pool's tokens stay those of one-token pages, and serve says both block sizes."""
    from dataclasses import replace

    hw, card = STORE.hardware("h100-sxm"), STORE.model("llama-3.1-8b")
    policy = policy_for(STORE.runtime("sglang"), hw)
    assert (policy.block_size_tokens, policy.sim_block_tokens) == (1, 16)
    wl = make_workload(quant="bf16", kv_quant="bf16")
    exact = kv_pool_blocks(card, hw, wl, replace(policy, min_sim_block_tokens=1))
    booked = kv_pool_blocks(card, hw, wl, policy) * 16
    assert exact * 0.999 <= booked <= exact
    served = json.loads(run_cli("serve", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--runtime", "sglang",
                                "--concurrency", "2", "--requests", "4", "--json").stdout)
    assert served["scheduler"]["block_size_tokens"] == 1 and served["scheduler"]["simulated_block_tokens"] == 16
