"""The run folder without launching anything: the writer (RunFolder), the loader, the row
builder, and rank 0's events becoming files (worker and parent in this process, a fake
communicator, no measurement)."""

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from commbench.folder.load import load_runs, read_samples
from commbench.errors import InputError
from commbench.folder.schema import COLUMN_DOCS, COLUMNS, FORMAT_VERSION, REQUIRED, build_row
from commbench.folder import write as folder_module
from commbench.folder.write import RunFolder


def _row(point, wrong=0, samples=3, **extra):
    return build_row(run_id="r1", label="lab", point=point, collective="all_reduce", backend="mpi", algorithm="native",
                     device="cpu", dtype="float32", op="sum", in_place=1, world_size=4, nodes=1, ranks_per_node=4,
                     size_bytes=1024 * (point + 1), count=256 * (point + 1), time_us=10.0 + point, samples=samples,
                     iterations=3, batch=1, warmup=1, wrong=wrong, **extra)


def _written(tmp_path, points=3, wrong=()):
    f = RunFolder(tmp_path / "run")
    f.create({"run_id": "r1", "label": "lab"})
    for p in range(points):
        f.add(_row(p, wrong=1 if p in wrong else 0), [9.0 + p, 10.0 + p, 11.5 + p])
    return f


def test_every_column_is_documented_once_and_required_columns_exist():
    names = [n for n, _ in COLUMN_DOCS]
    assert len(names) == len(set(names)) and tuple(names) == COLUMNS
    assert all(doc for _, doc in COLUMN_DOCS) and set(REQUIRED) <= set(COLUMNS)


def test_build_row_fills_bandwidth_and_refuses_unknown_columns():
    row = _row(0)
    assert list(row) == [c for c in COLUMNS if c in row]  # column order
    assert row["bus_factor"] == pytest.approx(1.5) and row["algbw_gbps"] == pytest.approx(1024 / 10e-6 / 1e9)
    assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * 1.5) and row["timestamp"]
    assert type(build_row(run_id="r", point=np.int64(2), collective="all_gather", world_size=2, size_bytes=8,
                          time_us=np.float32(1.0))["point"]) is int  # numpy scalars become plain numbers
    with pytest.raises(ValueError, match="not results columns: colour"):
        _row(0, colour="red")


def test_rows_and_samples_round_trip_with_format_version(tmp_path):
    f = _written(tmp_path, wrong=(1,))
    assert f.finalize() == "samples.parquet" and not (f.dir / "samples.csv").exists()
    assert json.loads((f.dir / "run.json").read_text())["format_version"] == FORMAT_VERSION
    rows, metas = load_runs([f.dir], samples=True)
    assert list(rows.point) == [0, 1, 2] and list(rows.wrong) == [0, 1, 0] and set(rows.run) == {"lab"}
    assert [list(v) for v in rows.sample_values] == [[9.0, 10.0, 11.5], [10.0, 11.0, 12.5], [11.0, 12.0, 13.5]]
    assert metas == [(str(f.dir), {"format_version": FORMAT_VERSION, "run_id": "r1", "label": "lab"})]
    assert (f.rows, f.wrong) == (3, 1)


def test_resumed_samples_join_the_parquet_file(tmp_path):
    f = _written(tmp_path, points=2)
    f.finalize()
    f.add(_row(2), [1.0, 2.0])
    assert f.finalize() == "samples.parquet"
    assert sorted(read_samples(f.dir).groupby("point").size().items()) == [(0, 3), (1, 3), (2, 2)]


def test_repair_cuts_a_partial_row_and_orphan_samples(tmp_path):
    f = _written(tmp_path, points=3, wrong=(0,))
    csv = f.dir / "results.csv"
    text = csv.read_text()
    csv.write_text(text[:text.rindex("\n", 0, len(text) - 1) + 1] + text.splitlines()[-1][:20])  # last row cut
    again = RunFolder(f.dir)
    assert again.repair() == {0, 1} and (again.rows, again.wrong) == (2, 1)
    assert csv.read_text().endswith("\n") and len(csv.read_text().splitlines()) == 3
    assert sorted(set(read_samples(f.dir).point)) == [0, 1]  # point 2 is measured again on resume
    assert RunFolder(tmp_path / "nothing").repair() == set()


def test_each_ranks_samples_go_first_and_a_repair_keeps_those_of_points_with_a_row(tmp_path):
    import pandas as pd

    from commbench.folder.schema import RANK_COLUMNS, RANKS_CSV

    f = RunFolder(tmp_path / "run")
    f.create({"run_id": "r1", "label": "lab"})
    for p in range(3):
        f.add(_row(p), [9.0, 10.0, 11.0], ranks={0: ([9.0, 10.0, 11.0], [0.0, 0.0, 0.0]),
                                                  1: ([8.0, 9.5, 10.5], [1.5, 2.0, 2.5])})
    ranks = pd.read_csv(f.dir / RANKS_CSV)
    assert tuple(ranks.columns) == RANK_COLUMNS and len(ranks) == 3 * 2 * 3
    assert list(ranks[(ranks.point == 1) & (ranks["rank"] == 1)].late_us) == [1.5, 2.0, 2.5]
    csv = f.dir / "results.csv"
    lines = csv.read_text().splitlines(keepends=True)
    csv.write_text("".join(lines[:-1]))  # point 2's row lost: its samples and ranks' samples are dropped
    assert RunFolder(f.dir).repair() == {0, 1}
    assert sorted(set(pd.read_csv(f.dir / RANKS_CSV).point)) == [0, 1]
    again = folder_module.RunFolder(f.dir)  # events again: rank 1's first line is lost, so its later one leaves a gap
    again.record({"event": "samples", "point": 2, "values": [11.0, 12.0, 13.0]})
    again.record({"event": "ranks", "point": 2, "rank": 0, "start": 0, "time_us": [11.0, 12.0, 13.0],
                  "late_us": [0.0, 0.0, 0.0]})
    again.record({"event": "ranks", "point": 2, "rank": 1, "start": 2, "time_us": [13.0], "late_us": [0.0]})
    assert again.record({"event": "row", "row": _row(2)})
    # the row and its samples are written; the ranks' samples, which a rank lacks, are not
    assert sorted(set(pd.read_csv(f.dir / RANKS_CSV).point)) == [0, 1] and len(pd.read_csv(csv)) == 3


def test_a_version_less_folder_still_loads(tmp_path):
    f = _written(tmp_path)
    (f.dir / "run.json").write_text(json.dumps({"run_id": "r1", "label": "old"}))  # format 1: no version
    rows, metas = load_runs([f.dir])
    assert len(rows) == 3 and set(rows.run) == {"old"} and "format_version" not in metas[0][1]
    (f.dir / "run.json").unlink()  # no run.json at all: named after its folder
    rows, _ = load_runs([tmp_path])
    assert set(rows.run) == {"run"}


@pytest.mark.parametrize("change,message", [
    (lambda d: (d / "results.csv").write_text("run_id,collective\nx,all_reduce\n"),
     "results.csv is missing columns point, backend"),
    (lambda d: (d / "run.json").write_text(json.dumps({"format_version": FORMAT_VERSION + 1})),
     f"results format version {FORMAT_VERSION + 1} is newer"),
    (lambda d: (d / "run.json").write_text("{"), "unreadable run.json"),
    (lambda d: (d / "samples.csv").unlink(), "no samples"),
])
def test_an_unusable_folder_is_one_input_error(tmp_path, change, message):
    f = _written(tmp_path)
    change(f.dir)
    with pytest.raises(InputError) as exc:
        load_runs([tmp_path], samples=True)
    assert str(exc.value).startswith(f"{f.dir}: ") and message in str(exc.value) and "\n" not in str(exc.value)


def test_a_new_folder_refuses_one_with_results(tmp_path):
    f = _written(tmp_path)
    with pytest.raises(InputError, match="already holds results"):
        RunFolder(f.dir).create({"run_id": "again"})


@pytest.mark.skipif(os.geteuid() != 0 or os.sysconf("SC_PAGESIZE") != 4096,
                    reason="mounting a small tmpfs needs root; the sizes below are 4 KiB pages")
def test_a_full_disk_records_the_status_compact_where_the_indented_text_has_no_room(tmp_path, request):
    """run.json on a full 16 KB tmpfs (one page of its own): a status whose indented text outgrows
    the page is written compact in place, readable and whole; one that fits in neither form fails."""
    disk = tmp_path / "disk"
    disk.mkdir()
    try:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", disk], capture_output=True)
    except FileNotFoundError:
        pytest.skip("no mount program here")
    if mounted.returncode:
        pytest.skip("cannot mount a tmpfs here")
    request.addfinalizer(lambda: subprocess.run(["umount", "-l", disk], check=False))
    f = RunFolder(disk / "run")
    request.addfinalizer(f.release)
    f.create({"run_id": "r1", "status": "running", "warnings": list(range(400))})  # indented ~3 KB, one page
    room = os.statvfs(disk)
    (disk / "filler").write_bytes(b"\0" * (room.f_bavail * room.f_frsize))  # nothing is left
    with pytest.raises(OSError):
        (disk / "more").write_bytes(b"x")
    grown = {"status": "failed", "error": "No space left on device", "skipped": list(range(150))}
    f.update(grown)
    text = (f.dir / "run.json").read_text()
    assert len(json.dumps(json.loads(text), indent=2, sort_keys=True)) > 4096 > len(text)
    assert json.loads(text)["status"] == "failed" and json.loads(text)["skipped"] == list(range(150))
    with pytest.raises(OSError):
        f.update({"warnings": list(range(2000))})  # no form fits: the error, the old text kept whole
    assert json.loads((f.dir / "run.json").read_text())["status"] == "failed"
    assert not [p.name for p in f.dir.iterdir() if p.name.startswith(".run.json.")]  # no temporary file left


def test_a_shorter_status_rewritten_in_place_is_whole_json_before_the_file_is_cut(tmp_path, monkeypatch):
    """_rewrite_in_place with the cut (ftruncate) never reached, as after a kill: the file holds the new
    text padded with spaces, which reads as the new JSON, not the new text followed by the old one's end."""
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"status": "running", "sizes": list(range(300))}, indent=2))
    new = json.dumps({"status": "failed"}).encode()

    def killed(fd, length):
        raise KeyboardInterrupt

    monkeypatch.setattr(folder_module.os, "ftruncate", killed)
    with pytest.raises(KeyboardInterrupt):
        folder_module._rewrite_in_place(path, new)
    assert json.loads(path.read_text()) == {"status": "failed"}
    monkeypatch.undo()
    assert folder_module._rewrite_in_place(path, new) and path.read_bytes() == new


EVENTS = [
    {"event": "facts", "run": {"world_size": 4, "versions": {"python": "3"}}},
    {"event": "ready", "world_size": 4, "nodes": 1, "ranks_per_node": 4, "total": 3, "already": 0, "hosts": ["h"]},
    {"event": "skip", "point": {"index": 0, "collective": "all_reduce"}, "reason": "no such thing"},
    {"event": "start", "point": {"index": 1}},
    {"event": "warning", "text": "slow fallback"},
    {"event": "samples", "point": 1, "values": [1.5]},  # a point's samples may come in several events
    {"event": "samples", "point": 1, "values": [2.5]},
    {"event": "row", "row": _row(1, wrong=2, samples=2)},
    {"event": "samples", "point": 2, "values": [3.25]},
    {"event": "row", "row": _row(2, samples=1)},
    {"event": "done", "wrong": 2, "rows": 2},
]


def test_events_become_files_samples_before_each_row(tmp_path, monkeypatch):
    writes = []
    append = folder_module._append
    monkeypatch.setattr(folder_module, "_append", lambda path, cols, rows: (writes.append(path.name),
                                                                            append(path, cols, rows)))
    f = RunFolder(tmp_path / "run")
    f.create({"run_id": "r1"})
    for event in EVENTS:
        f.record(event)
    f.finish("completed", None)
    assert writes == ["samples.csv", "results.csv"] * 2
    meta = json.loads((f.dir / "run.json").read_text())
    assert meta["world_size"] == 4 and meta["warnings"] == ["slow fallback"] and meta["status"] == "completed"
    assert meta["skipped"] == [{"index": 0, "collective": "all_reduce", "reason": "no such thing"}]
    assert meta["samples_file"] == "samples.parquet" and meta["points_measured"] == 2 and meta["wrong_total"] == 2
    rows, _ = load_runs([f.dir], samples=True)
    assert list(rows.point) == [1, 2] and [list(v) for v in rows.sample_values] == [[1.5, 2.5], [3.25]]


def test_rows_lost_on_the_way_fail_the_run(tmp_path):
    """A row line garbled on the way (rank 0 counted it, the parent never got it) is not lost
    silently: the run fails, resumable."""
    from commbench.errors import JobError
    from commbench.run.session import RunResult, collect

    f = RunFolder(tmp_path / "run")
    f.create({"run_id": "r1"})
    result = RunResult(f.dir)
    for event in EVENTS[:8]:  # facts .. the row of point 1
        collect(result, f, event)
    with pytest.raises(JobError, match="1 of the 2 rows rank 0 sent did not arrive"):
        collect(result, f, {"event": "done", "wrong": 2, "rows": 2})
    assert RunFolder(f.dir).repair() == {1}


def test_a_row_missing_samples_is_not_written(tmp_path):
    """A samples line lost on the way: the row is not written without them (the point stays
    to be measured again), and the run fails at the end instead of keeping a short row."""
    from commbench.errors import JobError
    from commbench.run.session import RunResult, collect

    f = RunFolder(tmp_path / "run")
    f.create({"run_id": "r1"})
    result = RunResult(f.dir)
    for event in EVENTS[:6] + EVENTS[7:]:  # the second samples event of point 1 is lost
        if event["event"] != "done":
            collect(result, f, event)
    assert [r["point"] for r in result.rows] == [2] and RunFolder(f.dir).repair() == {2}
    with pytest.raises(JobError, match="1 of the 2 rows"):
        collect(result, f, EVENTS[-1])


def test_facts_lost_on_the_way_fail_the_run(tmp_path):
    from commbench.errors import JobError
    from commbench.run.session import RunResult, collect

    f = RunFolder(tmp_path / "run")
    f.create({"run_id": "r1"})
    result = RunResult(f.dir)
    with pytest.raises(JobError, match="facts for run.json"):
        for event in EVENTS[1:]:
            collect(result, f, event)


class FakeComm:
    """One rank alone; refuses max reductions, like a backend without that op."""
    rank, size, device, reducer, notes = 0, 1, "cpu", object(), ()

    def allgather_object(self, obj):
        return [obj]

    def library_info(self):
        return {"fake_library": "1.0"}

    def barrier(self):
        pass

    def reduce_host(self, values, op):  # one rank: its own values
        return values

    def unsupported(self, collective, dtype, op, in_place, native):
        return "the fake has no max" if op == "max" else None

    def close(self):
        self.closed = True


@pytest.fixture
def fake_job(tmp_path, monkeypatch):
    """A spec of 4 points (2 sizes x sum, max) for one rank on the fake communicator, with a fixed
    measurement (2 µs median) instead of the harness."""
    from commbench import runinfo
    from commbench.rank import harness, worker
    from commbench.machine import inventory as machine
    from commbench.spec import SweepSpec

    for var in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "RANK", "SLURM_PROCID", "PMIX_RANK"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(worker, "open_communicators", lambda spec, info: {"mpi": FakeComm()})
    monkeypatch.setattr(runinfo, "software_versions", lambda libraries: dict(libraries))
    monkeypatch.setattr(machine, "describe", lambda: {"hostname": "h"})
    monkeypatch.setattr(harness, "measure", lambda *a, **k: harness.Measurement(np.array([2e-6, 1e-6, 3e-6]), 1, 0, 1))
    spec = SweepSpec(collectives=["all_reduce"], backends=["mpi"], algorithms=["native"], sizes=[8, 1024],
                     dtypes=["float32"], ops=["sum", "max"], in_place=[True], nprocs=1, launcher="none",
                     iters=3, label="fake", run_id="fake-1", out_dir=str(tmp_path / "run"))
    return spec.validate()


def test_the_worker_sends_facts_rows_and_samples_and_writes_nothing(fake_job):
    from commbench.rank import worker

    events, entered = [], []
    wrong = worker.run(fake_job, emit=lambda kind, **data: events.append({"event": kind, **data}),
                       progress=lambda kind, **data: entered.append(data["point"]["index"]))
    kinds = [e["event"] for e in events]
    assert kinds[:2] == ["facts", "ready"] and kinds[-1] == "done" and wrong == 0
    assert sorted(kinds[2:-1]) == ["row", "row", "samples", "samples", "skip", "skip", "start", "start"]
    assert all(kinds[i + 1:i + 3] == ["samples", "row"] for i, kind in enumerate(kinds) if kind == "start")
    facts = events[0]["run"]
    assert facts["world_size"] == 1 and facts["planned_points"] == 4 and facts["versions"] == {"fake_library": "1.0"}
    rows = [e for e in events if e["event"] == "row"]
    samples = [e for e in events if e["event"] == "samples"]
    assert [(s["point"], s["values"]) for s in samples] == [(r["row"]["point"], [2.0, 1.0, 3.0]) for r in rows]
    assert sorted(entered) == [r["row"]["point"] for r in rows]
    assert all(r["row"]["time_us"] == 2.0 and r["row"]["op"] == "sum" for r in rows)
    assert events[-1] == {"event": "done", "wrong": 0, "rows": 2}
    assert not Path(fake_job.out_dir).exists()  # the parent writes the folder, never a rank

    fake_job.done_points = [r["row"]["point"] for r in rows]  # a resumed run skips what is measured
    events.clear()
    worker.run(fake_job, emit=lambda kind, **data: events.append({"event": kind, **data}))
    assert [e["event"] for e in events if e["event"] in ("row", "done")] == ["done"]


def test_worker_events_written_by_the_in_process_path(fake_job):
    """--launcher none: rank 0 runs the worker in this process; the same RunFolder writes."""
    from commbench.run import session

    seen = []
    folder = RunFolder(fake_job.out_dir)
    folder.create({"run_id": fake_job.run_id, "label": fake_job.label})
    result = session.run_in_process(fake_job, folder, lambda e: seen.append(e["event"]))
    assert seen[:2] == ["facts", "ready"] and seen[-1] == "done" and seen.count("row") == 2
    assert len(result.rows) == 2 and len(result.skipped) == 2 and result.wrong == 0
    rows, metas = load_runs([fake_job.out_dir], samples=True)
    assert list(rows.size_bytes) == [8, 1024] and (rows.time_us == 2.0).all() and set(rows.label) == {"fake"}
    assert [list(v) for v in rows.sample_values] == [[2.0, 1.0, 3.0]] * 2
    meta = metas[0][1]
    assert meta["status"] == "completed" and meta["versions"] == {"fake_library": "1.0"}
    assert meta["points_measured"] == 2 and len(meta["skipped"]) == 2 and meta["format_version"] == FORMAT_VERSION


def test_samples_arrive_in_lines_a_pipe_writes_whole(fake_job, monkeypatch):
    """Rank 0's event lines share a pipe with the other ranks' lines: samples go in events of at
    most SAMPLES_PER_EVENT values (each line under 4 KB), gathered by the writer before the row."""
    from commbench.rank import harness, point_events, worker

    def five_samples(*args, **kwargs):
        m = measure(*args, **kwargs)
        return harness.Measurement(np.arange(1, 6) * 1e-6, m.batch, m.wrong, m.warmup)

    measure = harness.measure
    monkeypatch.setattr(point_events, "SAMPLES_PER_EVENT", 2)
    monkeypatch.setattr(harness, "measure", five_samples)
    fake_job.ops = ["sum"]
    events = []
    worker.run(fake_job.validate(), emit=lambda kind, **data: events.append({"event": kind, **data}),
               progress=lambda kind, **data: None)
    lines = [json.dumps(e) for e in events if e["event"] == "samples"]
    assert [len(json.loads(line)["values"]) for line in lines] == [2, 2, 1] * 2
    folder = RunFolder(fake_job.out_dir)
    folder.create({"run_id": fake_job.run_id})
    for e in events:
        folder.record(e)
    rows, _ = load_runs([fake_job.out_dir], samples=True)
    assert [list(v) for v in rows.sample_values] == [[1.0, 2.0, 3.0, 4.0, 5.0]] * 2


def test_only_a_commbench_run_is_a_run_folder_for_the_output_checks(tmp_path, monkeypatch):
    """Someone's results.csv in the current folder does not block `run` (default results/<id>);
    a commbench run folder above --out does."""
    from commbench.folder.place import check_place, is_run_folder

    (tmp_path / "results.csv").write_text("a,b\n1,2\n")
    (tmp_path / "run.json").write_text('{"name": "not ours"}')
    monkeypatch.chdir(tmp_path)
    assert not is_run_folder(tmp_path) and check_place("results/x") == Path("results/x")
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.csv").write_text(",".join(REQUIRED) + "\n")
    assert is_run_folder(run)
    with pytest.raises(InputError, match="is inside the run folder"):
        check_place(run / "sub")
