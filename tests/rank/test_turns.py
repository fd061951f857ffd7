"""commbench.rank.turns, the ranks of `commbench ab`: the Channel to the parent (JSON lines over a
socketpair), and the Server each rank runs, on fake communicators (threads as ranks, their
session opened by a stand-in for worker.open_session): prepare binds each side's point (sharing
buffers where the layouts match, in the arena where there is one, a skip with its reason), turns
times them, finish checks them, and serve answers the parent command by command, rank 0 with the
data."""

import json
import os
import socket
import threading

import numpy as np
import pytest

from commbench.rank import arena, turns, worker
from commbench.algorithms import Context
from commbench.plan import build_plan
from commbench.spec import SweepSpec
from harness_fakes import FakeComm, FakeWorld


class TurnComm(FakeComm):
    """A fake communicator whose library runs every collective but of float64 (a side skips it)."""

    closed = False

    def unsupported(self, collective, dtype, op, in_place, native=True):
        return "fakelib has no float64" if dtype.name == "float64" else None

    def close(self):
        self.closed = True


def _spec(**kw) -> SweepSpec:
    fields = dict(backends=["mpi"], collectives=["all_reduce"], sizes=[4096], nprocs=2, iters=3, warmup=1,
                  timer="python")
    return SweepSpec(**(fields | kw)).validate()


HERE = threading.local()  # the communicator of the rank this thread is


@pytest.fixture
def sessions(monkeypatch):
    """worker.open_session on the thread's fake communicator; rank 0 sends its facts, as the real one."""
    def open_session(spec, emit):
        comm = HERE.comm
        nodes = [0] * comm.size
        if comm.rank == 0:
            emit("facts", run={"world_size": comm.size, "hosts": ["h"]})
        return worker.Session(spec, {b: comm for b in spec.backends}, comm.rank, comm.size, nodes,
                              build_plan(spec), {b: Context(comm, nodes) for b in spec.backends}, None, None)

    monkeypatch.setattr(worker, "open_session", open_session)


class Chan:
    """A Channel stand-in: the parent's commands in, the answers out."""

    def __init__(self, commands=(), conf=None):
        self.conf, self.commands, self.sent = conf or {}, list(commands), []

    def send(self, **data):
        self.sent.append(json.loads(json.dumps(data)))

    def recv(self):
        return self.commands.pop(0)


def _on_ranks(fn, world=2):
    def rank(comm):
        HERE.comm = comm
        return fn(comm)
    return FakeWorld(world, comm_class=TurnComm).run(rank)


# --- the Channel ------------------------------------------------------------------------------------

@pytest.fixture
def parent_end(monkeypatch):
    """A socketpair for the connection: the rank's end is what create_connection returns."""
    parent, rank = socket.socketpair()
    asked = []

    def connect(address, timeout=None):
        asked.append((address, timeout))
        return rank

    monkeypatch.setattr(turns.socket, "create_connection", connect)
    yield parent, asked
    parent.close()
    rank.close()


def test_the_channel_says_hello_then_speaks_json_lines(parent_end, monkeypatch):
    parent, asked = parent_end
    monkeypatch.setenv("SIDE_VAR", "on")
    monkeypatch.delenv("MISSING_VAR", raising=False)
    conf = {"address": "10.0.0.1:4567", "secret": "s3cret", "job": "A1", "check": ["SIDE_VAR", "MISSING_VAR"]}
    channel = turns.Channel(json.dumps(conf))
    assert asked == [(("10.0.0.1", 4567), 60)] and channel.conf == conf
    assert channel.sock.gettimeout() is None  # from now on a read waits as long as the parent does
    reader = parent.makefile("r")
    hello = json.loads(reader.readline())
    assert hello["secret"] == "s3cret" and hello["job"] == "A1" and hello["protocol"] == turns.PROTOCOL
    assert hello["env"] == {"SIDE_VAR": "on", "MISSING_VAR": None} and hello["pid"] == os.getpid()
    assert type(hello["rank"]) is int and hello["host"]
    channel.send(ok=True, samples=[[1.5, 2.0]], path=turns)  # what JSON cannot hold goes as text
    answer = json.loads(reader.readline())
    assert answer["ok"] is True and answer["samples"] == [[1.5, 2.0]] and "module" in answer["path"]
    parent.sendall(b'{"cmd": "prepare", "points": {"A": 0}}\n{"cmd": "fin')
    assert channel.recv() == {"cmd": "prepare", "points": {"A": 0}}
    parent.sendall(b'ish"}\n')
    assert channel.recv() == {"cmd": "finish"}
    parent.shutdown(socket.SHUT_WR)
    with pytest.raises(ConnectionError, match="the parent closed the connection"):
        channel.recv()


def test_a_failing_rank_tells_the_parent_once_and_ends(parent_end, monkeypatch, tmp_path):
    parent, _ = parent_end
    monkeypatch.setenv(turns.TURNS_ENV, json.dumps({"address": "127.0.0.1:1", "secret": "s", "job": "A"}))
    failed = []

    class Ended(Exception):
        pass

    def fail(exc):
        failed.append(exc)
        raise Ended

    monkeypatch.setattr(worker, "fail", fail)
    with pytest.raises(Ended):
        turns.main(["--side", f"A={tmp_path / 'missing.json'}"])
    lines = parent.makefile("r")
    assert "secret" in json.loads(lines.readline())
    error = json.loads(lines.readline())["error"]
    assert error.startswith("RuntimeError: cannot read the spec file") and isinstance(failed[0], RuntimeError)
    monkeypatch.delenv(turns.TURNS_ENV)  # no channel: the failure still ends the rank
    with pytest.raises(Ended):
        turns.main(["--side", "A=x"])
    assert isinstance(failed[1], KeyError)


# --- the Server ---------------------------------------------------------------------------------------

def test_the_communicators_open_for_every_sides_backends_and_algorithms():
    a = _spec(algorithms=["native", "ring"], label="a")
    b = _spec(backends=["gloo", "mpi"], algorithms=["ring", "tree"], sizes=[8])
    merged = turns._merged({"A": a, "B": b})
    assert merged.backends == ["mpi", "gloo"] and merged.algorithms == ["native", "ring", "tree"]
    assert merged.sizes == [4096] and merged.label == "a"  # the rest: the first side's
    assert a.backends == ["mpi"]  # the sides' own specs untouched


def _serve_a_comparison(monkeypatch, specs, commands, conf=None):
    """Every rank serves the same commands; (rank 0's answers, rank 1's answers, the servers by rank)."""
    servers = {}

    class Kept(turns.Server):
        def __init__(self, *args):
            super().__init__(*args)
            servers[self.session.rank] = self

    monkeypatch.setattr(turns, "Server", Kept)

    def rank(comm):
        channel = Chan(commands + [{"cmd": "end"}], conf)
        turns.serve(specs, channel)
        return channel.sent

    sent = _on_ranks(rank)
    return sent[0], sent[1], servers


def test_serve_answers_every_command_rank_0_with_the_data(sessions, monkeypatch):
    specs = {"A": _spec(), "B": _spec(dtypes=["float64"]), "C": _spec(ops=["max"])}
    turn = [["A", 2, 3, False], ["C", 1, 2, True]]
    zero, one, servers = _serve_a_comparison(monkeypatch, specs, [{"cmd": "prepare", "points": {"A": 0, "B": 0, "C": 0}},
                                                     {"cmd": "turns", "turns": turn},
                                                     {"cmd": "finish"}])
    ready, prepared, timed, finished, ended = zero
    assert ready == {"ready": True, "rank0": True, "facts": {"world_size": 2, "hosts": ["h"]}, "world": 2}
    a, b, c = (prepared["prepared"][s] for s in "ABC")
    assert b == {"skip": "fakelib has no float64"}
    assert a["batch"] >= 1 and a["per_call_us"] > 0 and a["timer"] == "python" and a["warmup"] == 1
    assert a["size_bytes"] == 4096 and a["count"] == 1024 and a["memory"] == "own" and a["notes"] == []
    assert a["library_choice"] is None  # (the kernels' schedule, native_han's coll/han: worker.library_choice)
    assert c["memory"] == "shared"  # the same layout as A's: on A's buffers
    assert [len(s) for s in timed["samples"]] == [3, 2] and all(t > 0 for s in timed["samples"] for t in s)
    assert finished == {"ok": True, "wrong": {"A": 0, "C": 0}} and ended == {"ok": True}
    assert one == [{"ready": True, "rank0": False, "facts": None, "world": 2}] + [{"ok": True}] * 4  # no data
    assert all(not s.prepared and s.session.comms["mpi"].closed for s in servers.values())
    assert servers[0].prepared == {} and servers[0].rank0 and not servers[1].rank0


def test_sides_share_buffers_only_of_one_layout(sessions):
    specs = {"A": _spec(), "B": _spec(), "C": _spec(dtypes=["int32"]), "D": _spec(sizes=[8192])}

    def rank(comm):
        server = turns.Server(specs, Chan())
        out = server.prepare({"A": 0, "B": 0, "C": 0, "D": 0})["prepared"]
        p = server.prepared
        shared = [np.shares_memory(p["A"].bufs.recv, p[s].bufs.recv) for s in "BCD"]
        server.turns([["B", 1, 2, True], ["C", 1, 2, False]])
        return {s: out[s]["memory"] for s in out}, shared, server.finish()

    for memory, shared, finish in _on_ranks(rank):
        assert memory == {"A": "own", "B": "shared", "C": "own", "D": "own"} and shared == [True, False, False]
        assert finish == {"wrong": {"A": 0, "B": 0, "C": 0, "D": 0}}


def test_an_in_place_side_does_not_share_an_out_of_place_sides_buffers(sessions):
    """ab's in-process grain without an arena (GPU buffers, ranks on other hosts) comparing
    --out-of-place against --in-place: bound on the other side's out-of-place buffers, the in-place
    all-gather (the ring's, which honours the buffer mode) would find half its output wrong."""
    spec = dict(collectives=["all_gather"], algorithms=["ring"])
    specs = {"A": _spec(in_place=[False], **spec), "B": _spec(in_place=[True], **spec)}

    def rank(comm):
        server = turns.Server(specs, Chan())
        out = server.prepare({"A": 0, "B": 0})["prepared"]
        return out["B"]["memory"], server.finish()

    for memory, finish in _on_ranks(rank):
        assert memory == "own" and finish == {"wrong": {"A": 0, "B": 0}}


def test_in_an_arena_every_side_lies_on_the_same_memory(sessions, tmp_path, monkeypatch):
    monkeypatch.setattr(arena, "SHM_DIR", str(tmp_path))
    specs = {"A": _spec(), "B": _spec(dtypes=["int32"])}
    stride = arena.stride(arena.region_bytes(1024, 1024, 4, False), 2)
    path = arena.create("turns", 2 * stride)

    def rank(comm):
        server = turns.Server(specs, Chan(conf={"arena": {"path": path, "stride": stride}}))
        assert all(ctx.arena is server.arena for ctx in server.session.contexts.values())
        out = server.prepare({"A": 0, "B": 0})["prepared"]
        p = server.prepared
        same = np.shares_memory(p["A"].bufs.send, p["B"].bufs.send)
        server.turns([["A", 1, 2, True], ["B", 1, 2, True]])  # each fills its own inputs again
        return out["A"]["memory"], out["B"]["memory"], same, server.finish(), server.arena.rank

    answers = _on_ranks(rank)
    assert [r[4] for r in answers] == [0, 1]  # each rank in its own region
    for a, b, same, finish, _ in answers:
        assert (a, b, same) == ("arena", "arena", True) and finish == {"wrong": {"A": 0, "B": 0}}
