"""A runtime's scheduling limits and memory policy as data (the contract in RUNTIME_SCHEDULER.md): the one
scheduler (`roofline.engine.core.scheduler`) runs every runtime; only these numbers differ."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

from roofline.cards.hardware import HardwareCard
from roofline.cards.runtime import RuntimeChoice, chunking_for
from roofline.errors import RooflineError
from roofline.sizing.memory import slot_share_tokens

MEMORY_POLICIES = ("preallocate", "free_fraction", "on_demand", "per_slot")


def replica_memory_bytes(hw: HardwareCard | None, gpus: int = 1) -> float | None:
    """The GPU memory a runtime finds on one replica: the card's usable memory (unified parts: less the OS's share)
    over its GPUs; None without a card."""
    return None if hw is None else hw.memory.usable_bytes * gpus


# The simulator books KV in blocks of at least this many tokens. A runtime of token-granular pages (SGLang's page
# size 1, llama.cpp's KV cells) then holds up to 15 tokens a sequence less than it could (under 1% of a
# 2,000-token request) and its prefix-cache hits end at a 16-token boundary, where the block manager's work per
# token (a Python loop per block) had made a capacity search under SGLang five times as long as under vLLM.
SIM_MIN_BLOCK_TOKENS = 16


@dataclass(frozen=True)
class ServingPolicy:
    name: str = "generic"
    max_num_batched_tokens: int = 8192  # tokens per engine step (prefill chunks + decodes)
    max_num_seqs: int = 256  # running sequences
    chunked_prefill: bool = True  # long prompts split across steps under the token budget, decodes mixed in
    chunked_prefill_above_context: int | None = None  # chunked only for a model of a longer context (`for_model`)
    block_size_tokens: int = 16  # paged-KV block
    parallel_slots: int | None = None  # llama.cpp -np / OLLAMA_NUM_PARALLEL: fixed slots, each its own context
    slot_context_tokens: int | None = None  # context per slot (context_split: the server's, over its slots)
    context_split: bool = False  # llama-server: -c is split over the -np slots (`slot_tokens`)
    prefix_caching: bool = True  # reuse of full KV blocks by hash
    memory_policy: str = "preallocate"  # preallocate | free_fraction | on_demand | per_slot
    # preallocate: share of what the device reports that the runtime takes for weights, activations and KV; 1 (all
    # of it) without --runtime, as `fits` counts, and for runtimes that allocate on demand (MLX) or state none.
    # free_fraction: share of what is left after weights, activations and the runtime that the KV pool takes
    # (TensorRT-LLM's free_gpu_memory_fraction)
    gpu_memory_utilization: float = 1.0
    default_context_tokens: int | None = None  # a runtime's context when none is asked for (Ollama num_ctx)
    default_context_tiers: list | None = None  # where that default depends on the device's memory (shown only)
    min_sim_block_tokens: int = SIM_MIN_BLOCK_TOKENS  # 1: simulate the runtime's own blocks (the engine's, validated)
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
        """No --runtime: a continuous-batching runtime with vLLM V1's scheduler defaults (runtimes/vllm.yaml states
        their sources), prefix caching on, all of the memory the device reports (`fits` without --runtime)."""
        return cls(sources={"*": "vLLM V1 scheduler defaults, as runtimes/vllm.yaml gives them; all memory"})

    @classmethod
    def from_dict(cls, values: dict) -> "ServingPolicy":
        """From `RuntimeProfile.serving_policy()` (the runtime-profile YAML's scheduler + memory fields)."""
        known = {f.name for f in fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise RooflineError(f"serving policy: unknown field(s) {', '.join(sorted(unknown))}")
        return replace(cls.generic(), **{k: v for k, v in values.items() if v is not None})

    def for_model(self, max_context: int) -> "ServingPolicy":
        """The policy serving a model of `max_context` tokens (`chunking_for`: vLLM V0 chunks prefill above 32K)."""
        keys = ("chunked_prefill", "chunked_prefill_above_context", "max_num_batched_tokens")
        return replace(self, **chunking_for({k: getattr(self, k) for k in keys}, max_context))

    @property
    def sim_block_tokens(self) -> int:
        """The block the simulator books KV in: the runtime's, but at least `min_sim_block_tokens`."""
        return max(self.block_size_tokens, self.min_sim_block_tokens)

    @property
    def effective_max_seqs(self) -> int:
        return self.parallel_slots or self.max_num_seqs

    @property
    def slot_tokens(self) -> int | None:
        """The context one slot holds: the slot context (else the default), split over the slots where the runtime
        splits it (llama-server: n_ctx_seq = n_ctx / n_parallel)."""
        ctx = self.slot_context_tokens or self.default_context_tokens
        return slot_share_tokens(ctx, self.effective_max_seqs, self.context_split) if ctx else ctx


def check_slot_context(choice: RuntimeChoice | None, values: dict | None, context: int | None) -> None:
    """One line and exit 2 for --context (the tokens each slot of a per-slot runtime holds) under a runtime that
    shares one KV pool across requests, where no slot has a context of its own."""
    if context is not None and (values or {}).get("memory_policy") != "per_slot":
        raise RooflineError(f"--context sets the context of each slot of a per-slot runtime (llama.cpp, Ollama); "
                            f"{choice.label if choice else 'without --runtime roofline'} shares one KV pool "
                            "across requests: drop --context")


def policy_for(choice: RuntimeChoice | None, hw: HardwareCard | None = None, gpus: int = 1,
               context: int | None = None) -> ServingPolicy:
    """The serving policy of a runtime profile at the chosen version (`RuntimeProfile.serving_policy`: the
    profile YAML is the one source of these limits), named by its label ('vllm@0.8.0+'); None: generic. `hw` and
    `gpus` (one replica's) set a default context that depends on the GPU memory (Ollama's); `context`, the tokens
    each slot of a per-slot runtime holds instead (Ollama's num_ctx; llama-server's -c is that times its slots)."""
    values = {} if choice is None else \
        choice.profile.serving_policy(choice.version or choice.range_start, replica_memory_bytes(hw, gpus))
    check_slot_context(choice, values, context)
    if choice is None:
        return ServingPolicy.generic()
    if context is not None:
        slots = values.get("parallel_slots") or values["max_num_seqs"]
        values["slot_context_tokens"] = context * slots if values.get("context_split") else context
    # per-slot runtimes (llama.cpp, Ollama) keep each slot's own context: no block cache shared across requests
    caching = values.get("memory_policy") != "per_slot"
    return ServingPolicy.from_dict({**values, "name": choice.label, "prefix_caching": caching,
                                    "sources": {"*": f"runtimes/{choice.profile.name}.yaml (scheduler, memory)"}})
