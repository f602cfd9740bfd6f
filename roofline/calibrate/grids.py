"""The engine shapes `roofline calibrate` measures: named grids and the points they expand to.

Each `models` entry is a card, its first N layers and the phases it runs. One layer keeps the shapes exact and the
run short; decode steps of a second layer let the fit tell a cost per layer from a cost per step (with one layer
they are one unknown). A small vocabulary keeps the lm_head from dominating. `repeats`: steps per point (the median
is kept); `passes`: passes over the whole grid (each point keeps its fastest pass, so a slow spell of a shared
machine has to last a pass, or recur at the same point on every pass, to move it). Timings behind these choices:
docs/calibration.md.
"""

from __future__ import annotations

from roofline.errors import RooflineError

# MoE with at least this many experts is "fine-grained" (Qwen3: 128), below it "coarse" (Mixtral: 8, gpt-oss-20b: 32)
FINE_EXPERTS = 64

# Every layer kind the engine runs, one card each at one layer: llama-3.1-8b full GQA attention + dense FFN,
# gpt-oss-20b sliding attention + coarse MoE (32 experts, top-4), qwen3-30b-a3b full attention + fine MoE (128,
# top-8), granite-4.0-h-small a Mamba-2 mixer + MoE (72, top-10) in one layer; prefill up to the engine's step budget
# (8 x 256 = 2048 tokens) and 1024 tokens in one sequence, on fresh prompts (context 0: the fused causal attention
# kernel most requests run) and on a cached context (the masked kernel of later chunks). `validate --random` never
# draws these cards. llama-3.2-1b (hidden 2048) at one and two layers: a step small enough that the fixed costs (per
# step, per sequence, per kernel) are a visible share of it, which the wide cards alone cannot tell from bandwidth.
QUICK = dict(models=[("llama-3.1-8b", 1), ("llama-3.1-8b", 2, ("decode",)), ("qwen3-30b-a3b", 1), ("gpt-oss-20b", 1),
                     ("granite-4.0-h-small", 1), ("llama-3.2-1b", 1), ("llama-3.2-1b", 2, ("decode",))],
             vocab=4096, prefill=[(1, 64), (1, 256), (1, 1024), (4, 128), (8, 256)], decode_batches=[1, 4, 16, 32],
             contexts=[64, 512], prefill_contexts=[0, 512], repeats=3, passes=2)
# seconds long, for tests and smoke checks: one small dense card
SMOKE = dict(models=[("qwen2.5-3b", 1)], vocab=512, prefill=[(1, 32), (2, 64)], decode_batches=[1, 4],
             contexts=[16, 128], repeats=3, passes=1)
# 2-layer prefill on llama only: a prefill step's per-step cost is small beside its per-layer cost
FULL = dict(models=[("llama-3.1-8b", 1), ("llama-3.1-8b", 2)]
            + [m for card in ("qwen2.5-7b", "qwen3-30b-a3b", "mixtral-8x7b", "gpt-oss-20b", "gemma-3-27b")
               for m in ((card, 1), (card, 2, ("decode",)))],
            vocab=8192, prefill=[(1, 64), (1, 256), (1, 512), (4, 128), (8, 128), (8, 256)],
            decode_batches=[1, 2, 4, 8, 16, 32], contexts=[64, 512, 2048], repeats=3, passes=2)

GRIDS = {"quick": QUICK, "full": FULL, "smoke": SMOKE}
# On a GPU the quick grid also runs llama-3.1-8b's prefill at two layers and its decode at four: one- and two-layer
# steps there cannot tell a per-layer fixed cost (a replayed graph's kernel gaps) from a slow matrix-vector stream,
# nor a prefill's per-layer launches from its per-step cost, and both extrapolate to 32 layers (docs/calibration.md,
# "NVIDIA H100 with CUDA graphs": whole-card batch-1 ITL +78% from the quick grid). llama-3.2-3b at its whole depth
# (28 layers, both phases): per-layer costs (eager launches, a replayed graph's kernel gaps) fitted on steps as deep
# as the cards users predict; with them the served whole qwen2.5-7b's median error fell from 25-30% to 9-21% over
# three fits ("NVIDIA H200, a whole-depth card"). About 35 s of GPU time.
GPU_EXTRA = {"quick": [("llama-3.1-8b", 2, ("prefill",)), ("llama-3.1-8b", 4, ("decode",)), ("llama-3.2-3b", 28)]}


def grid_spec(name: str, device: str = "cpu") -> dict:
    """The named grid, with its GPU rows on a CUDA device."""
    if name not in GRIDS:
        raise RooflineError(f"--grid {name}: use {', '.join(GRIDS)}")
    extra = GPU_EXTRA.get(name, []) if device.startswith("cuda") else []
    return {**GRIDS[name], "models": GRIDS[name]["models"] + extra}


def grid_points(spec: dict) -> list[dict]:
    """Every (card, layers, phase, batch, context, new_tokens) the grid measures: prefill at `prefill_contexts`
    (default `contexts`) cached tokens, decode at `contexts`."""
    points = []
    for card, layers, *phases in spec["models"]:
        phases = phases[0] if phases else ("prefill", "decode")
        if "prefill" in phases:
            points += [dict(card=card, layers=layers, phase="prefill", batch=b, context=ctx, new_tokens=n)
                       for ctx in spec.get("prefill_contexts", spec["contexts"]) for b, n in spec["prefill"]]
        if "decode" in phases:
            points += [dict(card=card, layers=layers, phase="decode", batch=b, context=ctx, new_tokens=1)
                       for ctx in spec["contexts"] for b in spec["decode_batches"]]
    return points


def layer_kinds(spec: dict, store) -> set[str]:
    """The layer kinds a grid's cards run: attention mixers (full, sliding; 'gqa' where KV heads are shared), FFNs
    (dense, moe-coarse, moe-fine at FINE_EXPERTS experts), recurrent mixers (mamba2, ...), and 'hybrid' where one
    card mixes a recurrent mixer with attention or MoE."""
    from roofline.sizing.layers import resolve_layers
    from roofline.sizing.reduce import reduce_card

    kinds: set[str] = set()
    for card_name, layers, *_ in spec["models"]:
        card = reduce_card(store.model(card_name), layers)
        own: set[str] = set()
        for lay in resolve_layers(card.architecture):
            own.add(lay.mixer)
            if lay.is_attention and lay.num_kv_heads < lay.num_heads:
                own.add("gqa")
            if lay.ffn == "moe":
                own.add("moe-fine" if card.architecture.moe.num_experts >= FINE_EXPERTS else "moe-coarse")
            elif lay.ffn == "dense":
                own.add("dense")
        if own & {"mamba1", "mamba2", "deltanet"} and own & {"full", "sliding", "moe-fine", "moe-coarse"}:
            own.add("hybrid")
        kinds |= own - {"none"}
    return kinds
