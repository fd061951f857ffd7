"""commbench.run.turn_server, the parent's end of `commbench ab`'s turns, without a launch: the
JSON-line connection (_Conn over a socketpair), the TurnServer taking fake ranks that connect over
real sockets from threads (hellos checked, strangers and wrong secrets refused, every rank's ready),
TurnJob's commands answered or failing as one JobError naming the side and where (a rank's error,
a closed connection, a deadline). check_python: test_check_python.py."""

import hashlib
import json
import os
import socket
import tempfile
import threading
import time

import pytest

from commbench.errors import InputError, JobError
from commbench.events import PREFIX
from commbench.rank.turns import PROTOCOL, TURNS_ENV, connect
from commbench.folder.spec_file import SIDE_SPEC_FILES, decode_spec
from commbench.run import launch, turn_server
from commbench.run.launch import SAFE_PATH
from commbench.run.turn_server import TurnJob, TurnServer, _Conn
from commbench.spec import SweepSpec


# --- _Conn ----------------------------------------------------------------------------------------------

@pytest.fixture
def pair():
    a, b = socket.socketpair()
    yield _Conn(a), b
    a.close()
    b.close()


def test_conn_reads_json_lines_however_they_arrive(pair):
    conn, rank = pair
    rank.sendall(b'{"ok": true}\n{"samples": [1.5]}\n{"par')
    soon = time.monotonic() + 5
    assert conn.read(soon) == {"ok": True} and conn.read(soon) == {"samples": [1.5]}
    rank.sendall(b'tial": 1}\n')
    assert conn.read(soon) == {"partial": 1}
    rank.sendall(b"not json at all\n")
    assert conn.read(soon) == {"error": "an unreadable answer (b'not json at all')"}
    conn.send({"cmd": "turns", "turns": [["A", 1, 2, False]]})
    assert rank.recv(1000) == b'{"cmd": "turns", "turns": [["A", 1, 2, false]]}\n'


def test_conn_deadline_and_close(pair):
    conn, rank = pair
    with pytest.raises(TimeoutError):
        conn.read(time.monotonic() - 1)  # past already: no wait
    start = time.monotonic()
    with pytest.raises(TimeoutError):
        conn.read(start + 0.2)
    assert 0.15 < time.monotonic() - start < 5
    rank.sendall(b'{"last": 1}\n{"cut')
    rank.shutdown(socket.SHUT_WR)
    assert conn.read(time.monotonic() + 5) == {"last": 1}
    assert conn.read(time.monotonic() + 5) is None  # closed mid-line: the rank is gone


# --- TurnServer and TurnJob -------------------------------------------------------------------------

class FakeJob:
    """launch.Job's stand-in: the lines it has to show, whether it exited, whether it was killed."""

    def __init__(self, commands):
        self.commands, self.lines, self.killed, self.ended = commands, [], False, threading.Event()
        self.procs = []

    def ready_lines(self):
        out, self.lines = self.lines, []
        return out

    def exited(self):
        return self.ended.is_set() or self.killed

    def kill(self):
        self.killed = True


@pytest.fixture
def server(monkeypatch):
    built = []

    def build_commands(spec, launcher, extra, worker=None, ranks_env=None):
        built.append((launcher, extra, worker, ranks_env))
        return [(["launcher"], ranks_env)]

    monkeypatch.setattr(launch, "build_commands", build_commands)
    monkeypatch.setattr(launch, "Job", FakeJob)
    s = TurnServer(local=True)
    s.built = built
    yield s
    s.close()


def _job(server, tmp_path, name="A", nprocs=2, sides="A", env=None, relay=None):
    spec = SweepSpec(backends=["mpi"], sizes=[8], nprocs=nprocs, out_dir=str(tmp_path / "ab"), run_id="r").validate()
    return TurnJob(name, {s: spec for s in sides}, "mpirun", ["--bind-to", "none"], "/venv/bin/python", env or {},
                   server, relay or (lambda line: None))


def _ok(rank, cmd):
    return {"ok": True, "rank": rank, "cmd": cmd["cmd"]}


class Rank(threading.Thread):
    """A rank of a job: connects, says hello and ready, then answers each command with answer(rank,
    cmd) (None: closes its connection). What the server did to it: `refused` if it hung up at once."""

    def __init__(self, server, job, number, secret=None, rank0=None, answer=_ok, **hello):
        super().__init__(daemon=True)
        self.server, self.job, self.rank, self.answer = server, job, number, answer
        self.hello = {"secret": server.secret if secret is None else secret, "job": job.name if job else "Z",
                      "rank": number, "host": "h", "protocol": PROTOCOL, "env": {}, **hello}
        self.rank0 = number == 0 if rank0 is None else rank0
        self.got, self.refused, self.connected = [], False, threading.Event()
        self.start()

    def run(self):
        with connect(self.server.address) as sock, sock.makefile("rw") as f:
            f.write(json.dumps(self.hello) + "\n" + json.dumps({"ready": True, "rank0": self.rank0,
                                                                 "facts": {"r": self.rank}}) + "\n")
            f.flush()
            self.connected.set()
            try:
                for line in f:
                    cmd = json.loads(line)
                    self.got.append(cmd["cmd"])
                    reply = self.answer(self.rank, cmd)
                    if reply is None:
                        return
                    if cmd["cmd"] == "end":
                        self.job.job.ended.set()
                    f.write(json.dumps(reply) + "\n")
                    f.flush()
            except ConnectionResetError:  # hung up on with our ready unread
                pass
            except TimeoutError:  # the test ended with this rank's connection open: nothing more comes
                return
            self.refused = not self.got


def test_a_jobs_launch_carries_its_specs_and_the_servers_address(server, tmp_path):
    job = _job(server, tmp_path, env={"LD_LIBRARY_PATH": "/b/lib"})
    launcher, extra, worker, env = server.built[0]
    assert launcher == "mpirun" and extra == ["--bind-to", "none"]
    assert worker[:3] == ["/venv/bin/python", "-m", "commbench.rank.turns"] and worker[3] == "--side"
    side, path = worker[4].split("=", 1)
    assert side == "A" and path == str(tmp_path / "ab" / SIDE_SPEC_FILES["A"]) and decode_spec(path) == job.spec
    assert env["LD_LIBRARY_PATH"] == "/b/lib" and env["PYTHONSAFEPATH"] == SAFE_PATH["PYTHONSAFEPATH"]
    assert json.loads(env[TURNS_ENV]) == {"address": server.address, "secret": server.secret, "job": "A",
                                          "check": ["LD_LIBRARY_PATH"], "arena": None}
    assert server.address.startswith("127.0.0.1:") and len(server.secret) == 32
    server.arena = {"path": "/dev/shm/x", "stride": 4096}
    assert json.loads(server.env("B1", [])[TURNS_ENV])["arena"] == {"path": "/dev/shm/x", "stride": 4096}
    both = _job(server, tmp_path, name="AB", sides="AB")
    assert [w.split("=")[0] for w in server.built[-1][2][4::2]] == ["A", "B"] and both.label == "the job of both sides"
    assert job.label == "side A" and _job(server, tmp_path, name="B2").label == "side B, launch pair 2"


def test_the_ranks_of_an_emulated_cluster_reach_the_server_through_the_file_system(tmp_path, monkeypatch):
    """unix (an emulated cluster, whose nodes share no loopback with the parent): a Unix socket in a
    folder of its own, gone when the server closes; else TCP, on the loopback where every rank is here."""
    server = TurnServer(local=True, unix=True)
    path = server.address[len("unix:"):]
    try:
        assert os.stat(os.path.dirname(path)).st_mode & 0o077 == 0  # the folder is the parent's alone
        with connect(server.address) as rank:
            peer, _ = server.sock.accept()
            rank.sendall(b"hello\n")
            assert peer.recv(16) == b"hello\n"
            peer.close()
    finally:
        server.close()
    assert not os.path.exists(os.path.dirname(path))
    deep = tmp_path / ("d" * 100)  # a $TMPDIR too deep for a socket's name: one in /tmp instead
    deep.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    short = TurnServer(local=True, unix=True)
    try:
        assert short.address.startswith("unix:/tmp/commbench-ab-") and not list(deep.iterdir())
    finally:
        short.close()
    monkeypatch.setattr(turn_server, "_socket_folder", lambda: None)
    with pytest.raises(InputError, match="needs a folder for its socket"):
        TurnServer(local=True, unix=True)
    for local, host in ((True, "127.0.0.1"), (False, None)):
        tcp = TurnServer(local=local)
        try:
            address, port = tcp.address.rsplit(":", 1)
            assert tcp.sock.family == socket.AF_INET and int(port) == tcp.sock.getsockname()[1]
            assert address == (host or address) and tcp.folder is None
        finally:
            tcp.close()


def test_the_socket_folder_of_a_killed_ab_is_swept_by_the_next(tmp_path, monkeypatch):
    """A SIGKILLed ab cannot remove its socket's folder: the next one on the machine removes every
    such folder whose socket nobody serves, and leaves a served one and anything else alone."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    host = f"commbench-ab-{hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]}"
    dead = tmp_path / f"{host}-dead"
    dead.mkdir()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as gone:  # bound, then closed: what a kill leaves
        gone.bind(str(dead / turn_server.SOCKET_NAME))
    empty = tmp_path / f"{host}-empty"  # killed between the folder and the bind
    empty.mkdir()
    other = tmp_path / f"{host}-other"  # not only a socket: not ab's to remove
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    young = tmp_path / f"{host}-young"  # an ab starting now, between its folder and its socket
    elsewhere = tmp_path / "commbench-ab-0000000x-dead"  # another host's (a shared folder): not this host's to judge
    elsewhere.mkdir()
    young.mkdir()
    for folder in (dead, empty, other, elsewhere):
        os.utime(folder, (time.time() - 2 * turn_server.STALE_S,) * 2)
    live = TurnServer(local=True, unix=True)
    try:
        assert not dead.exists() and not empty.exists() and (other / "notes.txt").exists() and young.exists()
        assert elsewhere.exists() and live.address.startswith(f"unix:{tmp_path}/{host}-")
        served = os.path.dirname(live.address[len("unix:"):])
        os.utime(served, (time.time() - 2 * turn_server.STALE_S,) * 2)
        second = TurnServer(local=True, unix=True)  # the first one still listens, however old: it stays
        second.close()
        assert os.path.exists(live.address[len("unix:"):])
    finally:
        live.close()


def test_accept_takes_every_rank_of_every_job_and_refuses_strangers(server, tmp_path):
    a, b = _job(server, tmp_path, "A"), _job(server, tmp_path, "B", nprocs=3)
    wrong = Rank(server, a, 0, secret="0" * 32)
    stranger = Rank(server, None, 0)  # the right secret, a job that is not being accepted
    assert wrong.connected.wait(10) and stranger.connected.wait(10)  # first in the queue: accepted first
    ranks = [Rank(server, a, r) for r in (1, 0)] + [Rank(server, b, r) for r in (2, 0, 1)]
    server.accept([a, b], time.monotonic() + 30)
    wrong.join(10)
    assert wrong.refused and not wrong.is_alive()
    assert sorted(a.conns) == [0, 1] and sorted(b.conns) == [0, 1, 2]
    assert a.rank0 is a.conns[0] and a.facts == {"r": 0} and b.facts == {"r": 0} and a.where == ""
    assert a.request({"cmd": "prepare", "points": {"A": 0}}, 10, "all-reduce 8 B") == {"ok": True, "rank": 0,
                                                                                      "cmd": "prepare"}
    assert a.where == "in all-reduce 8 B" and all(r.got == ["prepare"] for r in ranks[:2])
    a.end()
    assert all(r.got == ["prepare", "end"] for r in ranks[:2]) and not a.job.killed  # it exited by itself
    assert stranger.got == [] and b.job.killed is False


def test_a_job_whose_ranks_do_not_all_come(server, tmp_path):
    a = _job(server, tmp_path, "A")
    Rank(server, a, 0)
    with pytest.raises(JobError, match=r"^side A: timed out after \d+ s waiting for its ranks to connect \(1 of 2 did\) "
                                       "during start-up$"):
        server.accept([a], time.monotonic() + 0.3)
    assert a.job.killed


@pytest.mark.parametrize("hello,message", [
    (dict(protocol=0), "side A: rank 0 speaks ab protocol 0, not 1 (another commbench) during start-up"),
    (dict(env={}), "side A: the variable X='1' did not reach rank 0 on h (it has None): the launcher does not pass it on"),
    (dict(rank=7), "side A: a rank said it is rank 7 of 2 during start-up"),
])
def test_a_bad_hello_fails_the_job(server, tmp_path, hello, message):
    a = _job(server, tmp_path, "A", env={"X": "1"})
    Rank(server, a, 0, **{"env": {"X": "1"}, **hello})
    with pytest.raises(JobError) as err:
        server.accept([a], time.monotonic() + 30)
    assert str(err.value).startswith(message) and a.job.killed


def test_no_rank_answering_as_rank_0(server, tmp_path):
    a = _job(server, tmp_path, "A")
    for r in (0, 1):
        Rank(server, a, r, rank0=False)
    with pytest.raises(JobError, match="^side A: no rank answered as rank 0 during start-up$"):
        server.accept([a], time.monotonic() + 30)


def _accepted(server, tmp_path, answer, relay=None):
    a = _job(server, tmp_path, "A", relay=relay)
    ranks = [Rank(server, a, r, answer=answer) for r in (0, 1)]
    server.accept([a], time.monotonic() + 30)
    return a, ranks


def test_a_ranks_error_names_the_side_rank_and_point(server, tmp_path):
    a, _ = _accepted(server, tmp_path, lambda r, cmd: {"error": "MemoryError: no room"} if r == 1 else {"ok": True})
    with pytest.raises(JobError, match=r"^side A: rank 1: MemoryError: no room in all-gather 64 B$"):
        a.request({"cmd": "prepare"}, 10, "all-gather 64 B")
    assert a.job.killed


def test_a_rank_that_does_not_answer_in_time(server, tmp_path):
    release = threading.Event()

    def slow(rank, cmd):
        if rank == 1:
            release.wait(10)
        return {"ok": True}

    a, _ = _accepted(server, tmp_path, slow)
    try:
        with pytest.raises(JobError, match=r"^side A: timed out \(rank 1 did not answer; the job was killed\) in turns$"):
            a.request({"cmd": "turns"}, 0.3, "turns")
    finally:
        release.set()
    assert a.job.killed


def test_a_rank_that_dies_is_named_with_how(server, tmp_path):
    shown = []
    a, _ = _accepted(server, tmp_path, lambda r, cmd: None if r == 1 else {"ok": True}, relay=shown.append)
    a.job.ended.set()  # the launcher has exited: nothing more to wait for
    with pytest.raises(JobError, match=r"^side A: rank 1 closed its connection \(the job ended\) in finish$"):
        a.request({"cmd": "finish"}, 10, "finish")
    b, _ = _accepted(server, tmp_path, lambda r, cmd: None if r == 1 else {"ok": True}, relay=shown.append)
    b.job.ended.set()
    b.job.lines = [launch.Line("mpirun noticed that process rank 1 with PID 42 on node h exited on signal 9 (Killed).",
                               "stderr")]
    with pytest.raises(JobError, match=r"^side A: rank 1 was killed by SIGKILL in finish$"):
        b.request({"cmd": "finish"}, 10, "finish")
    assert shown[-1].text.startswith("[A] mpirun noticed") and shown[-1].stream == "stderr"


def test_follow_relays_lines_and_notes_a_ranks_error(server, tmp_path):
    shown = []
    a, _ = _accepted(server, tmp_path, lambda r, cmd: None, relay=shown.append)
    a.job.lines = [launch.Line("plain output", "stdout"),
                   launch.Line(PREFIX + json.dumps({"event": "error", "rank": 1, "message": "boom"}), "stdout")]
    a.follow()
    assert [(line.text, line.stream) for line in shown] == [("[A] plain output", "stdout")]
    assert a.monitor.error == "rank 1: boom" and list(a.monitor.tail) == ["plain output"]
    a.job.ended.set()
    with pytest.raises(JobError, match=r"^side A: rank 1: boom in closing$"):  # what the rank said, not the hang-up
        a.end()
