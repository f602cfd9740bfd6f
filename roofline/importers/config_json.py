"""Build a ModelCard from a transformers config.json (a plain dict; torch and transformers are never imported).

One shared decoder path reads the fields every supported family has (layers, hidden, heads, vocab, context, rope,
dtype); small per-family functions add what differs: biases, QK-norm, sliding-window layouts, MoE, MLA, Mamba-2.
The parameter count is derived from the shapes (params.py), not published, and the card says so.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, ValidationError

from roofline.cards.files import read_json_file
from roofline.cards.schema import first_problem
from roofline.errors import CardError, RooflineError
from roofline.importers.checkpoint import IMPORTED_FROM
from roofline.importers.hf_families import (
    _FAMILIES,
    _FAMILY_ALIASES,
    _FAMILY_DEFAULTS,
    _NESTED_DEFAULTS,
    SUPPORTED_MODEL_TYPES,
)
from roofline.importers.hf_fields import _DTYPES, _Fields
from roofline.importers.hf_pattern import compress_pattern

__all__ = ["card_from_config", "compress_pattern", "SUPPORTED_MODEL_TYPES"]
from roofline.cards.model import Architecture, ModelCard
from roofline.sizing.params import active_param_counts, param_counts

# ------------------------------------------------------------------------------------------------ weights, name

_MODULE_COMPONENTS = (("embed", "embedding"), ("lm_head", "lm_head"), ("attn", "attention"),
                      ("attention", "attention"), ("mixer", "mamba"), ("shared_expert", "shared_experts"),
                      ("router", "router"))


def _dtype(config: dict, notes: list[str]) -> str:
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    dtype = config.get("torch_dtype") or config.get("dtype") or text.get("torch_dtype") or text.get("dtype")
    if dtype is None:
        notes.append("no torch_dtype in the config; weights assumed bf16")
        return "bf16"
    name = _DTYPES.get(str(dtype).removeprefix("torch."))
    if name is None:
        notes.append(f"torch_dtype '{dtype}' not recognised; weights assumed bf16")
        return "bf16"
    return name


def _unconverted(qc: dict, base: str) -> dict[str, str]:
    """Components `modules_to_not_convert` keeps at the checkpoint dtype (lm_head and embeddings always)."""
    out = {"embedding": base, "lm_head": base}
    for module in qc.get("modules_to_not_convert") or []:
        for needle, component in _MODULE_COMPONENTS:
            if needle in str(module):
                out[component] = base
    return out


# mlx-lm's `quantization: {bits, group_size}` -> roofline's MLX affine formats (groups of 64: cards/formats.py)
MLX_FORMATS = {4: "mlx_q4", 8: "mlx_q8"}
MLX_GROUP = 64


def _mlx_weights(quant: dict, base: str, notes: list[str]) -> dict[str, str]:
    """An MLX checkpoint's affine quantization (mlx-lm writes `quantization`, no quant_method)."""
    bits, group = quant.get("bits"), quant.get("group_size", MLX_GROUP)
    fmt = MLX_FORMATS.get(bits) if group == MLX_GROUP and not isinstance(bits, bool) else None
    if fmt is None:
        notes.append(f"MLX quantization of {bits!r} bits in groups of {group!r} not modelled (4 and 8 bits in groups "
                     f"of {MLX_GROUP} are); weights at {base} (use --quant)")
        return {"default": base}
    return {"default": fmt}


# compressed-tensors (llm-compressor, vLLM's `compressed-tensors` method): a config group's weights {type, num_bits,
# group_size} -> roofline's format; FP4 in groups of 16 is NVFP4, of 32 MXFP4 (their block sizes: cards/formats.py)
CT_FORMATS = {("float", 8, None): "fp8", ("int", 8, None): "int8", ("int", 4, None): "int4",
              ("float", 4, 16): "nvfp4", ("float", 4, 32): "mxfp4"}
INT4_GROUP = 128  # the int4 format's group (AWQ/GPTQ g128: cards/formats.py)


def _compressed_tensors(qc: dict, base: str, notes: list[str]) -> dict[str, str]:
    """The first config group's weight format; the modules it `ignore`s (lm_head) kept at the checkpoint dtype."""
    groups = qc.get("config_groups")
    found = [g["weights"] for g in groups.values() if isinstance(g, dict) and isinstance(g.get("weights"), dict)] \
        if isinstance(groups, dict) else []
    w = found[0] if found else {}
    kind, bits, group = str(w.get("type", "")).lower(), w.get("num_bits"), w.get("group_size")
    bits, group = (v if isinstance(v, int) and not isinstance(v, bool) else None for v in (bits, group))
    fmt = CT_FORMATS.get((kind, bits, group if kind == "float" and bits == 4 else None))
    if fmt is None:
        notes.append(f"compressed-tensors weights of type {kind or '?'!r} with {bits!r} bits not modelled (float 8, "
                     f"int 8, int 4 and float 4 are); weights at {base} (use --quant)")
        return {"default": base}
    if fmt == "int4":
        _int4_group(group, notes)
    return {"default": fmt, **_unconverted({"modules_to_not_convert": qc.get("ignore")}, base)}


def _int4_group(group, notes: list[str]) -> None:
    """A 4-bit group other than 128 is sized as 128 (one int4 format): say what that misses."""
    if isinstance(group, int) and not isinstance(group, bool) and group > 0 and group != INT4_GROUP:
        notes.append(f"int4 group_size {group} sized as {INT4_GROUP} ({4 + 20 / INT4_GROUP:.2f} bits per weight; "
                     f"{4 + 20 / group:.2f} at {group})")


def _weights(config: dict, notes: list[str]) -> dict[str, str]:
    """Default format from torch_dtype; quantization_config: fp8 -> fp8 (embeddings, head kept); mxfp4 -> experts;
    MLX's `quantization` -> its affine format."""
    base = _dtype(config, notes)
    qc = config.get("quantization_config")
    if isinstance(config.get("quantization"), dict) and not (isinstance(qc, dict) and qc.get("quant_method")):
        return _mlx_weights(config["quantization"], base, notes)
    if not isinstance(qc, dict):
        if qc is not None:
            notes.append(f"quantization_config is {type(qc).__name__}, not a mapping; weights at {base} (use --quant)")
        return {"default": base}
    method = str(qc.get("quant_method", "")).lower()
    if method == "fp8":
        return {"default": "fp8", **_unconverted(qc, base)}
    if method == "mxfp4":
        return {"default": base, "experts": "mxfp4"}
    if method == "compressed-tensors":
        return _compressed_tensors(qc, base, notes)
    if method in ("awq", "gptq") and qc.get("bits") == 4:
        _int4_group(qc.get("group_size"), notes)
        return {"default": "int4", **_unconverted(qc, base)}
    if method in ("awq", "gptq"):  # no weight-only format of another width (int8 is W8A8)
        notes.append(f"quantization_config {method} with bits {qc.get('bits')!r} not modelled (4 bits is); weights "
                     f"at {base} (use --quant)")
        return {"default": base}
    notes.append(f"quantization_config quant_method '{method}' not modelled; weights at {base} (use --quant)")
    return {"default": base}


def _slug(text: str) -> str:
    slug = re.sub(r"[^a-z0-9._-]+", "-", text.strip().lower()).strip("-.")
    return re.sub(r"-{2,}", "-", slug)


NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9._-]{0,99}")


def card_name(name: str) -> str:
    """A --name as a card name: letters, digits, '.', '_', '-' and spaces, starting with a letter or digit (no '/',
    no leading dot: it becomes a file name), slugged ('My Llama' -> 'my-llama') to at most 100 characters."""
    slug = _slug(name)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._ -]*", name) or not NAME_PATTERN.fullmatch(slug) \
            or slug.endswith((".yaml", ".yml")):
        raise RooflineError(f"--name {name!r}: a card name needs letters or digits (lowercase, '.', '_', '-'; "
                            "at most 100 characters), like my-model")
    return slug


def _repo_id(config: dict) -> str | None:
    path = str(config.get("_name_or_path") or "").strip()
    if re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", path):
        return path
    return None


def _size(n: float) -> str:
    return f"{n / 1e9:.3g}b" if n >= 1e9 else f"{n / 1e6:.3g}m"


def _default_name(config: dict, model_type: str, total: int, active: float | None) -> str:
    """Slug of `_name_or_path`'s last part, else '<model_type>-<size>' (MoE: '-a<active>')."""
    path = str(config.get("_name_or_path") or "").rstrip("/\\")
    stem = re.split(r"[/\\]", path)[-1] if path else ""
    if NAME_PATTERN.fullmatch(_slug(stem)[:100]):
        return _slug(stem)[:100]
    name = f"{model_type.replace('_', '-')}-{_size(total)}"
    return f"{name}-a{_size(active)}" if active is not None else name


# ------------------------------------------------------------------------------------------------ entry point


def _validated(schema: type[BaseModel], data: dict, source: str, where: str = ""):
    try:
        return schema.model_validate(data)
    except ValidationError as err:
        loc, msg, _ = first_problem(err)
        raise CardError(source, ".".join(p for p in (where, loc) if p), msg) from None


_NESTED_TEXT = ("gemma3", "llama4", "qwen2_vl", "qwen2_5_vl")  # their own type, flat or nested
# model_types roofline does not model, by why (the refusal says which)
_NOT_DECODERS = {
    "an encoder-decoder model": ("t5", "mt5", "umt5", "longt5", "bart", "mbart", "marian", "pegasus", "whisper",
                                 "switch_transformers", "led", "m2m_100", "nllb_moe", "seamless_m4t", "fsmt"),
    "an encoder-only model": ("bert", "roberta", "xlm-roberta", "deberta", "deberta-v2", "distilbert", "electra",
                              "albert", "modernbert"),
}


def _wrapped(config: dict, model_type: str) -> str | None:
    """The text model a multimodal wrapper nests (LLaVA's `text_config` of model_type llama, Aya Vision's cohere2):
    its model_type when roofline reads that family and not the wrapper's own."""
    text = config.get("text_config")
    if model_type in _FAMILIES or not isinstance(text, dict) or text.get("model_type") not in _FAMILIES:
        return None
    return text["model_type"]


def _text_fields(config: dict, model_type: str, source: str, wrapper: bool = False) -> _Fields:
    """Gemma 3, Llama 4 and Qwen2(.5)-VL (multimodal, registered under their own type) may nest the decoder's fields
    under `text_config`, as a wrapper does (its text model's transformers defaults filling what it leaves out); the
    rest are flat."""
    defaults, aliases = _FAMILY_DEFAULTS.get(model_type), _FAMILY_ALIASES.get(model_type)
    if wrapper or (model_type in _NESTED_TEXT and "text_config" in config):
        text = config["text_config"]
        if not isinstance(text, dict):
            raise CardError(source, "", "'text_config' must be a mapping of the text model's fields")
        if wrapper:
            defaults = {**_NESTED_DEFAULTS.get(model_type, {}), **(defaults or {})}
        if text.get("tie_word_embeddings") is None and "tie_word_embeddings" in config:
            # transformers 5 saves a wrapper's tying at the top level only (its text model's output layer)
            text = {**text, "tie_word_embeddings": config["tie_word_embeddings"]}
        return _Fields(text, source, prefix="text_config.", defaults=defaults, aliases=aliases)
    return _Fields(config, source, defaults=defaults, aliases=aliases)


def _unsupported(model_type: object) -> RooflineError:
    why = next((f" ({what}: roofline models decoder-only LLMs)" for what, types in _NOT_DECODERS.items()
                if model_type in types), "")
    return RooflineError(f"unsupported model_type '{model_type}'{why}; supported: {', '.join(SUPPORTED_MODEL_TYPES)};"
                         " write a card by hand, see README")


def card_from_config(config: dict, name: str | None = None, source: str = "config.json") -> ModelCard:
    """A ModelCard from a transformers config.json dict; RooflineError (one line) when it cannot be read. A config
    of the wrong shape (a list where a number belongs, a zero where a divisor belongs) is the file's problem, never
    an internal error: whatever the family builders trip over becomes a CardError naming the file."""
    try:
        return _card_from_config(config, name, source)
    except RooflineError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, ZeroDivisionError, OverflowError, IndexError) as err:
        why = f"{type(err).__name__}: {' '.join(str(err).split())[:200]}"
        raise CardError(source, "", f"cannot read this config: a field's value does not fit its model family ({why}); "
                                    "compare the file with the model's published config.json") from None
    except RecursionError:
        raise CardError(source, "", "cannot read this config (nested too deeply)") from None


def _card_from_config(config: dict, name: str | None, source: str) -> ModelCard:
    if not isinstance(config, dict):
        raise CardError(source, "", "a config.json must be a JSON object of fields")
    model_type = config.get("model_type")
    if model_type is None:
        raise CardError(source, "", "missing 'model_type'")
    if not isinstance(model_type, str):
        raise _unsupported(model_type)
    text_type = _wrapped(config, model_type) or model_type
    if text_type not in _FAMILIES:
        raise _unsupported(model_type)
    family, build = _FAMILIES[text_type]
    fields = _text_fields(config, text_type, source, wrapper=text_type != model_type)
    notes: list[str] = []
    if text_type != model_type:
        notes.append(f"a {model_type} wrapper: its text model ({text_type}) only; the vision encoder and projector "
                     "are not counted")
    arch = _validated(Architecture, build(fields, notes), source, "architecture")
    if fields.defaulted:
        notes.append(f"{text_type} defaults used for fields the config leaves out: {', '.join(fields.defaulted)}")
    total = sum(param_counts(arch).values())
    active = sum(active_param_counts(arch).values()) if arch.moe is not None else None
    repo = _repo_id(config)
    weights = _weights(config, notes)
    card = {
        "name": card_name(name) if name else _default_name(config, model_type, total, active),
        "aliases": [repo] if repo else [],
        "family": family,
        "source": {"hf_repo": repo, "shapes_from": source},
        "params": {"total": float(total), "active": float(active) if active else None,
                   "source": f"derived from {source} shapes (no published figure)"},
        "architecture": arch.model_dump(),
        "weights": weights,
        "notes": "; ".join([f"{IMPORTED_FROM}{source} (model_type {model_type})", *notes]),
    }
    return _validated(ModelCard, card, source)


def read_config_file(path: Path) -> dict:
    """A JSON object file (config.json, a safetensors index) as a dict, read bounded; one line when it cannot be."""
    # transformers writes Infinity where a limit is open (SSM configs' time_step_limit: [0.0, Infinity]); every field
    # the importer reads goes through hf_fields' typed reads, which refuse a non-finite number by name
    config = read_json_file(path, "config.json", nonfinite=True)
    if not isinstance(config, dict):
        raise CardError(path, "", "a config.json must be a JSON object")
    return config


def card_from_config_file(path: Path, name: str | None = None) -> ModelCard:
    """A ModelCard from a config.json file given by path."""
    return card_from_config(read_config_file(path), name=name, source=str(path))
