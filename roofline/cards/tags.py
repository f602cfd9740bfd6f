"""Model names as Ollama users type them: a library tag ('qwen3:30b') and the weight format its suffix or the
library's default build gives."""

from __future__ import annotations

from roofline.cards.formats import WEIGHT_FORMATS, weight_format
from roofline.cards.model import ModelCard

# Ollama-style tag suffixes: 'llama3.3:70b-instruct-q4_K_M' names llama3.3:70b in q4_k_m ('-instruct' is the tuned
# variant the cards describe already)
_VARIANTS = ("-instruct", "-chat", "-it", "-text")


# what a bare Ollama library tag ('llama3.1:8b', 'qwen3:30b') pulls: the library's default build, a Q4_K_M GGUF
# (theepic.dev/kb/deciphering-ollama-model-names: 'llama3.1:8b' and 'llama3.1:latest' are 8b-instruct-q4_K_M;
# martinkollie.com/blog/llm-naming-explained-what-does-it-mean: 'if not specified, it's usually q4_K_M'), except where
# the model ships 4-bit weights of its own (gpt-oss's MXFP4 experts), which the library keeps
OLLAMA_LIBRARY_FORMAT = "q4_k_m"
NATIVE_LOW_BITS = 4.5  # bits per weight at or under which a card's own format is the library's build


def ollama_library_format(card: ModelCard) -> str | None:
    """The weight format a bare Ollama library tag of `card` pulls: Q4_K_M, or None (the card's own formats) where
    the card already ships a format of at most 4.5 bits a weight."""
    native = {weight_format(f).bits_per_value for f in card.weights.values()}
    return None if min(native) <= NATIVE_LOW_BITS else OLLAMA_LIBRARY_FORMAT


def split_format_tag(name: str) -> tuple[str, str | None]:
    """('llama3.3:70b', 'q4_k_m') from 'llama3.3:70b-instruct-q4_K_M'; (name, None) when no format ends the tag."""
    text = name.strip()
    if ":" not in text:
        return text, None
    lower = text.lower()
    for fmt in sorted((f.name for f in WEIGHT_FORMATS), key=len, reverse=True):
        for sep in ("-", "_", ":"):
            if lower.endswith(sep + fmt):
                base = text[: -len(fmt) - 1]
                for variant in _VARIANTS:
                    if base.lower().endswith(variant):
                        base = base[: -len(variant)]
                        break
                return base, fmt
    return text, None
