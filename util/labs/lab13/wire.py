"""Bytes on the wire between ranks, counted by the kernel, read by a process no rank's code runs in.

gloo connects every pair of ranks with one TCP connection over the loopback interface when the group starts.
Right after joining, before any notebook code runs in it, a rank hands its launcher duplicates of its
connected TCP sockets (:func:`connected_sockets`, sent with ``SCM_RIGHTS``). The launcher keeps them and
reads each socket's ``TCP_INFO`` itself (:func:`received`): ``tcpi_bytes_received``, the bytes that arrived on
that end of the connection, counted by the kernel as they arrive. The other end tells whose they are
(:func:`pair_ranks`). So ``wire[i][j]`` is every byte rank ``j`` received from rank ``i``: tensor data and
gloo's own framing (for each message the sender adds 96 bytes and the receiver answers with 48), whatever
Python functions sent them. Code running in a rank cannot change that count but by sending less; the walls
(:mod:`util.labs.lab13.walls`) leave it no other way to reach another rank.
"""
from __future__ import annotations

import os
import socket
import stat
import struct

_TCP_INFO_SIZE = 256
_BYTES_RECEIVED = 128
"""Offset of ``tcpi_bytes_received`` (a u64, Linux 4.1 and later) in ``struct tcp_info``."""
_BYTES_ACKED = 120
"""Offset of ``tcpi_bytes_acked`` (a u64, Linux 4.1 and later): bytes sent that the other end acknowledged."""


def available() -> bool:
    """Whether this machine lets a process count its TCP bytes this way (Linux: ``/proc/self/fd`` and
    ``TCP_INFO``); elsewhere (macOS) runs report no wire counts, and the grader, on Linux, counts them."""
    return hasattr(socket, "TCP_INFO") and os.path.isdir("/proc/self/fd")


def connected_sockets() -> list[socket.socket]:
    """New socket objects (duplicated descriptors) for each connected TCP socket this process holds, one per
    socket however many descriptors point to it."""
    found, seen = [], set()
    for name in sorted(os.listdir("/proc/self/fd"), key=int):
        try:
            info = os.fstat(int(name))
        except OSError:
            continue
        if not stat.S_ISSOCK(info.st_mode) or info.st_ino in seen:
            continue
        try:
            sock = socket.socket(fileno=os.dup(int(name)))
        except OSError:
            continue
        try:
            if sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM:
                sock.getpeername()  # a listening socket has no peer
                seen.add(info.st_ino)
                found.append(sock)
                continue
        except OSError:
            pass
        sock.close()
    return found


def endpoints(sock: socket.socket) -> tuple[str, str]:
    """``(this end, the other end)`` of a connected socket, as ``"host:port"`` strings."""
    here, there = sock.getsockname(), sock.getpeername()
    return f"{here[0]}:{here[1]}", f"{there[0]}:{there[1]}"


def received(sock: socket.socket) -> int:
    """Bytes that have arrived on this end of a TCP connection (the kernel's ``tcpi_bytes_received``)."""
    raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_SIZE)
    if len(raw) < _BYTES_RECEIVED + 8:
        raise OSError("this kernel's TCP_INFO has no bytes_received (Linux 4.1 or later is needed)")
    return struct.unpack_from("Q", raw, _BYTES_RECEIVED)[0]


def moved(sock: socket.socket) -> int:
    """Bytes this end of a TCP connection has received plus those it sent that the other end acknowledged
    (``tcpi_bytes_received`` + ``tcpi_bytes_acked``): anything that crossed it, either way."""
    raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_SIZE)
    if len(raw) < _BYTES_RECEIVED + 8:
        raise OSError("this kernel's TCP_INFO has no bytes_received (Linux 4.1 or later is needed)")
    return struct.unpack_from("Q", raw, _BYTES_ACKED)[0] + struct.unpack_from("Q", raw, _BYTES_RECEIVED)[0]


def pair_ranks(ends: dict[int, list[tuple[str, str]]]) -> dict[tuple[int, int], int]:
    """``(rank, index of its socket) -> the rank at the other end``, from every rank's :func:`endpoints`.

    A socket whose other end no rank holds is left out (a stray, :meth:`Meter.stray_bytes`): gloo, on a loaded
    machine, may retry a connection and leave the first attempt in the other rank's queue of connections it
    never accepted (seen once here, grading under a load of 9 on 2 cores). Raises ``ValueError`` when two ranks
    share no connection (every pair of a gloo group has one: the group is not what it should be) or a rank is
    connected to itself. Every rank's sockets must all be here: until release 4 the launcher's channel took 4
    descriptors a message and the kernel dropped the rest, so a rank holding more (8 ranks' 7, or 4 ranks' 3 beside
    two strays) lost connections and this raised "rank 0 holds no connection to rank ..." (CI, at a load of 4 to
    6); the launcher now takes :data:`util.labs.lab13.ranks.MAX_CONNECTIONS` and checks that all arrived."""
    owner = {here: rank for rank, pairs in ends.items() for here, _ in pairs}
    peers = {}
    for rank, pairs in ends.items():
        for index, (_, there) in enumerate(pairs):
            if there in owner and owner[there] == rank:
                raise ValueError(f"rank {rank} holds a connection to itself ({there})")
            if there in owner:
                peers[(rank, index)] = owner[there]
    ranks = sorted(ends) if any(ends.values()) else []  # no sockets at all: a machine that cannot count them
    for rank in ranks:
        linked = {peer for (which, _), peer in peers.items() if which == rank}
        missing = [other for other in ranks if other != rank and other not in linked]
        if missing:
            raise ValueError(f"rank {rank} holds no connection to rank {missing[0]} (its connections: "
                             f"{', '.join(there for _, there in ends[rank]) or 'none'})")
    return peers


class Meter:
    """The launcher's counter of one group: every rank's sockets, and who is at the other end of each."""

    def __init__(self, world: int) -> None:
        self.world = world
        self.sockets: dict[int, list[socket.socket]] = {}
        self.ends: dict[int, list[tuple[str, str]]] = {}
        self.peers: dict[tuple[int, int], int] = {}

    def add(self, rank: int, sockets: list[socket.socket]) -> None:
        self.sockets[rank] = sockets
        self.ends[rank] = [endpoints(sock) for sock in sockets]

    def close(self) -> None:
        for sockets in self.sockets.values():
            for sock in sockets:
                sock.close()
        self.sockets.clear()

    def matrix(self) -> list[list[int]]:
        """``m[i][j]``: bytes rank ``j`` has received from rank ``i`` so far."""
        if not self.peers:
            self.peers = pair_ranks(self.ends)
        found = [[0] * self.world for _ in range(self.world)]
        for rank, sockets in self.sockets.items():
            for index, sock in enumerate(sockets):
                if (rank, index) in self.peers:
                    found[self.peers[(rank, index)]][rank] += received(sock)
        return found

    def stray_bytes(self) -> dict[int, int]:
        """Rank -> bytes moved so far, either way, on its sockets whose other end is no rank's (see
        :func:`pair_ranks`); the launcher fails a run in which any moved while the functions ran."""
        if not self.peers:
            self.peers = pair_ranks(self.ends)
        found: dict[int, int] = {}
        for rank, sockets in self.sockets.items():
            for index, sock in enumerate(sockets):
                if (rank, index) not in self.peers:
                    found[rank] = found.get(rank, 0) + moved(sock)
        return found


def difference(after: list[list[int]], before: list[list[int]]) -> list[list[int]]:
    return [[a - b for a, b in zip(row_a, row_b)] for row_a, row_b in zip(after, before)]
