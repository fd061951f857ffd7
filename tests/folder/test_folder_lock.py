"""One writer per folder, only into a folder of its own, through no link (issue 43, items 2 and 3's
writers): commbench.folder.lock and RunFolder's use of it, without launching anything. Another
process holding a lock is a small Python child (no ranks); the real runs are in
tests/folder/test_folder_lock_runs.py."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from commbench.errors import InputError
from commbench.folder import write as folder_module
from commbench.folder import lock as folder_lock
from commbench.folder.write import RunFolder

HOLDER = textwrap.dedent("""
    import sys, time
    from commbench.folder import lock as folder_lock
    folder_lock.acquire(sys.argv[1])
    print("held", flush=True)
    time.sleep(600)
""")


@pytest.fixture
def holder():
    """Start a process that holds a folder's lock; yields a function folder -> its Popen."""
    procs = []

    def start(folder: Path) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout.readline().strip() == "held"
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def _entries(d: Path) -> dict:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in d.iterdir()}


def test_a_folder_another_process_writes_is_refused_until_it_ends(tmp_path, holder):
    d = tmp_path / "run"
    d.mkdir()
    proc = holder(d)
    with pytest.raises(InputError, match=rf"is being written by another commbench \(pid {proc.pid} on "):
        folder_lock.acquire(d)
    with pytest.raises(InputError, match="is being written by another commbench"):
        folder_lock.check_free(d)
    with pytest.raises(InputError, match="is being written by another commbench"):
        RunFolder(d).create({"run_id": "x"})
    assert [p.name for p in d.iterdir()] == [folder_lock.LOCK_NAME]  # nothing written by the refused ones
    proc.send_signal(signal.SIGKILL)  # the kernel drops the lock of a process however it ends
    proc.wait()
    token = folder_lock.acquire(d)
    try:
        assert folder_lock.holds(d)
        folder_lock.check_free(d)  # this process's own lock is no other writer
        assert folder_lock.acquire(d) == token  # counted, not taken twice
        folder_lock.release(token)
        assert folder_lock.holds(d)
    finally:
        folder_lock.release(token)
    assert not folder_lock.holds(d)


def test_check_free_creates_nothing_and_a_lock_file_link_is_refused(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    folder_lock.check_free(d)
    assert list(d.iterdir()) == []
    victim = tmp_path / "victim.txt"
    victim.write_text("mine")
    (d / folder_lock.LOCK_NAME).symlink_to(victim)
    for call in (folder_lock.check_free, folder_lock.acquire):
        with pytest.raises(InputError, match=r"\.lock is a link"):
            call(d)
    assert victim.read_text() == "mine"


def test_a_run_folder_object_holds_the_lock_from_create_until_release(tmp_path, holder):
    f = RunFolder(tmp_path / "new" / "run")
    f.create({"run_id": "r1"})
    assert folder_lock.holds(f.dir) and (f.dir / folder_lock.LOCK_NAME).is_file()
    f.release()
    assert not folder_lock.holds(f.dir)
    g = RunFolder(tmp_path / "other")
    g.create({"run_id": "r2"})
    del g  # dropped: released (a test helper or a script need not release)
    holder(tmp_path / "other").kill()


@pytest.mark.parametrize("name,content,fragment", [
    ("run.json", '{"title": "my notes"}', "it holds 'run.json'"),  # a JSON object naming no run
    ("run.json", "not json at all", "it holds 'run.json'"),
    ("samples.csv", "run_id,point,iteration,time_us\n", "it holds 'samples.csv'"),
    ("samples.parquet", "PAR1", "it holds 'samples.parquet'"),
    ("notes.txt", "mine", "it holds 'notes.txt'"),
    ("results.csv", "a,b\n", "already holds results"),
])
def test_a_folder_that_is_not_a_run_is_never_written_into(tmp_path, name, content, fragment):
    d = tmp_path / "mine"
    d.mkdir()
    (d / name).write_text(content)
    before = _entries(d)
    for attempt in (RunFolder(d).check_new, lambda: RunFolder(d).create({"run_id": "r1"})):
        with pytest.raises(InputError, match=fragment):
            attempt()
        assert _entries(d) == before


def test_what_a_run_that_measured_nothing_leaves_is_a_run_folder_of_its_own(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    (d / "run.json").write_text(json.dumps({"run_id": "old", "status": "failed", "error": "x", "resumes": [1]}))
    (d / ".spec.json").write_text("{}")
    (d / ".run.json.abc123").write_text("")  # a temporary file a killed writer left
    (d / folder_lock.LOCK_NAME).write_text("1 elsewhere\n")
    f = RunFolder(d)
    f.create({"run_id": "new"})
    assert json.loads((d / "run.json").read_text()).keys() == {"run_id", "format_version"}  # a new record
    f.release()
    (d / "sub").mkdir()
    with pytest.raises(InputError, match="it holds 'sub'"):
        RunFolder(d).check_new()
    (d / "sub").rmdir()
    os.unlink(d / "run.json")
    (d / "run.json").symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(InputError, match="it holds 'run.json'"):
        RunFolder(d).check_new()


@pytest.mark.parametrize("name", folder_lock.OWN_FILES)
def test_a_run_file_that_is_a_link_is_refused_for_writing(tmp_path, name):
    d = tmp_path / "run"
    d.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("mine")
    (d / name).symlink_to(victim)
    with pytest.raises(InputError, match=rf"{name} is not a regular file of the folder but a link"):
        folder_lock.own_files(d)
    (d / name).unlink()
    (d / name).mkdir()
    with pytest.raises(InputError, match=rf"{name} is not a regular file of the folder"):
        folder_lock.own_files(d)


def test_run_json_on_a_full_disk_is_rewritten_in_place_and_no_temporary_file_stays(tmp_path, monkeypatch):
    f = RunFolder(tmp_path / "run")
    f.create({"run_id": "r1", "status": "running", "label": "x" * 2000})
    f.release()

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(folder_module.os, "replace", full)  # the temp file written, its rename refused
    f.finish("failed", "cannot write: No space left on device")
    meta = json.loads((f.dir / "run.json").read_text())
    assert meta["status"] == "failed" and meta["label"] == "x" * 2000
    assert sorted(p.name for p in f.dir.iterdir()) == [folder_lock.LOCK_NAME, "run.json"]
    with pytest.raises(OSError):  # more than the file's room: refused, the file as it was
        f.update({"label": "y" * 10000})
    assert json.loads((f.dir / "run.json").read_text()) == meta
    monkeypatch.setattr(folder_module.tempfile, "mkstemp", full)  # no temp file can be made at all
    f.finish("interrupted", None)
    assert json.loads((f.dir / "run.json").read_text())["status"] == "interrupted"
    monkeypatch.undo()
    monkeypatch.setattr(folder_module.os, "replace", lambda *a: (_ for _ in ()).throw(OSError(errno.EIO, "I/O")))
    with pytest.raises(OSError):  # another error: raised, and the temp file removed all the same
        f.update({"rounds": 1})
    assert sorted(p.name for p in f.dir.iterdir()) == [folder_lock.LOCK_NAME, "run.json"]


def test_rows_are_never_appended_through_a_link(tmp_path):
    """A link planted in a folder being written (after its checks) is not followed: the row fails."""
    f = RunFolder(tmp_path / "run")
    f.create({"run_id": "r1"})
    victim = tmp_path / "victim.csv"
    victim.write_text("mine\n")
    (f.dir / "samples.csv").symlink_to(victim)
    with pytest.raises(OSError) as err:
        f.add({"run_id": "r1", "point": 0, "wrong": 0}, [1.0])
    assert err.value.errno == errno.ELOOP and victim.read_text() == "mine\n"
    f.release()


def test_every_writer_refuses_a_folder_another_process_holds(tmp_path, holder):
    """run, run --resume, ab, sweep (the sweep's folder and a run's folder in it) and import, each in one line,
    exit 2, before anything is launched or written (no ranks start: refused first)."""
    from cli_inprocess import run_cli
    from commbench.errors import BAD_INPUT
    from folder_fixtures import make_folder

    d = make_folder(tmp_path / "run", status="running")
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "suite.yaml").write_text("name: tiny\n")
    suite = tmp_path / "s.yaml"
    suite.write_text("name: tiny\ndefaults: {nprocs: 2, sizes: [8], collective: all_reduce, backend: mpi}\n"
                     "runs: [{label: one}]\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    small = ("-n", "2", "-c", "all_reduce", "--sizes", "64", "--quiet")
    for folder in (d, sweep, empty):
        holder(folder)
    for args in [("run", *small, "--out", empty), ("run", "--resume", d), ("ab", *small, "--out", empty),
                 ("sweep", suite, "--out", sweep, "--quiet"), ("sweep", suite, "--out", sweep, "--resume"),
                 ("run", *small, "--out", sweep / "one"),
                 ("import", "nccl-tests", Path(__file__).parents[1] / "data" / "nccl_tests_all_reduce_16xH100.txt",
                  "--out", empty)]:
        before = {str(p): p.lstat().st_mtime_ns for p in tmp_path.rglob("*")}
        outcome = run_cli(*args)
        outcome.assert_clean()
        lines = outcome.stderr.strip().splitlines()
        assert outcome.code == BAD_INPUT and len(lines) == 1 and "is being written by another commbench" in lines[0], \
            (args, outcome.stderr)
        assert {str(p): p.lstat().st_mtime_ns for p in tmp_path.rglob("*")} == before, args


def test_a_lock_file_removed_between_open_and_lock_is_taken_again(tmp_path, monkeypatch):
    """A refused run removes the lock file it made; a writer that opened that file just before holds
    a lock nobody else can see: acquire takes the lock of the file that is there."""
    from commbench.folder import lock as folder_lock

    real = folder_lock._try_lock
    calls = []

    def removed_first(fd):
        calls.append(fd)
        if len(calls) == 1:
            os.unlink(tmp_path / folder_lock.LOCK_NAME)
        return real(fd)

    monkeypatch.setattr(folder_lock, "_try_lock", removed_first)
    key = folder_lock.acquire(tmp_path)
    try:
        assert len(calls) == 2
        held = os.fstat(folder_lock._held[key][0])
        there = os.lstat(tmp_path / folder_lock.LOCK_NAME)
        assert (held.st_dev, held.st_ino) == (there.st_dev, there.st_ino)
    finally:
        folder_lock.release(key)
