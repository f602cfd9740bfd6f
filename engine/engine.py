"""LLMEngine: a model card's shapes run for real with paged KV and continuous batching.

    eng = LLMEngine("llama-3.1-8b", layers=4, dtype="fp32")
    outputs = eng.generate([[1, 2, 3], [4, 5]], max_tokens=16)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from roofline.engine import DTYPE_NAMES
from roofline.engine.core.block_manager import BlockManager
from roofline.engine.core.scheduler import Scheduled, Scheduler
from roofline.engine.core.sequence import Sequence
from roofline.engine.device import keep_freed_memory
from roofline.engine.model.runner import make_caches, run_step, sample
from roofline.engine.model.transformer import EngineError, Transformer, init_weights

from roofline.cards.host import available_bytes
from roofline.cards.model import ModelCard
from roofline.cards.store import CardStore
from roofline.sizing.kv import kv_bytes
from roofline.sizing.params import weight_bytes
from roofline.sizing.reduce import reduce_card

DTYPES = dict(zip(DTYPE_NAMES, (torch.float32, torch.bfloat16, torch.float16, torch.float64)))
KV_FORMAT = {"fp32": "fp32", "bf16": "bf16", "fp16": "fp16", "fp64": "fp32", "int8": "q8_0"}
# what the process needs beyond weights and KV: torch's allocator, activations of one step, Python (measured
# ~0.3-0.6 GB for a CPU process running 8B shapes); the guard keeps this much free
HEADROOM_BYTES = 1.0e9
BLOCKS_WITHOUT_KV = 65536


@dataclass
class StepStats:
    seconds: float  # host wall time of the step (forward + sampling), device-synchronised
    prefill_tokens: int
    decode_tokens: int
    sequences: int
    device_seconds: float = 0.0  # CUDA-event time of the same span on the GPU; = seconds on the CPU
    mode: str = "eager"  # "graphs" (CUDA graph replay), "static" (static buffers, uncaptured) or "eager"
    chunks: tuple = ()  # per scheduled sequence: (new tokens, tokens cached before the step, samples 0/1)


@dataclass
class EngineConfig:
    dtype: str = "fp32"
    device: str = "cpu"
    weight_format: str | None = None  # None | "int8" | "int4" (weight-only, nn.Linear layers)
    kv_dtype: str | None = None  # None = model dtype; "int8" = per-token int8
    block_size: int = 16
    num_blocks: int | None = None  # None: sized from free memory (at most max_kv_bytes)
    max_kv_bytes: float = 2e9
    max_num_seqs: int = 64
    max_step_tokens: int = 512
    prefix_caching: bool = True
    seed: int = 0
    threads: int | None = None
    graphs: bool | None = None  # decode on static buffers: None = on CUDA only (captured), False = eager (--eager)
    graph_max_batch: int = 32  # largest bucket; bigger decode steps run eagerly
    graph_max_context: int = 4096  # tokens the static block tables address; longer sequences decode eagerly
    tp: int = 1  # tensor-parallel ranks (engine/parallel.py runs one engine per rank)
    rank: int = 0
    stats: list = field(default_factory=list)


def free_memory_bytes(device: str) -> float:
    """Free device memory: CUDA's mem_get_info, or on the CPU MemAvailable capped by the container's limit."""
    if device.startswith("cuda"):
        return float(torch.cuda.mem_get_info()[0])
    return available_bytes()


# int4 group sizes tried, largest first: 128 is the common checkpoint layout (GPTQ/AWQ); a width it does not divide
# (gpt-oss's 2,880, GLM-4.5-Air's 10,944) takes the largest the int4 kernels also run that divides every layer's
INT4_GROUPS = (128, 64, 32)


def int4_group_size(model: torch.nn.Module, fmt: str) -> int:
    """The int4 group size for every linear layer of `model` (the largest of INT4_GROUPS dividing each input
    width); EngineError naming the layer when none does. Other formats: 128 (unused)."""
    if fmt != "int4":
        return INT4_GROUPS[0]
    widths = {m.in_features: name for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    for group in INT4_GROUPS:
        if all(w % group == 0 for w in widths):
            return group
    width = next(w for w in widths if w % INT4_GROUPS[-1])
    raise EngineError(f"--weights int4: layer {widths[width]} is {width:,} wide, not a multiple of "
                      f"{INT4_GROUPS[-1]} (the int4 kernels' smallest group); use --weights int8")


class LLMEngine:
    def __init__(self, model: str | ModelCard, layers: int | None = None, vocab: int | None = None, **options):
        self.cfg = EngineConfig(**options)
        if self.cfg.dtype not in DTYPES:
            raise EngineError(f"--dtype {self.cfg.dtype}: use one of {', '.join(DTYPES)}")
        card = model if isinstance(model, ModelCard) else CardStore().model(model)
        self.card = reduce_card(card, layers, vocab)
        if self.cfg.threads:
            torch.set_num_threads(self.cfg.threads)
        if self.cfg.device == "cpu":
            keep_freed_memory()
        self.device = torch.device(self.cfg.device)
        num_blocks = self._guard_memory()
        self.model = self._build()
        slots = self.cfg.max_num_seqs if self.card.architecture.mamba2 else 0
        # one block past the block manager's pool: static decode steps write their padding rows' K/V there
        self.caches = make_caches(self.model, num_blocks + 1, self.cfg.block_size, slots, DTYPES[self.cfg.dtype],
                                  self.device, self.cfg.kv_dtype == "int8")
        self.decode_runner = self._decode_runner(num_blocks, slots)
        caching = self.cfg.prefix_caching and not slots  # recurrent state cannot be reused per block
        self.blocks = BlockManager(num_blocks, self.cfg.block_size, caching)
        self.scheduler = Scheduler(self.blocks, self.cfg.max_num_seqs, self.cfg.max_step_tokens, slots)
        self.stats: list[StepStats] = []

    def _build(self) -> Transformer:
        torch.manual_seed(self.cfg.seed)
        with torch.device("meta"):
            model = Transformer(self.card).to(DTYPES[self.cfg.dtype])
        model = model.to_empty(device="cpu")  # allocated once, in the target dtype
        init_weights(model, self.cfg.seed)
        if self.cfg.weight_format:
            from roofline.engine.model.quant import quantize_linears

            quantize_linears(model, self.cfg.weight_format, int4_group_size(model, self.cfg.weight_format))
        if self.cfg.tp > 1:
            from roofline.engine.parallel import shard_model

            shard_model(model, self.cfg.rank, self.cfg.tp)
        return model.to(self.device).eval()

    def _decode_runner(self, num_blocks: int, state_slots: int):
        """Static-buffer decode (CUDA graphs on CUDA) unless turned off, or the card has Mamba-2 state."""
        on = self.cfg.graphs if self.cfg.graphs is not None else self.device.type == "cuda"
        if not on or state_slots:
            return None
        from roofline.engine.model.graphs import DecodeRunner

        max_blocks = min(-(-self.cfg.graph_max_context // self.cfg.block_size), num_blocks)
        return DecodeRunner(self.model, self.caches, self.cfg.block_size, num_blocks,
                            min(self.cfg.graph_max_batch, self.cfg.max_num_seqs), max_blocks, self.device,
                            use_graphs=self.device.type == "cuda")

    def warm_up(self) -> None:
        """Start up as a server does before its first request: one step holding the whole token budget (vLLM's
        `profile_run` runs a dummy batch of `max_num_batched_tokens`), so the allocator already holds the largest
        step's activations and no request pays their first allocation; then every decode bucket's CUDA graph."""
        pool_tokens = len(self.blocks.ref_count) * self.cfg.block_size
        short = [[1] * 16] * 4  # with the long prompt's chunk they fill the budget; then they decode beside its rest
        long_tokens = max(1, min(self.cfg.max_step_tokens, self.card.architecture.max_context, pool_tokens // 2) - 8)
        self.generate(short + [[1] * long_tokens], 2)
        self.capture_graphs()

    def capture_graphs(self) -> None:
        """Capture every decode bucket's CUDA graph now rather than at its first step (a no-op without graphs)."""
        if self.decode_runner is not None:
            self.decode_runner.capture_all()

    @property
    def mode(self) -> str:
        """How decode steps run: "graphs", "static" or "eager"."""
        if self.decode_runner is None:
            return "eager"
        return "graphs" if self.decode_runner.use_graphs else "static"

    def _guard_memory(self) -> int:
        """Ask roofline's own formulas whether weights and a KV pool fit the device; size the pool; else refuse."""
        fmt = self.cfg.weight_format or ("fp32" if self.cfg.dtype == "fp64" else self.cfg.dtype)
        weights = sum(weight_bytes(self.card, fmt).values()) * (2 if self.cfg.dtype == "fp64" else 1)
        kv_fmt = KV_FORMAT[self.cfg.kv_dtype or self.cfg.dtype]
        per_block = kv_bytes(self.card, self.cfg.block_size, kv_fmt, cap_windows=False) \
            - kv_bytes(self.card, 0, kv_fmt, cap_windows=False)
        free = free_memory_bytes(self.cfg.device)
        room = free - weights - HEADROOM_BYTES
        if self.cfg.num_blocks is not None:
            need = weights + self.cfg.num_blocks * per_block + HEADROOM_BYTES
            if need > free:
                raise EngineError(f"{self.card.name} needs {need / 1e9:,.1f} GB (weights {weights / 1e9:,.1f} GB + KV "
                                  f"pool) but {self.cfg.device} has {free / 1e9:,.1f} GB free; use fewer --layers, "
                                  f"a smaller --dtype or fewer blocks")
            return self.cfg.num_blocks
        if room < 64 * max(per_block, 1):
            raise EngineError(f"{self.card.name} needs {weights / 1e9:,.1f} GB of weights but {self.cfg.device} has "
                              f"{free / 1e9:,.1f} GB free; run fewer layers (--layers N), a smaller --vocab, "
                              f"--dtype bf16 or --weights int8/int4")
        if per_block == 0:  # no attention layer keeps KV: blocks only count positions (65,536 x 16 = 1M tokens)
            return BLOCKS_WITHOUT_KV
        return int(min(room, self.cfg.max_kv_bytes) // per_block)

    # --- requests ---------------------------------------------------------------------------------------------

    def add_request(self, prompt: list[int], max_tokens: int, temperature: float = 0.0, seed: int | None = None) -> Sequence:
        vocab = self.card.architecture.vocab_size
        if any(not 0 <= t < vocab for t in prompt):
            raise EngineError(f"prompt token ids must be in [0, {vocab})")
        seq = Sequence(list(prompt), max_tokens, temperature, seed)
        seq.generator = torch.Generator().manual_seed(seed) if seed is not None else None
        if self.blocks.blocks_needed(len(prompt) + max_tokens) > len(self.blocks.ref_count):
            raise EngineError(f"a request of {len(prompt) + max_tokens} tokens exceeds the KV pool "
                              f"({len(self.blocks.ref_count) * self.cfg.block_size} tokens)")
        self.scheduler.add(seq)
        return seq

    def step(self) -> list[Sequence]:
        """Schedule, run, sample, retire: one engine step. Returns the sequences that finished."""
        work = self.scheduler.schedule()
        if not work:
            return []
        chunks = tuple((w.num_tokens, w.seq.num_computed_tokens, int(w.samples)) for w in work)
        seconds, sampled = self.execute(work)
        decode = sum(1 for w in work if w.num_tokens == 1 and w.seq.num_computed_tokens >= w.seq.num_prompt_tokens)
        self.stats.append(StepStats(seconds, sum(w.num_tokens for w in work) - decode, decode, len(work),
                                    self.last_device_seconds, self.last_mode, chunks))
        return self.scheduler.finish_step(work, sampled)

    def execute(self, work: list[Scheduled]) -> tuple[float, dict[int, int]]:
        """Forward and sample one step's work: its host seconds (device-synchronised) and the token sampled for
        each sequence whose chunk reaches its end (by seq_id); the device time and the mode it ran in are left in
        `last_device_seconds` and `last_mode`. `engine.bench` times steps through this too."""
        t0 = self._now()
        timer = DeviceTimer(self.device)
        logits = self._forward(work)
        samplers = [w.seq for w in work if w.samples]
        tokens = sample(logits, [s.temperature for s in samplers], [getattr(s, "generator", None) for s in samplers]) \
            if logits is not None else []
        timer.stop()
        host = self._now() - t0
        self.last_device_seconds = timer.elapsed(host)
        return host, {s.seq_id: t for s, t in zip(samplers, tokens)}

    def _forward(self, work: list[Scheduled]) -> torch.Tensor | None:
        """Logits [sampling rows, vocab]: a decode step through the static buffers where it fits, else eager."""
        self.last_mode = "eager"
        if self.decode_runner is not None:
            logits = self.decode_runner.run(work)
            if logits is not None:
                self.last_mode = self.decode_runner.mode
                rows = [i for i, w in enumerate(work) if w.samples]
                return logits[rows] if rows else None
        return run_step(self.model, work, self.caches, self.cfg.block_size, self.device)

    def generate(self, prompts: list[list[int]], max_tokens: int | list[int], temperature: float = 0.0) -> list[list[int]]:
        """Run requests to completion with continuous batching; generated token ids per prompt, in order."""
        limits = max_tokens if isinstance(max_tokens, list) else [max_tokens] * len(prompts)
        seqs = [self.add_request(p, m, temperature) for p, m in zip(prompts, limits)]
        while not self.scheduler.idle:
            self.step()
        return [s.output_ids for s in seqs]

    last_device_seconds: float = 0.0
    last_mode: str = "eager"

    def _now(self) -> float:
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter()


class DeviceTimer:
    """Device time of a span: CUDA events recorded on the current stream at creation and at `stop` (the time from
    the span's first kernel starting to its last finishing, gaps between launches included; host work before the
    first launch and after the last is not); on the CPU the device is the host, so it is the host time given."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        if self.cuda:
            self.start, self.end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            self.start.record()

    def stop(self) -> None:
        if self.cuda:
            self.end.record()

    def elapsed(self, host_seconds: float) -> float:
        if not self.cuda:
            return host_seconds
        self.end.synchronize()
        return self.start.elapsed_time(self.end) / 1e3  # elapsed_time is in ms
