"""`roofline fits` and the memory budget: seed budgets, closed forms, multi-GPU, and bad input."""

import json

import pytest
from conftest import run_cli

import roofline
from roofline.cards.store import CardStore
from roofline.sizing.kv import kv_bytes
from roofline.sizing.memory import (
    Deployment,
    max_concurrency,
    max_context,
    memory_budget,
    min_gpus,
)

STORE = CardStore()
KEYS = {"fits", "capacity_bytes", "total_bytes", "headroom_bytes", "budget", "kv_bytes_per_token", "max_context",
        "max_concurrency", "min_gpus"}


def fits_json(*args):
    out = run_cli("fits", *args, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("model, hw", [("llama-3.1-8b", "rtx-4090"), ("deepseek-v3", "h200"), ("gpt-oss-120b", "dgx-spark"),
                                       ("nemotron-3-nano", "apple-m4-max"), ("gemma-3-27b", "l40s"), ("qwen3-32b", "mi300x")])
def test_fits_json_keys_on_many_cards(model, hw):
    d = fits_json("--model", model, "--hw", hw, "--context", "32k")
    assert KEYS <= set(d)
    assert set(d["budget"]) == {"weights", "kv", "activations", "runtime", "reserved"}
    assert d["total_bytes"] == pytest.approx(sum(d["budget"].values()))
    assert d["headroom_bytes"] == pytest.approx(d["capacity_bytes"] - d["total_bytes"])
    assert d["fits"] == (d["headroom_bytes"] >= 0)


def test_spark_seed_budget_70b_nvfp4_128k():
    """Seed 001: ~40 GB NVFP4 weights + ~40 GB KV at 128K + ~10 GB OS/runtime = ~90 GB of 128 GB."""
    d = fits_json("--model", "llama-3.3-70b", "--hw", "dgx-spark", "--quant", "nvfp4", "--context", "128K")
    b = d["budget"]
    assert d["fits"]
    assert b["kv"] == 40 * 2**30  # exactly 40 GiB: 131,072 tokens is a whole number of 16-token blocks
    assert b["weights"] == pytest.approx(40e9, rel=0.08)  # 39.7 GB of NVFP4 linears + bf16 embedding and head
    assert b["reserved"] + b["runtime"] == pytest.approx(10e9, rel=0.05)
    assert d["total_bytes"] == pytest.approx(90e9, rel=0.08)


def test_spark_one_million_tokens_does_not_fit():
    d = fits_json("--model", "llama-3.3-70b", "--hw", "dgx-spark", "--quant", "nvfp4", "--context", "1M")
    assert not d["fits"] and d["budget"]["kv"] == 320 * 2**30  # seed 001's "~300 GB"
    assert d["min_gpus"] is None  # a Spark card has no GPU-to-GPU link
    assert d["warnings"] and "beyond" in d["warnings"][0]


def test_paged_blocks_round_up():
    card = STORE.model("llama-3.1-8b")
    assert kv_bytes(card, 17, block_tokens=16) == kv_bytes(card, 32) == 32 * 131072


def test_70b_bf16_needs_two_h100s():
    d1 = fits_json("--model", "llama-3.3-70b", "--hw", "h100-sxm", "--quant", "bf16")
    assert not d1["fits"] and d1["min_gpus"] == 2
    assert any(s.startswith("--gpus 2") for s in d1["suggestions"])
    assert any(s.startswith("--quant fp8") for s in d1["suggestions"])
    d2 = fits_json("--model", "llama-3.3-70b", "--hw", "h100-sxm", "--quant", "bf16", "--gpus", "2")
    assert d2["fits"] and d2["budget"]["weights"] == pytest.approx(d1["budget"]["weights"] / 2, rel=1e-4)


def test_tp_shards_kv_heads_and_replicates_beyond_them():
    card, hw = STORE.model("llama-3.1-8b"), STORE.hardware("h100-sxm")  # 8 KV heads
    one = memory_budget(card, hw, None, "bf16", 4096).kv_bytes
    assert memory_budget(card, hw, None, "bf16", 4096, dep=Deployment(tp=8)).kv_bytes == pytest.approx(one / 8)
    assert memory_budget(card, hw, None, "bf16", 4096, dep=Deployment(tp=16)).kv_bytes == pytest.approx(one / 8)
    ds = STORE.model("deepseek-v3")  # the MLA latent does not shard
    assert memory_budget(ds, hw, None, "bf16", 4096, dep=Deployment(tp=8)).kv_bytes == \
        memory_budget(ds, hw, None, "bf16", 4096).kv_bytes


def test_tp2_decode_step_is_half_plus_all_reduce():
    """Closed form: the TP=2 decode step = the TP=1 step / 2 + two ring all-reduces per layer (ceiling mode)."""
    p1 = roofline.predict("llama-3.3-70b", "h100-sxm", quant="bf16", prompt_tokens=512, output_tokens=1)
    p2 = roofline.predict("llama-3.3-70b", "h100-sxm", quant="bf16", prompt_tokens=512, output_tokens=1, tp=2)
    hidden, layers, link = 8192, 80, 450e9  # NVLink4 per direction
    all_reduce = 2 * layers * (2 * (2 - 1) / 2 * hidden * 2) / link  # 2 per layer, 2(N-1)/N x T x h x 2 B each
    norms = layers * 2 * 2 * 2 * hidden * 2 / 3.35e12  # replicated norms: read + write, 2 per layer
    assert p2.ceiling.itl_s == pytest.approx(p1.ceiling.itl_s / 2 + all_reduce + norms / 2, rel=0.01)


def test_max_context_and_concurrency_invert_the_budget():
    card, hw = STORE.model("llama-3.1-8b"), STORE.hardware("rtx-4090")
    ctx = max_context(card, hw, "q4_k_m", "fp16", 4)
    assert memory_budget(card, hw, "q4_k_m", "fp16", ctx, 4).fits
    assert ctx == card.architecture.max_context or not memory_budget(card, hw, "q4_k_m", "fp16", ctx + 16, 4).fits
    n = max_concurrency(card, hw, "q4_k_m", "fp16", 8192)
    assert memory_budget(card, hw, "q4_k_m", "fp16", 8192, n).fits
    assert not memory_budget(card, hw, "q4_k_m", "fp16", 8192, n + 1).fits


def test_min_gpus_layout():
    layout = min_gpus(STORE.model("deepseek-v3"), STORE.hardware("h100-sxm"), None, "bf16", 8192, 1)
    assert layout is not None and layout.gpus == 16 and layout.tp == 8 and layout.pp == 2  # 690 GB of FP8 weights


BAD = [(("--context", "0"), "--context"), (("--context", "-5"), "--context"), (("--context", "12q"), "--context"),
       (("--gpus", "0"), "--gpus: must be > 0"), (("--concurrency", "0"), "--concurrency: must be > 0"),
       (("--gpus", "3"), "cannot split"), (("--runtime", "lots"), "--runtime"), (("--block-tokens", "0"), "--block-tokens")]


@pytest.mark.parametrize("args, message", BAD)
def test_bad_fits_input(args, message):
    out = run_cli("fits", "--model", "llama-3.1-8b", "--hw", "h100-sxm", *args)
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr
    assert out.stderr.count("\n") == 1


def test_fits_takes_ollama_s_default_context_cut_to_the_model():
    """`fits --runtime ollama`: an RTX 5090 (32 GB = 29.8 GiB) gets the 32k tier; a DGX Spark's 256k tier is cut to
    Llama 3.3 70B's 131,072-token context, as Ollama's server cuts it."""
    def fits(hw, model):
        out = run_cli("fits", "-m", model, "--hw", hw, "--runtime", "ollama", "--quant", "q4_k_m", "--json")
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)
    five, spark = fits("rtx-5090", "llama-3.1-8b"), fits("dgx-spark", "llama-3.3-70b")
    assert five["context_tokens"] == 32768 and five["memory_policy"]["context_default"]
    assert spark["context_tokens"] == 131072 and spark["memory_policy"]["context_capped_at_model"]
