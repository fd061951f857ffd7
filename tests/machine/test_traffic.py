"""The analytical message pattern of every own algorithm (Algorithm.messages), checked against
the elements its ranks really send in a real MPI job, and its closed forms."""

import json
import subprocess
import sys

import pytest

from commbench.algorithms import ALGORITHMS
from commbench.algorithms.base import SEGMENT_BYTES, ring_order
from commbench.collectives import COLLECTIVES
from commbench.machine.traffic import expected_internode_bytes, internode
from commbench.run.launch import find_binary
from conftest import ROOT, needs_mpirun
from commbench.errors import OK


@needs_mpirun
@pytest.mark.parametrize("world", [3, 4, 5, 6, 8])
def test_messages_match_what_ranks_send(job, world):
    proc = subprocess.run([find_binary("mpirun"), "--allow-run-as-root", "--oversubscribe", "-n", str(world),
                           sys.executable, str(ROOT / "tests" / "scripts" / "count_messages.py")],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == OK, proc.stderr[-3000:]
    cases = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    silent = {name for name, a in ALGORITHMS.items() if not a.sends_messages}  # tests/algorithms/test_peer.py
    # two nodes of unequal sizes, and no layout of 3 nodes (count_messages.py)
    uneven = {"hierarchical", "hierarchical_kernel"} if world % 2 and world % 3 else set()
    assert {c["case"].split()[0] for c in cases} == set(ALGORITHMS) - silent - uneven
    modes = {c["case"].rsplit(" ", 1)[-1] for c in cases if c["case"].startswith("hierarchical_kernel ")}
    assert modes == ({"pipelined=True", "pipelined=False"} if "hierarchical_kernel" not in uneven else set())
    for case in cases:
        assert case["counted"] == case["expected"], case["case"]
        assert case["counted"], case["case"]


def _bytes(algo, collective, size, nodes):
    counts = COLLECTIVES[collective].counts(size, 4, len(nodes))
    return expected_internode_bytes(ALGORITHMS[algo], collective, counts, 4, nodes, SEGMENT_BYTES)


@pytest.mark.parametrize("m,g", [(2, 2), (4, 2), (2, 4), (8, 8), (3, 5)])
def test_closed_forms(m, g):
    n, size = m * g, 2**20 * 3 * 5 * 7 * 8
    block = [r // g for r in range(n)]
    robin = [r % m for r in range(n)]
    # flat ring, block placement: M crossing edges, each 2(n-1)/n N
    assert _bytes("ring", "all_reduce", size, block) == m * 2 * (n - 1) * size // n
    # round-robin: every edge crosses in rank order; the topology ring still crosses M times
    assert _bytes("ring", "all_reduce", size, robin) == n * 2 * (n - 1) * size // n
    assert _bytes("ring_topology", "all_reduce", size, robin) == m * 2 * (n - 1) * size // n
    # hierarchical: G rings of M across nodes, each carrying N/G: 2(M-1)N in all
    assert _bytes("hierarchical", "all_reduce", size, block) == 2 * (m - 1) * size
    assert _bytes("hierarchical", "all_gather", size, block) == (m - 1) * size
    assert _bytes("hierarchical", "reduce_scatter", size, block) == (m - 1) * size
    # the ring's all-gather and reduce-scatter: M crossing edges of (n-1)/n N each
    assert _bytes("ring", "all_gather", size, block) == m * (n - 1) * size // n
    # trees: the whole buffer both ways over every crossing edge
    assert _bytes("tree", "all_reduce", size, [0] * (n - 1) + [1]) == 2 * size


def test_ring_orders():
    round_robin = [0, 1, 2, 0, 1, 2]  # rank r on node r % 3
    assert ring_order(round_robin, "rank") == [0, 1, 2, 3, 4, 5]
    assert ring_order(round_robin, "topology") == [0, 3, 1, 4, 2, 5]
    sent = ALGORITHMS["ring_topology"].messages("all_gather", 10, round_robin)
    assert internode(sent, round_robin) == 3 * 50 and sum(sent.values()) == 6 * 50
