"""What two result sets were measured under, and what differs: library and software versions,
hosts, world size and layout, launcher, the timed loop (the rows' `timer`), and the environment variables that change collectives
(NCCL_*, OMPI_*, ...; commbench.runinfo.ENV_PREFIXES), all read from each run's run.json.

A fact is compared only where both sides recorded it; an environment variable recorded on one
side only is `(unset)` on the other (when that side recorded its environment at all). A side
of several runs or jobs that disagree within itself shows all its values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

UNSET = "(unset)"
_WIDTH = 80


@dataclass
class Change:
    fact: str
    baseline: str
    candidate: str

    def __str__(self) -> str:
        return f"{self.fact}: {self.baseline} -> {self.candidate}"


def _clean(value) -> str:
    text = re.sub(r"\s+", " ", str(value).replace("\x00", "")).strip()
    return text if len(text) <= _WIDTH else text[:_WIDTH - 1] + "…"


def _dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value) -> list:
    return value if isinstance(value, list) else []


def facts(meta: dict) -> tuple[dict[str, str], dict[str, str] | None]:
    """One run's facts (name -> value) and its environment (None: not recorded). run.json comes
    from someone else's folder: a fact of the wrong type (a list where an object belongs) is left out."""
    out = {f"version {_clean(k)}": _clean(v) for k, v in _dict(meta.get("versions")).items() if v not in (None, "")}
    names = [r.get("hostname") for r in _list(meta.get("ranks")) if isinstance(r, dict)]
    names += [h for j in _list(meta.get("jobs")) if isinstance(j, dict) for h in _list(j.get("hosts"))]
    hosts = {_clean(h) for h in names if isinstance(h, (str, int, float))}
    if hosts:
        out["hosts"] = ", ".join(sorted(hosts))
    for key in ("world_size", "nodes", "ranks_per_node", "launcher"):
        if meta.get(key) not in (None, ""):
            out[key.replace("_", " ")] = _clean(meta[key])
    spec = _dict(meta.get("spec"))
    if spec:  # what shapes the points beyond their keys: the groups at once, the uneven all-to-all's traffic,
        # NCCL's buffer registration
        out["split"] = _clean(spec.get("split") or "none")
        out["NCCL registration"] = _clean(spec.get("registration") or "none")
        if spec.get("spread") is not None or spec.get("peer_bytes"):
            out["all_to_allv traffic"] = (f"spread {_clean(spec['spread'])}" if spec.get("spread") is not None else
                                          f"matrix {_clean(spec.get('matrix'))} x {_clean(spec.get('matrix_scale'))}")
    if "timers" in meta:  # compare.load_side: the rows' `timer` values (folders before the column: Python loops)
        out["timed by"] = ", ".join(meta["timers"]) or "python (not recorded)"
    if meta.get("launcher_args"):
        out["launcher args"] = _clean(" ".join(map(str, _list(meta["launcher_args"]))) or meta["launcher_args"])
    env = None
    if "environment" in meta or "rank0_environment" in meta:
        env = {_clean(k): _clean(v) for k, v in {**_dict(meta.get("environment")),
                                                  **_dict(meta.get("rank0_environment"))}.items()}
    return out, env


def _side(metas: list[dict]) -> dict[str, str]:
    values: dict[str, set[str]] = {}
    envs = [e for _, e in map(facts, metas) if e is not None]
    for meta in metas:
        for k, v in facts(meta)[0].items():
            values.setdefault(k, set()).add(v)
    for name in {k for e in envs for k in e}:
        values[f"env {name}"] = {e.get(name, UNSET) for e in envs}
    if envs:
        values["(environment recorded)"] = {"yes"}
    return {k: " | ".join(sorted(v)) for k, v in values.items()}


def changes(baseline: list[dict], candidate: list[dict]) -> list[Change]:
    """What differs between the runs (run.json contents) of two sides."""
    b, c = _side(baseline), _side(candidate)
    both_env = "(environment recorded)" in b and "(environment recorded)" in c
    out = []
    for fact in sorted(set(b) | set(c)):
        if fact.startswith("("):
            continue
        if fact.startswith("env ") and both_env:
            before, after = b.get(fact, UNSET), c.get(fact, UNSET)
        elif fact in b and fact in c:
            before, after = b[fact], c[fact]
        else:
            continue
        if before != after:
            out.append(Change(fact, before, after))
    return out
