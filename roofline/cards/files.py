"""Every file roofline reads or writes goes through here: bounded reads, bounded YAML, and safe writes.

Reads: regular files only (a FIFO or a device named `*.yaml` would block or never end), a size cap checked before
and while reading, UTF-8 with a one-line error. YAML: the text is first walked as parser events (libyaml's parser
is iterative, so this cannot overflow the C stack) to bound nesting depth and the size after alias expansion; only
then is it constructed, with duplicate keys refused. Writes: checked before any work (`check_output_*`), then
written through an exclusive temporary file in the target directory and moved into place with os.replace.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import BinaryIO

import yaml

from roofline.errors import CardError, RooflineError

MAX_CARD_BYTES = 1 << 20  # 1 MiB: the largest bundled card (a calibrated host card with its measurements) is ~60 kB
MAX_JSON_BYTES = 16 << 20  # 16 MiB: config.json files are a few kB; safetensors index files reach a few MB
MAX_CSV_BYTES = 64 << 20  # 64 MiB: published-measurement tables are tens of kB
MAX_YAML_DEPTH = 32  # cards nest 4 levels deep (architecture.layer_types.X.field)
MAX_YAML_NODES = 200_000  # nodes after alias expansion: a calibrated card holds ~10k; a "billion laughs" holds 1e9
# Paths nothing should be written under: kernel and device file systems.
_SYSTEM_ROOTS = ("/proc", "/sys", "/dev")


def open_regular(path: Path, what: str = "file") -> BinaryIO:
    """A regular file opened for binary reading; CardError (one line) for a directory, a FIFO, socket or device, or a
    path that cannot be opened. Never blocks on a FIFO (opened non-blocking, then checked to be a regular file)."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise CardError(path, "", f"cannot read file ({err.strerror or err})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file (a FIFO, socket or device)"
        raise CardError(path, "", f"{kind}; give a {what} path")
    return os.fdopen(fd, "rb")


def read_text(path: Path, max_bytes: int = MAX_CARD_BYTES, what: str = "file") -> str:
    """The UTF-8 text of a regular file (`open_regular`) of at most `max_bytes`; CardError (one line) otherwise."""
    path = Path(path)
    with open_regular(path, what) as f:
        size = os.fstat(f.fileno()).st_size
        if size > max_bytes:
            raise CardError(path, "", f"{size:,} bytes is larger than the {max_bytes:,}-byte limit for a {what}")
        try:
            data = f.read(max_bytes + 1)
        except OSError as err:
            raise CardError(path, "", f"cannot read file ({err.strerror or err})") from None
    if len(data) > max_bytes:
        raise CardError(path, "", f"larger than the {max_bytes:,}-byte limit for a {what}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise CardError(path, "", f"not UTF-8 text (byte {err.start}: {data[err.start:err.start + 1]!r}); save it as UTF-8") from None


# ------------------------------------------------------------------------------------------------ YAML


def _loader_base():
    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _NoDuplicates(_loader_base()):
    """The safe loader (libyaml where present) refusing a key given twice in one mapping (the last would win)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
            except TypeError:  # an unhashable key (a list): SafeConstructor says so below
                break
            if duplicate:
                raise yaml.constructor.ConstructorError(None, None, f"key '{key}' appears twice",
                                                        key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_NoDuplicates.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _NoDuplicates.construct_mapping)


def _check_shape(text: str, path: Path) -> None:
    """Walk the parser's events: nesting at most MAX_YAML_DEPTH, at most MAX_YAML_NODES nodes once every alias is
    expanded (an anchor's subtree counts again at each alias)."""
    depth, nodes = 0, 0
    opened: list[tuple[str | None, int]] = []  # (anchor, node count when its collection opened)
    sizes: dict[str, int] = {}  # anchor -> expanded node count of its subtree
    for event in yaml.parse(text, Loader=_loader_base()):
        if isinstance(event, yaml.AliasEvent):
            nodes += sizes.get(event.anchor, 1)
        elif isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            nodes += 1
            if depth > MAX_YAML_DEPTH:
                raise CardError(path, f"line {event.start_mark.line + 1}", f"nested deeper than {MAX_YAML_DEPTH} levels")
            opened.append((event.anchor, nodes))
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
            anchor, start = opened.pop()
            if anchor:
                sizes[anchor] = nodes - start + 1
        elif isinstance(event, yaml.ScalarEvent):
            nodes += 1
            if event.anchor:
                sizes[event.anchor] = 1
        if nodes > MAX_YAML_NODES:
            raise CardError(path, "", f"more than {MAX_YAML_NODES:,} values once aliases are expanded "
                                      "(an alias bomb?); cards need no aliases")


def parse_yaml(text: str, path: object = "<text>") -> object:
    """YAML text -> Python data, bounded (depth, alias expansion) and with duplicate keys refused."""
    try:
        _check_shape(text, path)
        return yaml.load(text, Loader=_NoDuplicates)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
        where = f"line {mark.line + 1}" if mark else "file"
        raise CardError(path, where, f"not valid YAML ({getattr(err, 'problem', None) or err})") from None
    except RecursionError:
        raise CardError(path, "", f"nested deeper than {MAX_YAML_DEPTH} levels") from None
    except ValueError as err:  # an integer past Python's 4,300-digit conversion limit
        raise CardError(path, "", "a number too long to read (over 4,300 digits); write it with an exponent, "
                                  "e.g. 1e30") from None


def read_yaml_file(path: Path) -> object:
    return parse_yaml(read_text(path, MAX_CARD_BYTES, "YAML card"), path)


class DuplicateKeyError(ValueError):
    """A JSON object that gives one key twice."""


def unique_keys(pairs: list) -> dict:
    """json's object_pairs_hook: an object whose every key is given once (a second value would silently win)."""
    out = dict(pairs)
    if len(out) < len(pairs):
        seen: set = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise DuplicateKeyError(f"key {twice[:60]!r} appears twice in one object; keep one")
    return out


def read_json_file(path: Path, what: str = "JSON file", nonfinite: bool = False) -> object:
    """JSON from a bounded file; NaN/Infinity refused (not JSON) unless `nonfinite` (then read as floats, for a reader
    whose every field check refuses them), nesting bounded by the parser's recursion limit."""
    text = read_text(path, MAX_JSON_BYTES, what)

    def no_constant(name):
        if nonfinite:
            return float(name.replace("Infinity", "inf"))
        raise ValueError(f"{name} is not a JSON number")

    def whole(digits: str) -> int:  # past Python's digit limit its error gives advice for its own API, not the user's
        if len(digits.lstrip("-")) > sys.get_int_max_str_digits():
            raise ValueError(f"a {len(digits.lstrip('-')):,}-digit integer, beyond any count a model config holds")
        return int(digits)

    try:
        return json.loads(text, parse_constant=no_constant, object_pairs_hook=unique_keys, parse_int=whole)
    except json.JSONDecodeError as err:
        raise CardError(path, f"line {err.lineno}", f"not valid JSON ({err.msg})") from None
    except ValueError as err:
        raise CardError(path, "", f"not valid JSON ({err})") from None
    except RecursionError:
        raise CardError(path, "", "not valid JSON (nested too deeply)") from None


# ------------------------------------------------------------------------------------------------ writing


def _system_path(path: Path) -> bool:
    resolved = str(path.resolve())
    return any(resolved == root or resolved.startswith(root + "/") for root in _SYSTEM_ROOTS)


def check_output_dir(directory: Path, option: str = "--out") -> Path:
    """Refuse, before any work, a directory roofline could not write into: a file, a system path, read-only."""
    directory = Path(directory).expanduser()
    if _system_path(directory):
        raise RooflineError(f"{option}: {directory} is a system directory; name a directory of your own")
    probe = directory
    while not probe.exists():  # the nearest existing ancestor must be a writable directory
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise RooflineError(f"{option}: {probe} is a file, not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise RooflineError(f"{option}: {probe} is not writable")
    return directory


def check_output_file(path: Path, option: str = "--out") -> Path:
    """Refuse, before any work, a file path roofline could not write: a directory, a system path, read-only."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise RooflineError(f"{option}: {path} is a directory; give a file name")
    if path.exists() and not path.is_file():
        raise RooflineError(f"{option}: {path} is not a regular file")
    if path.exists() and not os.access(path, os.W_OK):
        raise RooflineError(f"{option}: {path} is not writable")
    check_output_dir(path.parent, option)
    return path


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(target: Path, data: str | bytes, option: str = "output") -> Path:
    """Write `data` to `target` through an exclusive temporary file in the same directory (O_EXCL via mkstemp: a
    planted file or symlink is never followed), fsynced, then os.replace'd: an interrupted run leaves the old file."""
    target = Path(target)
    check_output_file(target, option)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as err:
        raise RooflineError(f"{option}: cannot write in {target.parent} ({err.strerror or err})") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a card is as readable as any file the user writes
        os.replace(tmp, target)
    except OSError as err:
        raise RooflineError(f"{option}: cannot write {target} ({err.strerror or err})") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target
