"""Runtime versions as users write them ('b6918', '0.10.1', 'v1.0rc2'), as sortable keys; text that is not a
version is refused."""

from __future__ import annotations

import re
from functools import lru_cache

# a version as users write it, after one leading 'v' or 'b': up to six ASCII numbers of up to nine digits joined by
# dots (llama.cpp builds have five digits, releases three parts), then up to two pre/post-release tags ('1.0rc2',
# '0.6.3.post1', '1.0rc2.dev3'), each with its number or none (PEP 440: 'rc' is 'rc0')
VERSION = re.compile(r"[0-9]{1,9}(\.[0-9]{1,9}){0,5}([.\-]?(rc|a|b|dev|post)\.?[0-9]{0,9}){0,2}")


@lru_cache(maxsize=4096)  # parsed on every prediction a profile's version ranges take part in
def version_key(text: str) -> tuple:
    """Order versions as users write them: (release numbers without trailing zeros, tags). 'b6918' (llama.cpp
    build) -> ((6918,), (0,)), '0.10.1' -> ((0, 10, 1), (0,)), '0.6' and '0.6.0' -> ((0, 6), (0,)), 'v1.0rc2' ->
    ((1,), (-1, 2)): a pre-release sorts before its release, a post-release after. Raises ValueError on text that
    is not a version ('-1', '0.11;rm')."""
    t = text.strip().lower()
    t = t[1:] if t[:1] in ("v", "b") else t
    if not VERSION.fullmatch(t):
        raise ValueError(f"'{text}' is not a version (like 0.10.1, 1.0rc2 or b6918)")
    numbers = re.match(r"[0-9]+(\.[0-9]+)*", t).group()
    release = [int(n) for n in numbers.split(".")]
    while len(release) > 1 and release[-1] == 0:  # '0.6' is '0.6.0'
        release.pop()
    tags = re.findall(r"rc|a|b|dev|post|[0-9]+", t[len(numbers):])
    pre = {"dev": -3, "a": -2, "b": -2, "rc": -1, "post": 1}
    # each tag list ends in 0, so a release (no tags) follows its pre-releases and '1.0rc2.dev3' precedes '1.0rc2'
    return tuple(release), tuple(int(n) if n.isdigit() else pre[n] for n in tags) + (0,)


# NVIDIA's newest compute capability is 12.x (Blackwell); a major beyond this is a typo such as 89 for 8.9
MAX_COMPUTE_CAPABILITY_MAJOR = 20
COMPUTE_CAPABILITY = re.compile(r"(\d{1,2})\.(\d)")  # major.minor, one minor digit as NVIDIA numbers them


def compute_capability_key(text: str) -> tuple[int, int]:
    """A CUDA compute capability as (major, minor), compared as numbers: '12.1' -> (12, 1) sorts after '9.0' -> (9, 0)
    (as text '12.1' < '9.0'). Raises ValueError on anything but quoted major.minor text with 1 <= major <= 20."""
    m = COMPUTE_CAPABILITY.fullmatch(text.strip()) if isinstance(text, str) else None
    if not m or not 1 <= int(m[1]) <= MAX_COMPUTE_CAPABILITY_MAJOR:
        raise ValueError(f"{text!r} is not a compute capability: give major.minor as a quoted string, like \"8.9\" "
                         f"(major 1 to {MAX_COMPUTE_CAPABILITY_MAJOR})")
    return int(m[1]), int(m[2])
