"""config.json families with no attention at all: every layer one Mamba block (Mamba-1: state-spaces/mamba,
Falcon-Mamba; Mamba-2: Codestral Mamba) and its norm, no MLP."""

from __future__ import annotations

from roofline.cards.schema import MAX_CONTEXT
from roofline.importers.hf_decoder import _decoder
from roofline.importers.hf_fields import _Fields
from roofline.importers.hf_parts import _mamba2, _num_layers

MAMBA2_KEYS = ("state_size", "num_heads", "head_dim")  # Mamba2Config's names for the state, heads and head width


def _recurrent(c: _Fields, notes: list[str], mixer: str, mamba2: dict | None = None) -> dict:
    """Every layer a `mixer` block under one RMSNorm; embeddings tied unless the config says (MambaConfig's default).
    A recurrent model has no positional limit: its context is the schema's largest."""
    n = _num_layers(c)
    notes.append(f"every layer a {mixer} block (no attention, no MLP); no positional limit on the context")
    return _decoder(c, mixers=[mixer] * n, ffns=["none"] * n, attention=None, ffn=None, mamba2=mamba2, rope=None,
                    tie_default=True, norms_per_layer=1, max_context_default=MAX_CONTEXT)


def _mamba(c: _Fields, notes: list[str]) -> dict:
    """Mamba-1 (MambaConfig / FalconMambaConfig): d_inner is `intermediate_size` where stated (Falcon-Mamba's
    `expand` 16 is not its width), else expand x hidden; dt_rank `time_step_rank` ('auto': hidden / 16). Falcon-Mamba's
    B/C/dt RMSNorms carry no weights."""
    arch = _recurrent(c, notes, "mamba1")
    hidden = c.int("hidden_size")
    rank = c.raw("time_step_rank")
    arch["mamba1"] = {"d_inner": c.int("intermediate_size", default=c.int("expand", default=2) * hidden),
                      "state_size": c.int("state_size"), "conv_kernel": c.int("conv_kernel", default=4),
                      "dt_rank": -(-hidden // 16) if rank in (None, "auto") else c.int("time_step_rank"),
                      "inner_norms": False}
    return arch


def _mamba2_family(c: _Fields, notes: list[str]) -> dict:
    """Mamba-2 (Mamba2Config): `num_heads` x `head_dim` state heads in `n_groups` groups, a gated RMSNorm before the
    output projection."""
    return _recurrent(c, notes, "mamba2", mamba2=_mamba2(c, keys=MAMBA2_KEYS))
