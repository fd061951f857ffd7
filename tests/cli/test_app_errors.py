"""The app's errors at the process boundary: an unexpected error is exit 3 in one line with the
traceback in a file; an OS error is one line, exit 2."""

import os

from cli_inprocess import run_cli
from commbench.errors import BAD_INPUT, INTERNAL


def test_an_unexpected_error_is_exit_3_with_the_traceback_in_a_file(monkeypatch):
    import commbench.machine.inventory

    def boom():
        raise ZeroDivisionError("boom\nsecond line")

    monkeypatch.setattr(commbench.machine.inventory, "describe", boom)
    outcome = run_cli("topo")
    assert outcome.code == INTERNAL, outcome
    lines = outcome.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in outcome.stderr, outcome.stderr
    assert lines[0].startswith("commbench: internal error: ZeroDivisionError: boom / second line (traceback in ")
    path = lines[0].split("(traceback in ")[1].split(";")[0]
    text = open(path).read()
    os.unlink(path)
    assert "Traceback" in text and "ZeroDivisionError: boom" in text and "'topo'" in text


def test_an_os_error_is_one_line_exit_2(monkeypatch):
    import commbench.machine.inventory

    def refused():
        raise PermissionError(13, "Permission denied", "/sys/x")

    monkeypatch.setattr(commbench.machine.inventory, "describe", refused)
    outcome = run_cli("topo")
    assert (outcome.code, outcome.stderr) == (BAD_INPUT, "commbench: error: Permission denied: '/sys/x'\n")
