"""Framing over fds (PROTOCOL.md section 1)."""

from __future__ import annotations

import io
import os
import random
import select
import struct
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import pytest

from py_backend import channel
from py_backend.channel import (
    HEADER_MAX,
    FrameReader,
    FrameTooLarge,
    FrameWriter,
    TruncatedFrame,
    default_max_frame,
    max_frame_from_env,
)


class ChunkedSource:
    """An unbuffered binary source that hands out data in the given pieces."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = [p for p in pieces if p]
        self.reads = 0

    def readinto(self, buffer: Any) -> int:
        self.reads += 1
        if not self.pieces:
            return 0
        piece = self.pieces[0]
        n = min(len(piece), len(buffer))
        buffer[:n] = piece[:n]
        self.pieces[0] = piece[n:]
        if not self.pieces[0]:
            self.pieces.pop(0)
        return n


class TrickleSink:
    """A sink that accepts at most ``step`` bytes per write (like a full pipe)."""

    def __init__(self, step: int) -> None:
        self.step = step
        self.data = bytearray()

    def write(self, data: Any) -> int:
        chunk = bytes(data[: self.step])
        self.data += chunk
        return len(chunk)


def frame(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + payload


def test_a_frame_split_at_every_byte_boundary_is_reassembled() -> None:
    payload = bytes(range(50))
    data = frame(payload)
    for cut in range(len(data) + 1):
        reader = FrameReader(ChunkedSource([data[:cut], data[cut:]]))
        assert reader.read_frame() == payload
        assert reader.read_frame() is None


def test_frames_arriving_in_many_reads_are_reassembled() -> None:
    rng = random.Random(7)
    payloads = [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300)))
                for _ in range(40)]
    stream = b"".join(frame(p) for p in payloads)
    pieces = []
    i = 0
    while i < len(stream):
        n = rng.randrange(1, 17)
        pieces.append(stream[i:i + n])
        i += n
    source = ChunkedSource(pieces)
    reader = FrameReader(source)
    assert [reader.read_frame() for _ in payloads] == payloads
    assert reader.read_frame() is None
    assert source.reads > len(payloads)


def test_empty_frame() -> None:
    reader = FrameReader(ChunkedSource([frame(b"")]))
    assert reader.read_frame() == b""
    assert reader.read_frame() is None


def test_a_64_mb_frame_crosses_a_real_pipe() -> None:
    payload = os.urandom(1 << 20) * 64
    r, w = os.pipe()
    writer = FrameWriter(w)

    def send() -> None:
        writer.write_frame([payload[:10], payload[10:]])
        os.close(w)

    thread = threading.Thread(target=send)
    start = time.perf_counter()
    thread.start()
    try:
        reader = FrameReader(r)
        got = reader.read_frame()
        elapsed = time.perf_counter() - start
        assert got is not None and len(got) == len(payload) and got == payload
        assert reader.read_frame() is None
    finally:
        thread.join()
        os.close(r)
    assert elapsed < 10.0  # linear: well under a second here; quadratic would take minutes


def test_an_oversize_frame_is_refused_before_allocating() -> None:
    huge = 1 << 31
    source = ChunkedSource([struct.pack(">I", huge), b"x" * 64, frame(b"next")])
    reader = FrameReader(source, max_frame=1000)
    tracemalloc.start()
    try:
        with pytest.raises(FrameTooLarge) as info:
            reader.read_frame()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    assert info.value.size == huge and "NX_JAX_MAX_FRAME" in str(info.value)


def test_an_oversize_frame_can_be_discarded_to_stay_in_sync() -> None:
    big = b"y" * 5000
    reader = FrameReader(ChunkedSource([frame(big), frame(b"next")]), max_frame=1000)
    with pytest.raises(FrameTooLarge) as info:
        reader.read_frame()
    reader.discard(info.value.size)
    assert reader.read_frame() == b"next"


def test_max_frame_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NX_JAX_MAX_FRAME", raising=False)
    quarter = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 4
    assert max_frame_from_env() == default_max_frame() == min(quarter, HEADER_MAX)
    monkeypatch.setenv("NX_JAX_MAX_FRAME", "10")
    reader = FrameReader(ChunkedSource([frame(b"x" * 11)]))
    with pytest.raises(FrameTooLarge):
        reader.read_frame()


def test_eof_between_frames_is_a_clean_end() -> None:
    assert FrameReader(ChunkedSource([])).read_frame() is None


def test_eof_inside_a_frame_is_truncation() -> None:
    with pytest.raises(TruncatedFrame, match="2 of 4 header"):
        FrameReader(ChunkedSource([b"\x00\x00"])).read_frame()
    with pytest.raises(TruncatedFrame, match="3 of 10 payload"):
        FrameReader(ChunkedSource([struct.pack(">I", 10) + b"abc"])).read_frame()


def test_eof_on_a_real_pipe() -> None:
    r, w = os.pipe()
    os.close(w)
    try:
        assert FrameReader(r).read_frame() is None
    finally:
        os.close(r)


def test_writer_writes_all_bytes_of_all_chunks_despite_partial_writes() -> None:
    sink = TrickleSink(3)
    writer = FrameWriter(sink)
    writer.write_frame([b"hello ", memoryview(b"world"), bytearray(b"!")])
    writer.write_frame(b"")
    assert bytes(sink.data) == frame(b"hello world!") + frame(b"")
    reader = FrameReader(ChunkedSource([bytes(sink.data)]))
    assert reader.read_frame() == b"hello world!"
    assert reader.read_frame() == b""


class CountingSink:
    def __init__(self) -> None:
        self.writes = 0
        self.data = bytearray()

    def write(self, data: Any) -> int:
        self.writes += 1
        self.data += bytes(data)
        return len(data)


def test_a_small_frame_of_many_chunks_is_one_write() -> None:
    # the reader of a pipe wakes once per write: a reply must not go out chunk by chunk
    sink = CountingSink()
    FrameWriter(sink).write_frame([b"\x83h", memoryview(b"\x02ab"), bytearray(b"cd")])
    assert sink.writes == 1 and bytes(sink.data) == frame(b"\x83h\x02abcd")


def test_small_frames_are_read_in_one_system_call_each() -> None:
    payloads = [b"a" * 10, b"b" * 3000, b""]
    source = ChunkedSource([frame(p) for p in payloads])
    reader = FrameReader(source)
    assert [reader.read_frame() for _ in payloads] == payloads
    assert reader.read_frame() is None
    assert source.reads == len(payloads) + 1  # header and payload together; the last is EOF


def test_frames_that_arrive_together_are_served_from_one_read() -> None:
    # pipelined requests: the first comes straight out of the read (FrameReader's path for an
    # empty buffer), the others out of the buffer, a partial one completed by the next read
    payloads = [b"first", b"", b"x" * 3000, b"last"]
    stream = b"".join(frame(p) for p in payloads)
    source = ChunkedSource([stream[:-3], stream[-3:]])
    reader = FrameReader(source)
    assert [reader.read_frame() for _ in payloads] == payloads
    assert reader.read_frame() is None
    assert source.reads == 3  # the frames in two reads, then EOF


def test_frames_straddling_the_read_buffer_are_reassembled() -> None:
    # sizes around the buffer (64 KiB): a frame's header or payload split over two reads,
    # the rest of the buffer holding the start of the next frame
    rng = random.Random(3)
    payloads = [os.urandom(n) for n in
                (65532, 65536, 65537, 1, 65535, 131072, 7, 65530, 200_000, 3, 0, 65536)]
    stream = b"".join(frame(p) for p in payloads)
    pieces, i = [], 0
    while i < len(stream):
        n = rng.choice([1, 3, 4096, 65536, 70000, 150_000])
        pieces.append(stream[i:i + n])
        i += n
    reader = FrameReader(ChunkedSource(pieces))
    for p in payloads:
        assert reader.read_frame() == p
    assert reader.read_frame() is None


def test_large_frames_cross_a_real_pipe_with_writev_in_order() -> None:
    payloads = [os.urandom(300_000), b"x", os.urandom(70_000)]
    r, w = os.pipe()
    writer = FrameWriter(w)

    def send() -> None:
        for p in payloads:
            writer.write_frame([p[:5], memoryview(p)[5:], b""])
        os.close(w)

    thread = threading.Thread(target=send)
    thread.start()
    try:
        reader = FrameReader(r)
        assert [reader.read_frame() for _ in payloads] == payloads
        assert reader.read_frame() is None
    finally:
        thread.join()
        os.close(r)


@pytest.mark.parametrize("spin_us", [0, 50, 5000])
def test_a_spinning_reader_gets_frames_sent_late_and_eof(spin_us: int) -> None:
    # frames arrive after the spin ran out (the reader must then block, not busy-fail), within
    # it, and split mid-frame; EOF ends it cleanly
    r, w = os.pipe()
    sent = [b"first", os.urandom(100_000), b"last"]

    # the sleeps only shape the timing (late, split, then EOF): the reader must return the
    # same frames whatever the machine makes of them
    def send() -> None:
        time.sleep(0.05)
        os.write(w, frame(sent[0]))
        data = frame(sent[1])
        os.write(w, data[:10])
        time.sleep(0.02)
        view = memoryview(data)[10:]
        while len(view):
            view = view[os.write(w, view):]
        os.write(w, frame(sent[2]))
        time.sleep(0.02)
        os.close(w)

    thread = threading.Thread(target=send)
    thread.start()
    try:
        reader = FrameReader(r, spin_us=spin_us)
        assert [reader.read_frame() for _ in sent] == sent
        assert reader.read_frame() is None
    finally:
        thread.join()
        os.close(r)


@pytest.mark.parametrize("payload", [b"small", [b"x" * 70_000, b"y" * 10]])
def test_a_buffered_sink_is_flushed_after_each_frame(payload: Any) -> None:
    # a caller's buffered file object: the frame must be on the wire when write_frame returns
    r, w = os.pipe()
    sink = io.BufferedWriter(io.FileIO(w, "wb"), buffer_size=1 << 20)
    try:
        data = payload if isinstance(payload, bytes) else b"".join(payload)
        thread = threading.Thread(target=FrameWriter(sink).write_frame, args=(payload,))
        thread.start()
        got = bytearray()
        while len(got) < len(data) + 4:
            ready, _, _ = select.select([r], [], [], 5.0)
            assert ready, f"only {len(got)} of {len(data) + 4} bytes reached the pipe"
            got += os.read(r, 1 << 20)
        thread.join()
        assert bytes(got) == frame(data)
    finally:
        os.close(r)  # first: a frame still in the buffer must not block the close below
        try:
            sink.close()
        except BrokenPipeError:
            pass


# --- pipe buffers -----------------------------------------------------------------------------


def test_grow_pipe_grows_a_pipe_up_to_the_system_limit(tmp_path: Any) -> None:
    r, w = os.pipe()
    try:
        before = channel.pipe_size(r)
        if before is None:
            pytest.skip("no F_GETPIPE_SZ on this system")
        with open("/proc/sys/fs/pipe-max-size") as f:
            limit = int(f.read())
        got = channel.grow_pipe(w)  # either end: the buffer is the pipe's
        assert got == min(channel.PIPE_BYTES, limit) == channel.pipe_size(r)
        assert channel.grow_pipe(r, size=4096) == got  # never shrinks
        # a frame larger than the old 64 KiB buffer now fits in one write
        payload = bytes(range(256)) * 1024
        if got >= len(payload) + 4:
            assert os.write(w, struct.pack(">I", len(payload)) + payload) == len(payload) + 4
            assert FrameReader(r).read_frame() == payload
    finally:
        os.close(r)
        os.close(w)
    with open(tmp_path / "file", "wb") as f:
        assert channel.pipe_size(f.fileno()) is None
        assert channel.grow_pipe(f.fileno()) is None


@pytest.mark.parametrize("full", [False, True])
def test_a_small_frame_partly_written_by_one_write_is_completed(full: bool) -> None:
    # a 4 KiB non-blocking pipe takes only part of a 10 KB frame per write (or, already full,
    # none of it): the rest must follow as the reader drains the pipe
    r, w = os.pipe()
    try:
        if channel.pipe_size(w) is None:
            pytest.skip("no F_SETPIPE_SZ on this system")
        import fcntl

        fcntl.fcntl(w, 1031, 4096)  # F_SETPIPE_SZ: one page
        os.set_blocking(w, False)
        payload = bytes(random.Random(5).randbytes(10_000))
        writer = FrameWriter(w)
        frames = [b"x" * 4092, payload] if full else [payload]
        if full:
            writer.write_frame(frames[0])  # 4096 bytes: the pipe is full
        got: list[bytes | None] = []
        source = FrameReader(r)

        def read_later() -> None:
            time.sleep(0.1)  # the write below finds the pipe full (or nearly) first
            got.extend(source.read_frame() for _ in frames)

        reader = threading.Thread(target=read_later)
        reader.start()
        writer.write_frame(payload)
        reader.join()  # unbounded: the suite's per-test limit (tests/conftest.py) bounds it
        assert got == frames
    finally:
        os.close(r)
        os.close(w)


def test_write_framed_writes_a_whole_frame_as_write_frame_does() -> None:
    # RequestLoop._hot_one builds its reply with the length header (channel.frame_header); on a bare
    # fd and on a file-like sink the bytes that go out are those of write_frame(payload)
    payload = b"reply bytes \x00\xff" * 3
    framed = channel.frame_header(len(payload)) + payload
    assert framed[:4] == struct.pack(">I", len(payload))
    sink, expected = io.BytesIO(), io.BytesIO()
    FrameWriter(sink).write_framed(framed)
    FrameWriter(expected).write_frame(payload)
    assert sink.getvalue() == expected.getvalue() == framed
    r, w = os.pipe()
    try:
        FrameWriter(w).write_framed(framed)
        assert FrameReader(r).read_frame() == payload
    finally:
        os.close(r)
        os.close(w)


def test_spin_pause_doubles_while_spins_keep_losing_and_halves_after_kept_ones() -> None:
    pause = channel.SpinPause()
    lengths = []
    for _ in range(7):
        pause.lost()
        lengths.append(pause.left)
    assert lengths == [8, 16, 32, 64, 128, 256, 256]
    assert pause.paused == 7
    # each KEPT_TO_HALVE spins that keep their CPU halve the next pause, down to PAUSE_MIN
    for _ in range(channel.KEPT_TO_HALVE - 1):
        pause.kept()
    assert pause.pause == 256
    pause.kept()
    assert pause.pause == 128
    for _ in range(10 * channel.KEPT_TO_HALVE):
        pause.kept()
    assert pause.pause == channel.PAUSE_MIN
    pause.lost()
    assert pause.left == channel.PAUSE_MIN



T = TypeVar("T")


def _run_on(cpus: set[int], fn: Callable[[], T]) -> T:
    """fn() in a thread of its own, started with affinity ``cpus`` (the test's own thread keeps
    its affinity)."""
    out: list[T] = []

    def body() -> None:
        os.sched_setaffinity(0, cpus)
        out.append(fn())

    t = threading.Thread(target=body)
    t.start()
    t.join()
    return out[0]


def _moved() -> tuple[int | None, bool, list[set[int]], set[int]]:
    """move_off_this_cpu() in this thread: the CPU before, whether it moved, the affinities it
    set (recorded, and set for real), the affinity after. (Which CPU the thread is on after
    the move is the scheduler's business: with its affinity set back at once, a busy machine
    may run it on its first CPU again before it is read, so the tests check what was asked.)"""
    set_affinity = os.sched_setaffinity
    calls: list[set[int]] = []

    def recording(pid: int, cpus: Iterable[int]) -> None:
        calls.append(set(cpus))
        set_affinity(pid, cpus)

    before = channel._current_cpu()
    channel.os.sched_setaffinity = recording  # type: ignore[attr-defined]
    try:
        done = channel.move_off_this_cpu()
    finally:
        channel.os.sched_setaffinity = set_affinity  # type: ignore[attr-defined]
    return before, done, calls, os.sched_getaffinity(0)


def _off_one_cpu_and_back(calls: list[set[int]], cpus: set[int]) -> bool:
    """The affinities a move sets: the allowed CPUs but the one it ran on (read by the move
    itself: the thread may have changed CPUs since the test read it), then all of them."""
    return len(calls) == 2 and calls[0] < cpus and len(calls[0]) == len(cpus) - 1 and (
        calls[1] == cpus
    )


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to move between")
def test_move_off_this_cpu_moves_to_another_allowed_cpu_and_keeps_the_affinity(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    allowed = os.sched_getaffinity(0)
    two = set(sorted(allowed)[:2])
    before, done, calls, affinity = _run_on(two, _moved)
    assert done is True and before in two
    assert _off_one_cpu_and_back(calls, two)
    assert affinity == two


def test_move_off_this_cpu_stays_where_only_one_cpu_is_allowed() -> None:
    one = {min(os.sched_getaffinity(0))}
    assert _run_on(one, lambda: (channel.move_off_this_cpu(), os.sched_getaffinity(0))) == (
        False,
        one,
    )


def test_a_lost_spin_may_move_and_spin_on_once_per_move_gap() -> None:
    pause = channel.SpinPause()
    t = 10 * channel.MOVE_GAP_NS
    assert pause.may_move(t) is True
    assert pause.may_move(t + 1) is False
    assert pause.may_move(t + channel.MOVE_GAP_NS - 1) is False
    assert pause.may_move(t + channel.MOVE_GAP_NS) is True
    assert pause.paused == 0 and pause.left == 0  # a move is not a pause


def test_current_cpu_reads_proc() -> None:
    assert channel._current_cpu() in os.sched_getaffinity(0)

def test_a_paused_reader_blocks_in_read_and_spins_again_after_the_pause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # every spin "loses its CPU" (no gap is short enough): at its first wait the reader moves
    # and spins on, loses again at once and pauses, reads with the descriptor blocking for
    # PAUSE_MIN reads, then spins again, moves, loses again and pauses for twice as long;
    # nothing is lost or reordered on the way. (Time between losses is the test's, not the
    # machine's: within a wait every loss is within MOVE_GAP_NS of the move before, and the
    # second wait starts as if the last move were long ago; beside a CPU-bound process a spin
    # descheduled for over a real millisecond moved twice.)
    monkeypatch.setattr(channel, "PREEMPTED_NS", -1)
    monkeypatch.setattr(channel, "MOVE_GAP_NS", 10**18)
    moves: list[bool] = []

    def move() -> bool:
        moves.append(True)
        return True

    monkeypatch.setattr(channel, "move_off_this_cpu", move)
    r, w = os.pipe()
    try:
        reader = FrameReader(r, spin_us=1_000_000)
        assert not os.get_blocking(r)
        timer = threading.Timer(0.05, lambda: os.write(w, frame(b"first")))
        timer.start()
        assert reader.read_frame() == b"first"  # waited in a blocking read, after the spin
        timer.join()
        assert reader.paused_spins == 1 and os.get_blocking(r)
        got = []
        for i in range(channel.PAUSE_MIN - 1):  # one read each: the pause's remaining reads
            os.write(w, frame(b"p%d" % i))
            got.append(reader.read_frame())
        assert got == [b"p%d" % i for i in range(channel.PAUSE_MIN - 1)]
        assert not os.get_blocking(r)  # the pause is over
        reader._pause.last_move_ns = -channel.MOVE_GAP_NS
        timer = threading.Timer(0.05, lambda: os.write(w, frame(b"second")))
        timer.start()
        assert reader.read_frame() == b"second"
        timer.join()
        assert reader.paused_spins == 2 and os.get_blocking(r)
        assert reader._pause.left == 2 * channel.PAUSE_MIN - 1
        # each wait's first lost spin moved to spin on, the second, within MOVE_GAP_NS, paused
        assert moves == [True, True]
        os.close(w)
        w = -1
        assert reader.read_frame() is None  # EOF in a blocking read
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


def test_a_spin_that_loses_its_cpu_stops_spinning_for_a_while() -> None:
    # a CPU-bound process on the reader's only CPU: the spin's yield lets it run a whole time
    # slice, the spin notices the gap and stops, and the waits after it block without spinning
    cpu = min(os.sched_getaffinity(0))
    hog = subprocess.Popen([sys.executable, "-c", f"import os\nos.sched_setaffinity(0, {{{cpu}}})\n"
                            "while True: pass"])
    r, w = os.pipe()
    before = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {cpu})  # this thread only
        # (the hog's first slices are running by then)
        time.sleep(0.05)
        timer = threading.Timer(0.3, lambda: os.write(w, frame(b"late") + frame(b"next")))
        timer.start()
        reader = FrameReader(r, spin_us=2_000_000)
        assert reader.read_frame() == b"late"
        assert reader.paused_spins == 1
        timer.join()
        # a wait that spun would find the hog again and count a second pause
        timer = threading.Timer(0.1, lambda: os.write(w, frame(b"after")))
        timer.start()
        assert [reader.read_frame(), reader.read_frame()] == [b"next", b"after"]
        timer.join()
        assert reader.paused_spins == 1
    finally:
        os.sched_setaffinity(0, before)
        hog.kill()
        hog.wait()
        os.close(r)
        os.close(w)
