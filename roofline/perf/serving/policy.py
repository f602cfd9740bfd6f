"""A runtime's scheduling limits and memory policy as data (the contract in RUNTIME_SCHEDULER.md): the one
scheduler (`roofline.engine.core.scheduler`) runs every runtime; only these numbers differ."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

from roofline.errors import RooflineError

MEMORY_POLICIES = ("preallocate", "on_demand", "per_slot")


@dataclass(frozen=True)
class ServingPolicy:
    name: str = "generic"
    max_num_batched_tokens: int = 8192  # tokens per engine step (prefill chunks + decodes)
    max_num_seqs: int = 256  # running sequences
    chunked_prefill: bool = True  # long prompts split across steps under the token budget, decodes mixed in
    block_size_tokens: int = 16  # paged-KV block
    parallel_slots: int | None = None  # llama.cpp -np / OLLAMA_NUM_PARALLEL: fixed slots, each its own context
    slot_context_tokens: int | None = None  # context per slot
    prefix_caching: bool = True  # reuse of full KV blocks by hash
    memory_policy: str = "preallocate"  # preallocate | on_demand | per_slot
    gpu_memory_utilization: float = 0.9  # share of the GPU the runtime may use for weights, activations and KV
    default_context_tokens: int | None = None  # a runtime's context when none is asked for (Ollama num_ctx)
    sources: dict[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self):
        if self.memory_policy not in MEMORY_POLICIES:
            raise RooflineError(f"memory policy {self.memory_policy!r}: use one of {', '.join(MEMORY_POLICIES)}")
        if self.max_num_batched_tokens <= 0 or self.max_num_seqs <= 0 or self.block_size_tokens <= 0:
            raise RooflineError(f"{self.name}: max_num_batched_tokens, max_num_seqs and block_size_tokens must be > 0")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise RooflineError(f"{self.name}: gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}")

    @classmethod
    def generic(cls) -> "ServingPolicy":
        return cls(sources={"*": "vLLM-like defaults (see vllm()); a generic continuous-batching runtime"})

    @classmethod
    def from_dict(cls, values: dict) -> "ServingPolicy":
        """From `RuntimeProfile.serving_policy()` (the runtime-profile YAML's scheduler + memory fields)."""
        known = {f.name for f in fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise RooflineError(f"serving policy: unknown field(s) {', '.join(sorted(unknown))}")
        return replace(cls.generic(), **{k: v for k, v in values.items() if v is not None})

    @property
    def effective_max_seqs(self) -> int:
        return self.parallel_slots or self.max_num_seqs


# Defaults as each runtime ships them (the value a user gets without the flag), with the document stating each.
PRESETS: dict[str, ServingPolicy] = {
    "generic": ServingPolicy.generic(),
    "vllm": ServingPolicy(
        name="vllm", max_num_batched_tokens=8192, max_num_seqs=256, chunked_prefill=True, block_size_tokens=16,
        prefix_caching=True, gpu_memory_utilization=0.9,
        sources={"max_num_batched_tokens": "vLLM V1 engine args: chunked prefill on, 8192 tokens for the OpenAI "
                                           "server (vllm/engine/arg_utils.py _set_default_args; docs.vllm.ai engine args)",
                 "max_num_seqs": "docs.vllm.ai engine args: --max-num-seqs default 256",
                 "block_size_tokens": "docs.vllm.ai engine args: --block-size default 16 on CUDA",
                 "gpu_memory_utilization": "docs.vllm.ai engine args: --gpu-memory-utilization default 0.9",
                 "prefix_caching": "vLLM V1: --enable-prefix-caching on by default"}),
    "sglang": ServingPolicy(
        name="sglang", max_num_batched_tokens=8192, max_num_seqs=1024, chunked_prefill=True, block_size_tokens=1,
        prefix_caching=True, gpu_memory_utilization=0.88,
        sources={"max_num_batched_tokens": "SGLang server args: --chunked-prefill-size 8192 on large-memory GPUs "
                                           "(sglang/srt/server_args.py)",
                 "max_num_seqs": "SGLang --max-running-requests: derived from the KV pool; 1024 as a cap here "
                                 "(uncertain: no fixed default)",
                 "block_size_tokens": "SGLang --page-size default 1 (token-level RadixAttention)",
                 "gpu_memory_utilization": "SGLang --mem-fraction-static: derived per GPU, ~0.88 on 80 GB parts "
                                           "(uncertain: computed at start-up)"}),
    "trtllm": ServingPolicy(
        name="trtllm", max_num_batched_tokens=8192, max_num_seqs=2048, chunked_prefill=True, block_size_tokens=32,
        prefix_caching=True, gpu_memory_utilization=0.9,
        sources={"max_num_batched_tokens": "trtllm-serve --max_num_tokens default 8192 (TensorRT-LLM docs, "
                                           "commands/trtllm-serve)",
                 "max_num_seqs": "trtllm-serve --max_batch_size default 2048 (TensorRT-LLM docs; 256 in some "
                                 "releases: uncertain)",
                 "block_size_tokens": "KvCacheConfig tokens_per_block 32 (TensorRT-LLM llm_args)",
                 "gpu_memory_utilization": "kv_cache_free_gpu_memory_fraction default 0.9 (of free memory after "
                                           "weights; applied here to the whole GPU)"}),
    "llama.cpp": ServingPolicy(
        name="llama.cpp", max_num_batched_tokens=2048, max_num_seqs=4, chunked_prefill=True, block_size_tokens=1,
        parallel_slots=4, slot_context_tokens=1024, prefix_caching=False, memory_policy="per_slot",
        default_context_tokens=4096,
        sources={"max_num_batched_tokens": "llama-server -b/--batch-size default 2048 (tools/server/README.md)",
                 "parallel_slots": "llama-server -np/--parallel default -1 = auto, 4 slots (tools/server/README.md; "
                                   "ggml-org/llama.cpp issue #17989)",
                 "slot_context_tokens": "-c 4096 split over the 4 slots (n_ctx_seq = n_ctx / n_seq_max, "
                                        "src/llama-context.cpp)",
                 "default_context_tokens": "llama-server -c/--ctx-size 4096 (uncertain: 0 = the model's in newer "
                                           "builds)"}),
    "ollama": ServingPolicy(
        name="ollama", max_num_batched_tokens=512, max_num_seqs=1, chunked_prefill=True, block_size_tokens=1,
        parallel_slots=1, slot_context_tokens=4096, prefix_caching=False, memory_policy="per_slot",
        default_context_tokens=4096,
        sources={"parallel_slots": "Ollama FAQ: OLLAMA_NUM_PARALLEL default 1 (uncertain: older releases chose "
                                   "4 or 1 by memory)",
                 "default_context_tokens": "Ollama FAQ: default context window 4096 tokens (num_ctx)",
                 "max_num_batched_tokens": "Ollama num_batch default 512 (api docs, Modelfile parameters)"}),
}


def policy_for(runtime: str | None) -> ServingPolicy:
    """The preset for a runtime name (None: generic)."""
    key = (runtime or "generic").lower().replace("llamacpp", "llama.cpp").replace("llama-cpp", "llama.cpp")
    key = {"tensorrt-llm": "trtllm", "trt-llm": "trtllm"}.get(key, key)
    if key not in PRESETS:
        raise RooflineError(f"--runtime {runtime}: use one of {', '.join(PRESETS)}")
    return PRESETS[key]
