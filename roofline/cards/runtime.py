"""Runtime profile schema (runtimes/*.yaml): what fraction of a hardware card's peaks a serving runtime reaches,
what it adds (launch and step overheads, its prefill micro-batch), which formats it runs, its scheduler limits and
its memory policy, by version.

The hardware card says what the silicon can do; a profile only scales it. Efficiency overrides are keyed by scope,
applied from the least to the most specific: `default` < hardware kind (`gpu`, `soc`, `apple`, `cpu`,
`accelerator`) < vendor (`nvidia`, `amd`, `intel`, `apple`) < `vendor-kind` (`nvidia-soc`). A profile's versions
are ranges: an entry applies from its `version` up to the next entry's.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator, model_validator

from roofline.cards.formats import GGUF_FORMATS, card_format
from roofline.cards.quantity import PositiveBytes
from roofline.cards.schema import (
    MAX_CONTEXT,
    MAX_SMALL,
    ComputeCapability,
    Strict,
    card_name,
)
from roofline.cards.runtime_efficiency import (  # noqa: F401  (re-exported: the profile's efficiency schema)
    FLOOR_FIELDS,
    FRACTION_FIELDS,
    NUMBER_FIELDS,
    SCOPE_KINDS,
    EfficiencyOverrides,
)
from roofline.cards.versions import version_key

# The most sequences one replica's scheduler may hold (vLLM's max_num_seqs defaults to 256-1024; TensorRT-LLM's
# max_batch_size to 2,048) and the most llama.cpp server slots (-np; one context each): far above any deployment,
# low enough that the simulator's per-sequence arrays stay small
MAX_SEQUENCES = 65_536
MAX_SLOTS = 4_096


class Scheduler(Strict):
    """RUNTIME_SCHEDULER.md: the serving simulator's per-step limits. None = the generic default."""

    max_num_batched_tokens: int | None = Field(None, gt=0, le=MAX_CONTEXT)
    max_num_seqs: int | None = Field(None, gt=0, le=MAX_SEQUENCES)
    chunked_prefill: StrictBool | None = None
    # chunked prefill on only for models whose context exceeds this (vLLM V0: 32K); at or below it a prompt runs
    # whole, in a step of up to the model's context; 0: every model (a later version undoing an earlier threshold)
    chunked_prefill_above_context: int | None = Field(None, ge=0, le=MAX_CONTEXT)
    block_size_tokens: int | None = Field(None, gt=0, le=MAX_SMALL)
    parallel_slots: int | None = Field(None, gt=0, le=MAX_SLOTS)
    slot_context_tokens: int | None = Field(None, gt=0, le=MAX_CONTEXT)


class ContextTier(Strict):
    """One tier of a default context that depends on the device's memory: `tokens` where the GPU memory (summed over
    the GPUs) is below `below`; no `below`: every larger device."""

    below_bytes: PositiveBytes | None = Field(None, alias="below")
    tokens: int = Field(gt=0, le=MAX_CONTEXT)


class MemoryPolicy(Strict):
    """RUNTIME_SCHEDULER.md: how the runtime sizes its KV cache."""

    policy: Literal["preallocate", "free_fraction", "on_demand", "per_slot"] | None = None
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1)  # free_fraction: the share of what is left
    default_context_tokens: int | None = Field(None, gt=0, le=MAX_CONTEXT)
    # True: the context is the server's, split over its slots (llama-server's -c over -np); else each sequence's
    # (Ollama allocates num_ctx x OLLAMA_NUM_PARALLEL)
    context_split: StrictBool | None = None
    # the default context by device memory (Ollama from 0.15.5), smallest tier first; default_context_tokens stays
    # the answer where no device is named
    default_context_tiers: list[ContextTier] | None = None

    @model_validator(mode="after")
    def _tiers_ascend(self):
        tiers = self.default_context_tiers
        if tiers is not None:
            bounds = [t.below_bytes for t in tiers]
            if not tiers or bounds[-1] is not None or None in bounds[:-1] or bounds[:-1] != sorted(bounds[:-1]):
                raise ValueError("default_context_tiers: list tiers smallest first, each with `below` (a memory size) "
                                 "but the last, which has none")
        return self


class Version(Strict):
    """One version range of a runtime: from `version` (inclusive) to the next entry."""

    version: str
    released: str | None = None  # YYYY-MM(-DD): rows that give a date but no version map here
    notes: str = ""
    # CUDA graphs: shown, not applied (the launch cost is the fitted kernel_overhead_s; a change `refits: memory`)
    cuda_graphs: StrictBool | None = None
    efficiency: dict[str, EfficiencyOverrides] = {}
    scheduler: Scheduler = Scheduler()
    memory: MemoryPolicy = MemoryPolicy()
    # hardware scope -> the fitted parameters ("memory", "compute_by_format") whose kernels changed at this version:
    # benchmarks/fit_runtimes.py fits them per version range from here on (fitted.<scope>@<version>)
    refits: dict[str, list[Literal["memory", "compute_by_format"]]] = {}
    # the profile's `windows_ignored` from this version on (None: unchanged); needs a source
    windows_ignored: list[str] | None = None


FitKind = Literal["memory", "compute_by_format"]
FitPolicy = Literal["versions", "runtime", "none", "kernels_from"]


class RuntimeProfile(Strict):
    name: str
    display_name: str
    aliases: list[str] = []
    description: str = ""
    homepage: str
    # vendors, hardware kinds and/or vendor-kinds it runs on: nvidia, amd, apple, cpu, intel-gpu...
    runs_on: list[str] = Field(min_length=1)
    # vendor -> the oldest compute capability its kernels build for (nvidia: "7.0"); an older card is refused
    min_compute_capability: dict[str, ComputeCapability] = {}
    # weight format -> the oldest NVIDIA compute capability whose kernels run it (TensorRT-LLM: FP8 from Ada's 8.9)
    format_min_compute_capability: dict[str, ComputeCapability] = {}
    weight_formats: list[str] = Field(min_length=1)  # the formats it can load (see `roofline formats`)
    # weight format -> the first release that loads it (vLLM: MXFP4 from 0.10.1); a version asked for that is older
    # is refused; each needs a source (format_since.<format>)
    format_since: dict[str, str] = {}
    kv_formats: list[str] = Field(min_length=1)
    default_kv_format: str
    cuda_graphs: StrictBool | None = None
    multi_gpu: Literal["tensor", "layer"] = "tensor"  # what --gpus N splits: tensors, or layers (llama.cpp -sm layer)
    efficiency: dict[str, EfficiencyOverrides] = {}
    scheduler: Scheduler = Scheduler()
    memory: MemoryPolicy = MemoryPolicy()
    versions: list[Version] = []  # oldest first
    fitted: dict[str, EfficiencyOverrides] = {}  # written by benchmarks/fit_runtimes.py; scope or scope@version
    fitted_from: dict[str, str] = {}  # fitted scope -> the published rows and sources it was fitted on
    # which fit shipped per kind of fitted value (benchmarks/fit_runtimes.py picks it on leave-one-source-out
    # error): "versions" (per version range where `refits` says kernels changed), "runtime" (one value per hardware
    # scope), "none" (priors only), "kernels_from" (the fitted kernels of the runtime named by `kernels_from`)
    # scope -> {kind -> policy} over it (a scope's fit ships only where leave-one-source-out judged it on that scope)
    fit_policy: dict[str, FitPolicy | dict[FitKind, FitPolicy]] = {}
    kernels_from: str | None = None  # a runtime whose kernels this one runs (Ollama: llama.cpp); needs a source
    # hardware scopes (vendor-kind) where every weight format's prompt GEMMs run one kernel (each format dequantized
    # into the same tile: llama.cpp's Metal kernel_mul_mm), so one large-GEMM efficiency (`compute`) is fitted for
    # them all instead of one per format; needs a source
    shared_gemm_kernel: list[str] = []
    # every quantized weight format runs one family of kernels (llama.cpp: ggml's dequantizing matmuls per block
    # type), so a format the published rows do not inform takes the mean of its fitted siblings in the same math
    # dtype (Efficiency.compute_quantized) rather than the hardware kind's prior; needs a source
    quantized_kernel_family: StrictBool = False
    # MoE prompts run each touched expert's tokens through GEMM tiles of their own (llama.cpp: ggml's mul_mat_id
    # sorts tokens by expert), so a step pays a fixed cost per touched expert (Efficiency.expert_gemm_overhead_s),
    # fitted on MoE rows too narrow for a tile per expert; needs a source. False: such rows are predicted, not fitted
    expert_gemm_tiles: StrictBool = False
    # model families (a model card's `family`; "*": every one) whose sliding-window layers the runtime keeps and
    # attends over the whole context, as full attention (llama.cpp's `llama` and `phi3` architectures have no
    # windowed KV cache); versions may change it (`windows_ignored`); needs a source
    windows_ignored: list[str] = []
    # one hardware card (by name) under this runtime: measured there (`roofline calibrate` writes the micro-engine's
    # fit here), or a kernel path only that card takes (ggml-vulkan never gives the Arc A770 cooperative matrices);
    # applied after every scope; each needs `sources: devices.<card>`
    devices: dict[str, EfficiencyOverrides] = {}
    sources: dict[str, str]  # dotted field -> where the number comes from (docs, source default, fitted rows)
    uncertain: dict[str, str] = {}

    @field_validator("name")
    @classmethod
    def _lowercase_name(cls, v: str) -> str:
        return card_name(v, "vllm")

    @field_validator("weight_formats")
    @classmethod
    def _weight_formats(cls, v: list[str]) -> list[str]:
        names = [n for f in v for n in (GGUF_FORMATS if f.strip().lower() == "gguf" else (card_format(f).name,))]
        return list(dict.fromkeys(names))

    @field_validator("kv_formats")
    @classmethod
    def _kv_formats(cls, v: list[str]) -> list[str]:
        return [card_format(f, "kv").name for f in v]

    @model_validator(mode="after")
    def _consistent(self):
        if card_format(self.default_kv_format, "kv").name not in self.kv_formats:
            raise ValueError(f"default_kv_format '{self.default_kv_format}' is not in kv_formats")
        for where, table in [("efficiency", self.efficiency), ("fitted", self.fitted)] + \
                [(f"versions.{v.version}.efficiency", v.efficiency) for v in self.versions]:
            for scope in table:
                if not _valid_scope(scope.split("@")[0]):
                    raise ValueError(f"{where}.{scope}: scope must be default, a kind ({', '.join(SCOPE_KINDS)}), "
                                     "a vendor, or vendor-kind like nvidia-soc")
                if "@" in scope and scope.split("@", 1)[1] not in self.version_names():
                    raise ValueError(f"{where}.{scope}: name a version of this profile after '@' "
                                     f"({', '.join(self.version_names())})")
        self._min_compute_capability_cited()
        for device in self.devices:
            if f"devices.{device}" not in self.sources:
                raise ValueError(f"devices.{device}: sources must say where it was measured (devices.{device})")
        for scope in self.shared_gemm_kernel:
            if "-" not in scope or not _valid_scope(scope) or "shared_gemm_kernel" not in self.sources:
                raise ValueError(f"shared_gemm_kernel.{scope}: give vendor-kind scopes like apple-soc, with a source "
                                 "(sources: shared_gemm_kernel)")
        if self.quantized_kernel_family and "quantized_kernel_family" not in self.sources:
            raise ValueError("quantized_kernel_family: sources must say why the quantized formats share kernels "
                             "(quantized_kernel_family)")
        if self.expert_gemm_tiles and "expert_gemm_tiles" not in self.sources:
            raise ValueError("expert_gemm_tiles: sources must say how the MoE kernels tile each expert "
                             "(expert_gemm_tiles)")
        if self.kernels_from == self.name:
            raise ValueError("kernels_from: names this runtime itself; name the runtime whose kernels it runs")
        self._windows_ignored_cited()
        if self.kernels_from and "kernels_from" not in self.sources:
            raise ValueError("kernels_from: sources must say why this runtime runs those kernels (kernels_from)")
        for v in self.versions:
            for scope in v.refits:
                if not _valid_scope(scope):
                    raise ValueError(f"versions.{v.version}.refits.{scope}: not a scope like nvidia-gpu")
        for scope in self.fitted:
            if scope not in self.fitted_from:
                raise ValueError(f"fitted.{scope}: fitted_from must name the rows it was fitted on")
        for key, value in self.fit_policy.items():
            kind = key in ("memory", "compute_by_format")
            if kind == isinstance(value, dict) or not kind and not _valid_scope(key):
                raise ValueError(f"fit_policy.{key}: give memory/compute_by_format: POLICY, or a scope (nvidia-gpu) "
                                 "with {memory: POLICY, compute_by_format: POLICY}")
        keys = [version_key(v.version) for v in self.versions]
        if keys != sorted(keys) or len(set(keys)) != len(keys):
            raise ValueError("versions must be listed oldest first, each once")
        return self

    def _min_compute_capability_cited(self) -> None:
        """Each vendor's minimum names a vendor the runtime runs on, each format's a format it loads, and each cites
        where the runtime's docs say it."""
        runs_on = {t.lower() for t in self.runs_on}
        for vendor in self.min_compute_capability:
            key = f"min_compute_capability.{vendor}"
            if vendor != vendor.lower() or not ({vendor} | {f"{vendor}-{k}" for k in SCOPE_KINDS}) & runs_on:
                raise ValueError(f"{key}: name a vendor in runs_on, in lowercase ({', '.join(self.runs_on)})")
            if key not in self.sources:
                raise ValueError(f"{key}: sources must say where the runtime's docs give it ({key})")
        for table in ("format_min_compute_capability", "format_since"):
            for fmt in getattr(self, table):
                key = f"{table}.{fmt}"
                if card_format(fmt).name not in self.weight_formats:
                    raise ValueError(f"{key}: name a format in weight_formats ({', '.join(self.weight_formats)})")
                if key not in self.sources:
                    raise ValueError(f"{key}: sources must say where the runtime's docs give it ({key})")
        for version in self.format_since.values():
            version_key(version)  # a ValueError naming the text that is not a version

    def formats_at(self, version: str | None) -> list[str]:
        """The weight formats this runtime loads at `version` (None: the newest profile, every one of them)."""
        if version is None:
            return self.weight_formats
        since = {card_format(f).name: version_key(v) for f, v in self.format_since.items()}
        return [f for f in self.weight_formats if f not in since or version_key(version) >= since[f]]

    def first_version(self, fmt: str) -> str | None:
        """The release `format_since` names for weight format `fmt` (None: every profiled one loads it)."""
        return next((v for f, v in self.format_since.items() if card_format(f).name == fmt), None)

    def _windows_ignored_cited(self) -> None:
        """Each `windows_ignored` list (the profile's, a version's) cites where the runtime's code shows it."""
        for key, families in [("windows_ignored", self.windows_ignored)] + \
                [(f"versions.{v.version}.windows_ignored", v.windows_ignored) for v in self.versions]:
            if families and key not in self.sources:
                raise ValueError(f"{key}: sources must say where the runtime keeps these windows whole ({key})")

    def ignores_windows(self, family: str, version: str | None = None) -> bool:
        """Whether the runtime at `version` (None: the newest) runs a `family` model's sliding-window layers as full
        attention."""
        families = self.windows_ignored
        for entry in self.versions_up_to(version):
            families = families if entry.windows_ignored is None else entry.windows_ignored
        return "*" in families or family.lower() in {f.lower() for f in families}

    def version_names(self) -> list[str]:
        return [v.version for v in self.versions]

    def serving_policy(self, version: str | None = None, memory_bytes: float | None = None) -> dict:
        """RUNTIME_SCHEDULER.md's fields for the serving simulator (None = generic default), at `version`'s range
        (None: the newest); the default context for a device of `memory_bytes` of GPU memory where it depends on it
        (`default_context_tiers`)."""
        sched, mem = self.scheduler.model_dump(), self.memory.model_dump()
        for entry in self.versions_up_to(version):
            sched.update({k: v for k, v in entry.scheduler.model_dump().items() if v is not None})
            mem.update({k: v for k, v in entry.memory.model_dump().items() if v is not None})
        context, tiers = mem["default_context_tokens"], mem["default_context_tiers"]
        if tiers and memory_bytes is not None:
            context = next(t["tokens"] for t in tiers if t["below_bytes"] is None or memory_bytes < t["below_bytes"])
        return {**sched, "memory_policy": mem["policy"], "gpu_memory_utilization": mem["gpu_memory_utilization"],
                "default_context_tokens": context, "default_context_tiers": tiers,
                "context_split": bool(mem["context_split"])}

    def versions_up_to(self, version: str | None) -> list[Version]:
        """The version entries in effect at `version` (None: all), oldest first; later entries override earlier."""
        if version is None:
            return list(self.versions)
        key = version_key(version)
        return [v for v in self.versions if version_key(v.version) <= key]


def chunking_for(policy: dict, max_context: int | None) -> dict:
    """`serving_policy()`'s fields for a model of `max_context` tokens. Where chunked prefill is on only above a
    context (vLLM V0's server: 32K) it is on for a longer model, else off with steps of up to the model's context
    (V0: max_num_batched_tokens = max_model_len); no threshold, or no model given: as the profile states."""
    above = policy.get("chunked_prefill_above_context")
    if above is None or max_context is None:
        return policy
    if max_context > above:
        return {**policy, "chunked_prefill": True, "chunked_prefill_above_context": None}
    return {**policy, "chunked_prefill": False, "chunked_prefill_above_context": None,
            "max_num_batched_tokens": max(max_context, policy.get("max_num_batched_tokens") or 0)}


def _valid_scope(scope: str) -> bool:
    if scope == "default" or scope in SCOPE_KINDS:
        return True
    parts = scope.split("-")
    return bool(re.fullmatch(r"[a-z]+", parts[0])) and (len(parts) == 1 or len(parts) == 2 and parts[1] in SCOPE_KINDS)


class RuntimeChoice(BaseModel):
    """A runtime as asked for on the command line: the profile, the version asked (None: the newest profile) and
    the version range it falls in."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    profile: RuntimeProfile
    version: str | None = None  # as the user wrote it, normalised ('b7941', '0.11')
    range_start: str | None = None  # the profile entry whose range holds `version`

    @property
    def label(self) -> str:
        """'vllm@0.11' or 'llama.cpp@b6918+' (no version asked: the newest profiled range); what every output states."""
        if self.version:
            return f"{self.profile.name}@{self.version}"
        return f"{self.profile.name}@{self.range_start}+" if self.range_start else self.profile.name

    @property
    def described(self) -> str:
        """The label and, for a version asked, the profiled range it falls in: 'vllm@0.11 (the 0.8.0+ profile)'."""
        if self.version and self.range_start and self.range_start != self.version:
            return f"{self.label} (the {self.range_start}+ profile)"
        return self.label


def choose_version(profile: RuntimeProfile, version: str | None, date: str | None = None) -> RuntimeChoice:
    """The profile at `version` (or, without one, at `date` YYYY-MM: the newest entry released by then; neither:
    the newest). A version older than the oldest profiled one is an error naming the known ones."""
    entries = profile.versions
    if version is None:
        dated = [v for v in entries if date and v.released and v.released[:7] <= date[:7]]
        pick = dated[-1] if date and dated else (entries[0] if date and entries else (entries[-1] if entries else None))
        return RuntimeChoice(profile=profile, range_start=pick.version if pick else None)
    try:
        key = version_key(version)
    except ValueError as err:
        raise ValueError(f"{profile.name}@{version}: {err}") from None
    inside = [v for v in entries if version_key(v.version) <= key]
    if entries and not inside:
        known = ", ".join(profile.version_names())
        raise ValueError(f"{profile.name}@{version} is older than every profiled version ({known})")
    return RuntimeChoice(profile=profile, version=version, range_start=inside[-1].version if inside else None)
