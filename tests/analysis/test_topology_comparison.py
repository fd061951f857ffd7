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


def test_a_text_cell_that_would_start_a_formula_is_written_as_text():
    """topo-compare --csv and model validate --csv write through outputs.csv_text: a label from a
    hand-edited results.csv that a spreadsheet would run ("=HYPERLINK(...)") opens as text;
    numbers, negative ones included, stay numbers."""
    import io

    from commbench.outputs import csv_text

    out = topology_comparison(_rows(nodes=2, label='=HYPERLINK("http://x","y")'))
    back = pd.read_csv(io.StringIO(csv_text(out.assign(delta=-1.5, note=["@x"]))))
    assert list(back["label"]) == ["'" + '=HYPERLINK("http://x","y")'] and list(back["note"]) == ["'@x"]
    assert list(back["delta"]) == [-1.5] and list(back["collective"]) == ["all_reduce"]
    assert list(back["time_us:ring"]) == [6.0]
