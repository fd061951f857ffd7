"""topology_comparison on rows that do not say their nodes (a results.csv without the column,
as a fuzzed or hand-edited one): no multi-node point to compare, not a crash."""

import pandas as pd

from commbench.analysis.topology_comparison import topology_comparison


def _rows(**extra) -> pd.DataFrame:
    return pd.DataFrame({"label": "lab", "collective": "all_reduce", "backend": "mpi", "dtype": "float32",
                         "op": "sum", "in_place": False, "placement": "", "ranks_per_node": 2,
                         "algorithm": ["native", "ring"], "size_bytes": 1024, "time_us": [5.0, 6.0], **extra})


def test_rows_without_a_nodes_column_have_nothing_to_compare():
    assert topology_comparison(_rows()).empty


def test_two_nodes_of_two_variants_are_compared():
    out = topology_comparison(_rows(nodes=2))
    assert list(out["speedup:native"]) == [6.0 / 5.0] and list(out["time_us:ring"]) == [6.0]
    assert topology_comparison(_rows(nodes=1)).empty  # one node: no topology to compare
