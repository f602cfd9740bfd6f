"""Tiny model cards of every architecture family, for fast engine tests (same schema as the bundled cards)."""

from roofline.cards.model import ModelCard

BASE = {"family": "test", "source": {"shapes_from": "tests/tiny_cards.py"}, "params": {"total": 1e6, "source": "test"}}


def card(name: str, **arch) -> ModelCard:
    a = {"vocab_size": 97, "hidden_size": 64, "num_layers": 4, "max_context": 4096,
         "attention": {"num_heads": 4, "num_kv_heads": 2, "head_dim": 16},
         "ffn": {"intermediate_size": 96, "activation": "silu", "gated": True},
         "rope": {"theta": 10000.0}}
    a.update(arch)
    return ModelCard.model_validate({**BASE, "name": name, "architecture": a})


TINY = {
    "llama": card("tiny-llama", rope={"theta": 500000.0, "scaling": {"type": "llama3", "factor": 8.0,
                                                                       "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                                       "original_max_position": 64}}),
    "qwen2": card("tiny-qwen2", attention={"num_heads": 4, "num_kv_heads": 2, "head_dim": 16, "qkv_bias": True}),
    "sliding": card("tiny-sliding", attention={"num_heads": 4, "num_kv_heads": 1, "head_dim": 16, "sliding_window": 7},
                    layer_pattern="(SA)*2"),
    "moe": card("tiny-moe", moe={"num_experts": 8, "experts_per_token": 2, "expert_intermediate_size": 32,
                                 "num_shared_experts": 1, "shared_expert_intermediate_size": 48}),
    "mixtral": card("tiny-mixtral", moe={"num_experts": 4, "experts_per_token": 2, "expert_intermediate_size": 48}),
    "hybrid": card("tiny-hybrid", num_layers=6, layer_pattern="MEM*E-",
                   mamba2={"state_size": 8, "num_heads": 4, "head_dim": 16, "n_groups": 2, "conv_kernel": 4,
                           "chunk_size": 4, "state_dtype": "fp32"},
                   moe={"num_experts": 4, "experts_per_token": 2, "expert_intermediate_size": 32, "gated": False,
                        "num_shared_experts": 1, "shared_expert_intermediate_size": 32},
                   ffn={"intermediate_size": 64, "activation": "relu2", "gated": False}, rope=None),
    "gemma": card("tiny-gemma", norms_per_layer=4, tie_embeddings=True, layer_pattern="SSSA",
                  attention={"num_heads": 4, "num_kv_heads": 2, "head_dim": 16, "sliding_window": 5, "qk_norm": True},
                  layer_types={"A": {"mixer": "full", "num_kv_heads": 1, "head_dim": 32, "k_eq_v": True}},
                  ffn={"intermediate_size": 96, "activation": "gelu_tanh", "gated": True}),
}
