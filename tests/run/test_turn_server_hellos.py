"""commbench ab's turn server takes its ranks' hellos side by side (issue 67, H6): connections that say
nothing, or too much, are closed without holding the ranks' own (8 idle connections stalled the start-up
240 s: each was read alone, 30 s at most, unbounded)."""

import json
import socket
import threading
import time

from commbench.run import turn_server


class _Launch:
    def exited(self):
        return False


class _Job:
    """A job of one rank as accept() sees it: what its hello brought."""

    def __init__(self):
        self.name, self.world, self.conns, self.job, self.hellos = "A", 1, {}, _Launch(), []

    def follow(self):
        pass

    def hello(self, conn, hello):
        self.hellos.append(hello)
        self.conns[hello["rank"]] = conn

    def ready(self, deadline):
        pass


def _closed(sock) -> bool:
    """Has the server closed this connection (an end of file, or a reset where it left data unread)?"""
    sock.settimeout(5)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _connect(server):
    host, port = server.address.rsplit(":", 1)
    return socket.create_connection((host, int(port)))


def test_idle_and_oversized_connections_do_not_hold_the_ranks_hello():
    server = turn_server.TurnServer(local=True)
    idle = [_connect(server) for _ in range(8)]  # another user's, saying nothing
    flood = _connect(server)
    flood.sendall(b"x" * (turn_server.HELLO_BYTES + 10))  # no line within the limit
    rank = _connect(server)
    job = _Job()

    def say_hello():
        time.sleep(0.2)
        rank.sendall((json.dumps({"secret": server.secret, "job": "A", "rank": 0}) + "\n").encode())

    threading.Thread(target=say_hello).start()
    start = time.monotonic()
    try:
        server.accept([job], time.monotonic() + 60)
        elapsed = time.monotonic() - start
        assert job.hellos == [{"secret": server.secret, "job": "A", "rank": 0}] and 0 in job.conns
        assert elapsed < turn_server.HELLO_S  # not one idle connection waited out, let alone 8 x 30 s
        assert _closed(flood)  # too much without a line
        job.conns[0].send({"cmd": "go"})  # the rank's connection is kept, and works
        assert json.loads(rank.makefile().readline()) == {"cmd": "go"}
    finally:
        for s in idle + [flood, rank]:
            s.close()
        server.close()


def test_a_wrong_secret_is_closed_at_once():
    server = turn_server.TurnServer(local=True)
    stranger, rank = _connect(server), _connect(server)
    stranger.sendall(b'{"secret": "guess", "job": "A", "rank": 0}\n')
    rank.sendall((json.dumps({"secret": server.secret, "job": "A", "rank": 0}) + "\n").encode())
    job = _Job()
    try:
        server.accept([job], time.monotonic() + 60)
        assert [h["secret"] for h in job.hellos] == [server.secret]
        assert _closed(stranger)
    finally:
        for s in (stranger, rank):
            s.close()
        server.close()
