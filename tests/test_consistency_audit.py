"""One setup, one answer: the commands a user compares (fits, predict, sweep, serve, capacity) agree on memory
under every runtime's policy. Each case states the rule it checks."""

from __future__ import annotations

import io
import json

import pytest
from hostile import cli, ok, refused

from roofline.cards.store import CardStore
from roofline.perf.serving.capacity import candidates


def _json(capsys, *args) -> dict:
    return json.loads(ok(cli(capsys, *args, "--json")))


@pytest.mark.parametrize("runtime", [(), ("--runtime", "mlx")])
def test_serve_holds_what_fits_counts_without_a_memory_share(runtime, capsys):
    """Without --runtime (and under MLX, which allocates on demand) no share of memory is set aside: `fits` and the
    serving KV pool count the same memory, where the pool had taken vLLM's 90% and refused a model `fits` took."""
    hw = ("--hw", "apple-m2-ultra") if runtime else ("--hw", "h100-sxm")
    model = ("-m", "llama-3.3-70b") + (() if runtime else ("--quant", "q8_0"))
    fits = _json(capsys, "fits", *model, *hw, *runtime, "--context", "700")
    assert fits["fits"]
    served = _json(capsys, "serve", *model, *hw, *runtime, "--concurrency", "1", "--requests", "2", "--prompt", "500",
                   "--output", "200")
    assert served["requests"] == 2


def test_a_per_slot_runtime_sizes_every_sequence_at_its_context(capsys):
    """Ollama allocates its default context (32,768 tokens on a 24 GiB card) per slot: predict says what fits says
    (does not fit), where it had sized the 700 tokens the request holds."""
    setup = ("-m", "qwen2.5-32b", "--hw", "rtx-4090", "--quant", "q4_k_m", "--runtime", "ollama")
    assert not _json(capsys, "fits", *setup)["fits"]
    assert not _json(capsys, "predict", *setup)["fits_in_memory"]
    code, out, _ = cli(capsys, "predict", *setup)
    assert code == 0 and out.splitlines()[0].startswith("does NOT fit")
    small = ("-m", "llama-3.1-8b", "--hw", "rtx-4090", "--quant", "q4_k_m", "--runtime", "ollama")
    held = _json(capsys, "fits", *small)["total_bytes"]
    assert _json(capsys, "sweep", *small, "--static", "--concurrency", "1")["rows"][0]["memory_per_gpu_bytes"] == held


@pytest.mark.parametrize("runtime, knob", [("ollama", "num_ctx"), ("llama.cpp", "-c")])
def test_a_request_beyond_a_slot_s_default_context_is_said(runtime, knob, capsys):
    """An 8,392-token request on a 16 GiB card, where Ollama's num_ctx and llama-server's -c give 4,096 a sequence:
    predicted as if raised, and said once; a 1,024-token request says nothing."""
    setup = ("-m", "llama-3.1-8b", "--hw", "rtx-4080", "--quant", "q4_k_m", "--runtime", runtime)
    code, _, err = cli(capsys, "predict", *setup, "--prompt", "8k")
    assert code == 0 and err.count("4,096 tokens of context by default") == 1 and f"({knob}," in err
    assert "holds 8,392" in err
    code, _, err = cli(capsys, "predict", *setup, "--prompt", "1k")
    assert code == 0 and "context by default" not in err


def test_serve_takes_a_slot_context_where_the_default_is_too_short(capsys):
    """What predict assumes (the context raised to hold the request) serve simulates with --context; a runtime with
    one shared KV pool has no slot context to set."""
    setup = ("serve", "-m", "llama-3.1-8b", "--hw", "rtx-4080", "--quant", "q4_k_m", "--runtime", "ollama",
             "--prompt", "8k", "--concurrency", "1", "--requests", "2")
    refused(cli(capsys, *setup), "4,096", "--context")
    assert _json(capsys, *setup, "--context", "10k")["kv_pool_tokens_per_replica"] == 10_240
    refused(cli(capsys, "serve", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--runtime", "vllm", "--concurrency", "1",
                "--requests", "2", "--context", "10k"), "one KV pool")


def test_sweep_and_capacity_take_the_slot_context_serve_takes(capsys):
    """--context on sweep and capacity sets each Ollama slot's context as on serve and fits: the static batch holds
    it per sequence (fits' total at two sequences), a request beyond it is refused per configuration with the fix
    named, and a shared-pool runtime refuses the flag in one line."""
    small = ("-m", "llama-3.1-8b", "--hw", "rtx-4080", "--quant", "q4_k_m", "--runtime", "ollama")
    held = _json(capsys, "fits", *small, "--context", "12k", "--concurrency", "2")["total_bytes"]
    row = _json(capsys, "sweep", *small, "--static", "--concurrency", "2", "--context", "12k")["rows"][0]
    assert row["memory_per_gpu_bytes"] == held
    looped = _json(capsys, "sweep", *small, "--concurrency", "1", "--prompt", "8k", "--output", "16",
                   "--requests-per-client", "1", "--context", "10k")["rows"][0]
    assert looped["requests"] == 1
    search = ("capacity", *small, "--slo-ttft", "30", "--slo-itl", "1", "--prompt", "3000", "--output", "16")
    short = _json(capsys, *search, "--context", "2k")
    assert short["slot_context_tokens"] == 2048
    assert all(not r["fits"] and "--context 3016" in r["why"] for r in short["configurations"])
    assert any(r.get("max_rate_per_s") for r in _json(capsys, *search, "--context", "4k")["configurations"])
    for command in (("sweep", "--concurrency", "1"), ("capacity", "--slo-ttft", "2", "--slo-itl", "0.1")):
        refused(cli(capsys, command[0], "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--runtime", "vllm", *command[1:],
                    "--context", "10k"), "one KV pool")


def test_short_by_is_the_memory_a_pool_runtime_lacks(capsys):
    """TensorRT-LLM's pool takes 90% of what the rest leaves: the shortfall is what the device lacks, the KV's share
    over 0.9, at least the total beyond the capacity (not 0.9 of it)."""
    d = _json(capsys, "fits", "-m", "deepseek-v3", "--hw", "h200", "--runtime", "trtllm")
    assert not d["fits"] and -d["headroom_bytes"] >= d["total_bytes"] - d["capacity_bytes"]


def test_max_concurrency_is_the_most_that_fits(capsys):
    base = ("fits", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--context", "700")
    most = _json(capsys, *base)["max_concurrency"]
    assert _json(capsys, *base, "--concurrency", str(most))["fits"]
    assert not _json(capsys, *base, "--concurrency", str(most + 1))["fits"]


def test_capacity_searches_the_formats_a_gguf_runtime_loads():
    st = CardStore()
    found = {(c.quant, c.kv_quant) for c in candidates(st.model("llama-3.1-8b"), st.hardware("rtx-4090"),
                                                       st.runtime("llama.cpp"))}
    assert {("q4_k_m", "fp16"), ("q8_0", "q8_0"), ("bf16", "fp16")} <= found
    assert not any(kv == "bf16" for _, kv in found)  # fp16, its default, stands for the 16-bit cache


@pytest.mark.parametrize("runtime, hw, formats", [
    ("vllm", "h100-sxm", {"bf16", "fp8", "int4"}), ("sglang", "b200", {"bf16", "fp8", "nvfp4", "int4"}),
    ("mlx", "apple-m4-max", {"bf16", "mlx_q8", "mlx_q4"}), ("trtllm", "h100-sxm", {"bf16", "fp8", "int4"})])
def test_capacity_searches_the_4_bit_formats_each_runtime_serves(runtime, hw, formats):
    st = CardStore()
    found = {c.quant for c in candidates(st.model("llama-3.1-8b"), st.hardware(hw), st.runtime(runtime))}
    assert found == formats


def test_priced_capacity_lists_the_cheapest_configuration_first():
    from roofline.cli.serve_cmd import render_capacity

    rows = [{"hardware": h, "tp": tp, "quant": "fp8", "kv_quant": "fp8", "max_rate_per_s": rate, "concurrency": 9,
             "output_tok_s": 900.0, "ttft_p90_s": 0.2, "tpot_p90_s": 0.03, "usd_per_m_output_tokens": usd}
            for h, tp, rate, usd in (("b200", 1, 10.0, 1.37), ("h100-sxm", 2, 13.0, 0.83))]
    data = {"model": "m", "runtime": "vllm", "slo_ttft_s": 2, "slo_itl_s": 0.05, "attainment": 0.9, "prompt": "1",
            "output": "1", "target_rate_per_s": None, "configurations": rows, "prices": {},
            "load_point": {"min_requests": 1, "min_arrival_s": 1, "warmup_share": 0.1, "overload_share": 0.05,
                           "rate_tolerance": 0.05}}
    from rich.console import Console

    console = Console(width=200, record=True, file=io.StringIO())
    console.print(next(iter(render_capacity(data, False, True))))
    text = console.export_text()
    assert text.index("h100-sxm") < text.index("b200")  # $0.83/M before $1.37/M, though b200 serves more per GPU


def test_a_group_with_every_row_beyond_its_ceiling_says_so_not_nan():
    from roofline.calibrate.fit import error_summary
    from roofline.calibrate.loso_report import within_ceiling_cell

    cell = within_ceiling_cell({"beyond_ceiling": 1, "after_within_ceiling": error_summary([], [])})
    assert cell == "none within (1 beyond)" and "nan" not in cell
    assert within_ceiling_cell({"beyond_ceiling": 0, "after_within_ceiling": error_summary([1.0], [1.0])}) == "same"


def test_fits_says_when_the_scheduler_caps_what_memory_holds(capsys):
    code, out, _ = cli(capsys, "fits", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--runtime", "vllm", "--context", "700")
    assert code == 0 and "at most 256 sequences at once (max_num_seqs)" in " ".join(out.split())


def test_plot_memory_takes_pipeline_stages_as_fits_does(tmp_path, capsys):
    setup = ("-m", "llama-3.3-70b", "--hw", "h100-sxm", "--quant", "fp8", "--pp", "2")
    fits = _json(capsys, "fits", *setup)
    plotted = _json(capsys, "plot", "memory", *setup, "-o", tmp_path / "m.png")["hardware"]["h100-sxm"]
    assert plotted["weights"] == fits["budget"]["weights"] < 0.55 * 72.7e9


def test_a_phase_time_shares_sum_to_one(capsys):
    """The fixed host time per step and sequence is a share of its own ("host"), not left out of the shares."""
    d = _json(capsys, "predict", "-m", "llama-3.2-1b", "--hw", "b200", "--runtime", "vllm")
    for phase in d["phases"].values():
        assert sum(phase["time_share"].values()) == pytest.approx(1.0) and phase["time_share"]["host"] > 0


@pytest.mark.parametrize("model, runtime, chunked, budget", [
    ("llama-2-13b", "vllm@0.6.0", False, 4096), ("llama-3.1-8b", "vllm@0.6.0", True, 512),
    ("llama-2-13b", "vllm", True, 8192)])
def test_vllm_v0_chunks_prefill_only_above_32k(model, runtime, chunked, budget, capsys):
    """vLLM 0.6 chunks prefill (512 tokens a step) only for models of more than 32K context; below, a prompt runs
    whole in a step of up to the model's context, batched with the others, where the simulator had let one prompt at
    a time through a 512-token budget (TTFT p50 125 s at 4 requests/s); V1 chunks every model."""
    d = _json(capsys, "serve", "-m", model, "--hw", "h100-sxm", "--runtime", runtime, "--rate", "4", "--requests",
              "200", "--prompt", "1000", "--output", "200")
    assert d["scheduler"]["chunked_prefill"] is chunked and d["scheduler"]["max_num_batched_tokens"] == budget
    assert d["ttft_s"]["p50"] < 0.5 and not d.get("overloaded")


def test_a_prompt_beyond_an_unchunked_step_is_refused(capsys):
    """TensorRT-LLM without chunked prefill runs a prompt's context phase in one step of max_num_tokens (8,192): a
    10,000-token prompt is refused in one line, not queued until every running request has finished."""
    refused(cli(capsys, "serve", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--runtime", "trtllm", "--rate", "1",
                "--prompt", "10000", "--output", "300", "--requests", "10"), "10,000-token prompt", "8,192",
            "chunked prefill")


def test_what_stderr_warns_the_json_carries(capsys):
    """A machine reading --json sees the warnings a person reads on stderr: the sliding windows llama.cpp keeps whole
    (fits had printed `"warnings": []`) and a request beyond Ollama's default context (predict had no field)."""
    code, out, err = cli(capsys, "fits", "-m", "mistral-7b", "--hw", "h100-sxm", "--runtime", "llama.cpp", "--json")
    assert code == 0 and "sliding windows whole" in err
    assert any("sliding windows whole" in w for w in json.loads(out)["warnings"])
    code, out, err = cli(capsys, "predict", "-m", "llama-3.1-8b", "--hw", "rtx-4080", "--quant", "q4_k_m", "--runtime",
                         "ollama", "--prompt", "8k", "--json")
    warned = json.loads(out)["warnings"]
    assert code == 0 and len(warned) == 1 and "num_ctx" in warned[0] and "num_ctx" in err
    assert _json(capsys, "predict", "-m", "llama-3.1-8b", "--hw", "h100")["warnings"] == []


def test_a_disaggregated_fleet_states_its_replicas_and_link(capsys):
    """--disagg 1:2 on H100s: 1 prefill and 2 decode replicas (3 GPUs), the KV handed off over NVLink's 450 GB/s a
    direction (3,600 Gbit/s) when --network-gbps is not given, and at the rate given when it is."""
    base = ("serve", "-m", "llama-3.1-8b", "--hw", "h100-sxm", "--runtime", "vllm", "--disagg", "1:2", "--rate", "2",
            "--requests", "20")
    d = _json(capsys, *base)
    assert (d["prefill_replicas"], d["decode_replicas"], d["gpus"]) == (1, 2, 3)
    assert d["network_gbps"] is None and d["kv_transfer_gbps"] == pytest.approx(3600)
    assert _json(capsys, *base, "--network-gbps", "400")["kv_transfer_gbps"] == pytest.approx(400)
