"""Decode steps on static buffers, captured as one CUDA graph per batch-size bucket.

A decode step (every sequence runs one new token) is copied into preallocated buffers padded to a bucket
(1, 2, 4, 8, then every 8 up to `max_batch`), and the model runs on the buffers with fixed shapes: attention reads a
fixed `max_blocks` blocks per sequence and masks positions at or past each sequence's length on the device, so
nothing in the forward depends on host data. On CUDA each bucket's forward is captured once and replayed; on the
CPU (or where capture cannot apply: Mamba state, MoE routing that reads expert counts back to the host) the same
static-buffer forward runs eagerly, which is what the CPU tests exercise. Steps beyond the largest bucket, longer
than the buffers' context, or with any multi-token chunk take the engine's ordinary eager path.

Padded rows run token 0 at position 0, attend to one position of block 0 and write their K/V to a scratch block
past the block manager's pool (`scratch_block`), so they never touch a live sequence's cache.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from roofline.engine.core.scheduler import Scheduled
from roofline.engine.model.attention import StepMeta
from roofline.engine.model.mamba import Mamba2
from roofline.engine.model.modules import MoE
from roofline.engine.model.transformer import Transformer

from roofline.perf.graph_buckets import batch_buckets, bucket_for


def is_decode(work: list[Scheduled]) -> bool:
    """Every chunk is one token on top of a cache (a decode step, or a prompt's last token after chunking)."""
    return all(w.num_tokens == 1 for w in work)


def capturable(model: Transformer) -> bool:
    """Whether a decode forward has no host synchronisation: Mamba-2 layers index state slots from host lists and
    MoE routing reads expert token counts back to the host, so cards with either run static but uncaptured."""
    return not any(isinstance(m, (Mamba2, MoE)) for m in model.modules())


@dataclass
class StaticInputs:
    """The step's inputs at the largest bucket, rows [0, batch) live, the rest padding."""
    ids: torch.Tensor  # [B] long: the token each sequence runs
    positions: torch.Tensor  # [B] long: its position (= tokens already cached)
    slots: torch.Tensor  # [B] long: flat cache slot its K/V is written to
    block_tables: torch.Tensor  # [B, max_blocks] long: blocks holding each sequence (0-padded)
    kv_lens: torch.Tensor  # [B] long: tokens each sequence attends to, this one included

    @classmethod
    def allocate(cls, batch: int, max_blocks: int, device) -> "StaticInputs":
        z = lambda *shape: torch.zeros(shape, dtype=torch.long, device=device)  # noqa: E731
        return cls(z(batch), z(batch), z(batch), z(batch, max_blocks), z(batch))

    def view(self, batch: int) -> "StaticInputs":
        """The first `batch` rows (views: writes land in the buffers)."""
        return StaticInputs(self.ids[:batch], self.positions[:batch], self.slots[:batch], self.block_tables[:batch],
                            self.kv_lens[:batch])


def host_inputs(work: list[Scheduled], bucket: int, max_blocks: int, block_size: int, scratch_slot: int) -> dict:
    """The step's inputs on the host, padded to `bucket` rows: ids, positions, slots, kv_lens [bucket] and
    block_tables [bucket, max_blocks]. Padding: token 0 at position 0 writing to `scratch_slot`, one visible key."""
    n = len(work)
    ids, pos, slots, lens = ([0] * bucket for _ in range(4))
    tables = torch.zeros(bucket, max_blocks, dtype=torch.long)
    for i, w in enumerate(work):
        p = w.seq.num_computed_tokens
        table = w.seq.block_table
        ids[i], pos[i], lens[i] = w.seq.token_ids[p], p, p + 1
        slots[i] = table[p // block_size] * block_size + p % block_size
        tables[i, :len(table)] = torch.tensor(table[:max_blocks])
    for i in range(n, bucket):
        slots[i], lens[i] = scratch_slot, 1
    as_long = lambda v: torch.tensor(v, dtype=torch.long)  # noqa: E731
    return {"ids": as_long(ids), "positions": as_long(pos), "slots": as_long(slots), "kv_lens": as_long(lens),
            "block_tables": tables}


class DecodeRunner:
    """Static-buffer decode steps for one engine: `run(work)` -> logits [len(work), vocab], or None when the step
    does not fit the buffers (the caller runs it eagerly). `mode` says how the last step ran."""

    def __init__(self, model: Transformer, caches: list, block_size: int, scratch_block: int, max_batch: int,
                 max_blocks: int, device, use_graphs: bool):
        self.model, self.caches, self.block_size = model, caches, block_size
        self.scratch_slot = scratch_block * block_size
        self.buckets, self.max_blocks, self.device = batch_buckets(max_batch), max_blocks, torch.device(device)
        self.inputs = StaticInputs.allocate(self.buckets[-1], max_blocks, self.device)
        self.use_graphs = use_graphs and self.device.type == "cuda" and capturable(model)
        self.graphs: dict[int, tuple] = {}  # bucket -> (CUDAGraph, logits [bucket, vocab])
        self.pool = None
        self.keep: list = []  # tensors captured graphs read (rope tables), kept alive if the model regrows them
        self.mode = "eager"

    def fits(self, work: list[Scheduled]) -> bool:
        longest = max(w.seq.num_computed_tokens + 1 for w in work)
        return is_decode(work) and len(work) <= self.buckets[-1] and longest <= self.max_blocks * self.block_size

    @torch.inference_mode()
    def run(self, work: list[Scheduled]) -> torch.Tensor | None:
        if not self.fits(work):
            self.mode = "eager"
            return None
        bucket = bucket_for(len(work), self.buckets)
        self._copy_in(work, bucket)
        if self.use_graphs:
            graph, logits = self.graphs.get(bucket) or self._capture(bucket)
            graph.replay()
            self.mode = "graphs"
        else:
            logits = self._forward(bucket)
            self.mode = "static"
        return logits[:len(work)]

    def capture_all(self) -> None:
        """Capture every bucket now (a server does this at start-up, so no request waits on a capture): the buffers
        hold padding rows, whose K/V writes land in the scratch block."""
        if not self.use_graphs:
            return
        self.pad_inputs()
        for bucket in self.buckets:
            if bucket not in self.graphs:
                self._capture(bucket)

    def pad_inputs(self) -> None:
        """Every row of the static buffers a padding row: token 0 at position 0, writing to the scratch slot."""
        x = self.inputs
        for t in (x.ids, x.positions, x.block_tables):
            t.zero_()
        x.slots.fill_(self.scratch_slot)
        x.kv_lens.fill_(1)

    def _copy_in(self, work: list[Scheduled], bucket: int) -> None:
        host = host_inputs(work, bucket, self.max_blocks, self.block_size, self.scratch_slot)
        buf = self.inputs.view(bucket)
        for name, value in host.items():
            getattr(buf, name).copy_(value, non_blocking=True)

    def _forward(self, bucket: int) -> torch.Tensor:
        """Logits [bucket, vocab] of the model run on the first `bucket` rows of the static buffers."""
        x = self.inputs.view(bucket)
        meta = StepMeta(x.positions, x.slots, x.block_tables, [], [], [], self.block_size, [None] * bucket,
                        static_kv_lens=x.kv_lens, static_max_len=self.max_blocks * self.block_size)
        hidden = self.model(x.ids, meta, self.caches)
        return self.model.logits(hidden)

    def _capture(self, bucket: int) -> tuple:
        """Warm up on a side stream (allocator, lazy kernels), then capture the bucket's forward into a graph that
        shares one memory pool with the other buckets."""
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            for _ in range(2):
                self._forward(bucket)
        torch.cuda.current_stream(self.device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            logits = self._forward(bucket)
        self.pool = graph.pool()
        self.keep += [t for block in self.model.blocks if getattr(block.mixer, "rope", None) is not None
                      for t in (block.mixer.rope.cos, block.mixer.rope.sin)]
        self.graphs[bucket] = (graph, logits)
        return self.graphs[bucket]
