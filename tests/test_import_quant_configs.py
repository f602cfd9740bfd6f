"""Common quantized and long-context config.json files read as the runtimes read them: compressed-tensors
(llm-compressor) FP8 / W4A16 / NVFP4 checkpoints at their stored formats, a GPTQ group other than 128 named in the
notes, and YaRN's extended context (original x factor, as vLLM derives max_model_len)."""

from __future__ import annotations

import pytest

from roofline.importers.config_json import card_from_config

LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
         "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32,
         "vocab_size": 128256, "max_position_embeddings": 131072, "rope_theta": 500000.0, "torch_dtype": "bfloat16"}


def _ct(weights: dict) -> dict:
    return LLAMA | {"quantization_config": {"quant_method": "compressed-tensors", "ignore": ["lm_head"],
                                            "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights}}}}


@pytest.mark.parametrize("weights, fmt", [
    ({"num_bits": 8, "type": "float", "strategy": "channel"}, "fp8"),
    ({"num_bits": 8, "type": "int", "strategy": "channel"}, "int8"),
    ({"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128}, "int4"),
    ({"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}, "nvfp4"),
])
def test_a_compressed_tensors_checkpoint_is_sized_at_its_stored_format(weights, fmt):
    card = card_from_config(_ct(weights))
    assert card.weights == {"default": fmt, "embedding": "bf16", "lm_head": "bf16"}


@pytest.mark.parametrize("weights", [{"num_bits": 2, "type": "int"}, {"num_bits": [8], "type": "float"},
                                     {"num_bits": 4, "type": "float", "group_size": [16]}, {"num_bits": True}])
def test_a_compressed_tensors_type_not_modelled_says_so(weights):
    card = card_from_config(_ct(weights))
    assert card.weights == {"default": "bf16"} and "compressed-tensors" in card.notes and "--quant" in card.notes


@pytest.mark.parametrize("group, named", [(32, True), (64, True), (128, False), (-1, False)])
def test_a_gptq_group_other_than_128_is_named_in_the_notes(group, named):
    card = card_from_config(LLAMA | {"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": group}})
    assert card.weights["default"] == "int4"
    assert (f"group_size {group}" in card.notes) == named


@pytest.mark.parametrize("max_pos, scaling, context", [
    (32768, {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}, 131072),  # Qwen2.5 128K
    (40960, {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}, 131072),  # Qwen3
    (163840, {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096}, 163840),  # DeepSeek-V3
    (131072, {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192}, 131072),
    (32768, {"type": "yarn", "factor": "four"}, 32768),  # unreadable: the stated length
    (163840, {"type": "yarn", "factor": 40}, 163840),  # no original length: the stated one (DeepSeek-V2-Lite)
])
def test_yarn_extends_the_context_to_original_times_factor(max_pos, scaling, context):
    card = card_from_config(LLAMA | {"max_position_embeddings": max_pos, "rope_scaling": scaling})
    assert card.architecture.max_context == context
