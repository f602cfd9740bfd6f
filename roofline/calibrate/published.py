"""Predict the rows of a published-measurements CSV (the format of benchmarks/data/published_train.csv).

Each row names its cards (`hw_card`, `model_card`, `gpus`) and one metric. The mapping from a benchmark's
conditions to a roofline step is stated per metric in `predict_row`; rows roofline cannot model yet are skipped
with the reason.
"""

from __future__ import annotations

import csv
import io
import itertools
import re
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from roofline.calibrate.engine_text import engine_runtime, row_date
from roofline.calibrate.fit import error_summary
from roofline.calibrate.row_checks import LATENCY_MS, LATENCY_S, row_depth, row_problem, split_normalisation
from roofline.calibrate.row_conditions import max_load_batch, row_flags, under_load
from roofline.cards.files import MAX_CSV_BYTES, read_text
from roofline.cards.formats import kv_format, weight_format
from roofline.cards.runtime import RuntimeChoice
from roofline.cards.runtime_windows import as_run
from roofline.cards.store import CardStore
from roofline.errors import RooflineError, UnknownNameError
from roofline.perf.efficiency import Efficiency, ceiling_for, expected_efficiency
from roofline.perf.ops import Step
from roofline.perf.parallel import check_parallel
from roofline.perf.request import (
    decode_contexts,
    decode_step_time,
    request_metrics,
    timed_step,
)
from roofline.perf.workload import Workload
from roofline.sizing.memory import Deployment, max_concurrency, runtime_memory_view

# Benchmarks that do not state their prompt: Ollama's published Spark numbers (rows H139-H150).
UNSTATED_PROMPT_TOKENS = 512
UNSTATED_OUTPUT_TOKENS = 128
METRICS = ("decode_tok_s", "prefill_tok_s", "agg_decode_tok_s", "agg_output_tok_s", "ttft_ms", "itl_ms", "tpot_ms",
           "batch_latency_s")


@dataclass
class RowPrediction:
    row_id: str
    metric: str
    measured: float
    predicted: float | None
    skipped: str | None = None
    hw: str = ""
    model: str = ""
    engine: str = ""
    ceiling: float | None = None  # the metric at datasheet peaks with no overhead (`predict_row(..., ceiling=True)`)
    runtime: str = "generic"  # the runtime profile the prediction assumed
    source: str = ""  # the row's source document (see `source_document`)

    @property
    def error_pct(self) -> float | None:
        return None if self.predicted is None else 100.0 * (self.predicted - self.measured) / self.measured

    @property
    def beyond_ceiling(self) -> bool:
        """Measured faster than the hardware card's peaks allow under the row's stated conditions: a throughput
        above its ceiling, a latency below it. Such a row ran something else (a cached or shorter prompt, other
        routing, another clock) or the card's peaks are wrong; no efficiency can fit it."""
        if self.ceiling is None or self.predicted is None:
            return False
        latency = split_normalisation(self.metric)[0] in {**LATENCY_MS, **LATENCY_S}
        return self.measured < self.ceiling if latency else self.measured > self.ceiling


def _is_gguf(row: dict) -> bool:
    engine = row.get("engine", "").lower()
    return "llama.cpp" in engine or "ollama" in engine


def quant_text(text: str) -> str:
    """The format a free-text weight_quant names: "INT4 AWQ (w4a16, group 128)" -> "int4 awq", "MLX 4-bit" kept."""
    return re.split(r"\s*\(", text.strip().lower(), maxsplit=1)[0].removesuffix(" awq").replace("int4 awq", "int4")


def row_quant(row: dict, card) -> str | None:
    """The CSV's weight_quant as a roofline --quant (a `component=format,...` value passes through as written).
    ggml-org's MXFP4 GGUFs keep only the experts in MXFP4 and
    store the rest in Q8_0 (gpt-oss-20b: 11.27 GiB file, row H006 = 19.1B x 4.25 bit + 1.8B x 8.5 bit).
    A row names the card's native (mixed) formats by their most compressed one ("MXFP4" for gpt-oss, MXFP4
    experts and BF16 elsewhere); a wider one the card also holds names a checkpoint with every weight in it
    (gpt-oss "BF16": lmsys/gpt-oss-120b-bf16)."""
    if "=" in row["weight_quant"]:  # per-component formats as --quant takes them, where the source states them
        return row["weight_quant"].strip().lower()
    q = quant_text(row["weight_quant"])
    if q == "mxfp4" and _is_gguf(row):
        return "experts=mxfp4,default=q8_0"
    if q == min(card.weights.values(), key=lambda w: weight_format(w).bits_per_value).lower():
        return None  # the card's native formats
    return weight_format(q).name


UNSTATED_KV = ("auto", "not", "default", "unknown", "n/a", "-")  # the engine's default: the model dtype


def row_kv(row: dict) -> str:
    """KV format from the kv_dtype text's first word ('f16 (llama.cpp default; not shown)' -> fp16, 'q8_0 (...)' ->
    q8_0). Unstated ('auto', 'not stated', empty): NVIDIA's ModelOpt FP8/NVFP4 checkpoints run TensorRT-LLM with an FP8
    KV cache (kv_cache_quant_algo FP8); otherwise bf16, the model dtype. A word that names no KV format is an error."""
    text = row.get("kv_dtype", "").strip().lower()
    word = re.split(r"[\s(;,]", text, maxsplit=1)[0]
    if word and word not in UNSTATED_KV:
        try:
            return kv_format(word).name
        except UnknownNameError:
            raise RooflineError(f"kv_dtype {row.get('kv_dtype', '')!r} names no KV-cache format; start it with one "
                                "of fp16, bf16, fp8, q8_0, q4_0, or write 'not stated'") from None
    if "tensorrt" in row.get("engine", "").lower() and row["weight_quant"].upper() in ("FP8", "NVFP4"):
        return "fp8"
    return "bf16"


def _int(text: str, default: int) -> int:
    return int(text) if text and text.strip().isdecimal() else default


def predict_row(row: dict, store: CardStore, eff: Efficiency | None = None, ceiling: bool = False,
                runtime: RuntimeChoice | None = None) -> RowPrediction:
    """Predict one CSV row's metric; `eff` overrides the card's expected efficiency (used when fitting), `runtime`
    predicts under that runtime profile (see `runtime_of`); `ceiling` also predicts it at datasheet peaks. A row
    roofline cannot read (unknown card or format, bad number) comes back with `skipped` saying why."""
    try:
        out = RowPrediction(row["id"], row["metric"], float(row["value"]), None,
                            hw=row.get("hw_card") or row.get("hardware", ""),
                            model=row.get("model_card") or row.get("model", ""), engine=row.get("engine", ""),
                            source=source_document(row.get("source", "")))
    except (KeyError, ValueError, TypeError) as err:
        return RowPrediction(row.get("id") or "?", row.get("metric") or "?", float("nan"), None,
                             skipped=f"unreadable row: {row_problem(row) or err}")
    problem = row_problem(row) or under_load(row)
    if problem:
        out.skipped = problem
        return out
    try:
        card, hw, gpus = cards_of(row, store)
        out.model, out.hw, card = card.name, hw.name, as_run(card, runtime)
        if eff is None:
            eff = row_flags(row, expected_efficiency(hw, runtime, card.architecture.max_context))
        out.runtime = eff.runtime
        load = MaxLoad(max_load_batch(row, runtime), *max_load_memory(hw, runtime))
        out.predicted = _predict(row, card, hw, gpus, eff, load)
        if ceiling and out.predicted is not None:
            out.ceiling = _predict(row, card, hw, gpus, ceiling_for(eff), load)
    except (RooflineError, ValueError, ZeroDivisionError) as err:
        out.skipped = " ".join(str(err).split())[:300]  # one line (a pydantic error spans several)
    if out.predicted is None and not out.skipped:
        out.skipped = f"metric '{out.metric}' is not predicted"
    return out


def _predict(row: dict, card, hw, gpus: int, eff: Efficiency, load: MaxLoad) -> float | None:
    metric, per = split_normalisation(row["metric"])
    value = _predict_metric(metric, row, card, hw, gpus, eff, load)
    if value is None or not per:
        return value
    # `*_per_gpu` / `*_per_node` (PUBLISHED.md): the sum over the row's GPUs, per GPU or per node of this hardware
    return value / gpus * (hw.interconnect.gpus_per_node if per == "per_node" else 1)


def cards_of(row: dict, store: CardStore):
    """(model card, hardware card, GPUs) of a row: its `model_card`, `hw_card` and `gpus` columns, or where a CSV
    lacks them, the cards its `model` and `hardware` texts name and the "Nx " GPU count there."""
    card = store.model(row["model_card"]) if row.get("model_card", "").strip() else store.match("models", row["model"])
    hw = store.hardware(row["hw_card"]) if row.get("hw_card", "").strip() else store.match("hardware", row["hardware"])
    count = re.match(r"\s*(\d+)\s*x\s", row.get("hardware", ""))
    return card, hw, _int(row.get("gpus", ""), int(count.group(1)) if count else 1)


def _predict_metric(metric: str, row: dict, card, hw, gpus: int, eff: Efficiency, load: MaxLoad) -> float | None:
    tp = _int(row.get("tp", ""), 1)
    # gpus > tp: llama.cpp's default layer split — each token passes every GPU in turn (pipeline stages)
    pp = max(gpus // tp, 1)
    try:  # a layout no engine runs: skipped with the reason, as `predict` refuses it
        check_parallel(card, hw, tp, pp)
    except RooflineError as err:  # its text names predict's options: say which columns set them
        raise RooflineError(f"gpus {gpus}, tp {tp} (tp {tp} x pp {pp}): {err}") from None
    quant, kv = row_quant(row, card), row_kv(row)
    isl, osl = _int(row["isl"], 0), _int(row["osl"], 0)
    batch = _int(row["batch"], 0)
    if metric == "prefill_tok_s":
        n = isl or UNSTATED_PROMPT_TOKENS
        wl = Workload(prompt_tokens=n, quant=quant, kv_quant=kv, tp=tp, pp=pp)
        t = timed_step(card, hw, Step("prefill", n, max(batch, 1), row_depth(row)), wl, eff).total_s
        return float(max(batch, 1) * n / t)
    if metric in ("decode_tok_s", "agg_decode_tok_s"):
        wl = Workload(prompt_tokens=max(isl, 1), output_tokens=osl or UNSTATED_OUTPUT_TOKENS, batch=max(batch, 1),
                      quant=quant, kv_quant=kv, tp=tp, pp=pp)
        start = isl if row["isl"].strip() else UNSTATED_PROMPT_TOKENS
        dec = decode_step_time(card, hw, wl, eff, wl.batch, decode_contexts(start, wl.output_tokens))
        itl = float(np.mean(dec.total_s))
        return (wl.batch if metric == "agg_decode_tok_s" else 1.0) / itl
    if metric == "agg_output_tok_s":
        if not (isl and osl):  # a batch's throughput turns on its lengths: no default stands in for them
            raise RooflineError("agg_output_tok_s needs the row's isl and osl (its throughput depends on both)")
        replicas = max(gpus // (tp * pp), 1)
        wl = Workload(prompt_tokens=isl, output_tokens=osl, batch=max(batch, 1), quant=quant, kv_quant=kv, tp=tp, pp=pp)
        if not row["batch"].strip().isdecimal():  # `max`: the scheduler's max-load batch; a stated batch is kept
            wl = _at_max_load(card, wl, load)
        values, _, _ = request_metrics(card, hw, wl, eff)
        return float(wl.batch * wl.output_tokens / values["e2e_s"]) * replicas
    if metric in LATENCY_S:  # one batch of `batch` requests, prompt -> output, start to finish
        wl = Workload(prompt_tokens=isl or UNSTATED_PROMPT_TOKENS, output_tokens=osl or UNSTATED_OUTPUT_TOKENS,
                      batch=max(batch, 1), quant=quant, kv_quant=kv, tp=tp, pp=pp)
        values, _, _ = request_metrics(card, hw, wl, eff)
        return float(values[LATENCY_S[metric]])
    if metric in LATENCY_MS:
        # `batch` requests arriving together (`max`: the max-load batch): TTFT = their prefill (which samples the
        # first token), ITL = the mean decode step over the output
        wl = Workload(prompt_tokens=isl or UNSTATED_PROMPT_TOKENS, output_tokens=max(osl or UNSTATED_OUTPUT_TOKENS, 2),
                      batch=max(batch, 1), quant=quant, kv_quant=kv, tp=tp, pp=pp)
        if row["batch"].strip().lower() == "max":
            wl = _at_max_load(card, wl, load)
        values, _, _ = request_metrics(card, hw, wl, eff)
        return float(values[LATENCY_MS[metric]]) * 1e3
    return None


@dataclass(frozen=True)
class MaxLoad:
    """What bounds an offline max-load row's batch: the scheduler's cap (or the requests the run sent), and the
    memory as the row's runtime sizes it (`max_load_memory`)."""

    cap: int
    hw: object  # HardwareCard as the runtime sees it (a preallocating runtime's share of the device)
    dep: Deployment  # its KV block and step tokens, and the share of the rest its pool takes


def max_load_memory(hw, runtime: RuntimeChoice | None) -> tuple:
    """(hardware card, Deployment) under the runtime's memory policy, as `fits --runtime` sizes it (generic: all of
    the memory, 16-token blocks, a 2,048-token step)."""
    if runtime is None:
        return hw, Deployment()
    policy = runtime.profile.serving_policy(runtime.version or runtime.range_start)
    if policy.get("memory_policy") == "per_slot":  # slots of a context no max-load row states: the whole memory
        return hw, Deployment()
    view, _, blocks, step, summary = runtime_memory_view(policy, hw, None, None, None)
    return view, Deployment(block_tokens=blocks, max_step_tokens=step, kv_share=summary["kv_share"],
                            sampled_seqs=summary["sampled_seqs"])


def _at_max_load(card, wl: Workload, load: MaxLoad) -> Workload:
    """An offline max-load run of one replica: the largest batch whose KV fits the memory as its runtime sizes it,
    capped at the scheduler's limit (or the requests the run sent)."""
    limit = max_concurrency(card, load.hw, wl.quant, wl.kv_quant, wl.prompt_tokens + wl.output_tokens,
                            replace(load.dep, tp=wl.tp, pp=wl.pp))
    return wl.model_copy(update={"batch": max(min(limit, load.cap), 1)})


def runtime_of(row: dict, store: CardStore) -> RuntimeChoice | None:
    """The runtime profile and version a row ran: its engine text, else (no version stated) the version in use at
    the row's date. None: a runtime with no profile (predicted generic)."""
    name, version = engine_runtime(row.get("engine", ""))
    if name is None:
        return None
    try:
        return store.runtime(f"{name}@{version}" if version else name, row_date(row))
    except RooflineError:
        return store.runtime(name, row_date(row))  # a version older than every profiled one: the oldest range


def source_document(source: str) -> str:
    """The document a row's `source` names, without the table or comment within it: "github.com/NVIDIA/TensorRT-LLM
    docs/source/performance/perf-overview.md @258c7540 (v0.17 tables), 'Throughput ...'" -> "github.com/NVIDIA/
    TensorRT-LLM docs/source/performance/perf-overview.md @258c7540"."""
    return re.split(r"\s+\(|\s+'|,", source.strip(), maxsplit=1)[0].strip()


# published tables hold hundreds of rows (this repository's ~950); a file of more is not one table
MAX_PUBLISHED_ROWS = 20_000


def read_rows(path: Path) -> list[dict]:
    """The rows of a CSV file read through the bounded reader (regular file, size cap, UTF-8)."""
    text = read_text(Path(path), MAX_CSV_BYTES, "CSV file")
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        twice = sorted({c for c in reader.fieldnames or [] if (reader.fieldnames or []).count(c) > 1})
        if twice:
            raise RooflineError(f"--published {path}: the header names column {twice[0]!r} twice; keep one")
        rows = list(itertools.islice(reader, MAX_PUBLISHED_ROWS + 1))
    except csv.Error as err:
        raise RooflineError(f"--published {path}: not a readable CSV ({err})") from None
    if len(rows) > MAX_PUBLISHED_ROWS:
        raise RooflineError(f"--published {path}: more than {MAX_PUBLISHED_ROWS:,} rows; each is predicted (~2 ms): "
                            "split the file")
    return rows


def csv_header(path: Path) -> list[str]:
    """The column names of a CSV file's first line (read through the bounded reader)."""
    text = read_text(Path(path), MAX_CSV_BYTES, "CSV file")
    try:
        return next(csv.reader(io.StringIO(text, newline="")), [])
    except csv.Error:
        return []


def engine_family(engine: str) -> str:
    """The runtime a row's `engine` text names, without build and flags: "llama.cpp CUDA build 6918 (...)" ->
    "llama.cpp", "llama.cpp Metal (May 2024 ...)" -> "llama.cpp Metal", "TensorRT-LLM trtllm-bench ..." ->
    "TensorRT-LLM"."""
    words = re.split(r"[\s;(,]+", engine.strip())
    if not words or not words[0]:
        return "?"
    return f"{words[0]} Metal" if len(words) > 1 and words[1].lower() == "metal" else words[0]


def _metric_order(metric: str) -> tuple:
    base, per = split_normalisation(metric)
    return (METRICS.index(base) if base in METRICS else len(METRICS), base, per)


def breakdown(preds: list[RowPrediction]) -> list[dict]:
    """Where the error comes from: per (metric, engine family, hardware card), n, median/p90 |err| and bias,
    largest median error first."""
    groups: dict[tuple, list[RowPrediction]] = {}
    for p in preds:
        if p.predicted is not None:
            groups.setdefault((p.metric, engine_family(p.engine), p.hw), []).append(p)
    rows = [{"metric": m, "engine": e, "hardware": h,
             **error_summary([p.predicted for p in ps], [p.measured for p in ps])} for (m, e, h), ps in groups.items()]
    return sorted(rows, key=lambda r: (_metric_order(r["metric"]), -r["median_ape_pct"]))


def summarize(preds: list[RowPrediction]) -> dict:
    """Per metric present (known metrics first): n, median and p90 absolute % error, and bias (median signed %)."""
    done = [p for p in preds if p.predicted is not None]
    return {m: error_summary([p.predicted for p in done if p.metric == m], [p.measured for p in done if p.metric == m])
            for m in sorted({p.metric for p in done}, key=_metric_order)}


NEEDED_COLUMNS = {"id", "metric", "value", "isl", "osl", "batch", "weight_quant"}


def read_published(path: Path) -> list[dict]:
    """The rows of a published-measurements CSV, refused in one line when the file or its columns are missing."""
    if not path.exists():
        raise RooflineError(f"--published {path}: no such file")
    rows = read_rows(path)
    have = set(rows[0]) if rows else set(csv_header(path))
    if have and not rows and NEEDED_COLUMNS <= have:
        raise RooflineError(f"--published {path}: a header and no rows below it; add one measurement per row")
    if not rows or not NEEDED_COLUMNS <= have or not ({"hw_card", "hardware"} & have and {"model_card", "model"} & have):
        raise RooflineError(f"--published {path}: needs the columns of published_train.csv "
                            f"({', '.join(sorted(NEEDED_COLUMNS))}, hw_card or hardware, model_card or model)")
    seen: set[str] = set()
    twice = next((r["id"] for r in rows if r["id"] in seen or seen.add(r["id"])), None)
    if twice is not None:
        raise RooflineError(f"--published {path}: id {twice[:40]!r} names two rows; give each row its own id")
    return rows


def validate_published(store: CardStore, path: Path) -> dict:
    """Predict every row of a published-measurements CSV (expected and at the datasheet ceiling): the error per
    metric, with and without the rows measured beyond the ceiling, per engine x hardware, and the rows skipped."""
    rows = read_published(path)
    preds = [predict_row(r, store, ceiling=True) for r in rows]
    return {"file": str(path), "metrics": summarize(preds),
            "metrics_within_ceiling": summarize([p for p in preds if not p.beyond_ceiling]),
            "by_engine_hardware": breakdown(preds),
            "rows": [{"id": p.row_id, "hardware": p.hw, "model": p.model, "metric": p.metric, "measured": p.measured,
                      "predicted": p.predicted, "error_pct": p.error_pct, "ceiling": p.ceiling,
                      "beyond_ceiling": p.beyond_ceiling} for p in preds if p.predicted is not None],
            "skipped": [{"id": p.row_id, "why": p.skipped} for p in preds if p.predicted is None]}
