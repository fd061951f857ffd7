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


def test_each_folder_is_compared_within_itself_and_its_jobs_by_their_median():
    """Two folders given to topo-compare are two tables, never one variant of one over another's (an
    ab folder's two sides are one); a --repeat run's jobs give each variant its median, not job 1's."""
    one = _rows(nodes=2, folder="/r/a", time_us=[5.0, 6.0])
    other = _rows(nodes=2, folder="/r/b", time_us=[50.0, 30.0])
    repeated = pd.concat([_rows(nodes=2, folder="/r/c", job=j, time_us=t)
                          for j, t in ((1, [4.0, 8.0]), (2, [6.0, 12.0]), (3, [100.0, 10.0]))])
    out = topology_comparison(pd.concat([other, one, repeated])).set_index("folder")
    assert out.loc["/r/a", "speedup:native"] == 6.0 / 5.0 and out.loc["/r/b", "speedup:native"] == 30.0 / 50.0
    assert out.loc["/r/c", "time_us:native"] == 6.0 and out.loc["/r/c", "time_us:ring"] == 10.0  # the jobs' medians
    from commbench.analysis.topology_comparison import group_tables

    tables = group_tables(out.reset_index().assign(label=["", "", "night"]))
    assert [t["title"].split(" · ")[0] for t in tables] == ["b", "a", "night"]  # the label, else the folder's name


def test_a_text_cell_that_would_start_a_formula_is_written_as_text():
    """topo-compare --csv and model validate --csv write through outputs.csv_text: a label from a
    hand-edited results.csv that a spreadsheet would run ("=HYPERLINK(...)") opens as text;
    numbers, negative ones included, stay numbers."""
    import io

    from commbench.folder.outputs import csv_text

    out = topology_comparison(_rows(nodes=2, label='=HYPERLINK("http://x","y")'))
    back = pd.read_csv(io.StringIO(csv_text(out.assign(delta=-1.5, note=["@x"]))))
    assert list(back["label"]) == ["'" + '=HYPERLINK("http://x","y")'] and list(back["note"]) == ["'@x"]
    assert list(back["delta"]) == [-1.5] and list(back["collective"]) == ["all_reduce"]
    assert list(back["time_us:ring"]) == [6.0]


def test_the_text_tables_show_microseconds_and_speedups_as_ratios():
    """topo-compare's text (group_tables): one table per group, titled by it; an 8-byte time in µs
    (0.42, not the 0.00 ms it was), each variant's speedup over the flat ring beside its time, the
    inter-node bytes with a decimal suffix, measured (expected)."""
    from commbench.analysis.topology_comparison import group_tables

    rows = _rows(nodes=2, size_bytes=[8, 8], time_us=[0.42, 0.63], internode_bytes_measured=[float("nan"), 16.0],
                 internode_bytes_expected=[float("nan"), 16.0])
    (table,) = group_tables(topology_comparison(rows))
    assert table["title"] == "lab · all_reduce · mpi · float32 · sum · out-of-place · 2 nodes × 2 ranks"
    assert table["header"] == ["size", "native", "ring"] and table["body"] == [["8", "0.4200 (1.50×)", "0.6300"]]
    assert table["bytes_header"] == ["size", "native", "ring"] and table["bytes_body"] == [["8", "- (-)", "16 (16)"]]
    (plain,) = group_tables(topology_comparison(_rows(nodes=2)))
    assert plain["bytes_header"] == [] and plain["bytes_body"] == []  # no variant counted bytes: no table
    assert plain["body"] == [["1K", "5.00 (1.20×)", "6.00"]]


def test_variant_names_break_at_underscores_in_headers_and_large_times_lose_decimals():
    from commbench.analysis.topology_comparison import _bytes, _us, _wrap

    assert _wrap("hierarchical_kernel") == "hierarchical_\nkernel"
    assert [_us(x) for x in (0.1234, 12.345, 144.84, 206712.4)] == ["0.1234", "12.35", "144.8", "206712"]
    assert [_bytes(x) for x in (0, 512, 1500, 16.8e6, 1.07e9)] == ["0", "512", "1.50K", "16.8M", "1.07G"]
