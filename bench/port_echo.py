"""Raw Erlang-port baseline for bench/run.exs: {packet, 4} frames on fds 3/4, no term codec.

A frame's first byte says what to do: ``e`` echo the frame, ``s`` swallow it and answer ``k``,
``g`` + 8-byte big-endian size: answer with that many bytes. The reader preallocates each frame
and fills it with readinto, the writer writes a preallocated buffer with its header in one
``writev``, through pipes grown to 1 MiB as the worker's: the physical limit of the pipe and the
port, with nothing of ours in between.

``--spin-us N``: after each frame, poll the request pipe for up to N microseconds before blocking,
as the worker does (``--spin-us`` of ``python -m py_backend``), to compare like with like: with
the worker's rule for a spin that loses its CPU (``py_backend.channel.SpinPause``: it moves to
another CPU and spins on there, or, lost again within a millisecond, it stops and the next waits
block at once).
"""

from __future__ import annotations

import fcntl
import io
import os
import select
import struct
import sys
import time

from py_backend.channel import PREEMPTED_NS, SpinPause, move_off_this_cpu

HEADER = struct.Struct(">I")


def spin_ns_from_argv() -> int:
    argv = sys.argv[1:]
    return int(argv[argv.index("--spin-us") + 1]) * 1000 if "--spin-us" in argv else 0


class RawPort:
    """{packet, 4} frames on fds 3/4: each frame preallocated and filled with readinto, each
    reply written with one writev (header and payload together)."""

    def __init__(self, spin_ns: int = 0) -> None:
        self.rd = io.FileIO(3, "rb", closefd=False)
        for fd in (3, 4):  # pipe buffers as large as the worker's (py_backend.channel.grow_pipe)
            try:
                with open("/proc/sys/fs/pipe-max-size") as f:
                    fcntl.fcntl(fd, 1031, min(1 << 20, int(f.read())))  # F_SETPIPE_SZ
            except (OSError, ValueError):
                pass
        self.spin_ns = spin_ns
        self.pause = SpinPause()
        if spin_ns:
            os.set_blocking(3, False)

    def _read_some(self, view: memoryview) -> int | None:
        pause = self.pause
        if pause.left:  # a pause of the spin: fd 3 blocks, as the worker's (FrameReader)
            pause.left -= 1
            n = self.rd.readinto(view)
            if not pause.left:
                os.set_blocking(3, False)
            return n
        n = self.rd.readinto(view)
        if n is None:  # non-blocking and nothing there yet: spin, then sleep in select
            last = time.perf_counter_ns()
            deadline = last + self.spin_ns
            while n is None and last < deadline:
                os.sched_yield()
                n = self.rd.readinto(view)
                now = time.perf_counter_ns()
                if now - last > PREEMPTED_NS:  # the spin lost its CPU: it moves and spins
                    # on, or (a second loss within MOVE_GAP_NS) a pause begins, as the worker's
                    if pause.may_move(now) and move_off_this_cpu():
                        last = time.perf_counter_ns()
                        continue
                    pause.lost()
                    os.set_blocking(3, True)
                    return n if n is not None else self._read_some(view)
                last = now
            pause.kept()
            while n is None:
                select.select([3], [], [])
                n = self.rd.readinto(view)
        return n

    def _fill(self, view: memoryview) -> bool:
        got = 0
        while got < len(view):
            n = self._read_some(view[got:])
            if not n:
                return False
            got += n
        return True

    def read_frame(self) -> bytearray | None:
        header = bytearray(4)
        if not self._fill(memoryview(header)):
            return None
        frame = bytearray(HEADER.unpack(header)[0])
        return frame if self._fill(memoryview(frame)) else None

    def write(self, payload: bytes | bytearray | memoryview) -> None:
        chunks = [memoryview(HEADER.pack(len(payload))), memoryview(payload)]
        while chunks:
            n = os.writev(4, chunks)
            while chunks and n >= len(chunks[0]):
                n -= len(chunks[0])
                chunks.pop(0)
            if n:
                chunks[0] = chunks[0][n:]


def main() -> None:
    port = RawPort(spin_ns_from_argv())
    outgoing = bytearray(0)
    while (frame := port.read_frame()) is not None:
        op = frame[0:1]
        if op == b"e":
            port.write(frame)
        elif op == b"s":
            port.write(b"k")
        elif op == b"g":
            (n,) = struct.unpack(">Q", frame[1:9])
            if len(outgoing) != n:
                outgoing = bytearray(n)
            port.write(outgoing)


if __name__ == "__main__":
    main()
