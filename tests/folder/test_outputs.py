"""Outputs, checked before any work: report, compare and topo-compare refuse an output that cannot
be written or would replace an input (exit 2, nothing on stdout, nothing changed); output_file and
output_folder's refusals; write_text replaces a file whole or leaves the old one, writes devices and
pipes in place and replaces a link rather than following it."""

from __future__ import annotations

import os

import pytest

from cli_inprocess import run_cli
from trust_sides import sides, tree  # noqa: F401 - sides: a fixture

from commbench.errors import BAD_INPUT, InputError
from commbench.folder.outputs import output_file, output_folder, write_text


# --- the writers of report, compare and topo-compare --------------------------------------------------

@pytest.mark.parametrize("args,message", [
    (["compare", "{base}", "{cand}", "-o", "/proc/nope.txt"], "-o '/proc/nope.txt' cannot be written"),
    (["compare", "{base}", "{cand}", "-o", "{cand}/results.csv"], "is one of the inputs"),
    (["compare", "{base}", "{cand}", "--html", "{base}/run.json"], "is one of the inputs"),
    (["compare", "{base}", "{cand}", "-o", "{tmp}/x", "--html", "{tmp}/x"], "-o and --html name the same file"),
    (["compare", "{base}", "{cand}", "-o", "{tmp}"], "is a folder"),
    (["report", "{base}", "-o", "{base}/results.csv"], "-o '{base}/results.csv' is one of the inputs"),
    (["report", "{base}", "-o", "/proc/x.html"], "cannot be written"),
    (["report", "{base}", "-o", "{tmp}/no/such/r.html"], "does not exist"),
    (["topo-compare", "{base}", "--csv", "{base}/results.csv"], "--csv '{base}/results.csv' is one of the inputs"),
    (["topo-compare", "{base}", "--csv", "/proc/x.csv"], "cannot be written"),
])
def test_writers_check_their_output_first_and_never_replace_an_input(tmp_path, sides, args, message):
    base, cand = sides
    fill = {"base": base, "cand": cand, "tmp": tmp_path}
    before = tree(base.parent)
    outcome = run_cli(*(a.format(**fill) for a in args))
    outcome.assert_clean()
    assert outcome.code == BAD_INPUT and message.format(**fill) in outcome.stderr, outcome.stderr
    assert outcome.stdout == "" and tree(base.parent) == before


# --- output_file, output_folder, write_text ----------------------------------------------------------

def test_output_file_refuses_folders_missing_folders_unwritable_places_and_inputs(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.csv").write_text("x\n")
    for path, message in [(tmp_path, "is a folder"), (tmp_path / "missing" / "r.html", "does not exist"),
                          ("/proc/nope.txt", "cannot be written"), (run / "results.csv", "is one of the inputs"),
                          ("", "an empty file name")]:
        with pytest.raises(InputError, match=message):
            output_file(path, "-o", inputs=[run])
    assert output_file(run / "report.html", "-o", inputs=[run]) == run / "report.html"  # beside, not over
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # the probes left nothing


def test_output_folder_refuses_files_on_the_way(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(InputError, match="is a file, not a folder"):
        output_folder(tmp_path / "f")
    with pytest.raises(InputError, match="which is a file"):
        output_folder(tmp_path / "f" / "sub")
    with pytest.raises(InputError, match="cannot be written"):
        output_folder("/proc/x/y")
    assert output_folder(tmp_path / "new" / "run") == tmp_path / "new" / "run"


def test_write_text_replaces_whole_or_leaves_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "out.txt"
    write_text(target, "old")
    monkeypatch.setattr(os, "replace", lambda *a: (_ for _ in ()).throw(OSError(28, "No space left on device")))
    with pytest.raises(InputError, match="cannot write report .*No space left on device"):
        write_text(target, "new", "report")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["out.txt"]


@pytest.mark.skipif(os.geteuid() != 0, reason="making device nodes needs root")
def test_a_device_is_written_in_place_never_replaced(tmp_path):
    """`compare -o /dev/null` must not turn /dev/null into a file (a rename over it would, as root)."""
    import stat

    null, full = tmp_path / "null", tmp_path / "full"
    os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    os.mknod(full, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    assert write_text(output_file(null, "-o"), "discarded") == null
    with pytest.raises(InputError, match="cannot write -o .*No space left on device"):
        write_text(output_file(full, "-o"), "x", "-o")
    assert stat.S_ISCHR(null.stat().st_mode) and stat.S_ISCHR(full.stat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full", "null"]


def test_a_pipe_is_written_in_place_and_a_link_replaced_not_followed(tmp_path):
    import threading

    fifo, victim, link = tmp_path / "fifo", tmp_path / "victim", tmp_path / "link"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo).read()))
    reader.start()
    write_text(output_file(fifo, "-o"), "through the pipe")
    reader.join(10)
    assert got == ["through the pipe"] and fifo.is_fifo()
    victim.write_text("someone's file")
    link.symlink_to(victim)  # e.g. planted in a folder received from someone else
    write_text(link, "new")
    assert victim.read_text() == "someone's file" and not link.is_symlink() and link.read_text() == "new"
