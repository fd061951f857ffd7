"""The ranks of `commbench ab`: measure what the parent asks, turn by turn, and sleep between.

Started by a launcher as `python -m commbench.rank.turns --side A=<spec file> [--side B=<spec file>]`
with TURNS_ENV set: one job serves one side (the sides cannot share a process: another
environment or Python) or both (they differ only in options a rank can hold side by side). Every
rank opens one connection to the parent (commbench.run.turn_server) and then does nothing but
answer its commands, in order, all ranks alike:

  prepare {side: point index}    bind each side's point on the same memory as the other side's
                                  (the arena both jobs map: commbench.rank.arena; without one, a
                                  pair of one layout in one process shares its buffers), fill,
                                  warm up; rank 0 answers per side its per-call time, batch,
                                  timed loop, or why it cannot run here
  turns [[side, batch, samples, fill]]  for each turn: its own inputs again where `fill` (the sides'
                                  types or ops differ, and they share memory), one untimed call,
                                  then `samples` timed batches (harness.Prepared.time); rank 0
                                  answers the samples, µs per call
  finish                          check each prepared side (wrong elements) and let its buffers go
  end                             close the communicators and exit

Between commands a rank blocks in recv() on its connection: asleep, not spinning, so while one
side's job takes its turn the other's leaves the cores to it. Rank 0's facts (versions, hosts:
what run.json records per side) go with its answer to the first command, "hello".
A rank that fails answers once with the error and ends the job, as the worker does.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys

from commbench.folder.spec_file import decode_spec
from commbench.kernels import reducers
from commbench.machine import topology
from commbench.plan import build_plan, rounding_twins
from commbench.rank import harness, worker
from commbench.rank.arena import Arena
from commbench.rank.han import close_han
from commbench.spec import SweepSpec
from commbench.timers import choose_batch

PROTOCOL = 1  # the parent refuses a side whose ranks speak another
TURNS_ENV = "COMMBENCH_AB"  # JSON: the parent's address, the job's secret and name, the variables to report


def connect(address: str) -> socket.socket:
    """The parent's socket: unix:PATH (every rank on its machine) or HOST:PORT."""
    if address.startswith("unix:"):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(60)
        sock.connect(address[len("unix:"):])
        return sock
    host, port = address.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=60)


class Channel:
    """One rank's connection to the parent: JSON lines both ways, the reads blocking."""

    def __init__(self, setting: str):
        self.conf = conf = json.loads(setting)
        self.sock = connect(conf["address"])
        self.sock.settimeout(None)  # from now on a read waits as long as the parent does: asleep
        self.reader = self.sock.makefile("r", encoding="utf-8")
        info = topology.detect()
        self.send(secret=conf["secret"], job=conf["job"], rank=info.rank, host=info.hostname, protocol=PROTOCOL,
                  pid=os.getpid(), python=sys.executable, env={k: os.environ.get(k) for k in conf.get("check", [])})

    def send(self, **data) -> None:
        self.sock.sendall((json.dumps(data, default=str) + "\n").encode())

    def recv(self) -> dict:
        line = self.reader.readline()
        if not line:
            raise ConnectionError("the parent closed the connection")
        return json.loads(line)


def _merged(specs: dict[str, SweepSpec]) -> SweepSpec:
    """The spec the job's communicators open from: the first side's, with every side's backends and
    algorithms (a side's points need theirs)."""
    first = next(iter(specs.values()))
    merged = SweepSpec.from_json(first.to_json())
    merged.backends = list(dict.fromkeys(b for s in specs.values() for b in s.backends))
    merged.algorithms = list(dict.fromkeys(a for s in specs.values() for a in s.algorithms))
    return merged


def _same_layout(a: worker.Bound, b: worker.Bound, in_place: tuple[bool, bool]) -> bool:
    """Can two bound points share buffers: the same layout (buffer mode included), and memory either
    can use (at most one of them places its buffers, or both in the same place)."""
    alloc = [getattr(x.binder, "alloc", None) for x in (a, b)]
    return (a.coll is b.coll and a.counts == b.counts and a.dtype is b.dtype and a.comm is b.comm
            and in_place[0] == in_place[1] and (None in alloc or alloc[0] == alloc[1]))


class Server:
    """What one rank holds across commands: the session, each side's plan and prepared points."""

    def __init__(self, specs: dict[str, SweepSpec], channel: Channel):
        self.specs, self.channel = specs, channel
        self.facts: dict = {}
        self.session = worker.open_session(_merged(specs), self._collect)
        self.plans = {side: build_plan(spec) for side, spec in specs.items()}
        self.twins = {side: rounding_twins(plan, self.session.world, specs[side].peer_traffic()) for side, plan in self.plans.items()}
        self.prepared: dict[str, harness.Prepared] = {}
        where = channel.conf.get("arena")  # the memory both sides' buffers lie in (commbench.rank.arena)
        self.arena = None if not where else Arena(where["path"], where["stride"], self.session.rank)
        for ctx in self.session.contexts.values():
            ctx.arena = self.arena

    def _collect(self, kind: str, **data) -> None:
        if kind == "facts":
            self.facts = data["run"]

    @property
    def rank0(self) -> bool:
        return self.session.rank == 0

    def prepare(self, points: dict[str, int]) -> dict:
        self.prepared.clear()
        out, bound = {}, {}
        for side, index in points.items():
            point = self.plans[side][index]
            b = worker.bind_point(self.session, self.specs[side], point, self.twins[side])
            if isinstance(b, str):
                out[side] = {"skip": b}
                continue
            share = None if self.arena else next((self.prepared[s].bufs for s, (other, mode) in bound.items()
                                                  if _same_layout(other, b, (mode, point.in_place))), None)
            bound[side] = b, point.in_place
            self.prepared[side] = p = b.prepare(self.specs[side], point, share,
                                                self.arena.alloc(b.comm) if self.arena else None)
            per_call, _ = p.warm(self.specs[side].warmup)
            batch = self.specs[side].batch or choose_batch(per_call)
            out[side] = {"per_call_us": per_call * 1e6, "batch": batch, "timer": p.loop.name,
                         "size_bytes": b.counts.size_bytes, "count": b.counts.count, "warmup": self.specs[side].warmup,
                         "notes": worker.notes_of(self.session, b, p.notes),
                         "library_choice": worker.library_choice(point, getattr(p.fn, "schedule", None)),
                         "memory": "arena" if self.arena else "shared" if share is not None else "own"}
        return {"prepared": out}

    def turns(self, turns: list) -> dict:
        samples = []
        for side, batch, n, fill in turns:
            p = self.prepared[side]
            if fill:  # the other side, on the same memory, filled it with its own type or values
                p.bufs.fill(p.pattern)
            p.fn()  # one untimed call: the caches this side's data left to the other side's turn
            samples.append([round(t * 1e6, 4) for t in p.time(int(n), int(batch)).tolist()])
        return {"samples": samples}

    def finish(self) -> dict:
        wrong = {side: p.check() for side, p in self.prepared.items()}
        self.prepared.clear()
        return {"wrong": wrong}

    def close(self) -> None:
        close_han(self.session.han)
        for c in self.session.comms.values():
            c.close()


def serve(specs: dict[str, SweepSpec], channel: Channel) -> None:
    server = Server(specs, channel)
    channel.send(ready=True, rank0=server.rank0, facts=server.facts if server.rank0 else None,
                 world=server.session.world)
    while True:
        cmd = channel.recv()
        kind = cmd["cmd"]
        if kind == "end":
            server.close()
            channel.send(ok=True)
            return
        answer = {"prepare": lambda: server.prepare(cmd["points"]), "turns": lambda: server.turns(cmd["turns"]),
                  "finish": server.finish}[kind]()
        channel.send(ok=True, **(answer if server.rank0 else {}))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="commbench.rank.turns")
    parser.add_argument("--side", action="append", required=True, help="SIDE=spec file, once per side served")
    args = parser.parse_args(argv)
    reducers.quiet_overflow()
    channel = None
    try:
        channel = Channel(os.environ[TURNS_ENV])
        specs = {}
        for item in args.side:
            side, path = item.split("=", 1)
            specs[side] = decode_spec(path)
        serve(specs, channel)
    except BaseException as exc:  # noqa: BLE001 - every failure must end the whole job
        if channel is not None:
            try:
                channel.send(error=f"{type(exc).__name__}: {exc}".strip())
            except OSError:
                pass
        worker.fail(exc)
    sys.exit(0)


if __name__ == "__main__":
    main()
