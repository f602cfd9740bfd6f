"""Typed, one-line-error reads from a transformers config mapping (for hf_import)."""

from __future__ import annotations

import math
from typing import Any

from roofline.cards.schema import MAX_CONTEXT, MAX_LAYERS
from roofline.errors import CardError, shown

_PERIODS = ("_pattern", "_freq", "_step", "_interval")  # config keys naming 'every N-th layer'

_MISSING = object()
# torch dtype names in configs -> roofline format names
_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32",
           "float8_e4m3fn": "fp8", "float8_e5m2": "fp8"}

# ------------------------------------------------------------------------------------------------ reading fields


class _Fields:
    """Typed reads from one config mapping; a missing or mistyped field raises a one-line error naming it."""

    def __init__(self, data: dict, source: str, prefix: str = "", defaults: dict | None = None,
                 aliases: dict | None = None):
        self.data, self.source, self.prefix = data, source, prefix
        self.defaults = defaults or {}
        self.aliases = aliases or {}  # a family's own names for standard fields (transformers' attribute_map)
        self.defaulted: list[str] = []  # family defaults used because the config left the field out

    def _key(self, key: str) -> str:
        """The name `key` goes by in this config: itself, else the family's alias (GPT-2's n_embd for hidden_size)."""
        alias = self.aliases.get(key)
        return alias if alias and self.data.get(key) is None and self.data.get(alias) is not None else key

    def has(self, key: str) -> bool:
        return self.data.get(self._key(key)) is not None

    def raw(self, key: str, default: Any = None) -> Any:
        if self.has(key):
            return self.data[self._key(key)]
        if key in self.defaults:
            if f"{key}={self.defaults[key]}" not in self.defaulted:
                self.defaulted.append(f"{key}={self.defaults[key]}")
            return self.defaults[key]
        return default

    def error(self, key: str, problem: str) -> CardError:
        return CardError(self.source, "", f"'{self.prefix}{self._key(key)}' {problem}")

    def _pick(self, keys: tuple[str, ...], default: Any) -> tuple[str, Any]:
        for key in keys:
            value = self.raw(key, _MISSING)
            if value is not _MISSING:
                return key, value
        if default is _MISSING:
            names = [name for key in keys for name in (key, self.aliases.get(key)) if name]
            also = f" (also read as {', '.join(names[1:])})" if len(names) > 1 else ""
            raise CardError(self.source, "", f"missing '{self.prefix}{keys[0]}'{also}")
        return keys[0], default

    def int(self, *keys: str, default: Any = _MISSING) -> int:
        """An integer field within its bound; a period (`sliding_window_pattern`, `moe_layer_freq`) at least 1."""
        key, value = self._pick(keys, default)
        if value is None:
            return value
        limit = MAX_LAYERS if "layers" in key else MAX_CONTEXT  # the importer builds one entry per layer
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not abs(value) <= limit \
                or value != int(value):
            raise self.error(key, f"must be an integer of at most {limit:,}, got {shown(value)}")
        if "layers" in key and value < 0:
            raise self.error(key, f"must be between 0 and {MAX_LAYERS}, got {shown(value)}")
        if key.endswith(_PERIODS) and value < 1:  # every N-th layer: N divides a layer index
            raise self.error(key, f"must be at least 1 (every N-th layer), got {shown(value)}")
        return int(value)

    def float(self, *keys: str, default: Any = _MISSING) -> float:
        key, value = self._pick(keys, default)
        if value is None:
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.error(key, f"must be a finite number, got {value!r}")
        return float(value)

    def bool(self, key: str, default: bool) -> bool:
        key, value = self._pick((key,), default)
        if not isinstance(value, bool):
            raise self.error(key, f"must be true or false, got {value!r}")
        return value

    def str(self, *keys: str, default: Any = _MISSING) -> str:
        key, value = self._pick(keys, default)
        if value is not None and not isinstance(value, str):
            raise self.error(key, f"must be a string, got {value!r}")
        return value

    def list(self, key: str) -> list | None:
        value = self.raw(key)
        if value is not None and not isinstance(value, list):
            raise self.error(key, f"must be a list, got {value!r}")
        return value


# ------------------------------------------------------------------------------------------------ shared pieces
