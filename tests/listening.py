"""The TCP sockets listening on this machine, read from /proc/net/tcp and tcp6 (what `ss -ltn` lists),
either all of them or only those some processes hold (their descriptors' socket inodes): for the tests
that watch what a local run exposes (issue 67)."""

from __future__ import annotations

import ipaddress
import os
import socket

LISTEN = "0A"  # /proc/net/tcp's state column


def _address(family: str, hex_address: str) -> str:
    raw = bytes.fromhex(hex_address)
    if family == "tcp":
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))  # four host-order 32-bit words
    return socket.inet_ntop(socket.AF_INET6, words)


def _inodes(pids) -> set[str]:
    found = set()
    for pid in pids:
        try:
            names = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for name in names:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{name}")
            except OSError:
                continue
            if target.startswith("socket:["):
                found.add(target[8:-1])
    return found


def listening(pids=None) -> set[tuple[str, int]]:
    """(address, port) of every listening TCP socket; with pids, only those these processes hold."""
    inodes = None if pids is None else _inodes(pids)
    found = set()
    for family in ("tcp", "tcp6"):
        try:
            lines = open(f"/proc/net/{family}").read().splitlines()[1:]
        except OSError:
            continue
        for fields in (line.split() for line in lines):
            if fields[3] == LISTEN and (inodes is None or fields[9] in inodes):
                address, port = fields[1].split(":")
                found.add((_address(family, address), int(port, 16)))
    return found


def loopback(address: str) -> bool:
    """127.0.0.0/8, ::1, or an IPv4-mapped loopback address; a wildcard (0.0.0.0, ::) is every interface."""
    ip = ipaddress.ip_address(address)
    mapped = getattr(ip, "ipv4_mapped", None)
    return ip.is_loopback or bool(mapped and mapped.is_loopback)


def beyond_loopback(found) -> list[str]:
    """The sockets of `found` that another machine could reach, as address:port."""
    return sorted(f"{a}:{p}" for a, p in found if not loopback(a))
