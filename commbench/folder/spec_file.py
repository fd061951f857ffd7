"""How a sweep's spec reaches its ranks: as a file in the run folder, never in argv (a spec of
10,000 sizes or a long label is longer than one argument may be). The parent writes it (encode_spec),
every rank reads it by its absolute path (decode_spec), so the ranks of a job over several nodes need
the run folder on a filesystem they share (as a cluster's home or scratch is). `commbench ab`
writes one per side."""

from __future__ import annotations

import socket
from pathlib import Path

from commbench.folder import outputs
from commbench.errors import InputError
from commbench.spec import SweepSpec

SPEC_FILE = ".spec.json"  # a run's: the spec its latest launch's ranks read (commbench.rank.worker)
SIDE_SPEC_FILES = {"A": ".spec-A.json", "B": ".spec-B.json"}  # each side's of `commbench ab` (run/turn_server.py)
SPEC_FILES = (SPEC_FILE, *SIDE_SPEC_FILES.values())


def spec_path(spec: SweepSpec, name: str = SPEC_FILE) -> Path:
    """Where the ranks read the spec: SPEC_FILE (or `name`) in the run folder, by absolute path."""
    if not spec.out_dir:
        raise ValueError("the spec has no run folder yet (commbench.run.api.prepare gives it one)")
    return Path(spec.out_dir).absolute() / name


def encode_spec(spec: SweepSpec, name: str = SPEC_FILE) -> str:
    """Write the spec for the ranks (whole, replacing the previous launch's); the worker's --spec
    argument: the file's path."""
    path = spec_path(spec, name)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the run folder {str(path.parent)!r}: {exc.strerror or exc}") from None
    outputs.write_text(path, spec.to_json(), "the ranks' spec file")
    return str(path)


def decode_spec(argument: str) -> SweepSpec:
    """The spec the worker's --spec argument names."""
    try:
        text = Path(argument).read_text(encoding="utf-8")
    except OSError as exc:
        raise RuntimeError(f"cannot read the spec file {argument!r} on {socket.gethostname()} ({exc.strerror or exc}): "
                           "the ranks read it from the run folder, which must be on a filesystem every node "
                           "of the job shares") from None
    return SweepSpec.from_json(text)
