"""The model file `model fit` writes and `model predict`, `model validate` and `workload --model` read
(model.json): to_json writes a fit of commbench.analysis.model.fit as the format's version says;
load_model / from_json read one back, every field of the type it was written with and every parameter
within bounds, a covariance that is a covariance, read within MAX_MODEL_BYTES; every problem one
InputError naming the file."""

from __future__ import annotations

import math
from dataclasses import asdict

import numpy as np

from commbench.analysis.model.determined import RANGES
from commbench.analysis.model.fit import MAX_PARAM, NAMES, STEPS, Fit
from commbench.errors import InputError
from commbench.folder.files import DuplicateKey, read_named, unique_keys
from commbench.options import MAX_PREDICT_RANKS
from commbench.algorithms import ALGORITHMS

MODEL_FORMAT = 1  # to_json's "commbench_model"
MAX_MODEL_BYTES = 1 << 20  # a model file (a fit is about 1 KB)
PSD_TOLERANCE = 1e-9  # of a correlation matrix's eigenvalues: rounding of a fitted covariance, not a negative variance


def to_json(fits: list[Fit], sources: list[str]) -> dict:
    return {"commbench_model": MODEL_FORMAT, "sources": sources, "fits": {f.group: asdict(f) for f in fits}}


def load_model(path: str, backend: str | None = None) -> list[Fit]:
    """A model file's fits of one backend (from_json), read within MAX_MODEL_BYTES; every
    problem one InputError naming the file."""
    import json

    data = read_named(path, MAX_MODEL_BYTES, "model", f"{MAX_MODEL_BYTES >> 20} MB: not a model file of `model fit`")
    try:
        return from_json(json.loads(data, object_pairs_hook=unique_keys), backend)
    except (ValueError, RecursionError) as exc:  # InputError is a ValueError: named once, with the file
        said = str(exc)[:200] if isinstance(exc, (InputError, DuplicateKey)) else "not JSON"
        raise InputError(f"model {path!r}: {said}") from None


def _finite(value, high: float = math.inf) -> bool:
    """A number of JSON (not a bool), finite, from 0 to high."""
    return type(value) in (int, float) and 0 <= value <= high and math.isfinite(value)


def _check_fit(name: str, f: dict) -> Fit:
    """One fit of a model file, each field of the type `model fit` writes; the parameters from 0 to
    MAX_PARAM (None: not informed)."""
    if not isinstance(f, dict):
        raise InputError(f"fit {name[:40]!r} is not a mapping")
    missing = [k for k in Fit.__dataclass_fields__
               if k not in f and k not in ("algorithms", "engine", "borrowed", "undetermined", "log_cov")]
    unknown = [k for k in f if k not in Fit.__dataclass_fields__]
    if missing or unknown:
        raise InputError(f"fit {name[:40]!r}: {'missing' if missing else 'unknown'} field "
                         f"{str((missing or unknown)[0])[:40]!r}")
    params, rel, undetermined = f["params"], f["rel_std"], f.get("undetermined", {})
    engine, algorithms = f.get("engine", STEPS), f.get("algorithms", [])
    checks = {
        "backend": isinstance(f["backend"], str) and 0 < len(f["backend"]) <= 64 and "/" not in f["backend"],
        "engine": isinstance(engine, str) and engine in {a.engine for a in ALGORITHMS.values()},
        "params": isinstance(params, dict) and all(_param_ok(k, v, undetermined) for k, v in params.items()),
        "rel_std": isinstance(rel, dict) and all(v is None or _finite(v) for v in rel.values()),
        "links_per_node": type(f["links_per_node"]) is int and 1 <= f["links_per_node"] <= MAX_PREDICT_RANKS,
        "lanes": type(f["lanes"]) is int and 1 <= f["lanes"] <= MAX_PREDICT_RANKS,
        "points": type(f["points"]) is int and f["points"] >= 0,
        "median_error": _finite(f["median_error"]),
        "p90_error": _finite(f["p90_error"]),
        "algorithms": isinstance(algorithms, list) and all(isinstance(a, str) and a in ALGORITHMS for a in algorithms),
        "borrowed": isinstance(f.get("borrowed", {}), dict),
        "undetermined": _undetermined_ok(f.get("undetermined", {}), params),
        "log_cov": _cov_ok(f.get("log_cov", {}), params),
    }
    bad = next((k for k, ok in checks.items() if not ok), None)
    shown = f.get(bad)
    if bad == "algorithms" and isinstance(algorithms, list) and all(isinstance(a, str) for a in algorithms):
        unknown = next(a for a in algorithms if a not in ALGORITHMS)
        raise InputError(f"fit {name[:40]!r}: algorithm {unknown[:40]!r} is none commbench has (a plugin's? set "
                         "COMMBENCH_PLUGINS as when the model was fitted)")
    if bad == "params" and isinstance(params, dict):  # the parameter at fault
        shown = next(({k: v} for k, v in params.items() if not _param_ok(k, v, undetermined)), params)
    if bad:
        raise InputError(f"fit {name[:40]!r}: field {bad!r} is not what `model fit` writes ({shown!r:.60})")
    fit = Fit(**f)
    if fit.group != name:
        raise InputError(f"fit {name[:40]!r} is of {fit.group[:40]!r} (its backend and engine): not what `model fit` writes")
    return fit


def _param_ok(name, value, undetermined) -> bool:
    """A parameter of a model file: one of the model's, None (not informed) or a finite number, and
    where `model fit` called it determined, within what a machine can have (RANGES)."""
    if name not in NAMES or not (value is None or _finite(value, MAX_PARAM)):
        return False
    return value is None or (isinstance(undetermined, dict) and name in undetermined) or \
        RANGES[name][0] <= value <= RANGES[name][1]


def _cov_ok(cov, params) -> bool:
    """A square, symmetric table of finite numbers over the model's parameters, positive semi-definite (as
    σ²(JᵀJ)⁺ is, to rounding): a table that is not gives some combination a negative variance, which a
    prediction's interval would turn into a width of zero."""
    if not isinstance(cov, dict) or not set(cov) <= set(NAMES):
        return False
    if not all(isinstance(r, dict) and set(r) == set(cov) for r in cov.values()):
        return False
    numbers = [v for r in cov.values() for v in r.values()]
    if not (all(type(v) in (int, float) and math.isfinite(v) for v in numbers)
            and all(cov[a][a] >= 0 and cov[a][b] == cov[b][a] for a in cov for b in cov)):
        return False
    names = sorted(cov)
    m = np.array([[cov[a][b] for b in names] for a in names], dtype=float).reshape(len(names), len(names))
    d = np.sqrt(np.diag(m))
    zero = d == 0
    if np.any(m[zero] != 0):  # a variance of 0 with a covariance beside it: no such table is semi-definite
        return False
    keep = ~zero  # judged as correlations: an undetermined direction's 1e13 beside a 1e-5 hides nothing
    r = m[np.ix_(keep, keep)] / np.outer(d[keep], d[keep])
    return not r.size or np.linalg.eigvalsh(r).min() >= -PSD_TOLERANCE


def _undetermined_ok(entries, params) -> bool:
    """What `model fit` writes: parameter name -> {"estimate": a number or None, "why": text,
    "needs": text[, "direction": name -> number from -1 to 1]}, whose params entry is None."""
    def entry_ok(name, u) -> bool:
        direction = u.get("direction", {}) if isinstance(u, dict) else None
        return (isinstance(u, dict) and name in NAMES and isinstance(params, dict) and params.get(name) is None
                and set(u) <= {"estimate", "why", "needs", "direction"}
                and all(isinstance(u.get(k), str) and len(u[k]) <= 1000 for k in ("why", "needs"))
                and (u.get("estimate") is None or _finite(u["estimate"], MAX_PARAM))
                and isinstance(direction, dict) and set(direction) <= set(NAMES)
                and all(type(v) in (int, float) and abs(v) <= 1 for v in direction.values()))
    return isinstance(entries, dict) and all(entry_ok(k, u) for k, u in entries.items())


def from_json(data: dict, backend: str | None = None) -> list[Fit]:
    """The fits of one backend (each of its groups), or of one group ("mpi/kernel"); backend may
    be left out where the model holds one backend. A file `model fit` did not write is an
    InputError."""
    if not (isinstance(data, dict) and data.get("commbench_model") == MODEL_FORMAT
            and isinstance(data.get("fits"), dict) and data["fits"]):
        raise InputError(f"not a commbench model file (format {MODEL_FORMAT}, with fits)")
    fits = [_check_fit(str(name), f) for name, f in data["fits"].items()]
    backends = sorted({f.backend for f in fits})
    if backend is None:
        if len(backends) != 1:
            raise InputError(f"the model holds backends {', '.join(backends)[:200]}; choose one with --backend")
        backend = backends[0]
    chosen = [f for f in fits if backend in (f.backend, f.group)]
    if not chosen:
        raise InputError(f"the model has no backend {backend[:40]!r} (it has: {', '.join(f.group for f in fits)[:200]})")
    return sorted(chosen, key=lambda f: (f.engine != STEPS, f.engine))
