"""A `commbench check` folder read back: each node's and link's verdict (commbench.fabric_rule) from its
rows (check_scope, check_nodes) and samples, as a table, markdown or the JSON object scripts act on."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from commbench import fabric_rule
from commbench.folder.load import load_run
from commbench.errors import InputError

FORMATS = ("text", "markdown", "json")


@dataclass
class CheckResult:
    folder: str
    nodes: int
    hosts: dict[int, str]  # node -> host name
    findings: list[fabric_rule.Finding]
    cluster: dict | None  # the all-reduce across every node: time_us, busbw_gbps, size_bytes, world_size
    meta: dict

    @property
    def flagged(self) -> list[fabric_rule.Finding]:
        return [f for f in self.findings if f.verdict == "slow"]


def _node_hosts(meta: dict) -> dict[int, str]:
    of_rank = meta.get("node_of_rank") or []
    ranks = {e.get("rank"): e.get("hostname") for e in meta.get("ranks") or [] if isinstance(e, dict)}
    hosts: dict[int, str] = {}
    for rank, node in enumerate(of_rank):
        hosts.setdefault(int(node), str(ranks.get(rank, "?")))
    emulated = (meta.get("emulation") or {}).get("hosts")
    if isinstance(emulated, list):  # the emulated nodes' host names (MPI's); gloo's share this machine's
        hosts = {i: str(h) for i, h in enumerate(emulated)}
    return hosts


def read_floors(path: str | None) -> dict[str, float]:
    """A floors file (JSON: fabric_rule.FLOORS' keys, each a positive number), checked; {} without one."""
    if path is None:
        return {}
    from commbench.analysis.importers.base import read_input  # a regular file, bounded, UTF-8

    try:
        doc = json.loads(read_input(path))
    except ValueError as exc:
        raise InputError(f"--floors {path}: not JSON ({str(exc)[:80]})") from None
    if not isinstance(doc, dict) or not doc:
        raise InputError(f"--floors {path}: expected an object of {', '.join(fabric_rule.FLOORS)}")
    for key, value in doc.items():
        if key not in fabric_rule.FLOORS:
            raise InputError(f"--floors {path}: unknown key {str(key)[:40]!r} (accepted: {', '.join(fabric_rule.FLOORS)})")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1e12:
            raise InputError(f"--floors {path}: {key} must be a positive number, not {str(value)[:40]!r}")
    return {k: float(v) for k, v in doc.items()}


def read_check(d: str | Path, floors: dict[str, float] | None = None) -> CheckResult:
    rows, meta = load_run(d, samples=True)
    if "check_scope" not in rows or rows.check_scope.isna().all():
        raise InputError(f"{d}: not a `commbench check` folder (its rows have no check_scope)")
    links, intra, paths, cluster = {}, {}, {}, None
    for _, row in rows.iterrows():
        scope, where = str(row.check_scope), str(row.check_nodes)
        samples = np.asarray(row.sample_values, float)
        if scope == "link":
            a, b = (int(x) for x in where.split("-"))
            links[(a, b)] = [row.size_bytes / (samples * 1e-6) / 1e9]  # GB/s each way, per exchange
        elif scope == "path":
            a, b = (int(x) for x in str(row.check_ranks).split("-"))
            paths[(a, b)] = [row.size_bytes / (samples * 1e-6) / 1e9]
        elif scope == "node":
            intra[int(where)] = [samples]
        elif scope == "cluster":
            cluster = {"time_us": float(row.time_us), "busbw_gbps": float(row.busbw_gbps),
                       "size_bytes": int(row.size_bytes), "world_size": int(row.world_size)}
    hosts = _node_hosts(meta)
    nodes = int(meta.get("nodes") or len(hosts))
    node_of = dict(enumerate(int(n) for n in meta.get("node_of_rank") or []))
    findings = fabric_rule.judge(links, intra, paths, node_of)
    if meta.get("emulation"):
        findings = fabric_rule.inside_unjudged(findings)
    findings = fabric_rule.with_floors(findings, floors or {})
    return CheckResult(str(d), nodes, hosts, findings, cluster, meta)


def to_json(c: CheckResult) -> dict:
    def entry(f: fabric_rule.Finding) -> dict:
        return {"what": f.what, "nodes": list(f.nodes), "ranks": list(f.ranks),
                "hosts": [c.hosts.get(n, "?") for n in f.nodes],
                "verdict": f.verdict, "measured": f.measured, "expected": f.expected, "unit": f.unit, "why": f.why}
    check = c.meta.get("check") or {}
    return {"verdict": "flagged" if c.flagged else "ok", "flagged": [entry(f) for f in c.flagged],
            "nodes": c.nodes, "hosts": [c.hosts.get(i, "?") for i in range(c.nodes)],
            "findings": [entry(f) for f in c.findings], "cluster_all_reduce": c.cluster,
            "repetitions": check.get("repetitions"), "decided": check.get("decided"), "seconds": check.get("seconds"),
            "folder": c.folder}


def render(c: CheckResult, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(to_json(c), indent=2)
    head = ("what", "node(s)", "rank(s)", "host(s)", "measured", "cluster median", "verdict", "why")
    table = []
    for f in c.findings:
        unit = f.unit
        table.append((f.what, "-".join(map(str, f.nodes)), "-".join(map(str, f.ranks)) or "-",
                      ",".join(c.hosts.get(n, "?") for n in f.nodes),
                      f"{f.measured:.4g} {unit}", f"{f.expected:.4g} {unit}", f.verdict.upper() if f.verdict == "slow"
                      else f.verdict, f.why))
    lines = []
    if fmt == "markdown":
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in table]
    else:
        widths = [max(len(h), *(len(r[i]) for r in table)) for i, h in enumerate(head[:-1])]
        lines.append("  ".join(h.ljust(w) for h, w in zip(head[:-1], widths)) + "  why")
        lines += ["  ".join(cell.ljust(w) for cell, w in zip(row[:-1], widths)) + "  " + row[-1] for row in table]
    check = c.meta.get("check") or {}
    if c.cluster:
        lines.append(f"\nall-reduce across the {c.nodes} nodes ({c.cluster['world_size']} ranks, "
                     f"{c.cluster['size_bytes']} B): {c.cluster['time_us']:.1f} us, busbw {c.cluster['busbw_gbps']:.3f} GB/s")
    if check:
        lines.append(f"{check.get('repetitions')} repetition(s) in {check.get('seconds')} s; "
                     + ("every verdict decided" if check.get("decided") else
                        "some verdicts undecided when the budget ended (the even and odd repetitions disagree)"))
    lines.append(("FLAGGED: " + "; ".join(f"{f.what} {'-'.join(map(str, f.ranks or f.nodes))} "
                                          f"({','.join(c.hosts.get(n, '?') for n in f.nodes)}) slow" for f in c.flagged))
                 if c.flagged else f"OK: no node or link flagged ({c.nodes} nodes)")
    return "\n".join(lines)

