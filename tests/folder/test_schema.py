"""The results schema (commbench/folder/schema.py): one documented list of columns, the kinds the loader
checks them by, and build_row, the one row builder: columns in schema order, bandwidths and the bus
factor computed (nccl-tests' definitions), op "none" and the timestamp filled in, numpy scalars made
plain, an unknown or missing column refused."""

import json
import re
from datetime import datetime

import numpy as np
import pytest

from conftest import ROOT
from commbench.folder import schema
from commbench.metrics import STAT_COLUMNS
from commbench.folder.schema import (AB_COLUMNS, AB_SAMPLE_COLUMNS, COLUMN_DOCS, COLUMNS, KINDS, MAY_BE_EMPTY, REQUIRED,
                               SAMPLE_COLUMNS, SAMPLE_KINDS, SAMPLE_REQUIRED, build_row)

BASE = {"run_id": "r", "point": 0, "collective": "all_reduce", "world_size": 4, "size_bytes": 1 << 20,
        "time_us": 100.0}


# --- the schema ----------------------------------------------------------------------------------------

def test_every_column_is_documented_once():
    assert len(COLUMNS) == len(set(COLUMNS)) and all(text.strip() for _, text in COLUMN_DOCS)
    assert COLUMNS[:3] == ("run_id", "label", "point") and COLUMNS[-1] == "timestamp"
    assert set(STAT_COLUMNS) <= set(COLUMNS)
    assert AB_COLUMNS == (*COLUMNS, "side", "round") and AB_SAMPLE_COLUMNS == (*SAMPLE_COLUMNS, "side", "round", "pair")


def test_what_readers_require_and_check_is_in_the_schema():
    assert set(REQUIRED) <= set(COLUMNS) and set(MAY_BE_EMPTY) <= set(REQUIRED)
    assert set(KINDS) <= set(AB_COLUMNS) and set(SAMPLE_KINDS) <= set(AB_SAMPLE_COLUMNS)
    assert set(SAMPLE_REQUIRED) <= set(SAMPLE_COLUMNS)
    kinds = {schema.COUNT, schema.POSITIVE, schema.TIME, schema.AMOUNT}
    assert set(KINDS.values()) <= kinds and set(SAMPLE_KINDS.values()) <= kinds
    assert KINDS["time_us"] == KINDS["time_us_p99"] == schema.TIME and KINDS["time_us_stdev"] == schema.AMOUNT
    assert KINDS["world_size"] == KINDS["size_bytes"] == schema.POSITIVE and KINDS["wrong"] == schema.COUNT
    text = {c for c in COLUMNS if c not in KINDS}  # read as text
    assert {"run_id", "label", "collective", "backend", "algorithm", "device", "dtype", "op", "timer", "placement",
            "library_choice", "timestamp"} <= text
    assert not text & {*STAT_COLUMNS, *REQUIRED} - {"run_id", "collective", "backend", "algorithm", "dtype", "op"}


def test_the_docs_list_every_column():
    from docs_pages import rendered

    table = rendered("reference/results.md").split("| column | meaning |", 1)[1].split("\n\n", 1)[0]
    named = set()
    for cell in (line.split("|")[1] for line in table.splitlines()[2:]):
        for name in re.findall(r"`([^`]+)`", cell):
            first, *more = name.split("/")
            named.add(first)
            named.update(first.rsplit("_", 1)[0] + m for m in more)  # time_us_mean/_min: time_us_min
    assert named == set(COLUMNS), (set(COLUMNS) - named, named - set(COLUMNS))


# --- build_row ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("collective,factor", [("all_reduce", 2 * 3 / 4), ("all_gather", 3 / 4),
                                               ("reduce_scatter", 3 / 4)])
def test_bandwidths_are_nccl_tests_definitions(collective, factor):
    row = build_row(**{**BASE, "collective": collective}, algbw_gbps=1e9, busbw_gbps=-1, bus_factor=7)  # replaced
    algbw = (1 << 20) / (100.0 * 1e-6) / 1e9
    assert row["bus_factor"] == pytest.approx(factor)
    assert row["algbw_gbps"] == pytest.approx(algbw) and row["busbw_gbps"] == pytest.approx(algbw * factor)


def test_one_rank_has_no_bus_traffic_and_a_zero_time_no_bandwidth():
    row = build_row(**{**BASE, "world_size": 1})
    assert row["bus_factor"] == 0 and row["busbw_gbps"] == 0 and row["algbw_gbps"] > 0
    assert (build_row(**{**BASE, "time_us": 0.0})["algbw_gbps"], build_row(**{**BASE, "time_us": 0.0})["busbw_gbps"]) \
        == (0.0, 0.0)


def test_columns_come_in_schema_order_with_the_defaults_filled():
    row = build_row(**BASE, wrong=0, dtype="float32", in_place=True, side="A", round=2)
    assert list(row) == [c for c in AB_COLUMNS if c in row]
    assert set(row) == {*BASE, "wrong", "dtype", "in_place", "side", "round", "label", "op", "timestamp",
                        "bus_factor", "algbw_gbps", "busbw_gbps"}
    assert row["label"] == "" and row["op"] == "none" and row["in_place"] == 1 and isinstance(row["in_place"], int)
    assert datetime.fromisoformat(row["timestamp"]).utcoffset().total_seconds() == 0


@pytest.mark.parametrize("given,kept", [("", "none"), (None, "none"), ("sum", "sum"), ("none", "none")])
def test_an_empty_op_is_none(given, kept):
    assert build_row(**BASE, op=given)["op"] == kept


def test_given_label_and_timestamp_are_kept():
    row = build_row(**BASE, label="nightly", timestamp="2024-01-01T00:00:00.000+00:00")
    assert (row["label"], row["timestamp"]) == ("nightly", "2024-01-01T00:00:00.000+00:00")


def test_numpy_scalars_become_plain_numbers_for_json_and_csv():
    row = build_row(**{**BASE, "point": np.int64(3), "world_size": np.int32(4), "size_bytes": np.int64(1024),
                       "time_us": np.float32(2.5)}, wrong=np.int64(0), samples=np.uint16(7), dtype=np.str_("int8"))
    assert type(row["point"]) is int and type(row["world_size"]) is int and type(row["time_us"]) is float
    assert type(row["algbw_gbps"]) is float and type(row["wrong"]) is int and type(row["samples"]) is int
    assert row["dtype"] == "int8"
    assert json.loads(json.dumps(row)) == row


def test_an_unknown_column_is_refused_by_name():
    with pytest.raises(ValueError, match="^not results columns: colour, speed$"):
        build_row(**BASE, speed=1, colour="red")


@pytest.mark.parametrize("missing", ["run_id", "point", "collective", "world_size", "size_bytes", "time_us"])
def test_a_row_without_what_its_bandwidth_needs_is_refused(missing):
    fields = {k: v for k, v in BASE.items() if k != missing}
    with pytest.raises(ValueError, match=f"^a row needs {missing}$"):
        build_row(**fields)
    with pytest.raises(ValueError, match="^a row needs run_id, point, collective, world_size, size_bytes, time_us$"):
        build_row()
