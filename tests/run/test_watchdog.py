"""commbench.run.watchdog on fake jobs: a scripted stream of output lines on a fake clock (the
timeouts are exact, nothing sleeps), and one trivial real process for the kill path."""

import json
import sys
from types import SimpleNamespace

import pytest

from commbench import events
from commbench.errors import JobError
from commbench.run import watchdog
from commbench.run.launch import Job, Line
from commbench.run.watchdog import STARTUP_TIMEOUT_S, Monitor, describe_point, iter_events
from commbench.spec import SweepSpec

POINT = {"index": 4, "backend": "mpi", "collective": "all_reduce", "algorithm": "ring", "dtype": "float32",
         "op": "sum", "in_place": True, "size": 1024}
WHERE = "in all_reduce ring on mpi, float32 sum, in-place, 1024 B"


def event(kind, **data) -> str:
    return events.PREFIX + json.dumps({"event": kind, **data})


def enter(rank, point=POINT) -> str:
    return event("enter", rank=rank, point=point)


class Clock:
    def __init__(self):
        self.now = 1000.0

    def monotonic(self):
        return self.now


class FakeJob:
    """Job.lines over a script of (seconds since start, stream, text); past the last line the job
    hangs (`hang`) or its streams close. Like Job.lines it raises TimeoutError once the clock
    reaches deadline() before the next line."""

    def __init__(self, clock, script, hang=False, codes=(None,)):
        self.clock, self.script, self.hang, self.killed = clock, script, hang, False
        self.procs = [SimpleNamespace(returncode=c) for c in codes]

    def lines(self, deadline):
        start = self.clock.now
        for at, stream, text in self.script:
            if start + at >= deadline():
                self.clock.now = deadline()
                raise TimeoutError
            self.clock.now = start + at
            yield Line(text, stream)
        if self.hang:
            self.clock.now = deadline()
            raise TimeoutError

    def kill(self):
        self.killed = True


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(watchdog, "time", c)
    return c


def _follow(job, timeout=None):
    """(events yielded, lines relayed, monitor)."""
    relayed, monitor = [], Monitor()
    got = list(iter_events(job, SweepSpec(timeout=timeout), relayed.append, monitor))
    return got, relayed, monitor


# --- the stream -----------------------------------------------------------------------------

def test_events_are_yielded_and_everything_else_relayed(clock):
    script = [(0, "stdout", "hello from rank 1"), (1, "stdout", event("ready", world_size=2)),
              (2, "stderr", event("row", row={"x": 1})),  # an event's prefix on stderr is just text
              (3, "stdout", enter(0)), (3, "stdout", enter(1)), (4, "stdout", "noise " + event("row", row={"x": 2})),
              (5, "stdout", events.PREFIX + "{not json"), (6, "stdout", event("done", wrong=0))]
    got, relayed, monitor = _follow(FakeJob(clock, script))
    assert [e["event"] for e in got] == ["ready", "row", "done"]  # "enter" only informs the monitor
    assert got[1]["row"] == {"x": 2}  # found after other text on the line
    assert [(line.stream, line.text) for line in relayed] == [
        ("stdout", "hello from rank 1"), ("stderr", script[2][2]), ("stdout", events.PREFIX + "{not json")]
    assert list(monitor.tail) == [line.text for line in relayed]
    assert monitor.world == 2 and monitor.point == POINT and monitor.entered == {0, 1}


def test_a_new_point_starts_a_new_set_of_entered_ranks():
    m = Monitor()
    for e in ({"event": "ready", "world_size": 3}, {"event": "enter", "rank": 0, "point": POINT},
              {"event": "enter", "rank": 1, "point": POINT}, {"event": "enter", "rank": 2, "point": POINT | {"index": 5}}):
        m.observe(e)
    assert m.point["index"] == 5 and m.entered == {2}


def test_the_first_error_is_kept():
    m = Monitor()
    m.observe({"event": "error", "rank": 2, "message": "boom"})
    m.observe({"event": "error", "rank": 0, "message": "later"})
    assert m.error == "rank 2: boom"


# --- timeouts ---------------------------------------------------------------------------------

def test_startup_timeout(clock):
    job = FakeJob(clock, [(0, "stdout", "starting"), (STARTUP_TIMEOUT_S - 1, "stdout", "still starting")], hang=True)
    with pytest.raises(JobError, match=r"^timed out after 300 s during start-up \(before the first point\); "
                                       r"the job was killed$"):
        _follow(job)
    assert job.killed and clock.now == 1000.0 + STARTUP_TIMEOUT_S  # ordinary lines do not extend it


@pytest.mark.parametrize("timeout,startup", [(None, STARTUP_TIMEOUT_S), (10.0, STARTUP_TIMEOUT_S), (500.0, 500.0)])
def test_startup_deadline_is_the_longer_of_300_s_and_timeout(clock, timeout, startup):
    """A rank 0 that says "ready" just in time; then the point timeout runs (no point yet: size 0)."""
    job = FakeJob(clock, [(startup - 0.5, "stdout", event("ready", world_size=1))], hang=True)
    limit = SweepSpec(timeout=timeout).point_timeout(0)
    with pytest.raises(JobError, match=rf"^timed out after {limit:g} s during start-up"):  # the limit in force
        _follow(job, timeout)
    assert job.killed
    assert clock.now == pytest.approx(1000.0 + startup - 0.5 + limit)


@pytest.mark.parametrize("size,limit", [(1024, 120.0001024), (10**9, 220.0)])
def test_the_point_timeout_follows_the_buffer_size(clock, size, limit):
    """120 s plus 1 s per 10 MB, counted from the last event; a rank's ordinary output does not reset it."""
    point = POINT | {"size": size}
    script = [(0, "stdout", event("ready", world_size=2)), (1, "stdout", enter(0, point)),
              (1 + limit - 1, "stdout", "rank 1 prints but never enters")]
    job = FakeJob(clock, script, hang=True)
    with pytest.raises(JobError, match=rf"^timed out after {limit:g} s in all_reduce ring on mpi, float32 sum, "
                                       rf"in-place, {size} B; rank 1 never reached it \(rank 0 waited in it\); "
                                       r"the job was killed$"):
        _follow(job)
    assert clock.now == pytest.approx(1000.0 + 1 + limit) and job.killed


def test_each_event_restarts_the_point_timeout(clock):
    script = [(0, "stdout", event("ready", world_size=1))] + [(100 * i, "stdout", enter(0, POINT | {"index": i}))
                                                             for i in range(1, 6)]
    got, _, monitor = _follow(FakeJob(clock, script, hang=False), timeout=None)
    assert [e["event"] for e in got] == ["ready"] and monitor.point["index"] == 5


def test_the_timeout_option_sets_the_point_timeout(clock):
    script = [(0, "stdout", event("ready", world_size=2)), (0, "stdout", enter(0)), (0, "stdout", enter(1))]
    with pytest.raises(JobError, match=r"^timed out after 3 s in .*; every rank entered it \(ranks 0, 1\), none finished"):
        _follow(FakeJob(clock, script, hang=True), timeout=3.0)
    assert clock.now == 1003.0


def test_point_timeout_and_description():
    assert SweepSpec().point_timeout(10**8) == 130.0 and SweepSpec(timeout=2.5).point_timeout(10**9) == 2.5
    assert describe_point(POINT) == WHERE[3:]
    assert describe_point(POINT | {"collective": "all_gather", "op": None, "in_place": False}) == \
        "all_gather ring on mpi, float32, out-of-place, 1024 B"


# --- failures ------------------------------------------------------------------------------

def _monitor(world=4, entered=(0, 2), tail=(), error=None):
    m = Monitor()
    m.observe({"event": "ready", "world_size": world})
    for r in entered:
        m.observe({"event": "enter", "rank": r, "point": POINT})
    m.tail.extend(tail)
    if error:
        m.observe({"event": "error", "rank": 1, "message": error})
    return m


def _job(*codes):
    return SimpleNamespace(procs=[SimpleNamespace(returncode=c) for c in codes])


def test_stragglers_are_named():
    assert _monitor().stragglers() == "; ranks 1, 3 never reached it (ranks 0, 2 waited in it)"
    assert _monitor(world=2, entered=()).stragglers() == ""  # no point in flight yet
    assert _monitor(world=2, entered=(1,)).stragglers() == "; rank 0 never reached it (rank 1 waited in it)"
    assert _monitor(world=2, entered=(0, 1)).stragglers() == "; every rank entered it (ranks 0, 1), none finished"


def test_local_ranks_that_died_by_a_signal_come_first():
    """Local launcher: one process per rank; a rank killed by a signal is the cause, the ranks
    that exited with an error after it are not named."""
    assert _monitor().failure(_job(0, -9, 1, None), 1) == f"rank 1 was killed by SIGKILL {WHERE}"
    assert _monitor().failure(_job(0, 0, 3, 0), 1) == f"rank 2 exited with code 3 {WHERE}"
    assert _monitor().failure(_job(-70, 0), 1) == f"rank 0 was killed by signal 70 {WHERE}"


def test_open_mpi_reports_a_dead_rank():
    tail = ["--------", "mpirun noticed that process rank 3 with PID 4242 on node host1 exited on",
            "signal 11 (Segmentation fault).", "--------"]
    assert _monitor(tail=tail).failure(_job(1), 1) == f"rank 3 was killed by SIGSEGV {WHERE}"


def test_torchrun_reports_a_dead_rank():
    tail = ["Root Cause (first observed failure):", "[0]:", "  time      : 2024-01-01_00:00:00",
            "  rank      : 1 (local_rank: 1)", "  exitcode  : -6 (pid: 77)"]
    assert _monitor(tail=tail).failure(_job(1), 1) == f"rank 1 was killed by SIGABRT {WHERE}"


def test_a_reported_error_when_no_rank_died():
    m = _monitor(error="CUDA out of memory")
    assert m.failure(_job(1), 1) == f"rank 1: CUDA out of memory ({WHERE})"
    assert _monitor(error="x").failure(_job(0, -15), 1).startswith("rank 1 was killed by SIGTERM")  # a death wins


def test_otherwise_the_launchers_code_and_the_stragglers():
    assert _monitor().failure(_job(2), 2) == f"the launcher exited with code 2 {WHERE}; ranks 1, 3 never reached it " \
                                             "(ranks 0, 2 waited in it)"
    assert Monitor().failure(_job(1), 1) == "the launcher exited with code 1 during start-up (before the first point)"


# --- a real process ------------------------------------------------------------------------

def test_a_real_hanging_job_is_killed_at_the_point_timeout():
    code = ("import json, sys, time\n"
            f"P = {events.PREFIX!r}\n"
            "print('plain line', flush=True)\n"
            "print('to stderr', file=sys.stderr, flush=True)\n"
            "print(P + json.dumps({'event': 'ready', 'world_size': 2}), flush=True)\n"
            f"print(P + json.dumps({{'event': 'enter', 'rank': 1, 'point': {POINT!r}}}), flush=True)\n"
            "time.sleep(600)\n")
    job = Job([([sys.executable, "-c", code], {})])
    relayed, monitor = [], Monitor()
    with pytest.raises(JobError, match=r"^timed out after 1 s in all_reduce .*; rank 0 never reached it "
                                       r"\(rank 1 waited in it\); the job was killed$"):
        list(iter_events(job, SweepSpec(timeout=1.0), relayed.append, monitor))
    assert job.procs[0].wait(timeout=30) < 0  # killed by a signal
    assert sorted((line.stream, line.text) for line in relayed) == [("stderr", "to stderr"), ("stdout", "plain line")]


# --- a launcher's own words (issue 67: Open MPI start-up failures, a launcher left hanging) ----------------------

def test_a_launcher_that_fails_at_start_up_is_named_by_its_first_sentence(clock):
    rule = "-" * 74
    script = [(0, "stderr", t) for t in (rule, "The mapby directive contains an unrecognized qualifier:", "",
                                        "  Qualifier: ppr:1:foo", rule)]
    job = FakeJob(clock, script, codes=(213,))
    _, _, monitor = _follow(job)
    assert monitor.failure(job, 213) == ("the launcher exited with code 213 during start-up (before the first point); "
                                         "its message: The mapby directive contains an unrecognized qualifier")


def test_prterun_5s_report_of_a_rank_is_a_death():
    m = Monitor()
    m.tail.extend(["prterun detected that one or more processes exited with non-zero status,",
                   "thus causing the job to be terminated. The first process to do so was:", "",
                   "   Process name: [prterun-vm-29201@1,3]", "   Exit code:    14"])
    assert m.reported_deaths() == {3: 14}


def _launcher_that_loses_its_rank(launcher: str) -> Job:
    """A real process whose one child (its "rank") fails at once and which then never ends (Open MPI 5's prterun
    after a rank's failed MPI_Init), as `launcher` started it."""
    import os

    script = ("import subprocess, sys, time; child = subprocess.Popen([sys.executable, '-c', 'raise SystemExit(14)']); "
              "print('-' * 30, flush=True); print('A rank could not start. Really.', flush=True); time.sleep(600)")
    return Job([([sys.executable, "-c", script], dict(os.environ))], launcher)


def test_a_launcher_left_without_its_ranks_is_killed_in_seconds_with_one_line(monkeypatch):
    """Killed ORPHAN_GRACE_S after its last rank here, not at the 300 s start-up timeout."""
    import time

    from commbench.run import launch

    monkeypatch.setattr(launch, "ORPHAN_GRACE_S", 1.0)
    job, start = _launcher_that_loses_its_rank("mpirun"), time.monotonic()
    with pytest.raises(JobError, match=r"^every rank here ended during start-up \(before the first point\), and the "
                                       r"launcher did not end the job: it was killed; its message: A rank could not "
                                       r"start\.$"):
        list(iter_events(job, SweepSpec(), lambda line: None, Monitor()))
    assert time.monotonic() - start < 60 and job.exited()


def test_a_local_rank_with_a_finished_child_is_no_hung_launcher(monkeypatch):
    """The local launcher's process is the rank itself: a compiler it ran and waited for is no rank of its."""
    import time

    from commbench.run import launch

    monkeypatch.setattr(launch, "ORPHAN_GRACE_S", 0.2)
    for launcher, hung in (("local", False), ("torchrun", True)):
        job = _launcher_that_loses_its_rank(launcher)
        try:
            end, judged = time.monotonic() + 5, False
            while time.monotonic() < end and not judged:
                judged = job._launcher_hung()
                time.sleep(0.1)
            assert judged == hung, launcher
        finally:
            job.kill()
