"""Options every command shares, so each command declares them the same way."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from roofline.cards.files import check_output_file
from roofline.cards.runtime_windows import as_run
from roofline.cards.schema import comma_entries
from roofline.cards.store import CardStore
from roofline.cards.units import DECIMAL_COMMA_HINT, QuantityError, ascii_int, parse_tokens
from roofline.cli.output import warn_on_success
from roofline.errors import RooflineError, UnknownNameError
from roofline.importers import open_store
from roofline.importers.checkpoint import assumed_notes
from roofline.perf.efficiency import Efficiency, check_runtime_supports, expected_efficiency
from roofline.perf.serving.policy import check_slot_context, replica_memory_bytes
from roofline.perf.workload import MAX_COUNT
from roofline.sizing.memory import Deployment, runtime_memory_view, slot_share_tokens

if TYPE_CHECKING:
    from roofline.cards.runtime import RuntimeChoice

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document (numbers in SI units).")]
CardsOpt = Annotated[
    Optional[list[str]],  # text, not Path: Path('') is '.', and --cards '' must be refused, not read as the cwd
    typer.Option("--cards", help="Extra card directory with hardware/, models/ and/or runtimes/ (overrides bundled and "
                                  "user cards)."),
]


def image_path(path: Path) -> Path:
    """A writable image path for -o, checked before any work (a directory, a read-only or system path is refused)."""
    if path.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise RooflineError(f"-o {path}: use a .png, .svg or .pdf file name")
    return check_output_file(path, "-o")


def nonempty_path(text: str) -> Path:
    """A path option's text as a Path, refusing '' (which Path would read as the working directory)."""
    if not str(text).strip():
        raise typer.BadParameter("empty path; give a file or folder name")
    return Path(text)


RuntimeOpt = Annotated[
    Optional[str],
    typer.Option("--runtime", help="Runtime profile NAME[@VERSION]: llama.cpp, llama.cpp-vulkan, ollama, vllm, "
                 "sglang, trtllm (nim), lmdeploy, mlx, tgi, roofline-engine; e.g. vllm@0.11, llama.cpp@b6918 "
                 "(default: generic, today's efficiencies per hardware kind; see `roofline runtimes list`)."),
]


ModelOpt = Annotated[str, typer.Option("--model", "-m", help="Model card name, alias or path (YAML, config.json, .gguf "
                                                 "or a safetensors checkpoint folder).")]
HwOpt = Annotated[str, typer.Option("--hw", help="Hardware card name, alias or path.")]
QuantOpt = Annotated[Optional[str], typer.Option("--quant", help="Weight format, e.g. bf16, fp8, int4, q4_k_m, nvfp4, or "
                                                 "per component: experts=mxfp4,default=q8_0 (default: the card's "
                                                 "native formats; see `roofline formats`).")]
KvOpt = Annotated[Optional[str], typer.Option("--kv-quant", help="KV-cache format: bf16, fp16, fp8, q8_0, q4_0 "
                                              "(default: the runtime's, else bf16).")]
TokOpt = Annotated[str, typer.Option(help="Token count: 500, 4k, 128K, 1M.")]
GpusOpt = Annotated[int, typer.Option("--gpus", help="GPUs in tensor parallel (shards weights and KV heads); under "
                                     "llama.cpp and Ollama, layers split across them (their default).")]
PpOpt = Annotated[int, typer.Option("--pp", help="Pipeline-parallel stages (GPUs = gpus x pp).")]
SlotContextOpt = Annotated[Optional[str], typer.Option("--context", help="Tokens each slot of llama.cpp or Ollama "
                                                       "holds (Ollama's num_ctx; llama-server's -c is this times its "
                                                       "slots); default: the runtime's.")]


def context_tokens(context: str | None) -> int | None:
    """--context's tokens (each sequence's, or each slot's under a per-slot runtime); None: not given."""
    return None if context is None else tokens("--context", context)


def tokens(option: str, value: str | int, allow_zero: bool = False) -> int:
    """A token option's count, at most MAX_COUNT (0 only where `allow_zero`)."""
    if allow_zero and str(value).strip() == "0":
        return 0
    try:
        n = parse_tokens(value)
    except QuantityError as err:
        comma = f"; {DECIMAL_COMMA_HINT}" if DECIMAL_COMMA_HINT in str(err) else ""
        raise RooflineError(f"{option}: {value!r} is not a token count {'>=' if allow_zero else '>'} 0 (like 500, "
                            f"4k, 128K or 1M){comma}") from None
    if n > MAX_COUNT:
        raise RooflineError(f"{option}: at most {MAX_COUNT:,} tokens, got {str(value)[:30]!r} ({n:,} tokens; k and M "
                            "are binary: 1M = 1,048,576)")
    return n


def fmt_s(seconds: float) -> str:
    if seconds != seconds:  # NaN: no such interval (ITL of one-token answers)
        return "—"
    if seconds < 1e-3:
        return f"{seconds * 1e6:,.0f} us"
    if seconds < 1:
        return f"{seconds * 1e3:,.1f} ms"
    return f"{seconds:,.2f} s"


def fmt_rate(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:,.2f}"


def runtime_choice(st: CardStore, spec: str | None) -> RuntimeChoice | None:
    """The --runtime option as a profile and version (None: generic)."""
    if spec is None or spec.strip().lower() == "generic":
        return None
    if not spec.strip():
        raise RooflineError("--runtime: empty; name a runtime (see `roofline runtimes list`) or leave --runtime out "
                            "for generic")
    try:
        return st.runtime(spec)
    except UnknownNameError as err:
        raise RooflineError(f"--runtime: {err}") from None


def runtime_efficiency(choice: RuntimeChoice | None, card, hw, wl) -> Efficiency | None:
    """The expected-mode efficiency of `card` on `hw` under the runtime (None: generic), after checking the runtime
    can run this hardware and these formats."""
    if choice is None:
        return None
    check_runtime_supports(choice, card, hw, wl.quant, wl.kv_quant)
    return expected_efficiency(hw, choice, card.architecture.max_context)


def runtime_runs(choice: RuntimeChoice | None, card, hw):
    """Whether the runtime runs a (weight format, KV format) pair of `card` on `hw` (`check_runtime_supports` as a
    test), for the alternatives `fits` and `predict` propose; None: generic (any)."""
    if choice is None:
        return None

    def runs(quant: str, kv_quant: str) -> bool:
        try:
            check_runtime_supports(choice, card, hw, quant, kv_quant)
        except RooflineError:
            return False
        return True
    return runs


def runtime_policy(choice: RuntimeChoice | None, hw, gpus: int) -> dict | None:
    """The runtime's scheduler and memory fields for one replica of `gpus` GPUs of `hw` (None: generic)."""
    if choice is None:
        return None
    return choice.profile.serving_policy(choice.version or choice.range_start, replica_memory_bytes(hw, gpus))


def parallel_layout(choice: RuntimeChoice | None, gpus: int, pp: int) -> dict:
    """tp and pp of --gpus/--pp under the runtime: a runtime that splits layers across GPUs by default (llama.cpp's
    -sm layer, Ollama) runs --gpus N as N pipeline stages, one GPU each; others tensor-parallel --gpus."""
    if choice is not None and choice.profile.multi_gpu == "layer" and gpus > 1:
        return {"tp": 1, "pp": gpus * pp}
    return {"tp": gpus, "pp": pp}


def beyond_context(card, context_tokens: int) -> list[str]:
    """The warning `fits` and `plot memory` give for a context longer than the model's (none within it)."""
    most = card.architecture.max_context
    if context_tokens <= most:
        return []
    return [f"{context_tokens:,} tokens is beyond {card.name}'s max context of {most:,}"]


def runtime_sizing(choice: RuntimeChoice | None, hw, wl, model, context: int | None = None) -> tuple:
    """(card as the runtime's memory policy sees it, Deployment, capacity text): the share of each GPU a
    preallocating runtime takes (vLLM's gpu_memory_utilization) and the KV block and step tokens it sizes with,
    as `fits --runtime` counts them, and the context a per-slot runtime (llama.cpp, Ollama) allocates for every
    sequence, cut to the `model` card's context as `fits` cuts it, so `predict`, `compare` and `sweep` give the
    verdict `fits` gives. `context`: the tokens each slot holds instead of the runtime's default (--context)."""
    memory_policy = runtime_policy(choice, hw, wl.tp * wl.pp)
    check_slot_context(choice, memory_policy, context)
    view, slot_ctx, blocks, step, policy = runtime_memory_view(memory_policy, hw, context, None, None)
    slot = min(slot_ctx, model.architecture.max_context) if policy["policy"] == "per_slot" else 0
    if slot:  # one slot per sequence of the batch; a --context asked for is each slot's
        slot = slot_share_tokens(slot, wl.batch, policy["context_split"] and context is None)
        warn_beyond_slot(choice, wl, slot)
    text = capacity_label(view.memory.capacity_bytes, view.memory.capacity_binary)
    util = policy["gpu_memory_utilization"]
    if util:
        text += f" ({util:.0%} of {reported_label(hw)}, the share the runtime takes)"
    if policy["kv_share"] < 1:
        text += f" (its KV pool: {policy['kv_share']:.0%} of what the rest leaves)"
    dep = Deployment(wl.tp, wl.pp, blocks, step, slot_tokens=slot, kv_share=policy["kv_share"],
                     sampled_seqs=policy["sampled_seqs"])
    return view, dep, text


def warn_beyond_slot(choice: RuntimeChoice, wl, slot_tokens: int) -> None:
    """A request longer than the context a per-slot runtime gives each sequence by default (Ollama's num_ctx,
    llama-server's -c over its slots) is predicted as if that context were raised to hold it: say so."""
    if wl.tokens_held <= slot_tokens:
        return
    knob = "num_ctx" if choice.profile.name == "ollama" else "-c"
    warn_on_success(f"{choice.label} gives each sequence {slot_tokens:,} tokens of context by default ({knob}, "
                    "over its parallel slots); "
                    f"this request holds {wl.tokens_held:,}: predicted as if {knob} were raised to hold it (left at "
                    "the default, the runtime truncates or refuses the prompt)")


def kv_default(choice: RuntimeChoice | None, kv_quant: str | None) -> str:
    """--kv-quant, else the runtime's default KV format (llama.cpp f16), else bf16."""
    if kv_quant is not None and not kv_quant.strip():
        raise RooflineError("--kv-quant: empty; give a KV format such as bf16, fp8 or q8_0 (see `roofline formats`)")
    return kv_quant or (choice.profile.default_kv_format if choice else "bf16")


def warn_batch_beyond_runtime(choice: RuntimeChoice | None, batch: int) -> None:
    """A --batch of more sequences than the runtime's server runs at once (max_num_seqs; llama.cpp's and Ollama's
    slots, -np / OLLAMA_NUM_PARALLEL) is timed as one step all the same: say so, and where the queue is modelled."""
    if choice is None:
        return
    policy = choice.profile.serving_policy(choice.version or choice.range_start)
    most = policy.get("parallel_slots") or policy.get("max_num_seqs")
    if most and batch > most:
        slots = "slots" if policy.get("parallel_slots") else "max_num_seqs"
        warn_on_success(f"{choice.profile.display_name} runs at most {most:,} sequence{'s' * (most > 1)} at once by "
                        f"default ({slots}); the batch of {batch:,} is timed as one step, as with that limit raised to "
                        f"{batch:,} (`roofline serve --concurrency {batch}` queues the rest at the default)")


def runtime_label(choice: RuntimeChoice | None) -> str:
    return "generic" if choice is None else choice.label


def host_card_name(hw: str | None, default: str = "host") -> str:
    """--hw of the commands that run here: a card name, else (left out) this machine; an empty one is refused."""
    if hw is not None and not hw.strip():
        raise RooflineError("--hw: empty; name a hardware card, or leave --hw out for this machine")
    return hw or default


def store(cards: Optional[list[str]]) -> CardStore:
    return open_store(list(cards or []))


def model_and_quant(st: CardStore, name: str, quant: Optional[str]):
    """The model card a name gives and the weight format to use: --quant, else the formats a published checkpoint's
    name or an Ollama-style tag carries ('nvidia/Gemma-4-31B-IT-NVFP4' -> ffn=nvfp4,default=bf16;
    'llama3.3:70b-instruct-q4_K_M' -> q4_k_m), else None (the card's native formats). A per-component format for a
    component the model lacks is refused."""
    from roofline.sizing.params import check_quant_components, parse_quant

    card, tagged = st.model_and_format(name)
    if Path(name).expanduser().exists() and Path(name).suffix.lower() not in (".yaml", ".yml"):
        # imported from a config.json, GGUF or checkpoint: what the importer assumed is said, not buried
        notes = assumed_notes(card.notes)
        if notes:
            warn_on_success(f"{card.name}: {notes}")
    if quant is not None and tagged is not None and parse_quant(quant) != parse_quant(tagged):
        raise RooflineError(f"--model {name!r} names the format {tagged} and --quant says {quant}; give one")
    quant = quant if quant is not None else tagged
    check_quant_components(card, quant)
    return card, quant


def runtime_card(card, choice: RuntimeChoice | None):
    """`card` as the runtime runs it (`as_run`), saying so where it keeps sliding windows whole."""
    run = as_run(card, choice)
    if run is not card:
        warn_on_success(f"{choice.described} keeps {card.name}'s sliding windows whole (no windowed KV cache for "
                        f"the {card.family} family there): those layers cache and attend over the whole context, as "
                        "full attention")
    return run


def capacity_label(capacity_bytes: float, binary: bool) -> str:
    """Memory capacity as its datasheet states it: '128 GiB (137.4 GB)' for a card written in GiB, else '80.0 GB'."""
    if binary:
        return f"{capacity_bytes / 2**30:,.0f} GiB ({capacity_bytes / 1e9:,.1f} GB)"
    return f"{capacity_bytes / 1e9:,.1f} GB"


def reported_label(hw) -> str:
    """The memory a device reports, which a preallocating runtime takes its share of: the capacity, less the reserve
    where the card has one ('22.5 GiB, what the device reports of its 24 GiB')."""
    m = hw.memory
    if not m.reserved_bytes:
        return capacity_label(m.capacity_bytes, m.capacity_binary)
    unit, scale = ("GiB", 2**30) if m.capacity_binary else ("GB", 1e9)
    whole = m.capacity_bytes / scale
    return f"{m.usable_bytes / scale:,.1f} {unit}, what the device reports of its {whole:,.0f} {unit}"


def fmt_margin(n_bytes: float) -> str:
    """A memory margin (spare or short, sign dropped) in a unit that never rounds it to zero: '1.20 GB', '85 kB'."""
    gap = abs(n_bytes)
    for unit, scale, least in (("GB", 1e9, 1e7), ("MB", 1e6, 1e6), ("kB", 1e3, 1e3)):
        if gap >= least:
            return f"{gap / scale:,.{2 if unit == 'GB' else 0}f} {unit}"
    return f"{gap:,.0f} bytes"


def gb(n: float | None, digits: int = 1) -> str | None:
    return None if n is None else f"{n / 1e9:,.{digits}f}"


def tflops(n: float | None) -> str | None:
    return None if n is None else f"{n / 1e12:,.1f}"


def billions(n: float | None) -> str | None:
    return None if n is None else f"{n / 1e9:,.2f}B"


def name_list(option: str, text: str) -> list[str]:
    """A comma-separated option's names, stripped, in order, each once; an empty entry ('a,,b', 'a,') is refused."""
    names = comma_entries(option, text)
    if not names:
        raise RooflineError(f"{option}: empty; give at least one, comma-separated")
    return list(dict.fromkeys(names))


def unique_cards(cards: list) -> list:
    """Cards in order, each once (two aliases of one card name it twice: 'h100-sxm,h100')."""
    return list({c.name: c for c in cards}.values())


def int_list(option: str, text: str) -> list[int]:
    try:
        values = [ascii_int(v) for v in name_list(option, text)]
    except ValueError:
        raise RooflineError(f"{option}: {text!r} is not a comma-separated list of integers like 1,4,8,16") from None
    if not values or min(values) <= 0:
        raise RooflineError(f"{option}: values must be positive integers, got {text!r}")
    if max(values) > MAX_COUNT:
        raise RooflineError(f"{option}: values must be at most {MAX_COUNT:,}, got {max(values):,}")
    return sorted(set(values))


DEFAULT_PROMPT, DEFAULT_OUTPUT = "500", "200"  # a chat-like request, as capacity's defaults
# serve's and plot serve's: a trace gives its own lengths, only an open loop has gaps to shape (None: not given)
LENGTHS_HELP = "Tokens: N, uniform:LOW,HIGH, normal:MEAN,SD or lognormal:MEAN,SD."
LenOpt = Annotated[str, typer.Option(help=LENGTHS_HELP)]
GivenLenOpt = Annotated[Optional[str], typer.Option(help=f"{LENGTHS_HELP}  [default: {DEFAULT_PROMPT} (--prompt), "
                                                    f"{DEFAULT_OUTPUT} (--output); a trace gives its own]")]
BurstOpt = Annotated[Optional[float], typer.Option(help="Open loop: gamma shape of the gaps (1 = Poisson, <1 bursty). "
                                                   " [default: 1]")]
