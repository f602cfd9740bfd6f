"""The engine against Hugging Face transformers: same card shapes, same random weights, same logits and tokens.

Each case builds an engine from a card, exports its weights into LlamaForCausalLM / Qwen2ForCausalLM /
MixtralForCausalLM (engine/hf_export.py) and compares fp32 logits over a whole 40-token sequence (to 1e-4) and
greedy generation (engine.generate, continuous batching included, vs hf_model.generate(do_sample=False)).
"""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from roofline.engine.engine import LLMEngine  # noqa: E402
from roofline.engine.model.attention import StepMeta  # noqa: E402
from roofline.engine.model.hf_export import (  # noqa: E402
    guess_family,
    hf_config,
    load_into_hf,
    to_hf_state_dict,
)
from roofline.engine.model.runner import make_caches  # noqa: E402
from roofline.engine.model.transformer import RMS_EPS, EngineError  # noqa: E402
from tiny_cards import TINY  # noqa: E402

from roofline.cards.store import CardStore  # noqa: E402
from roofline.sizing.reduce import reduce_card  # noqa: E402

ATOL = 1e-4
SEQ = 40
NEW = 10

# (id, card, family, reduction): tiny cards of each family, plus bundled cards cut to 2 layers and a 512 vocab so the
# real hidden / head / FFN shapes (and their rope settings, tied embeddings) run
CASES = [
    ("tiny-llama", TINY["llama"], "llama", {}),  # llama3 rope scaling
    ("tiny-qwen2", TINY["qwen2"], "qwen2", {}),  # q/k/v biases
    ("tiny-mixtral", TINY["mixtral"], "mixtral", {}),  # 4 experts, top-2
    ("qwen2.5-3b@2l", "qwen2.5-3b", "qwen2", {"layers": 2, "vocab": 512}),  # biases, tied, GQA 16:2
    ("llama-3.2-1b@2l", "llama-3.2-1b", "llama", {"layers": 2, "vocab": 512}),  # llama3 rope x32, tied, head_dim 64
]


def make_engine(card, reduction: dict, seed: int = 5) -> LLMEngine:
    eng = LLMEngine(card, dtype="fp32", num_blocks=48, block_size=16, max_step_tokens=32, seed=seed, **reduction)
    with torch.no_grad():  # the engine initialises norms to 1 and biases small; make both visible to the comparison
        gen = torch.Generator().manual_seed(seed + 1)
        for name, p in eng.model.named_parameters():
            if name.endswith(("norm_mixer.weight", "norm_ffn.weight")) or name == "norm.weight":
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=gen))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
    return eng


def engine_logits(eng: LLMEngine, tokens: list[int]) -> torch.Tensor:
    """Logits at every position from one uncached forward over the whole sequence (fresh caches)."""
    n, bs = len(tokens), eng.cfg.block_size
    blocks = -(-n // bs)
    caches = make_caches(eng.model, blocks, bs, 1, torch.float32, "cpu", False)
    table = torch.arange(blocks)[None]
    pos = torch.arange(n)
    meta = StepMeta(pos, table[0, pos // bs] * bs + pos % bs, table, [0], [n], [0], bs, [0])
    with torch.inference_mode():
        return eng.model.logits(eng.model(torch.tensor(tokens), meta, caches))


def tokens(vocab: int, n: int, seed: int) -> list[int]:
    return torch.randint(0, vocab, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


@pytest.fixture(scope="module", params=CASES, ids=[c[0] for c in CASES])
def pair(request):
    _, card, family, reduction = request.param
    eng = make_engine(card, reduction)
    hf = load_into_hf(eng.model, eng.card, family)
    yield eng, hf, family
    del eng, hf


def test_logits_match_transformers(pair):
    eng, hf, _ = pair
    ids = tokens(eng.card.architecture.vocab_size, SEQ, 11)
    ours = engine_logits(eng, ids)
    with torch.inference_mode():
        theirs = hf(torch.tensor([ids])).logits[0].float()
    assert ours.shape == theirs.shape == (SEQ, eng.card.architecture.vocab_size)
    diff = (ours - theirs).abs().max().item()
    print(f"{eng.card.name} as {type(hf).__name__}: max |logit diff| over {SEQ} tokens = {diff:.2e}")
    assert ours.abs().max() > 0.5  # not trivially zero logits
    assert diff < ATOL


def test_greedy_generation_matches_transformers(pair):
    eng, hf, _ = pair
    vocab = eng.card.architecture.vocab_size
    prompts = [tokens(vocab, n, 20 + n) for n in (12, 5, 23)]
    ours = eng.generate(prompts, NEW)  # three at once: chunked prefill + batched paged decode
    for prompt, out in zip(prompts, ours):
        with torch.inference_mode():
            seq = hf.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                              max_new_tokens=NEW, min_new_tokens=NEW, do_sample=False, pad_token_id=0)
        assert out == seq[0, len(prompt):].tolist()


# --- the export itself ----------------------------------------------------------------------------------------------

def test_config_carries_the_card_fields():
    card = reduce_card(CardStore().model("llama-3.1-8b"), layers=2, vocab=512)
    cfg = hf_config(card, "llama")
    a = card.architecture
    assert (cfg.vocab_size, cfg.hidden_size, cfg.num_hidden_layers) == (512, a.hidden_size, 2)
    assert (cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim) == (32, 8, 128)
    assert cfg.intermediate_size == 14336 and cfg.rms_norm_eps == RMS_EPS and not cfg.tie_word_embeddings
    rope = cfg.rope_parameters
    assert rope["rope_type"] == "llama3" and rope["rope_theta"] == 500000 and rope["factor"] == 8.0
    assert rope["original_max_position_embeddings"] == 8192
    q = hf_config(TINY["qwen2"], "qwen2")
    assert not q.use_sliding_window and q.layer_types == ["full_attention"] * 4 and q.head_dim == 16
    m = hf_config(TINY["mixtral"])
    assert type(m).__name__ == "MixtralConfig"
    assert (m.num_local_experts, m.num_experts_per_tok, m.intermediate_size) == (4, 2, 48)
    assert [guess_family(TINY[f]) for f in ("llama", "qwen2", "mixtral")] == ["llama", "qwen2", "mixtral"]


@pytest.mark.parametrize("family", ["gemma", "sliding", "hybrid", "moe"])
def test_cards_transformers_cannot_express_are_refused(family):
    with pytest.raises(EngineError, match="cannot be exported"):
        hf_config(TINY[family], "mixtral" if family == "moe" else "llama")


def test_per_expert_layout_reassembles_the_fused_experts():
    model = make_engine(TINY["mixtral"], {}).model
    sd = to_hf_state_dict(model, "mixtral", expert_layout="per_expert")
    moe = model.blocks[1].ffn
    for j in range(moe.w_up.shape[0]):
        e = f"model.layers.1.block_sparse_moe.experts.{j}."
        assert torch.equal(torch.cat([sd[e + "w1.weight"], sd[e + "w3.weight"]]), moe.w_up[j])
        assert torch.equal(sd[e + "w2.weight"], moe.w_down[j])
    assert torch.equal(sd["model.layers.1.block_sparse_moe.gate.weight"], moe.router.weight)
