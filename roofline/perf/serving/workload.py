"""What arrives: requests (arrival, prompt and output tokens, an optional shared prefix), from a closed loop of
clients, an open loop at a rate (Poisson or gamma-bursty), or a trace file read line by line."""

from __future__ import annotations

import csv
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np

from roofline.cards.files import DuplicateKeyError, unique_keys
from roofline.errors import RooflineError


@dataclass(frozen=True, slots=True)
class Request:
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    prefix_id: str | None = None  # requests with the same id share their first `prefix_tokens` tokens
    prefix_tokens: int = 0
    where: str | None = field(default=None, compare=False)  # a trace row's file and line, for the errors that name it


# --- lengths ------------------------------------------------------------------------------------------------------

DISTRIBUTIONS = ("fixed", "uniform", "normal", "lognormal")
MAX_LENGTH_TOKENS = 1e9  # a length parameter beyond this is a typo: 100x the longest context any model offers (10M)


@dataclass(frozen=True)
class Lengths:
    """Token counts: fixed N; uniform between low and high; normal or lognormal with a mean and a spread (the
    standard deviation, in tokens). Draws are rounded and kept >= 1."""

    kind: str
    mean: float
    spread: float = 0.0  # uniform: the high end; normal/lognormal: standard deviation

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "fixed":
            x = np.full(n, self.mean)
        elif self.kind == "uniform":
            x = rng.uniform(self.mean, self.spread + 1, n)  # [low, high] inclusive after floor
            x = np.floor(x)
        elif self.kind == "normal":
            x = rng.normal(self.mean, self.spread, n)
        else:  # lognormal with the given mean and standard deviation of the tokens themselves
            sigma2 = math.log(1 + (self.spread / self.mean) ** 2)
            x = rng.lognormal(math.log(self.mean) - sigma2 / 2, math.sqrt(sigma2), n)
        return np.maximum(np.rint(x), 1).astype(int)

    @property
    def upper(self) -> float:
        """A length few draws exceed (for checks against the context): the high end, or mean + 4 spreads."""
        return self.spread if self.kind == "uniform" else self.mean + 4 * self.spread


def parse_lengths(option: str, text: str) -> Lengths:
    """'512', 'uniform:128,1024', 'normal:512,64', 'lognormal:512,256' (k/K suffixes allowed)."""
    from roofline.cards.units import QuantityError, parse_quantity

    kind, _, rest = str(text).partition(":") if ":" in str(text) else ("fixed", "", str(text))
    try:
        values = [float(parse_quantity(v.strip(), "tokens")) for v in rest.split(",") if v.strip()]
    except QuantityError:
        values = []
    expected = 1 if kind == "fixed" else 2
    # a spread of 0 is a fixed length (normal:500,0 = 500); every other count must be positive
    if kind not in DISTRIBUTIONS or len(values) != expected or values[0] < 1 or min(values) < 0 \
            or (kind == "uniform" and values[1] < 1):
        raise RooflineError(f"{option} {text!r}: use N, uniform:LOW,HIGH, normal:MEAN,SD or lognormal:MEAN,SD "
                            f"with token counts of at least 1 (an SD may be 0)")
    if kind == "fixed" and not values[0].is_integer():
        raise RooflineError(f"{option} {text!r}: a length is a whole number of tokens; use "
                            f"{max(1, round(values[0])):,}")
    if max(values) > MAX_LENGTH_TOKENS:
        raise RooflineError(f"{option} {text!r}: {max(values):,.0f} tokens is beyond any model's context; give "
                            f"token counts up to {MAX_LENGTH_TOKENS:,.0f}")
    if kind == "uniform" and values[1] < values[0]:
        raise RooflineError(f"{option} {text!r}: uniform needs LOW <= HIGH")
    return Lengths(kind, values[0], values[1] if expected == 2 else 0.0)


# --- arrivals -----------------------------------------------------------------------------------------------------

# one request in 11.6 days: slower, an arrival time's float (1e16 s at 1e-14/s) has no room for a millisecond's latency
MIN_RATE_PER_S = 1e-6
# gamma shapes of the gaps: below 1e-3 nearly every gap underflows to 0 (one burst), above 1e3 they are all equal
BURSTINESS_RANGE = (1e-3, 1e3)


def open_loop(rate_per_s: float, n: int, prompt: Lengths, output: Lengths, seed: int = 0,
              burstiness: float = 1.0) -> Iterator[Request]:
    """`n` requests at `rate_per_s` on average: gamma inter-arrival gaps of shape `burstiness` (1 = Poisson;
    < 1 burstier, > 1 more even; as `vllm bench serve --burstiness`), scale 1 / (rate x burstiness)."""
    if not MIN_RATE_PER_S <= rate_per_s < math.inf:
        raise RooflineError(f"--rate: must be a finite number of at least {MIN_RATE_PER_S:g} requests/s, got "
                            f"{rate_per_s}")
    if not BURSTINESS_RANGE[0] <= burstiness <= BURSTINESS_RANGE[1]:
        raise RooflineError(f"--burstiness: must be between {BURSTINESS_RANGE[0]:g} and {BURSTINESS_RANGE[1]:g} "
                            f"(1 = Poisson), got {burstiness}")
    rng = np.random.default_rng(seed)
    gaps = rng.gamma(burstiness, 1.0 / (rate_per_s * burstiness), n)
    arrivals = np.cumsum(gaps)
    prompts, outputs = prompt.draw(rng, n), output.draw(rng, n)
    for t, p, o in zip(arrivals, prompts, outputs):
        yield Request(float(t), int(p), int(o))


def closed_loop_requests(n: int, prompt: Lengths, output: Lengths, seed: int = 0) -> Iterator[Request]:
    """The request sizes of a closed loop; their arrival is set by the simulator when a client is free."""
    rng = np.random.default_rng(seed)
    for p, o in zip(prompt.draw(rng, n), output.draw(rng, n)):
        yield Request(0.0, int(p), int(o))


# --- traces -------------------------------------------------------------------------------------------------------

TRACE_FIELDS = ("arrival_s", "prompt_tokens", "output_tokens")
# a trace's arrivals are seconds from its start; 31.7 years on, a step's milliseconds fall below the float's resolution
# (a Unix time in ns read as seconds made every latency 0 us)
MAX_ARRIVAL_S = 1e9
PREFIX_FIELDS = ("prefix_id", "prefix_tokens")  # optional: requests with one id share their first prefix_tokens
MAX_LINE_CHARS = 65_536  # a row is five short fields; a prefix_id of a few hundred characters still fits
# (leading bytes, format, the tool that undoes it): compressed traces are refused with the fix, not read as text
COMPRESSED = ((b"\x1f\x8b", "gzip", "gunzip"), (b"BZh", "bzip2", "bunzip2"), (b"\xfd7zXZ", "xz", "unxz"),
              (b"\x28\xb5\x2f\xfd", "zstd", "unzstd"), (b"PK\x03\x04", "zip", "unzip"))


# a number as a CSV cell writes it: ASCII digits, one point, an exponent (Python's float() also takes '1_000',
# Arabic-Indic and full-width digits, which no trace tool writes)
PLAIN_NUMBER = re.compile(r"\s*[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?\s*")


def _number(value) -> float:
    """A trace cell or JSON value as a float: a JSON number, or text PLAIN_NUMBER takes."""
    if isinstance(value, str) and not PLAIN_NUMBER.fullmatch(value):
        raise ValueError(f"{value[:40]!r} is not a plain number")
    return float(value)


def _count(value) -> int:
    """A token count written as 512 or 512.0; 10.7 tokens is an error, not 10."""
    number = _number(value)
    if not number.is_integer():
        raise ValueError(f"{value!r} is not a whole number of tokens")
    return int(number)


def _row(raw: dict, where: str) -> Request:
    unknown = [k for k in raw if k not in (*TRACE_FIELDS, *PREFIX_FIELDS)]
    if unknown:
        raise RooflineError(f"{where}: unknown field {str(unknown[0])[:40]!r} (a trace row has "
                            f"{', '.join(TRACE_FIELDS + PREFIX_FIELDS)})")
    if raw.get("prefix_tokens") not in (None, "", 0, "0") and raw.get("prefix_id") in (None, ""):
        raise RooflineError(f"{where}: prefix_tokens without a prefix_id; name the prefix the requests share")
    try:
        arrival, prompt, output = (raw[k] for k in TRACE_FIELDS)
    except KeyError as err:
        raise RooflineError(f"{where}: missing {err.args[0]!r} (each row needs {', '.join(TRACE_FIELDS)})") from None
    try:
        if any(isinstance(v, bool) for v in (arrival, prompt, output, raw.get("prefix_tokens"))):
            raise TypeError("a JSON true/false is not a number")
        arrival = _number(arrival)
        prompt, output, prefix_tokens = (_count(v) for v in (prompt, output, raw.get("prefix_tokens") or 0))
    except (TypeError, ValueError, OverflowError):
        raise RooflineError(f"{where}: arrival_s must be a finite number and prompt_tokens, output_tokens and "
                            "prefix_tokens whole numbers") from None
    if not math.isfinite(arrival):
        raise RooflineError(f"{where}: arrival_s {arrival} is not a finite number of seconds")
    if arrival < 0 or prompt <= 0 or output <= 0 or not 0 <= prefix_tokens <= prompt:
        raise RooflineError(f"{where}: needs arrival_s >= 0, prompt_tokens > 0, output_tokens > 0 and "
                            f"0 <= prefix_tokens <= prompt_tokens")
    if arrival > MAX_ARRIVAL_S:
        raise RooflineError(f"{where}: arrival_s {arrival:.4g} is beyond {MAX_ARRIVAL_S:g} s; it is seconds from the "
                            "trace's start, not a timestamp (subtract the first arrival; ns or ms: divide)")
    prefix = raw.get("prefix_id")
    if prefix not in (None, "") and (isinstance(prefix, bool) or not isinstance(prefix, (str, int))):
        raise RooflineError(f"{where}: prefix_id must be a name or a number, got {str(prefix)[:40]!r}")
    if prefix not in (None, "") and not prefix_tokens:
        raise RooflineError(f"{where}: prefix_id without prefix_tokens; give how many leading tokens the requests "
                            f"that name it share")
    return Request(arrival, prompt, output, None if prefix in (None, "") else str(prefix), prefix_tokens, where)


def read_trace(path: str | Path) -> Iterator[Request]:
    """Stream a CSV (header row) or JSONL trace one line at a time: arrival_s, prompt_tokens, output_tokens and
    optional prefix_id, prefix_tokens. Arrivals must not decrease. Errors name the line."""
    path = Path(path)
    if not path.is_file():
        why = "a directory" if path.is_dir() else "not a regular file" if path.exists() else "no such file"
        raise RooflineError(f"--trace {path}: {why}; give a CSV or JSONL trace file")
    with path.open("rb") as raw:
        magic = raw.read(4)
    for head, what, fix in COMPRESSED:
        if magic.startswith(head):
            raise RooflineError(f"--trace {path}: {what}-compressed; {fix} it first (a trace is CSV or JSONL text)")
    jsonl = path.suffix.lower() in (".jsonl", ".json", ".ndjson")
    last, count, line = 0.0, 0, 1
    with path.open(newline="", encoding="utf-8-sig") as f:
        rows = _jsonl_rows(_lines(f, path), path) if jsonl else _csv_rows(_lines(f, path), path)
        try:
            for line, raw in rows:
                req = _row(raw, f"--trace {path}, line {line}")
                if req.arrival_s < last:
                    raise RooflineError(f"--trace {path}, line {line}: arrival_s {req.arrival_s} is before the "
                                        f"previous row's {last}; sort the trace by arrival")
                last, count = req.arrival_s, count + 1
                yield req
        except UnicodeDecodeError:
            raise RooflineError(f"--trace {path}: not UTF-8 text; save the trace as UTF-8") from None
        except csv.Error as err:
            raise RooflineError(f"--trace {path}, after line {line}: not a readable CSV ({err}); write one request "
                                "per line") from None
    if count == 0:
        raise RooflineError(f"--trace {path}: no requests in the file")


def _lines(f, path: Path) -> Iterator[str]:
    """The file's lines, each read up to MAX_LINE_CHARS (a trace row is a few numbers: a longer line is not one,
    and reading it whole would hold it all in memory)."""
    line = 0
    while text := f.readline(MAX_LINE_CHARS + 1):
        line += 1
        if len(text) > MAX_LINE_CHARS:
            raise RooflineError(f"--trace {path}, line {line}: longer than {MAX_LINE_CHARS:,} characters; a trace row "
                                f"is {', '.join(TRACE_FIELDS)}[, {', '.join(PREFIX_FIELDS)}]")
        yield text


def _jsonl_rows(f, path: Path) -> Iterator[tuple[int, dict]]:
    for line, text in enumerate(f, 1):
        if not text.strip():
            continue
        try:
            raw = json.loads(text, object_pairs_hook=unique_keys)
        except json.JSONDecodeError as err:
            raise RooflineError(f"--trace {path}, line {line}: not JSON ({err.msg})") from None
        except DuplicateKeyError as err:
            raise RooflineError(f"--trace {path}, line {line}: {err}") from None
        except (ValueError, RecursionError):  # a number of thousands of digits, arrays nested thousands deep
            raise RooflineError(f"--trace {path}, line {line}: not a JSON object of numbers; write "
                                f"{{\"arrival_s\": 0.5, \"prompt_tokens\": 512, \"output_tokens\": 128}}") from None
        if not isinstance(raw, dict):
            raise RooflineError(f"--trace {path}, line {line}: each line must be a JSON object")
        yield line, raw


def _csv_rows(f, path: Path) -> Iterator[tuple[int, dict]]:
    reader = csv.reader(f)
    header = next(reader, None)
    if header is None:
        return
    header = [h.strip() for h in header]
    missing = [k for k in TRACE_FIELDS if k not in header]
    if len(set(header)) < len(header):
        _bad_header(path, "names a column twice")
    if len(header) == 1 and any(sep in header[0] for sep in "\t;| "):
        _bad_header(path, "is one column: separate the columns with commas")
    unknown = [h for h in header if h not in (*TRACE_FIELDS, *PREFIX_FIELDS)]
    if unknown:
        _bad_header(path, f"has a column roofline does not read, {unknown[0][:40]!r}")
    rows = 0
    for row in reader:
        line = reader.line_num
        if not row or not any(c.strip() for c in row):
            continue
        if len(row) != len(header):
            raise RooflineError(f"--trace {path}, line {line}: {len(row)} field{'s' * (len(row) != 1)}, the header has "
                                f"{len(header)}; separate the columns with commas")
        rows += 1
        yield line, dict(zip(header, (c.strip() for c in row)))
    if missing and not rows:  # with rows, the first names its line and the missing field
        _bad_header(path, f"lacks {', '.join(missing)}")


def _bad_header(path: Path, why: str):
    raise RooflineError(f"--trace {path}, line 1: the header {why}; a CSV trace starts with the header "
                        f"{','.join(TRACE_FIELDS)}[,{','.join(PREFIX_FIELDS)}] (a JSONL trace: name it .jsonl)")
