"""Tiny GGUF files and safetensors checkpoints written with the formats' own libraries (gguf.GGUFWriter,
safetensors.numpy.save_file), for the importer tests. Shapes are small; the bytes are zeros."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

QUANT = "Q4_K"  # the bulk type of the Q4_K_M-like files below
HIGH = "Q6_K"  # attn_v, ffn_down and output in a Q4_K_M file


def _array(shape: tuple[int, ...], type_name: str):
    """A zero tensor of ggml type `type_name`, numpy shape `shape` (ggml order reversed): (array, raw_dtype)."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    qtype = GGMLQuantizationType[type_name]
    if type_name == "F32":
        return np.zeros(shape, np.float32), None
    if type_name == "F16":
        return np.zeros(shape, np.float16), None
    block, block_bytes = GGML_QUANT_SIZES[qtype]
    return np.zeros((*shape[:-1], shape[-1] // block * block_bytes), np.uint8), qtype


def write_gguf(path: Path, arch: str, metadata: dict, tensors: dict[str, tuple[tuple[int, ...], str]]) -> Path:
    """A GGUF file: `metadata` keys without the '<arch>.' prefix (ints as u32, floats as f32, lists as arrays),
    `tensors` name -> (numpy shape, ggml type name)."""
    import gguf

    w = gguf.GGUFWriter(str(path), arch)
    for key, value in metadata.items():
        full = key if key.startswith(("general.", "tokenizer.", "split.")) else f"{arch}.{key}"
        if isinstance(value, bool):
            w.add_bool(full, value)
        elif isinstance(value, int):
            w.add_uint32(full, value)
        elif isinstance(value, float):
            w.add_float32(full, value)
        elif isinstance(value, str):
            w.add_string(full, value)
        else:
            w.add_array(full, value)
    for name, (shape, type_name) in tensors.items():
        array, raw = _array(shape, type_name)
        w.add_tensor(name, array, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def llama_gguf(path: Path, layers: int = 2, hidden: int = 256, ffn: int = 512, vocab: int = 512, heads: int = 4,
               kv_heads: int = 2) -> Path:
    """A Llama-shaped Q4_K_M-like file: Q4_K bulk, Q6_K attn_v / ffn_down / output, F32 norms."""
    hd = hidden // heads
    t = {"token_embd.weight": ((vocab, hidden), QUANT), "output_norm.weight": ((hidden,), "F32"),
         "output.weight": ((vocab, hidden), HIGH)}
    for i in range(layers):
        p = f"blk.{i}."
        t |= {p + "attn_norm.weight": ((hidden,), "F32"), p + "ffn_norm.weight": ((hidden,), "F32"),
              p + "attn_q.weight": ((heads * hd, hidden), QUANT), p + "attn_k.weight": ((kv_heads * hd, hidden), QUANT),
              p + "attn_v.weight": ((kv_heads * hd, hidden), HIGH), p + "attn_output.weight": ((hidden, heads * hd), QUANT),
              p + "ffn_gate.weight": ((ffn, hidden), QUANT), p + "ffn_up.weight": ((ffn, hidden), QUANT),
              p + "ffn_down.weight": ((hidden, ffn), HIGH)}
    meta = {"block_count": layers, "embedding_length": hidden, "attention.head_count": heads,
            "attention.head_count_kv": kv_heads, "feed_forward_length": ffn, "context_length": 8192,
            "rope.freq_base": 500000.0, "general.file_type": 15}
    return write_gguf(path, "llama", meta, t)


def qwen3moe_gguf(path: Path, layers: int = 2, hidden: int = 256, experts: int = 8, used: int = 2,
                  expert_ffn: int = 256, vocab: int = 512, heads: int = 4, kv_heads: int = 2, head_dim: int = 128) -> Path:
    t = {"token_embd.weight": ((vocab, hidden), "Q8_0"), "output_norm.weight": ((hidden,), "F32"),
         "output.weight": ((vocab, hidden), "Q8_0")}
    for i in range(layers):
        p = f"blk.{i}."
        t |= {p + "attn_norm.weight": ((hidden,), "F32"), p + "ffn_norm.weight": ((hidden,), "F32"),
              p + "attn_q.weight": ((heads * head_dim, hidden), "Q8_0"),
              p + "attn_k.weight": ((kv_heads * head_dim, hidden), "Q8_0"),
              p + "attn_v.weight": ((kv_heads * head_dim, hidden), "Q8_0"),
              p + "attn_output.weight": ((hidden, heads * head_dim), "Q8_0"),
              p + "attn_q_norm.weight": ((head_dim,), "F32"), p + "attn_k_norm.weight": ((head_dim,), "F32"),
              p + "ffn_gate_inp.weight": ((experts, hidden), "F32"),
              p + "ffn_gate_exps.weight": ((experts, expert_ffn, hidden), "Q4_K"),
              p + "ffn_up_exps.weight": ((experts, expert_ffn, hidden), "Q4_K"),
              p + "ffn_down_exps.weight": ((experts, hidden, expert_ffn), "Q6_K")}
    meta = {"block_count": layers, "embedding_length": hidden, "attention.head_count": heads,
            "attention.head_count_kv": kv_heads, "attention.key_length": head_dim, "attention.value_length": head_dim,
            "expert_count": experts, "expert_used_count": used, "expert_feed_forward_length": expert_ffn,
            "context_length": 32768, "rope.freq_base": 1000000.0}
    return write_gguf(path, "qwen3moe", meta, t)


def gemma3_gguf(path: Path, layers: int = 6, hidden: int = 256, ffn: int = 512, vocab: int = 512, heads: int = 4,
                kv_heads: int = 1, head_dim: int = 256, window: int = 512) -> Path:
    """Gemma 3: tied embeddings (no output.weight), QK-norm, four norms per layer, 5 local : 1 global."""
    t = {"token_embd.weight": ((vocab, hidden), "Q8_0"), "output_norm.weight": ((hidden,), "F32")}
    for i in range(layers):
        p = f"blk.{i}."
        t |= {p + n: ((hidden,), "F32") for n in ("attn_norm.weight", "post_attention_norm.weight",
                                                   "ffn_norm.weight", "post_ffw_norm.weight")}
        t |= {p + "attn_q.weight": ((heads * head_dim, hidden), "Q4_0"),
              p + "attn_k.weight": ((kv_heads * head_dim, hidden), "Q4_0"),
              p + "attn_v.weight": ((kv_heads * head_dim, hidden), "Q4_0"),
              p + "attn_output.weight": ((hidden, heads * head_dim), "Q4_0"),
              p + "attn_q_norm.weight": ((head_dim,), "F32"), p + "attn_k_norm.weight": ((head_dim,), "F32"),
              p + "ffn_gate.weight": ((ffn, hidden), "Q4_0"), p + "ffn_up.weight": ((ffn, hidden), "Q4_0"),
              p + "ffn_down.weight": ((hidden, ffn), "Q4_0")}
    meta = {"block_count": layers, "embedding_length": hidden, "attention.head_count": heads,
            "attention.head_count_kv": kv_heads, "attention.key_length": head_dim, "attention.value_length": head_dim,
            "feed_forward_length": ffn, "context_length": 131072, "rope.freq_base": 1000000.0,
            "attention.sliding_window": window}
    return write_gguf(path, "gemma3", meta, t)


def deepseek2_gguf(path: Path, hidden: int = 256, heads: int = 4, q_lora: int = 64, kv_lora: int = 64,
                   nope: int = 32, rope: int = 32, v: int = 32, experts: int = 8, expert_ffn: int = 256,
                   ffn: int = 512, vocab: int = 512) -> Path:
    """DeepSeek-V3 shapes: MLA on both layers, layer 0 dense, layer 1 routed + one shared expert, noaux router."""
    t = {"token_embd.weight": ((vocab, hidden), "Q8_0"), "output_norm.weight": ((hidden,), "F32"),
         "output.weight": ((vocab, hidden), "Q8_0")}
    for i in range(2):
        p = f"blk.{i}."
        t |= {p + "attn_norm.weight": ((hidden,), "F32"), p + "ffn_norm.weight": ((hidden,), "F32"),
              p + "attn_q_a.weight": ((q_lora, hidden), "Q8_0"), p + "attn_q_a_norm.weight": ((q_lora,), "F32"),
              p + "attn_q_b.weight": ((heads * (nope + rope), q_lora), "Q8_0"),
              p + "attn_kv_a_mqa.weight": ((kv_lora + rope, hidden), "Q8_0"),
              p + "attn_kv_a_norm.weight": ((kv_lora,), "F32"),
              p + "attn_kv_b.weight": ((heads * (nope + v), kv_lora), "Q8_0"),
              p + "attn_output.weight": ((hidden, heads * v), "Q8_0")}
    t |= {"blk.0.ffn_gate.weight": ((ffn, hidden), "Q4_K"), "blk.0.ffn_up.weight": ((ffn, hidden), "Q4_K"),
          "blk.0.ffn_down.weight": ((hidden, ffn), "Q6_K"),
          "blk.1.ffn_gate_inp.weight": ((experts, hidden), "F32"), "blk.1.exp_probs_b.bias": ((experts,), "F32"),
          "blk.1.ffn_gate_exps.weight": ((experts, expert_ffn, hidden), "Q4_K"),
          "blk.1.ffn_up_exps.weight": ((experts, expert_ffn, hidden), "Q4_K"),
          "blk.1.ffn_down_exps.weight": ((experts, hidden, expert_ffn), "Q6_K"),
          "blk.1.ffn_gate_shexp.weight": ((expert_ffn, hidden), "Q8_0"),
          "blk.1.ffn_up_shexp.weight": ((expert_ffn, hidden), "Q8_0"),
          "blk.1.ffn_down_shexp.weight": ((hidden, expert_ffn), "Q8_0")}
    meta = {"block_count": 2, "embedding_length": hidden, "attention.head_count": heads,
            "attention.head_count_kv": heads, "attention.key_length": nope + rope, "attention.value_length": v,
            "attention.q_lora_rank": q_lora, "attention.kv_lora_rank": kv_lora, "rope.dimension_count": rope,
            "expert_count": experts, "expert_used_count": 2, "expert_feed_forward_length": expert_ffn,
            "expert_shared_count": 1, "leading_dense_block_count": 1, "feed_forward_length": ffn,
            "context_length": 163840, "rope.freq_base": 10000.0}
    return write_gguf(path, "deepseek2", meta, t)


# ------------------------------------------------------------------------------------------------ safetensors


def llama_config(hidden: int = 64, layers: int = 2, ffn: int = 128, vocab: int = 256, heads: int = 4,
                 kv_heads: int = 2, **extra) -> dict:
    return {"model_type": "llama", "vocab_size": vocab, "hidden_size": hidden, "intermediate_size": ffn,
            "num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": kv_heads,
            "max_position_embeddings": 4096, "tie_word_embeddings": False, "torch_dtype": "bfloat16", **extra}


def llama_tensors(cfg: dict, linear=None, layers: range | None = None) -> dict[str, np.ndarray]:
    """HF Llama tensor names; `linear(out, in)` -> {leaf suffix: array} for each projection (default bf16-sized
    float16 weights: the bytes of a bf16 checkpoint)."""
    h, f, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    hd = h // cfg["num_attention_heads"]
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    linear = linear or (lambda o, i: {"weight": np.zeros((o, i), np.float16)})
    out = {"model.embed_tokens.weight": np.zeros((v, h), np.float16), "model.norm.weight": np.zeros(h, np.float16),
           "lm_head.weight": np.zeros((v, h), np.float16)}
    for i in layers if layers is not None else range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out[p + "input_layernorm.weight"] = np.zeros(h, np.float16)
        out[p + "post_attention_layernorm.weight"] = np.zeros(h, np.float16)
        for module, (o, i_) in {"self_attn.q_proj": (q, h), "self_attn.k_proj": (kv, h), "self_attn.v_proj": (kv, h),
                                "self_attn.o_proj": (h, q), "mlp.gate_proj": (f, h), "mlp.up_proj": (f, h),
                                "mlp.down_proj": (h, f)}.items():
            for leaf, array in linear(o, i_).items():
                out[f"{p}{module}.{leaf}"] = array
    return out


def write_checkpoint(folder: Path, config: dict, tensors: dict[str, np.ndarray], shards: int = 1) -> Path:
    """config.json + model.safetensors, or `shards` files and model.safetensors.index.json."""
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    if shards == 1:
        save_file(tensors, str(folder / "model.safetensors"))
        return folder
    names = list(tensors)
    weight_map = {}
    for k in range(shards):
        part = names[k::shards]
        file = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        save_file({n: tensors[n] for n in part}, str(folder / file))
        weight_map |= {n: file for n in part}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return folder
