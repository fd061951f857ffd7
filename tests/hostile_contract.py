"""The contract every hostile input (issue 20) must end in, and the runner that checks it, for the
acceptance suite of tests/acceptance (a file per class of input; their files: tests/hostile_fixtures.py).
Each case runs as the real `python -P -m commbench ...` (this Python, the current folder off its import
path as for the `commbench` script, from Python 3.11; cwd a scratch folder; PATH with the venv's bin for mpirun; TMPDIR its
own, where an internal error leaves its traceback file; a case may set or unset variables, "{S}" in a
value the scratch folder, and the umask), one at a time:

* the exit code is in the case's set (BAD_INPUT for bad input or unusable data; OK for valid but odd
  input; 128 + N for signal N: SIGINT, SIGTERM, SIGHUP, SIGPIPE for a closed stdout), never INTERNAL;
  a child killed by a signal it does not handle counts as 128 + N;
* no Python traceback (nor "Exception ignored in") on stderr or stdout;
* BAD_INPUT or INTERNAL: exactly one non-empty stderr line; a signal: the last stderr line says
  "interrupted" or "stopped" (a running sweep prints progress before it);
* no raw ESC, BEL, C1 CSI or bidirectional control character on stdout or stderr;
* nothing in the scratch folder changed outside the case's outputs (path, type, size, mtime_ns, link
  target, and sha256 of files up to 1 MB, before and after);
* before a BAD_INPUT exit: at most 5 s wall and 300 MB peak memory (LIMIT_MB): the larger of the command's
  ru_maxrss (its largest process and the descendants it waited for) and its process tree's RSS summed
  every 50 ms; every case is killed at a hard cap (15 s for a case accepted only with BAD_INPUT, 60 s
  otherwise: a timeout), or beyond MAX_TREE_PROCS processes or MAX_TREE_MB (a runaway);
* no process of the command left running after it exits (looked up by an environment tag);
* the system's /dev/null, /dev/full and /dev/zero still device nodes afterwards (a replaced one is
  put back at once and reported; outputs that are devices are private nodes in the scratch folder);
* the class extras (a case's `checks`: functions of the scratch folder and the Outcome; its `watch`,
  called with the command's pid and processes at every scan while it runs, notes what it sees in the
  Outcome).

Signals land at rows written (deterministic) or seconds after the start (on a loaded machine 1 s can
still be inside Python's imports). Nothing outside the scratch folder is watched (/dev/shm and others).
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import os
import re
import shlex
import signal
import stat
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

from conftest import ROOT
from process_tree import TAG_ENV, kill_all, tagged, tree
from commbench.errors import BAD_INPUT, INTERNAL, OK

VENV_BIN = ROOT / ".venv" / "bin" if (ROOT / ".venv" / "bin").is_dir() else Path(sys.executable).parent
SIGNALLED = 128  # a command ended by signal N exits 128 + N
INTERRUPTED, TERMINATED = SIGNALLED + signal.SIGINT, SIGNALLED + signal.SIGTERM
HUNG_UP, PIPE_CLOSED = SIGNALLED + signal.SIGHUP, SIGNALLED + signal.SIGPIPE
# before a BAD_INPUT exit (issue 20). Peak RSS counts the pages of the libraries mapped: on a venv
# installed minutes before (CI's), their files are whole in the page cache and map in larger runs,
# so a one-line refusal that peaks at ~190 MB in an older venv peaks at ~230 MB there
LIMIT_S, LIMIT_MB = 5.0, 300.0
CAP_BAD_S, CAP_S = 15.0, 60.0  # hard kill: a case accepted only with BAD_INPUT, any other
MAX_TREE_PROCS, MAX_TREE_MB = 48, 2500.0  # runaway guard for the shared machine
ADDRESS_LIMIT_GB, SCAN_S, HASH_LIMIT = 8, 0.05, 1 << 20  # every process's address space; /proc scans; hashed files
SAFE_PATH = ["-P"] if sys.version_info >= (3, 11) else []  # Python 3.10 has no -P (and ignores PYTHONSAFEPATH)
RAW_CONTROLS = re.compile("[\x07\x1b\x9b\u202a-\u202e\u2066-\u2069]")
SIGNAL_WORDS = re.compile(r"interrupted|stopped", re.IGNORECASE)

Step = Callable[[Path], None]  # prepares the scratch folder before the command runs
Check = Callable[[Path, "Outcome"], list]  # problems found after it ran


@dataclass(frozen=True)
class Sig:
    """A signal to send: after_s seconds after the start, or after the rows trigger when rows is set
    (results.csv at `csv` holds that many rows); to the process group (Ctrl-C) or the process."""
    signum: int
    after_s: float = 0.0
    rows: int | None = None
    csv: str = "X/results.csv"
    group: bool = False
    twice: bool = False  # a second one 0.1 s later (an impatient Ctrl-C Ctrl-C)


@dataclass
class Case:
    cls: int
    name: str
    argv: list[str]  # after `python -m commbench`; "{S}" is the scratch folder's absolute path
    setup: tuple[Step, ...] = ()
    expect: frozenset = frozenset({BAD_INPUT})
    outputs: tuple[str, ...] = ()  # paths (relative to the scratch folder) the command may write
    sig: Sig | None = None
    head: int | None = None  # read this many stdout lines, then close stdout (`| head -N`)
    checks: tuple[Check, ...] = ()
    note: str = ""  # why the expected codes, where they are debatable
    env: tuple = ()  # (name, value) set in the command's environment (PYTHONIOENCODING=ascii, ...); None: unset
    umask: int | None = None  # the command's umask (else this process's)
    watch: Callable | None = None  # watch(scratch, pid, tree, outcome) at every scan while the command runs
    cwd: str = ""  # where the command starts, relative to the scratch folder (else the scratch folder)
    stdout: str = ""  # "closed": the command starts with no standard output (`>&-`); "full": on /dev/full


def case(cls: int, name: str, argv, *setup: Step, expect=(BAD_INPUT,), outputs=(), sig=None, head=None, checks=(),
         note="", env=None, umask=None, watch=None, cwd="", stdout="") -> Case:
    """One case; argv as a shell-like string or a list (for strings with control characters)."""
    argv = shlex.split(argv) if isinstance(argv, str) else list(argv)
    return Case(cls, name, argv, tuple(setup), frozenset(expect), tuple(outputs), sig, head, tuple(checks), note,
                tuple((env or {}).items()), umask, watch, cwd, stdout)


@dataclass
class Outcome:
    rc: int | None = None  # shell-style: 128 + N when killed by signal N
    died_of: int | None = None  # the signal that killed it (no handler)
    wall_s: float = 0.0
    maxrss_mb: float = 0.0  # wait4: the largest process (and waited-for descendants)
    tree_mb: float = 0.0  # sampled: the whole tree's RSS at once
    stdout: bytes = b""
    stderr: bytes = b""
    killed: str | None = None  # why the runner killed it (timeout, runaway)
    sent: list[str] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)
    crash: str | None = None  # the traceback file of an internal error
    changed: list[str] = field(default_factory=list)
    peak_mb: float = 0.0  # the larger of maxrss_mb and tree_mb
    seen: list = field(default_factory=list)  # what the case's watch noted


def child_env(tmp: Path, tag: str = "", case_env: tuple = (), scratch: Path | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "CLICOLOR_FORCE", "PYTHONINSPECT")}
    env.update({"PATH": f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}", "TMPDIR": str(tmp),
                "PYTHONDONTWRITEBYTECODE": "1", TAG_ENV: tag})
    for name, value in case_env:
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value.replace("{S}", str(scratch)) if scratch else value
    return env


# Starts the command from a small process, so its ru_maxrss is its own (a child forked from this large
# pytest process carries the parent's RSS into ru_maxrss at exec): writes the command's pid, then its
# wait status and ru_maxrss (KB), to argv[1]; the command leads a session, in argv[2] bytes of address space,
# with its standard output closed where argv[3] says "closed".
REAPER = """import os, resource, sys
report, limit, stdout, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
pid = os.fork()
if pid == 0:
    os.setsid()
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    if stdout == "closed":
        os.close(1)
    try:
        os.execv(argv[0], argv)
    finally:
        os._exit(127)
with open(report, "w") as f:
    f.write(f"{pid}\\n")
_, status, usage = os.wait4(pid, 0)
with open(report, "a") as f:
    f.write(f"{status} {usage.ru_maxrss}\\n")
"""


def count_rows(path: Path) -> int:
    """Complete rows of a results.csv (a half-written last line does not count)."""
    if not path.is_file():
        return 0
    with open(path, newline="", errors="replace") as f:
        table = list(csv.reader(f))
    return sum(len(r) == len(table[0]) for r in table[1:]) if table else 0


def snapshot(root: Path) -> dict[str, tuple]:
    """path -> (kind, size, mtime_ns, sha256 or link target) for everything under root."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            rel, st = os.path.relpath(p, root), os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir",)
            elif not stat.S_ISREG(st.st_mode):  # a device node, fifo or socket: never read
                out[rel] = ("special", stat.S_IFMT(st.st_mode), st.st_rdev)
            else:
                digest = hashlib.sha256(Path(p).read_bytes()).hexdigest() if st.st_size <= HASH_LIMIT else None
                out[rel] = ("file", st.st_size, st.st_mtime_ns, digest)
    return out


def _changes(before: dict, after: dict, outputs: tuple[str, ...]) -> list[str]:
    allowed = lambda rel: any(rel == o or rel.startswith(o.rstrip("/") + "/") for o in outputs)  # noqa: E731
    out = []
    for rel in sorted(set(before) | set(after)):
        if before.get(rel) != after.get(rel) and not allowed(rel):
            what = "created" if rel not in before else "removed" if rel not in after else "modified"
            out.append(f"{ascii(rel)[1:-1]} {what}")
    return out


def _read_ready(pipe) -> bytes:
    with contextlib.suppress(BlockingIOError):
        return pipe.read() or b""
    return b""


def _started(reaper: subprocess.Popen, report: Path) -> int:
    """The command's pid, once the reaper has forked it."""
    while not (text := report.read_text() if report.exists() else "").endswith("\n"):
        assert reaper.poll() is None, f"the reaper failed (exit {reaper.returncode}), the command never started"
        time.sleep(0.002)
    return int(text.split()[0])


def execute(c: Case, scratch: Path, logs: Path) -> Outcome:
    """Run one case's command in scratch and watch it: signals, a closed stdout, caps, memory."""
    out, tmp, tag, report = Outcome(), logs / "tmp", uuid.uuid4().hex, logs / "reaper"
    tmp.mkdir(parents=True)
    argv = [sys.executable, *SAFE_PATH, "-m", "commbench", *(a.replace("{S}", str(scratch)) for a in c.argv)]
    cap = CAP_BAD_S if c.expect == {BAD_INPUT} else CAP_S
    with open("/dev/full" if c.stdout == "full" else logs / "stdout", "wb") as out_f, \
            open(logs / "stderr", "wb") as err_f:
        start = time.monotonic()
        mask = os.umask(c.umask) if c.umask is not None else None  # the reaper inherits it, and the command
        try:
            reaper = subprocess.Popen([sys.executable, "-S", "-c", REAPER, report, str(ADDRESS_LIMIT_GB << 30),
                                       c.stdout or "keep", *argv], cwd=scratch / c.cwd,
                                      env=child_env(tmp, tag, c.env, scratch), stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE if c.head else out_f, stderr=err_f, start_new_session=True)
        finally:
            if mask is not None:
                os.umask(mask)
        pid, head_buf, next_scan, sends = _started(reaper, report), b"", 0.0, 0
        if c.head:
            os.set_blocking(reaper.stdout.fileno(), False)
        trigger_at = None if c.sig is None else (c.sig.after_s if c.sig.rows is None else None)
        while reaper.poll() is None:
            now = time.monotonic() - start
            if c.head and not reaper.stdout.closed:
                head_buf += _read_ready(reaper.stdout)
                if head_buf.count(b"\n") >= c.head:
                    head_buf = b"".join(head_buf.splitlines(keepends=True)[:c.head])
                    reaper.stdout.close()
                    out.sent.append(f"stdout closed at {now:.2f} s")
            if c.sig is not None:
                if trigger_at is None and count_rows(scratch / c.sig.csv) >= (c.sig.rows or 0):
                    trigger_at = now + c.sig.after_s
                if trigger_at is not None and now >= trigger_at and sends < (2 if c.sig.twice else 1):
                    try:
                        (os.killpg if c.sig.group else os.kill)(pid, c.sig.signum)
                        out.sent.append(f"{signal.Signals(c.sig.signum).name} at {now:.2f} s")
                    except ProcessLookupError:
                        pass
                    sends += 1
                    trigger_at = now + 0.1
            if now >= next_scan:
                members = tree(pid)
                rss = sum(r for r, _ in members.values()) / 2**20
                out.tree_mb = max(out.tree_mb, rss)
                if len(members) > MAX_TREE_PROCS or rss > MAX_TREE_MB:
                    out.killed = f"runaway: {len(members)} processes, {rss:.0f} MB at {now:.1f} s"
                elif now > cap:
                    out.killed = f"timeout: killed after {cap:.0f} s"
                if out.killed:
                    kill_all(members)
                elif c.watch:
                    c.watch(scratch, pid, members, out)
                next_scan = now + SCAN_S
            time.sleep(0.01)
        out.wall_s = time.monotonic() - start
        status, maxrss_kb = map(int, report.read_text().split()[1:3])
        code = os.waitstatus_to_exitcode(status)
        out.rc, out.died_of = (SIGNALLED - code, -code) if code < 0 else (code, None)
        out.maxrss_mb = maxrss_kb / 1024
        out.peak_mb = max(out.maxrss_mb, out.tree_mb)
        if c.head:
            if not reaper.stdout.closed:
                head_buf += _read_ready(reaper.stdout)
                reaper.stdout.close()
    deadline = time.monotonic() + 3.0
    while (left := tagged(tag)) and time.monotonic() < deadline:
        time.sleep(0.1)
    if left:
        out.leftovers = [f"{name}({pid})" for pid, name in sorted(left.items())]
        kill_all(left)
        time.sleep(0.2)
    out.stdout = head_buf if c.head else b"" if c.stdout else (logs / "stdout").read_bytes()
    out.stderr = (logs / "stderr").read_bytes()
    crash = min(tmp.glob("commbench-crash-*"), default=None)
    out.crash = crash and (crash.read_text(errors="replace").strip().splitlines() or [str(crash)])[-1]
    return out


def _lines(data: bytes) -> list[str]:
    return [line for line in data.decode("utf-8", "replace").splitlines() if line.strip()]


def judge(c: Case, out: Outcome, scratch: Path) -> list[str]:
    """Every way the outcome breaks the contract (empty: met)."""
    problems = [out.killed] if out.killed else []
    if out.rc == INTERNAL:
        problems.append("internal error" + (f": {out.crash[:120]}" if out.crash else ""))
    elif out.rc not in c.expect:
        died = f" (killed by {signal.Signals(out.died_of).name}, no handler)" if out.died_of else ""
        problems.append(f"exit {out.rc}{died}, expected {'/'.join(map(str, sorted(c.expect)))}")
    if c.sig and not out.sent and OK not in c.expect:  # with OK accepted, ending first is allowed
        problems.append("the signal was never sent: the command ended first")
    for stream, data in (("stderr", out.stderr), ("stdout", out.stdout)):
        text = data.decode("utf-8", "replace")
        if "Traceback (most recent call last)" in text or "Exception ignored in" in text:
            problems.append(f"a Python traceback on {stream}")
        if raw := RAW_CONTROLS.search(text):
            problems.append(f"a raw control character {raw.group()!r} on {stream}")
    err = _lines(out.stderr)
    if out.rc in (BAD_INPUT, INTERNAL) and len(err) != 1:
        problems.append(f"{len(err)} stderr lines, expected 1")
    if out.rc is not None and out.rc >= SIGNALLED and not (err and SIGNAL_WORDS.search(err[-1])):
        problems.append("no last stderr line saying interrupted/stopped" if err else "nothing on stderr after a signal")
    if out.changed:
        more = f" (+{len(out.changed) - 3} more)" if len(out.changed) > 3 else ""
        problems.append("changed outside the output: " + ", ".join(out.changed[:3]) + more)
    if out.rc == BAD_INPUT and out.wall_s > LIMIT_S:
        problems.append(f"{out.wall_s:.1f} s before exit {BAD_INPUT} (limit {LIMIT_S:.0f} s)")
    if out.rc == BAD_INPUT and out.peak_mb > LIMIT_MB:
        problems.append(f"{out.peak_mb:.0f} MB before exit {BAD_INPUT} (limit {LIMIT_MB:.0f} MB)")
    if out.leftovers:
        problems.append("left processes running: " + ", ".join(out.leftovers[:4]))
    for check in c.checks:
        problems += check(scratch, out)
    return problems


SYSTEM_DEVICES = {"/dev/null": (1, 3), "/dev/full": (1, 7), "/dev/zero": (1, 5)}


def guard_system_devices() -> list[str]:
    """No case should reach the system's device nodes, but an output written by rename over one
    would replace it for the whole machine: put it back at once (root) and say so."""
    problems = []
    for path, (major, minor) in SYSTEM_DEVICES.items():
        try:
            if stat.S_ISCHR(os.lstat(path).st_mode):
                continue
            os.unlink(path)
        except FileNotFoundError:
            pass
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
        os.chmod(path, 0o666)
        problems.append(f"replaced the system's {path} (restored)")
    return problems


def meets_contract(c: Case, tmp_path: Path) -> Outcome:
    """Prepare the case's scratch folder, run its command, and fail the test on any broken term."""
    scratch, logs = tmp_path / "scratch", tmp_path / "logs"
    for folder in (scratch, logs):
        folder.mkdir()
    for step in c.setup:
        step(scratch)
    before = snapshot(scratch)
    out = execute(c, scratch, logs)
    out.changed = _changes(before, snapshot(scratch), c.outputs)
    problems = judge(c, out, scratch) + guard_system_devices()
    if problems:  # the case, its command line and how it ended
        err = _lines(out.stderr) or ["(empty)"]
        argv = shlex.join(a if len(a) < 80 else a[:60] + "..." for a in c.argv)
        last = f" ... {ascii(err[-1][:200])[1:-1]}" if len(err) > 1 else ""
        pytest.fail(f"class {c.cls} {c.name}: {'; '.join(problems)}\n  argv: commbench {ascii(argv)[1:-1]}\n"
                    f"  exit {out.rc}, {out.wall_s:.1f} s {out.peak_mb:.0f} MB, signals: {', '.join(out.sent) or '-'}\n"
                    f"  stderr: {ascii(err[0][:200])[1:-1]}{last}" + (f"\n  note: {c.note}" if c.note else ""),
                    pytrace=False)
    return out
