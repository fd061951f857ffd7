"""Several communicators at once (--split): the run's ranks split into groups that each run the same
collective at the same moment (commbench.rank.harness.Groups), as nccl-tests' NCCL_TESTS_SPLIT does and as the tensor-, data- and
pipeline-parallel groups of a training job do on shared links.

A rank's group is its color, from its world rank r and a value v: `and:v` r & v, `or:v` r | v, `mod:v`
r mod v, `div:v` r div v (nccl-tests' operations; its spellings "MOD 2", "%2", "AND 0x7" are taken too,
and values in decimal, 0x hex or 0b binary). Shorthands for a job's groups: `tp=G`, G consecutive ranks a
group (div:G, a tensor-parallel group); `dp=G`, G ranks a group strided by world / G (mod:world/G, a
data-parallel group). Groups keep world-rank order; every group must have as many ranks (a row gives one
size and one bus bandwidth per group).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from commbench.errors import InputError

MODES = ("and", "or", "mod", "div")
_SYMBOLS = {"&": "and", "|": "or", "%": "mod", "/": "div"}
_TEXT = re.compile(r"^\s*(and|or|mod|div|[&|%/])\s*[: ]?\s*(0x[0-9a-f]+|0b[01]+|[0-9]+)\s*$", re.IGNORECASE)
_SHORT = re.compile(r"^\s*(tp|dp)\s*=\s*([0-9]+)\s*$", re.IGNORECASE)
MAX_VALUE = 1 << 40


@dataclass(frozen=True)
class Split:
    mode: str  # and, or, mod, div
    value: int

    @property
    def text(self) -> str:
        """Its canonical spelling, as run.json and the rows record it: mod:2."""
        return f"{self.mode}:{self.value}"

    def color(self, rank: int) -> int:
        return {"and": rank & self.value, "or": rank | self.value, "mod": rank % max(self.value, 1),
                "div": rank // max(self.value, 1)}[self.mode]

    def groups(self, world: int) -> list[list[int]]:
        """The groups' world ranks, each in rank order, the groups by their color."""
        colors: dict[int, list[int]] = {}
        for r in range(world):
            colors.setdefault(self.color(r), []).append(r)
        return [colors[c] for c in sorted(colors)]


def parse(text: str, world: int) -> Split:
    """--split's text as a Split over `world` ranks, checked: its groups all of one size; an InputError
    in one line otherwise."""
    given = str(text)
    short = _SHORT.match(given)
    if short:
        kind, size = short.group(1).lower(), int(short.group(2))
        if not 1 <= size <= world or world % size:
            raise InputError(f"invalid --split {given[:40]!r}: {kind}=G needs G to divide the run's {world} ranks")
        split = Split("div", size) if kind == "tp" else Split("mod", world // size)
    else:
        m = _TEXT.match(given)
        if not m:
            raise InputError(f"invalid --split {given[:40]!r} (expected MODE:V with MODE one of {', '.join(MODES)}, "
                             "as nccl-tests' NCCL_TESTS_SPLIT, e.g. mod:2; or tp=G / dp=G)")
        mode = _SYMBOLS.get(m.group(1), m.group(1).lower())
        try:
            value = int(m.group(2), 0)
        except ValueError:  # "08": base 0 takes no leading zero
            value = int(m.group(2), 10)
        if value > MAX_VALUE or (mode in ("mod", "div") and value < 1):
            raise InputError(f"invalid --split {given[:40]!r}: {mode} needs a value from 1 to {MAX_VALUE}")
        split = Split(mode, value)
    sizes = {len(g) for g in split.groups(world)}
    if len(sizes) > 1:
        raise InputError(f"--split {split.text} makes groups of {' and '.join(map(str, sorted(sizes)))} ranks out of "
                         f"{world}: every group needs as many (a row gives one size and bus bandwidth per group)")
    return split
