"""Forwarding of the worker's stdout and stderr to the Elixir side (PROTOCOL.md section 2.1).

The channel lives on fds 3 and 4, so nothing printed on fds 1 and 2 can corrupt a frame. But
output there (a ``print`` in Python code, a warning of XLA, ``write(1, ...)`` in a native
library) would otherwise go wherever the BEAM's own stdout points, unattributed. With
:func:`forward`, fds 1 and 2 become the write ends of pipes (``os.dup2``, so native code writing
to fd 1 is captured too) and a daemon thread per pipe reads whole lines and sends each as an
unsolicited ``{:log, :stdout | :stderr, line, seq}`` frame through the shared, locked
:class:`~py_backend.channel.FrameWriter`; ``NxJax.Worker`` hands them to Elixir's Logger.
``seq`` numbers the lines 1, 2, 3, ... in the order they are written to the channel (both
streams counted together): the Elixir side reads a port's frames in several processes in turn
and puts the lines back in this order before it logs them.

This module knows about file descriptors and frames; it knows nothing about JAX.
"""

from __future__ import annotations

import os
import sys
import threading

from py_backend import channel
from py_backend.channel import FrameWriter, atom

MAX_LINE = 1 << 16  # longer lines are sent in pieces of this many bytes
_READ = 1 << 16

STREAMS = ((1, "stdout"), (2, "stderr"))


def log_message(stream: str, line: bytes, seq: int) -> list[channel.Chunk]:
    """The frame forwarding one line (without its newline) of ``stream``, the ``seq``-th."""
    return channel.encode_chunks((atom("log"), atom(stream), channel.binary(line), seq))


class LineSender:
    """Sends lines as log frames through ``writer``, numbered in the order they are written:
    the number is taken and the frame written under one lock, so the two streams' pump threads
    cannot write their lines in an order other than their numbers'."""

    def __init__(self, writer: FrameWriter) -> None:
        self._writer = writer
        self._lock = threading.Lock()
        self._sent = 0

    def send(self, stream: str, line: bytes) -> None:
        with self._lock:
            self._sent += 1
            self._writer.write_frame(log_message(stream, line, self._sent))


def split_lines(pending: bytes, chunk: bytes) -> tuple[list[bytes], bytes]:
    """Whole lines in ``pending + chunk`` (newlines dropped; over-long lines cut in pieces of
    ``MAX_LINE`` bytes) and the unfinished rest.

    >>> split_lines(b"a", b"b\\nc\\n\\nd")
    ([b'ab', b'c', b''], b'd')
    """
    *lines, rest = (pending + chunk).split(b"\n")
    out: list[bytes] = []
    for line in lines:
        out.extend(_pieces(line))
    while len(rest) >= MAX_LINE:
        out.append(rest[:MAX_LINE])
        rest = rest[MAX_LINE:]
    return out, rest


def _pieces(line: bytes) -> list[bytes]:
    if len(line) <= MAX_LINE:
        return [line]
    return [line[i : i + MAX_LINE] for i in range(0, len(line), MAX_LINE)]


def pump(read_fd: int, stream: str, sender: LineSender) -> None:
    """Forward lines read from ``read_fd`` until EOF or until the channel is closed."""
    pending = b""
    try:
        while True:
            chunk = os.read(read_fd, _READ)
            if not chunk:
                if pending:
                    sender.send(stream, pending)
                return
            lines, pending = split_lines(pending, chunk)
            for line in lines:
                sender.send(stream, line)
    except OSError:  # the Elixir side is gone (EPIPE on fd 4): nothing left to forward to
        return
    finally:
        os.close(read_fd)


def forward(writer: FrameWriter) -> list[threading.Thread]:
    """Redirect fds 1 and 2 into pipes pumped to ``writer``; returns the (daemon) threads."""
    threads = []
    sender = LineSender(writer)
    for fd, stream in STREAMS:
        read_fd, write_fd = os.pipe()
        os.dup2(write_fd, fd)
        os.close(write_fd)
        thread = threading.Thread(
            target=pump, args=(read_fd, stream, sender), name=f"nx_jax-{stream}", daemon=True
        )
        thread.start()
        threads.append(thread)
    # Python's own text streams write through fds 1 and 2: make them line-buffered so a print
    # reaches the pipe when its line ends
    for text_stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(text_stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(line_buffering=True)
    return threads
