"""commbench.run.processes: is a process, or a process group, still there? Signal 0 asks without
touching it; a process that is there but someone else's (EPERM) counts as there."""

import os
import signal
import subprocess
import sys

import pytest

from commbench.run import processes


def _finished_child(**popen) -> int:
    """The pid of a child that has exited and been reaped (its pid, and group, gone)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"], **popen)
    assert proc.wait(timeout=30) == 0
    return proc.pid


def test_this_process_and_its_group_are_alive():
    assert processes.alive(os.getpid())
    assert processes.group_alive(os.getpgrp())


def test_a_reaped_child_and_its_group_are_gone():
    pid = _finished_child(start_new_session=True)  # its own group, led by it: gone with it
    assert not processes.alive(pid)
    assert not processes.group_alive(pid)


def test_a_live_child_in_its_own_group_is_seen_until_it_ends():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        assert processes.alive(proc.pid) and processes.group_alive(proc.pid)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert not processes.alive(proc.pid) and not processes.group_alive(proc.pid)


def test_the_probe_sends_signal_0_and_reads_the_answer():
    asked = []

    def there(ident, sig):
        asked.append((ident, sig))

    def gone(ident, sig):
        raise ProcessLookupError(ident)

    def someone_elses(ident, sig):
        raise PermissionError(ident)

    assert processes._probe(there, 1234) and asked == [(1234, 0)]
    assert not processes._probe(gone, 1234)
    assert processes._probe(someone_elses, 1)  # there, but not ours to signal


def test_other_errors_are_not_taken_for_an_answer():
    def invalid(ident, sig):
        raise OSError(22, "Invalid argument")

    with pytest.raises(OSError, match="Invalid argument"):
        processes._probe(invalid, -5)
