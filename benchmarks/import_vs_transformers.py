"""config.json import against transformers' own models: for every model_type the importer reads, transformers'
default config of that type is imported into a card and its parameter count compared with transformers' causal LM
built from the same config on the meta device (no weights allocated). A multimodal type is compared on its text
model, the part a card describes.

    PYTHONPATH=. python benchmarks/import_vs_transformers.py [MODEL_TYPE ...]   # needs torch and transformers

Prints one row per type (roofline, transformers, difference) and the types whose defaults cannot be compared.
"""

from __future__ import annotations

import argparse
import logging
import warnings

MISMATCH = 0.01  # a difference beyond this share is flagged


def transformers_count(model_type: str) -> int:
    """Parameters of transformers' causal LM for the default config of `model_type` (its text model's where the
    type is a wrapper), built on the meta device."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(model_type)
    config = getattr(config, "text_config", None) or config
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


def compare(model_type: str) -> str:
    from transformers import AutoConfig

    from roofline.importers.config_json import card_from_config
    from roofline.sizing.params import total_params

    try:
        ours = total_params(card_from_config(AutoConfig.for_model(model_type).to_dict()))
    except Exception as err:  # noqa: BLE001 - a row per type, whatever stops it
        return f"| {model_type} | not imported: {str(err)[:90]} | | |"
    try:
        theirs = transformers_count(model_type)
    except Exception as err:  # noqa: BLE001
        return f"| {model_type} | {ours / 1e9:.4f}B | not built: {type(err).__name__} | |"
    diff = ours / theirs - 1
    flag = " (!)" if abs(diff) > MISMATCH else ""
    return f"| {model_type} | {ours / 1e9:.4f}B | {theirs / 1e9:.4f}B | {100 * diff:+.2f}%{flag} |"


def main() -> None:
    from roofline.importers.hf_families import SUPPORTED_MODEL_TYPES

    ap = argparse.ArgumentParser()
    ap.add_argument("types", nargs="*", help="model_types (default: every type the importer reads)")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    print("| model_type | roofline | transformers (meta device) | difference |")
    print("|---|---:|---:|---:|")
    for model_type in args.types or SUPPORTED_MODEL_TYPES:
        print(compare(model_type), flush=True)


if __name__ == "__main__":
    main()
