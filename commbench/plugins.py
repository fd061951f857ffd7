"""Collectives and algorithms defined outside the package. COMMBENCH_PLUGINS names modules (a
comma list, importable on PYTHONPATH) that register theirs when imported:

    from commbench.collectives import register
    register(AllToAll())

The registries load the plugins once, the first time they are imported; a module that fails to
import is reported by `check()` (the CLI and SweepSpec.validate call it) as one line. The
launchers pass the environment to every rank (mpirun with -x), so the parent (which validates the
spec) and the ranks (which run it) know the same names; the module must be importable on every
host.
"""

from __future__ import annotations

import importlib
import os

from commbench.errors import InputError

PLUGINS_ENV = "COMMBENCH_PLUGINS"
_loaded: set[str] = set()
_errors: list[str] = []


def load(env=None) -> None:
    """Import every module named in COMMBENCH_PLUGINS (once each); failures wait for check()."""
    env = os.environ if env is None else env
    for name in (n.strip() for n in env.get(PLUGINS_ENV, "").split(",")):
        if not name or name in _loaded:
            continue
        _loaded.add(name)
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - any failure of a user's module is one line
            _errors.append(f"{PLUGINS_ENV}: cannot import {name!r} ({type(exc).__name__}: {exc})")


def check() -> None:
    """Raise the first plugin import failure as an InputError."""
    if _errors:
        raise InputError(_errors[0])
