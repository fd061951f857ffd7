"""`commbench check`'s schedule and verdict, one owner for the ranks (when to stop) and the readers
(the table, the JSON, the exit code).

Schedule. Every node's link is measured against every other node's in a round-robin tournament (the
circle method): N/2 disjoint node pairs at once, N-1 rounds (N odd: N rounds, one node resting in each),
so a round costs one exchange whatever N is. For large N, `peers` rounds only (every node meets `peers`
others, O(N) pairs in all): rounds spread evenly over the tournament's, so each node's peers are spread
over the cluster.

Verdict, each against the cluster's own median (fabrics differ: no absolute floor):
  link   its median bandwidth (bytes each way per second of an exchange, over its samples);
  node   the median of its links' medians: a node whose own link is slow slows each of its pairs;
         slow when below SLOW x the cluster's median, the median over the nodes of theirs (a slow node
         is in N-1 of the N(N-1)/2 links, and at small N a median over links would follow it);
  link   slow when below SLOW x the cluster's median while neither of its nodes is slow (a path of its own);
  node   (nodes of several ranks) its all-reduce inside the node: slow when its median time is above
         the nodes' median / SLOW;
  rank   (nodes of several ranks: GPUs) the median of its paths' medians, a path being an exchange with
         another rank of its node: slow when below SLOW x the median over every such rank of the cluster
         (a slow GPU slows each of its paths);
  path   a pair of ranks inside a node, slow when below that bar while neither rank is slow (a weak
         NVLink / PCIe path); reported as a link whose two nodes are the same.
On an emulated cluster what is inside the nodes is measured and not judged (inside_unjudged): its
nodes' ranks share one machine's cores.
A floors file (`check --floors FILE`, FLOORS) adds an absolute bar per kind: a node or link under
link_gbps, a rank or path under path_gbps, a node's all-reduce over node_all_reduce_us is slow too.
A verdict is decided when the samples of the even and of the odd repetitions each give it too; the
ranks repeat until every verdict is decided (at least MIN_REPS, at most MAX_REPS or the budget).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SLOW = 0.85  # below this share of the cluster's median a node's or link's bandwidth is slow
MIN_REPS = 3
MAX_REPS = 30
Pair = tuple[int, int]
FLOORS = {"link_gbps": "GB/s each way a node's links and each link carry at least",
          "path_gbps": "GB/s each way each path inside a node (and each rank's paths) carries at least",
          "node_all_reduce_us": "µs a node's all-reduce inside it takes at most"}


def tournament(nodes: int) -> list[list[Pair]]:
    """The circle method's rounds: every pair of nodes once, disjoint pairs within a round."""
    ring: list[int | None] = list(range(nodes)) + ([None] if nodes % 2 else [])
    m = len(ring)
    rounds = []
    for _ in range(m - 1):
        pairs = [(ring[i], ring[m - 1 - i]) for i in range(m // 2)]
        rounds.append([(min(a, b), max(a, b)) for a, b in pairs if a is not None and b is not None])
        ring = [ring[0], ring[-1], *ring[1:-1]]
    return rounds


def schedule(nodes: int, peers: int | None = None) -> list[list[Pair]]:
    """The rounds to measure: the whole tournament, or `peers` of its rounds spread evenly (sampled)."""
    rounds = tournament(nodes)
    if peers is None or peers >= len(rounds):
        return rounds
    step = len(rounds) / peers
    return [rounds[int(i * step)] for i in range(peers)]


@dataclass
class Finding:
    what: str  # "node", "link" or "rank"
    nodes: tuple[int, ...]
    verdict: str  # "ok" or "slow"
    measured: float  # the node's or link's median, in unit
    expected: float  # the cluster's median it was judged against
    why: str
    unit: str = "GB/s"  # GB/s each way (a node's links, a link), us (a node's all-reduce inside it)
    ranks: tuple[int, ...] = ()  # a rank, or a path's two ranks (inside a node)


def _median(arrays) -> float:
    return float(np.median(np.concatenate([np.atleast_1d(np.asarray(a, float)) for a in arrays])))


def judge(links: dict[Pair, list], intra: dict[int, list] | None = None, paths: dict[Pair, list] | None = None,
          node_of: dict[int, int] | None = None) -> list[Finding]:
    """Every node's and link's finding. links: each pair's bandwidth samples (GB/s), a list of arrays
    (one per repetition); intra: each node's all-reduce times (µs), likewise (nodes of one rank: none);
    paths: each pair of ranks inside a node, as links, with node_of (rank -> node)."""
    findings = []
    medians = {pair: _median(s) for pair, s in links.items() if len(s)}
    nodes = sorted({n for pair in medians for n in pair} | set(intra or {}))
    slow_nodes = set()
    if medians:
        scores = {node: float(np.median([m for pair, m in medians.items() if node in pair])) for node in nodes
                  if any(node in pair for pair in medians)}
        cluster = float(np.median(list(scores.values())))
        for node, value in scores.items():
            slow = value < SLOW * cluster
            slow_nodes |= {node} if slow else set()
            findings.append(Finding("node", (node,), "slow" if slow else "ok", value, cluster,
                                    f"its links carry {value / cluster:.0%} of the cluster's median {cluster:.3g} GB/s "
                                    f"(bar {SLOW:.0%})" if slow else ""))
        for pair, value in sorted(medians.items()):
            slow = value < SLOW * cluster and not set(pair) & slow_nodes
            findings.append(Finding("link", pair, "slow" if slow else "ok", value, cluster,
                                    f"carries {value / cluster:.0%} of the cluster's median {cluster:.3g} GB/s (bar "
                                    f"{SLOW:.0%}) while both its nodes' other links do not" if slow else ""))
    times = {node: _median(s) for node, s in (intra or {}).items() if len(s)}
    if len(times) > 1:
        typical = float(np.median(list(times.values())))
        for node, value in sorted(times.items()):
            slow = value > typical / SLOW
            findings.append(Finding("node", (node,), "slow" if slow else "ok", value, typical,
                                    f"its all-reduce inside the node takes {value / typical:.2f}x the nodes' median "
                                    f"{typical:.3g} us (bar {1 / SLOW:.2f}x)" if slow else "", "us"))
    return findings + _paths(paths or {}, node_of or {})


def _paths(paths: dict[Pair, list], node_of: dict[int, int]) -> list[Finding]:
    """The ranks' and paths' findings inside the nodes (judge). A rank is scored where its node has three
    ranks or more (in a node of two its one path cannot tell its rank from its partner)."""
    medians = {pair: _median(s) for pair, s in paths.items() if len(s)}
    if not medians:
        return []
    typical = float(np.median(list(medians.values())))
    ranks = sorted({r for pair in medians for r in pair})
    scores = {r: float(np.median(own)) for r in ranks if len(own := [m for pair, m in medians.items() if r in pair]) > 1}
    out, slow_ranks = [], set()
    if scores:
        usual = float(np.median(list(scores.values())))
        for r, value in scores.items():
            slow = value < SLOW * usual
            slow_ranks |= {r} if slow else set()
            out.append(Finding("rank", (node_of.get(r, 0),), "slow" if slow else "ok", value, usual,
                               f"its paths to its node's other ranks carry {value / usual:.0%} of the ranks' median "
                               f"{usual:.3g} GB/s (bar {SLOW:.0%})" if slow else "", ranks=(r,)))
    for (a, b), value in sorted(medians.items()):
        slow = value < SLOW * typical and not {a, b} & slow_ranks
        out.append(Finding("link", (node_of.get(a, 0), node_of.get(b, 0)), "slow" if slow else "ok", value, typical,
                           f"the path between ranks {a} and {b} inside node {node_of.get(a, 0)} carries "
                           f"{value / typical:.0%} of the paths' median {typical:.3g} GB/s (bar {SLOW:.0%})"
                           if slow else "", ranks=(a, b)))
    return out


EMULATED = "not judged: the emulated nodes' ranks share one machine's cores, so what differs inside them is that machine"


def inside_unjudged(findings: list[Finding]) -> list[Finding]:
    """The findings with those inside the nodes (the ranks, paths and all-reduces of an emulated cluster)
    marked not judged (verdict "unjudged"): only the emulated links are the cluster's own."""
    return [Finding(f.what, f.nodes, "unjudged", f.measured, f.expected, EMULATED, f.unit, f.ranks)
            if f.unit == "us" or f.ranks else f for f in findings]


def with_floors(findings: list[Finding], floors: dict[str, float]) -> list[Finding]:
    """The findings with the floors' absolute bars applied: an ok one past its floor becomes slow."""
    out = []
    for f in findings:
        if f.verdict == "ok":
            if f.unit == "us":
                bar = floors.get("node_all_reduce_us")
                past = bar is not None and f.measured > bar
            else:
                bar = floors.get("path_gbps" if f.ranks else "link_gbps")
                past = bar is not None and f.measured < bar
            if past:
                f = Finding(f.what, f.nodes, "slow", f.measured, bar, f"{f.measured:.4g} {f.unit}, past the floor "
                            f"{bar:g} {f.unit} (--floors)", f.unit, f.ranks)
        out.append(f)
    return out


def flagged(findings: list[Finding]) -> set[tuple[str, tuple[int, ...], tuple[int, ...]]]:
    return {(f.what, f.nodes, f.ranks) for f in findings if f.verdict == "slow"}


def decided(links: dict[Pair, list], intra: dict[int, list] | None = None, paths: dict[Pair, list] | None = None,
            node_of: dict[int, int] | None = None) -> bool:
    """The verdicts from all repetitions, from the even ones and from the odd ones agree."""
    if min((len(s) for s in links.values()), default=0) < MIN_REPS:
        return False
    halves = [({p: s[k::2] for p, s in links.items()}, {n: s[k::2] for n, s in (intra or {}).items()},
               {p: s[k::2] for p, s in (paths or {}).items()}) for k in (0, 1)]
    whole = flagged(judge(links, intra, paths, node_of))
    return all(flagged(judge(l, i, p, node_of)) == whole for l, i, p in halves)
