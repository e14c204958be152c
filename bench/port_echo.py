"""Raw Erlang-port baseline for bench/run.exs: {packet, 4} frames on fds 3/4, no term codec.

A frame's first byte says what to do: ``e`` echo the frame, ``s`` swallow it and answer ``k``,
``g`` + 8-byte big-endian size: answer with that many bytes. The reader preallocates each frame
and fills it with readinto, the writer writes a preallocated buffer: the physical limit of the
pipe and the port, with nothing of ours in between.
"""

from __future__ import annotations

import io
import struct

HEADER = struct.Struct(">I")


def main() -> None:
    rd = io.FileIO(3, "rb", closefd=False)
    wr = io.FileIO(4, "wb", closefd=False)
    outgoing = bytearray(0)

    def fill(view: memoryview) -> bool:
        got = 0
        while got < len(view):
            n = rd.readinto(view[got:])
            if not n:
                return False
            got += n
        return True

    def write(*chunks: bytes | bytearray | memoryview) -> None:
        for chunk in chunks:
            view = memoryview(chunk)
            while len(view):
                view = view[wr.write(view) :]

    header = bytearray(4)
    while fill(memoryview(header)):
        (size,) = HEADER.unpack(header)
        frame = bytearray(size)
        if not fill(memoryview(frame)):
            return
        op = frame[0:1]
        if op == b"e":
            write(header, frame)
        elif op == b"s":
            write(HEADER.pack(1), b"k")
        elif op == b"g":
            (n,) = struct.unpack(">Q", frame[1:9])
            if len(outgoing) != n:
                outgoing = bytearray(n)
            write(HEADER.pack(n), outgoing)


if __name__ == "__main__":
    main()
