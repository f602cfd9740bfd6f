"""Which runtime, version and date a published row's `engine` text names, as people write it: "llama.cpp CUDA build
7941", "llama.cpp b4400", "ROCm llama.cpp b6000", "Vulkan llama.cpp build 7548", "vllm==0.10.1", "vLLM (v0.9.2)",
"TensorRT LLM 1.0", "NVIDIA NIM", "MLX-LM 0.20.4", "text-generation-inference 1.3.4"."""

from __future__ import annotations

import re

from roofline.cards.versions import version_key

# (profile, the words engine texts name it by: its name and the aliases users type). The runtime named first in the
# text is the one that ran ("MLC-LLM, as measured by lmdeploy" is MLC-LLM's row); at one position the earlier entry
# wins. None: a runtime without a profile, whose rows are predicted generic. MLX is a profile only as MLX-LM on Apple:
# a bare "MLX" ("MLX CUDA backend", "Rapid-MLX") names another runtime around MLX's kernels.
RUNTIME_WORDS = (
    ("llama.cpp", r"llama[.\-_ ]?cpp|llama-(?:bench|server|cli)\b"),
    ("ollama", r"ollama"),
    ("vllm", r"vllm"),
    ("sglang", r"sglang"),
    ("trtllm", r"tensorrt[- _]?llm|trt[- _]?llm"),
    ("trtllm", r"\bnim\b"),  # NVIDIA NIM for LLMs serves TensorRT-LLM engines (its version numbers are NIM's own)
    ("mlx", r"mlx[-_ ]lm"),
    ("lmdeploy", r"lmdeploy|turbomind"),
    ("tgi", r"text[- ]generation[- ]inference|\btgi\b"),
    (None, r"mlc[- ]?llm|\bmlc\b|exllama|ctranslate2|deepspeed|\btransformers\b|lm ?studio|koboldcpp|mistral\.rs|"
           r"llm-awq|auto-?awq|auto-?gptq|gptq-for-llama|"
           r"\bcandle\b|ipex-llm|openvino|onnx ?runtime|gaudi|synapseai|rapid-mlx|\bmlx\b|pegainfer|sparkinfer"),
)
# a version written right after the runtime's name: "vLLM 0.10.1", "vllm==0.10.1", "vLLM (v0.9.2)", "sglang-0.4.6"
VERSION_AFTER = re.compile(r"[\s:=@(\-]*v?(\d+(?:\.\d+)+(?:[.\-]?(?:rc|a|b|dev|post)\.?\d*)*)")
# TensorRT-LLM also writes single-number majors ("TensorRT-LLM 1")
MAJOR_AFTER = re.compile(r"[\s:=@(\-]*v?(\d+(?:\.\d+)*)")
# llama.cpp's build number anywhere in the text: "build 7941", "build: 7941", "(b1700)", "@b6918"; a bare "b" needs
# four digits or more (b1000 is August 2023), so a GPU name like "B200" is not read as one
LLAMA_BUILD = re.compile(r"\bbuild[:#\s]*b?(\d{3,6})\b|\bb(\d{4,6})\b")
MONTHS = {m: i + 1 for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov",
                                          "dec"))}


def _first_named(text: str) -> tuple[str | None, re.Match | None]:
    """The runtime named first in `text` (lower case) and where its name ends; (None, None) if none is."""
    best: tuple[int, int, str | None, re.Match] | None = None
    for order, (name, words) in enumerate(RUNTIME_WORDS):
        m = re.search(words, text)
        if m and (best is None or (m.start(), order) < best[:2]):
            best = (m.start(), order, name, m)
    return (best[2], best[3]) if best else (None, None)


def _version(name: str, text: str, named: re.Match) -> str | None:
    """The version the text gives for runtime `name` (named at `named`), as version_key reads it; None if none."""
    if name == "llama.cpp" or name == "llama.cpp-vulkan":
        m = LLAMA_BUILD.search(text)
        return f"b{m.group(1) or m.group(2)}" if m else None
    if named.group() == "nim":
        return None
    m = (MAJOR_AFTER if name == "trtllm" else VERSION_AFTER).match(text, named.end())
    if not m:
        return None
    try:
        version_key(m.group(1))
    except ValueError:
        return None
    return m.group(1)


def engine_runtime(engine: str) -> tuple[str | None, str | None]:
    """(profile name, version) a row's `engine` text names: "llama.cpp CUDA build 7941" -> ("llama.cpp", "b7941"),
    "llama.cpp Vulkan build 7548" -> ("llama.cpp-vulkan", "b7548") (the Vulkan backend: a profile of its own),
    "vLLM 0.10.1" -> ("vllm", "0.10.1"), "TensorRT-LLM 0.17" -> ("trtllm", "0.17"), "MLX-LM" -> ("mlx", None); a
    runtime without a profile (MLC-LLM, Gaudi software) -> (None, None)."""
    text = engine.lower()
    name, named = _first_named(text)
    if name is None:
        return None, None
    if name == "llama.cpp" and re.search(r"\bvulkan\b", text):
        name = "llama.cpp-vulkan"
    return name, _version(name, text, named)


def row_date(row: dict) -> str | None:
    """YYYY-MM of a row: its `date` column, else a 'May 2024' in its engine text."""
    if row.get("date", "").strip():
        return row["date"].strip()[:7]
    m = re.search(r"\b(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+(20\d\d)\b",
                  row.get("engine", "").lower())
    return f"{m.group(2)}-{MONTHS[m.group(1)]:02d}" if m else None
