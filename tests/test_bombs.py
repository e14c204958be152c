"""Small frames that would force huge work or memory on the worker, sent to a real
``python -m py_backend``: each is refused (or read without allocating ahead of the bytes),
quickly, and the worker keeps serving."""

from __future__ import annotations

import struct
import time
import zlib

from py_backend.channel import Binary, encode, frame_header

from .helpers import WorkerProcess, atom, atom_str, request, scaled
from .test_request_loop import assert_error, assert_pong

MB = 1 << 20


def memory(w: WorkerProcess, request_id: int, reset: bool) -> dict[str, int]:
    reply = w.call(request(request_id, "memory", [reset]))
    assert reply[1] == request_id
    return {atom_str(k): v for k, v in reply[2].items()}


def ping_frame(request_id: int) -> bytes:
    return request(request_id, "ping", [])


def test_a_compressed_term_is_refused_without_inflating_it() -> None:
    # 256 MB of a binary, deflated to a quarter of a megabyte: {:"C", 5, :nx_jax, :put, [[bin]]}
    data = Binary(b"\x00" * (256 * MB))
    inner = encode((atom("C"), 5, atom("nx_jax"), atom("put"), [[data]]))[1:]
    bomb = b"\x83\x50" + struct.pack(">I", len(inner)) + zlib.compress(inner, 9)
    assert len(bomb) < MB
    w = WorkerProcess()
    try:
        before = memory(w, 1, reset=True)
        reply = w.call(bomb)
        assert_error(reply, -1, "BadRequest", "compressed terms are refused")
        after = memory(w, 2, reset=False)
        assert after["peak_rss"] - before["rss"] < 64 * MB
        assert_pong(w.call(ping_frame(3)), 3)
    finally:
        assert w.close() == 0


def test_a_long_integer_is_refused_at_once() -> None:
    # a 40 KB integer (LARGE_BIG_EXT) as a request argument: erlang-py alone takes about a
    # second for it (its decoding is quadratic in the length)
    digits = b"\x01" * 40_000
    big = b"o" + struct.pack(">I", len(digits)) + b"\x00" + digits
    frame = encode((atom("C"), 6, atom("nx_jax"), atom("ping"), [0]))
    assert frame.endswith(b"a\x00j")
    frame = frame[:-3] + big + b"j"  # the argument list [0] becomes [big]
    w = WorkerProcess()
    try:
        # (refused by its length before any digit is read; answered under the id in its head)
        assert_error(w.call(frame), 6, "BadRequest", "an integer of 40000 bytes is refused")
        # an integer of Nx's size still travels (u64 max, and 2**200 as a constant would)
        reply = w.call(request(7, "ping", [2**200]))
        assert_error(reply, 7, "BadRequest", "ping")
        assert_pong(w.call(ping_frame(8)), 8)
    finally:
        assert w.close() == 0


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_a_header_announcing_gigabytes_commits_only_what_arrives() -> None:
    w = WorkerProcess(env={"NX_JAX_MAX_FRAME": str((1 << 32) - 1)})
    try:
        assert_pong(w.call(ping_frame(1)), 1)
        idle = rss(w.proc.pid)
        # 3 GiB announced, 8 MB sent: the worker waits for the rest of the frame
        w.send_bytes(frame_header(3 << 30) + b"\x00" * (8 * MB))
        deadline = time.monotonic() + scaled(5.0)
        grown = 0
        while time.monotonic() < deadline:
            grown = rss(w.proc.pid) - idle
            time.sleep(0.05)
        assert grown < 64 * MB, f"the worker's RSS grew by {grown >> 20} MB"
    finally:
        # the stream ends inside the frame: the worker exits, status 0
        assert w.close() == 0
