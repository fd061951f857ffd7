"""The parent's end of `commbench ab`'s turns (commbench.rank.turns is the ranks' end): a socket the
ranks of every job connect to, and TurnJob, one launched job whose ranks answer commands.

A job's ranks each open one connection, say who they are (the job's secret, their rank, the
protocol they speak, the side's variables as they see them) and, once their communicators are
open, that they are ready (rank 0 with the job's facts for run.json). `request` sends one command
to every rank and waits for every answer: the wait is where a hung rank (a deadline) or a dead one
(its connection closes, the launcher says how it died) becomes one JobError naming the side and
the point. The jobs' output is relayed line by line, tagged with the side.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import selectors
import shutil
import socket
import tempfile
import time
from typing import Callable

from commbench import events
from commbench.errors import InputError, JobError
from commbench.rank.turns import PROTOCOL, TURNS_ENV
from commbench.folder.spec_file import SIDE_SPEC_FILES, encode_spec
from commbench.run import launch, watchdog
from commbench.spec import SweepSpec

STARTUP_TIMEOUT_S = watchdog.STARTUP_TIMEOUT_S
UNIX_PATH_MAX = 108  # sockaddr_un's sun_path (Linux), its terminating NUL included
SOCKET_NAME = "turns"
EXIT_GRACE_S = 10.0  # after "end": how long a job may take to exit before it is killed
HELLO_S = 5.0  # a connection's hello must come within this (a rank sends it as it connects)
HELLO_BYTES = 1 << 16  # and within this many bytes
STALE_S = 60.0  # a socket folder unchanged this long and unserved was left by a killed ab (_stale)


def hello_problem(hello: dict, env: dict[str, str], world: int, seen: set[int]) -> str | None:
    """What is wrong with a rank's hello, or None: another protocol, a side's variable that did not
    reach it (a launcher that does not pass the environment on), a rank number out of place."""
    rank = hello.get("rank")
    if hello.get("protocol") != PROTOCOL:
        return f"rank {rank} speaks ab protocol {hello.get('protocol')}, not {PROTOCOL} (another commbench)"
    got = hello.get("env") or {}
    for key, value in env.items():
        if got.get(key) != value:
            return (f"the variable {key}={value!r} did not reach rank {rank} on {hello.get('host')} (it has "
                    f"{got.get(key)!r}): the launcher does not pass it on")
    if type(rank) is not int or not 0 <= rank < world or rank in seen:
        return f"a rank said it is rank {rank!r} of {world}"
    return None


class _Conn:
    """One rank's connection: JSON lines, read with a deadline."""

    def __init__(self, sock: socket.socket):
        self.sock, self.buf = sock, b""

    def send(self, data: dict) -> None:
        self.sock.sendall((json.dumps(data) + "\n").encode())

    def read(self, deadline: float) -> dict | None:
        """The next line as JSON; None when the rank closed the connection; TimeoutError past the deadline."""
        while b"\n" not in self.buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(1 << 16)
            except socket.timeout:
                raise TimeoutError from None
            except OSError:
                return None
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        try:
            return json.loads(line)
        except ValueError:
            return {"error": f"an unreadable answer ({line[:80]!r})"}


def _stale(folder: str) -> bool:
    """Whether `folder` is an ab socket folder of this user that nobody serves any more (its ab was
    killed before it could remove it): nothing in it but the socket, which refuses a connection, and
    nothing changed in it for STALE_S (an ab starting now, between its folder and its listen, is not)."""
    path = os.path.join(folder, SOCKET_NAME)
    try:
        st = os.lstat(folder)
        if st.st_uid != os.getuid() or time.time() - st.st_mtime < STALE_S or \
                os.listdir(folder) not in ([], [SOCKET_NAME]):
            return False
        if os.path.exists(path):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                probe.settimeout(1.0)  # a full backlog: an ab that is alive (OSError below)
                probe.connect(path)
            return False  # an ab still listens there
    except ConnectionRefusedError:
        return True
    except OSError:
        return False
    return True


def _socket_folder() -> str | None:
    """A new folder of this process's own (mode 0700) whose socket's path fits sockaddr_un: in the
    temporary folder ($TMPDIR), else in /tmp; None where neither does. The folders a killed ab left
    there go first (_stale), this host's only (a socket on a folder other hosts share, NFS, refuses
    their connections while it is alive)."""
    prefix = f"commbench-ab-{hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]}-"
    for parent in (None, "/tmp"):
        root = parent or tempfile.gettempdir()
        try:
            left = [os.path.join(root, name) for name in os.listdir(root) if name.startswith(prefix)]
        except OSError:
            left = []
        for folder in filter(_stale, left):
            shutil.rmtree(folder, ignore_errors=True)
        try:
            folder = tempfile.mkdtemp(prefix=prefix, dir=parent)
        except OSError:
            continue
        if len(os.path.join(folder, SOCKET_NAME).encode()) < UNIX_PATH_MAX:
            return folder
        os.rmdir(folder)
    return None


class TurnServer:
    """The listening socket every job of one comparison connects to. unix: the ranks are on an
    emulated cluster, each node in its own network namespace, with no route to this process's
    loopback: a Unix socket in a folder of its own, which they reach through the file system (a
    commbench from before it connects by TCP only: check_python); else TCP, local: every rank on
    this machine, on the loopback only; else on every interface, at this host's address."""

    def __init__(self, local: bool, unix: bool = False):
        self.folder = _socket_folder() if unix else None
        if unix and self.folder is None:
            raise InputError("ab on an emulated cluster needs a folder for its socket whose path is under "
                             f"{UNIX_PATH_MAX} bytes, in $TMPDIR or /tmp: give TMPDIR a short, writable folder")
        if self.folder:
            path = os.path.join(self.folder, SOCKET_NAME)
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                self.sock.bind(path)
            except OSError:
                self.close()
                raise
            self.address = f"unix:{path}"
        else:
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.sock.bind(("127.0.0.1" if local else "", 0))
            host = "127.0.0.1" if local else socket.gethostbyname(socket.gethostname())
            self.address = f"{host}:{self.sock.getsockname()[1]}"
        self.sock.listen(1024)
        self.secret = secrets.token_hex(16)

    arena: dict | None = None  # the ranks' arena (commbench.rank.arena): its path and stride

    def env(self, job: str, check: list[str]) -> dict[str, str]:
        """What the ranks of `job` need to find the server (TURNS_ENV), the variables they report, the arena."""
        return {TURNS_ENV: json.dumps({"address": self.address, "secret": self.secret, "job": job, "check": check,
                                       "arena": self.arena})}

    def accept(self, jobs: list["TurnJob"], deadline: float) -> None:
        """Take every rank's connection and hello, then every rank's ready, for all of `jobs`. Hellos are
        read side by side (a selector), each within HELLO_S and HELLO_BYTES: a connection that says
        nothing, or too much, is closed, never waited on (another user's idle connections to the
        port stalled the start-up 30 s each)."""
        by_name = {j.name: j for j in jobs}
        pending: dict[socket.socket, tuple[_Conn, float]] = {}  # connections whose hello has not come yet
        with selectors.DefaultSelector() as ready:
            self.sock.setblocking(False)
            ready.register(self.sock, selectors.EVENT_READ)
            try:
                self._hellos(jobs, by_name, deadline, ready, pending)
            finally:
                for sock in pending:
                    sock.close()
                self.sock.setblocking(True)
        for j in jobs:
            j.ready(deadline)

    def _hellos(self, jobs, by_name, deadline, ready, pending) -> None:
        while any(len(j.conns) < j.world for j in jobs):
            for j in jobs:
                j.follow()
                if len(j.conns) < j.world and j.job.exited():  # no rank that has not connected yet ever will
                    j.drain()  # its last lines (the launcher's own error) reach the output first
                    j.fail(f"its launcher ended (exit code {j.job.wait()}) with {len(j.conns)} of {j.world} ranks "
                           "connected")
            if time.monotonic() > deadline:
                late = next(j for j in jobs if len(j.conns) < j.world)
                late.fail(f"timed out after {STARTUP_TIMEOUT_S:g} s waiting for its ranks to connect "
                          f"({len(late.conns)} of {late.world} did)")
            now = time.monotonic()
            for sock in [s for s, (_, by) in pending.items() if by < now]:  # said nothing in time: not ours
                ready.unregister(sock)
                pending.pop(sock)
                sock.close()
            for key, _ in ready.select(timeout=0.5):
                if key.fileobj is self.sock:
                    try:
                        sock, _ = self.sock.accept()
                    except (BlockingIOError, InterruptedError):
                        continue
                    sock.setblocking(True)
                    pending[sock] = (_Conn(sock), time.monotonic() + HELLO_S)
                    ready.register(sock, selectors.EVENT_READ)
                    continue
                sock = key.fileobj
                conn, _ = pending[sock]
                try:
                    chunk = sock.recv(HELLO_BYTES)
                except OSError:
                    chunk = b""
                conn.buf += chunk
                if chunk and b"\n" not in conn.buf and len(conn.buf) < HELLO_BYTES:
                    continue  # more of the hello to come
                ready.unregister(sock)
                pending.pop(sock)
                hello = conn.read(time.monotonic()) if b"\n" in conn.buf else None
                if not isinstance(hello, dict) or not hmac.compare_digest(str(hello.get("secret", "")), self.secret):
                    sock.close()  # not one of ours
                    continue
                job = by_name.get(hello.get("job"))
                if job is not None:
                    job.hello(conn, hello)

    def close(self) -> None:
        self.sock.close()
        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)


class TurnJob:
    """One launched job serving one side (`sides` one spec) or both: its processes and its ranks'
    connections. relay: shows a line of the job's output."""

    def __init__(self, name: str, sides: dict[str, SweepSpec], launcher: str, launcher_args: list[str], python: str,
                 env: dict[str, str], server: TurnServer, relay: Callable[[launch.Line], None]):
        self.name, self.sides, self.env = name, sides, env
        self.spec = next(iter(sides.values()))
        self.world = self.spec.nprocs
        self.conns: dict[int, _Conn] = {}
        self.rank0: _Conn | None = None
        self.facts: dict = {}
        self.python = python
        self.monitor = watchdog.Monitor()
        self.relay = relay
        self.where = "during start-up"
        self._answered: list[int] = []  # the ranks that answered the command in flight
        worker = [python, "-m", "commbench.rank.turns"]
        for side, spec in sides.items():
            worker += ["--side", f"{side}={encode_spec(spec, SIDE_SPEC_FILES[side])}"]
        commands = launch.build_commands(self.spec, launcher, launcher_args, worker,
                                         dict(launch.SAFE_PATH, **env, **server.env(name, sorted(env))))
        self.job = launch.Job(commands)

    @property
    def label(self) -> str:
        """How messages name the job: its side (and launch pair), or both sides."""
        if len(self.sides) > 1:
            return "the job of both sides"
        side, pair = self.name[0], self.name[1:]
        return f"side {side}" + (f", launch pair {pair}" if pair else "")

    def follow(self) -> None:
        """Relay the output that has arrived; note an error a rank reported."""
        for line in self.job.ready_lines():
            event = events.parse(line.text) if line.stream == "stdout" else None
            if event is None:
                self.monitor.tail.append(line.text)
                self.relay(launch.Line(f"[{self.name}] {line.text}", line.stream))
            else:
                self.monitor.observe(event)

    def drain(self, timeout: float = 2.0) -> None:
        """Relay the output of a job that exited up to its streams' end (a process it left behind that
        holds them open: up to timeout)."""
        end = time.monotonic() + timeout
        while self.job.streams_open() and time.monotonic() < end:
            self.follow()
            time.sleep(0.01)
        self.follow()

    def fail(self, why: str) -> None:
        """Kill the job and raise the JobError that says what happened, where."""
        self.kill()
        self.follow()
        raise JobError(f"{self.label}: {why} {self.where}")

    def _died(self, rank: int) -> None:
        """A rank's connection closed: wait briefly for the launcher to say why, then fail."""
        end = time.monotonic() + 3.0
        while time.monotonic() < end and not self.job.exited():
            self.follow()
            time.sleep(0.05)
        self.follow()
        dead = self.monitor.deaths(self.job)
        if self.monitor.error:
            self.fail(self.monitor.error)
        if dead:
            self.fail("; ".join(f"rank {r} {watchdog.how_it_ended(c)}" for r, c in sorted(dead.items())))
        self.fail(f"rank {rank} closed its connection (the job ended)")

    def hello(self, conn: _Conn, hello: dict) -> None:
        problem = hello_problem(hello, self.env, self.world, set(self.conns))
        if problem:
            self.fail(problem)
        self.conns[hello["rank"]] = conn

    def ready(self, deadline: float) -> None:
        for rank, conn in sorted(self.conns.items()):
            answer = self._read(rank, conn, deadline)
            if answer.get("rank0"):
                self.rank0, self.facts = conn, answer.get("facts") or {}
        if self.rank0 is None:
            self.fail("no rank answered as rank 0")
        self.where = ""

    def _read(self, rank: int, conn: _Conn, deadline: float) -> dict:
        while True:
            try:
                answer = conn.read(min(deadline, time.monotonic() + 1.0))
            except TimeoutError:
                self.follow()
                if time.monotonic() < deadline:
                    continue
                waiting = sorted(set(range(self.world)) - set(self._answered))
                self.fail(f"timed out ({', '.join(f'rank {r}' for r in waiting)} did not answer; "
                          "the job was killed)")
            if answer is None:
                self._died(rank)
            if "error" in answer:
                self.fail(f"rank {rank}: {answer['error']}")
            self._answered.append(rank)
            return answer

    def request(self, command: dict, timeout: float, where: str) -> dict:
        """Send a command to every rank and wait for every answer: rank 0's."""
        self.where = f"in {where}"
        for rank, conn in self.conns.items():
            try:
                conn.send(command)
            except OSError:
                self._died(rank)
        deadline, self._answered, answer = time.monotonic() + timeout, [], {}
        for rank, conn in sorted(self.conns.items()):
            got = self._read(rank, conn, deadline)
            if conn is self.rank0:
                answer = got
        self.follow()
        return answer

    def end(self) -> None:
        """Close the communicators, let the job exit (killed if it does not)."""
        self.request({"cmd": "end"}, EXIT_GRACE_S, "closing")
        end = time.monotonic() + EXIT_GRACE_S
        while time.monotonic() < end and not self.job.exited():
            self.follow()
            time.sleep(0.02)
        self.kill()
        self.follow()

    def kill(self) -> None:
        if not self.job.exited():
            self.job.kill()
