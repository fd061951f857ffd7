"""Shared by the tests of compare, report, topo-compare and the importers: two quiet result folders
(`sides`: a baseline and a candidate whose jobs agree) and what their checks use: a folder tree by
content, JSON parsed strictly (no bare NaN or Infinity)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from synthetic_runs import write_run

QUIET = [10.0, 10.15, 9.9]


@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    root = tmp_path_factory.mktemp("sides")
    return write_run(root / "base", QUIET, seed=1), write_run(root / "cand", [9.95, 10.1, 10.05], seed=2)


def tree(root: Path, skip: Path | None = None) -> dict:
    """Every entry under root (except skip and what is below it): folders, and files by content."""
    out = {}
    for p in root.rglob("*"):
        if skip is not None and (p == skip or skip in p.parents):
            continue
        out[str(p)] = hashlib.sha1(p.read_bytes()).hexdigest() if p.is_file() else "folder"
    return out


def strict_json(text: str):
    def refuse(name):
        raise AssertionError(f"bare {name} in JSON")
    return json.loads(text, parse_constant=refuse)
