"""Framing and term codec for the Erlang Port channel (PROTOCOL.md sections 1 and 2).

This module knows about bytes, frames and Erlang terms; it knows nothing about JAX.

A frame is ``{packet, 4}``: a 4-byte big-endian length ``N`` followed by ``N`` bytes. The reader
fills a buffer of ``N`` bytes with ``readinto`` on a memoryview, so reading a frame is linear in
``N`` however the bytes arrive; above ``MAP_ABOVE`` the buffer is anonymous memory committed as
the bytes arrive. The size limit (``NX_JAX_MAX_FRAME``, default a quarter of physical memory)
is checked before anything is allocated.

The codec wraps ``erlang-py`` (module ``erlang``) and normalizes its quirks:

- atoms decode as ``OtpErlangAtom`` holding ``bytes`` (latin-1 tags) or ``str`` (UTF-8 tags);
  :func:`atom_name` gives ``str`` for both;
- ``nil`` decodes as ``None`` and ``None`` encodes as ``nil`` (erlang-py's default is
  ``undefined``; we set it once at import, this process speaks only to Elixir);
- a list of small integers arrives as ``bytes`` (``STRING_EXT``): :func:`int_list` accepts both;
- Python ``bytes`` encode as an Erlang *list*: wrap payloads with :func:`binary`.

    >>> decode(encode((atom("r"), 7, [1, 2])))
    (OtpErlangAtom(b'r'), 7, b'\\x01\\x02')
"""

from __future__ import annotations

import io
import mmap
import os
import select
import struct
import threading
import time
from collections.abc import Sequence
from typing import Any, Protocol

import erlang

from py_backend import slow

erlang.set_undefined(b"nil")

Atom = erlang.OtpErlangAtom
Binary = erlang.OtpErlangBinary

HEADER_MAX = (1 << 32) - 1  # the most a 4-byte length can announce


def default_max_frame() -> int:
    """A quarter of the machine's physical memory, at most ``HEADER_MAX`` (the Elixir side
    computes the same default, ``NxJax.Worker.max_frame/1``, and passes it explicitly)."""
    try:
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return HEADER_MAX
    return min(HEADER_MAX, max(physical // 4, 1 << 20))


_HEADER = struct.Struct(">I")
_DISCARD_CHUNK = 1 << 20
_BUFFER = 1 << 16  # read buffer; frames up to this size are also written in one piece
_IOV_MAX = 1024
# A spin that finds itself descheduled for this long (another runnable task had the CPU: the
# machine has more work than cores) stops, and the next reads block (SpinPause). Under the
# caller's own reply polling (NxJax.Worker.reply_spin_us/0, 100 us by default), so that a
# spin sharing one CPU with the very caller it waits for notices.
PREEMPTED_NS = 50_000
PAUSE_MIN = 8
PAUSE_MAX = 256
KEPT_TO_HALVE = 16
# a spin that lost its CPU moves to another one and spins on at most once in this long; a
# second loss sooner pauses (SpinPause)
MOVE_GAP_NS = 1_000_000


Chunk = bytes | bytearray | memoryview


def frame_header(size: int) -> bytes:
    """The 4-byte length header of a ``{packet, 4}`` frame of ``size`` bytes."""
    return _HEADER.pack(size)


class ChannelError(Exception):
    """Base class of framing errors."""


class FrameTooLarge(ChannelError):
    """A frame header announced more bytes than the configured limit.

    Only the 4-byte header has been consumed; call :meth:`FrameReader.discard` with ``size`` to
    skip the payload and stay in sync with the stream.
    """

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(
            f"frame of {size} bytes exceeds the limit of {limit} bytes "
            f"(raise NX_JAX_MAX_FRAME or send smaller messages)"
        )
        self.size = size
        self.limit = limit


class TruncatedFrame(ChannelError, EOFError):
    """The stream ended in the middle of a frame."""


class CodecError(Exception):
    """A payload is not a valid Erlang external term."""


class _Readable(Protocol):
    def readinto(self, buffer: Any, /) -> int | None: ...


class _Writable(Protocol):
    def write(self, data: Any, /) -> int | None: ...


def max_frame_from_env() -> int:
    """The frame size limit: ``NX_JAX_MAX_FRAME`` bytes, default :func:`default_max_frame`."""
    raw = os.environ.get("NX_JAX_MAX_FRAME")
    if raw is None or raw.strip() == "":
        return default_max_frame()
    value = int(raw)
    if value < 0:
        raise ValueError(f"NX_JAX_MAX_FRAME must be non-negative, got {raw!r}")
    return value


_F_SETPIPE_SZ, _F_GETPIPE_SZ = 1031, 1032  # Linux fcntl commands (not in Python's fcntl 3.11)
PIPE_BYTES = 1 << 20  # Linux's default /proc/sys/fs/pipe-max-size


def pipe_size(fd: int) -> int | None:
    """The buffer size of the pipe ``fd`` is an end of, or ``None`` (not a pipe, not Linux)."""
    try:
        import fcntl

        return fcntl.fcntl(fd, _F_GETPIPE_SZ)
    except (ImportError, OSError):
        return None


def grow_pipe(fd: int, size: int = PIPE_BYTES) -> int | None:
    """Ask for a pipe buffer of ``size`` bytes on ``fd`` (at most the system's
    ``/proc/sys/fs/pipe-max-size``), so that a large frame crosses in a few system calls rather
    than one per 64 KiB, the default. Returns the pipe's buffer size afterwards (unchanged if the
    kernel refuses, e.g. past the user's pipe-buffer quota), or ``None`` where ``fd`` is not a
    pipe or the system has no such control."""
    try:
        with open("/proc/sys/fs/pipe-max-size") as f:
            size = min(size, int(f.read()))
    except (OSError, ValueError):
        pass
    current = pipe_size(fd)
    if current is None or current >= size:
        return current
    try:
        import fcntl

        return fcntl.fcntl(fd, _F_SETPIPE_SZ, size)
    except OSError:
        return pipe_size(fd)


def _raw_reader(source: int | _Readable) -> _Readable:
    if isinstance(source, int):
        return io.FileIO(source, "rb", closefd=False)
    return source


def _raw_writer(sink: int | _Writable) -> _Writable:
    if isinstance(sink, int):
        return io.FileIO(sink, "wb", closefd=False)
    return sink


class SpinPause:
    """When a reader that spins (``FrameReader``'s ``spin_us``) blocks at once instead.

    A spin that loses its CPU first moves to another CPU and spins on there (``may_move``);
    one that loses it again within ``MOVE_GAP_NS``, or cannot move, starts a pause (``lost``):
    the reader's next ``pause`` reads block without spinning. The pause doubles each time that
    happens, from ``PAUSE_MIN`` up to ``PAUSE_MAX`` reads, and halves after every
    ``KEPT_TO_HALVE`` spins that keep their CPU to their end (``kept``: data came, or the spin
    ran out). Where every CPU keeps being taken from the reader the pauses soon last
    ``PAUSE_MAX`` reads, and the reader spins about once in that many; a passing preemption
    costs ``PAUSE_MIN`` blocking reads at most (one fixed pause of 256 reads took the spin from
    most calls of a benchmark that switches workers every 100 calls). The pause is what keeps a
    worker that may use one CPU only from taking turns on it with its polling caller: what it
    saves, docs/BENCHMARKS.md "Latency mechanisms" (its "pinned" condition).
    """

    __slots__ = ("pause", "left", "paused", "kept_spins", "last_move_ns")

    def __init__(self) -> None:
        self.pause = PAUSE_MIN  # the length of the next pause, in reads
        self.left = 0  # reads left in the current pause (the reader counts them down)
        self.paused = 0  # pauses so far
        self.kept_spins = 0
        self.last_move_ns = -MOVE_GAP_NS

    def may_move(self, now_ns: int) -> bool:
        """Whether a spin that lost its CPU at ``now_ns`` should move to another CPU and spin on
        there instead of pausing: the first loss in ``MOVE_GAP_NS`` does.

        The CPU is most often lost to the very caller the reader waits for, woken next to it
        (a write to a pipe wakes the reader on the writer's CPU) and polling for the answer:
        beside a CPU-bound process the two then take turns on one CPU for every request, and a
        pause keeps them there, as each blocking read is woken on the caller's CPU again.
        Moved, the reader spins on the other CPU; where a CPU-bound process runs there, it
        shares that CPU in whole time slices and answers at full speed in its own (what this
        saves: docs/BENCHMARKS.md "Latency mechanisms")."""
        if now_ns - self.last_move_ns >= MOVE_GAP_NS:
            self.last_move_ns = now_ns
            return True
        return False

    def lost(self) -> None:
        self.left = self.pause
        self.pause = min(2 * self.pause, PAUSE_MAX)
        self.paused += 1

    def kept(self) -> None:
        self.kept_spins += 1
        if self.pause > PAUSE_MIN and self.kept_spins % KEPT_TO_HALVE == 0:
            self.pause //= 2


def move_off_this_cpu() -> bool:
    """Moves the calling thread to another of the CPUs it may use, whatever they run; True if
    it moved. Called when a spin lost its CPU (:meth:`SpinPause.may_move`).

    A worker woken by its caller's write can land on the CPU of the caller, which keeps that
    CPU busy while it polls for the reply; the two then take turns on one CPU for every call.
    Moved (the thread's affinity set without the current CPU, then set back as it was), the
    worker shares the other CPU, if at all, with a process that takes whole time slices, and
    answers at full speed in between. False, and nothing changed, where this cannot be read or
    set (not Linux, one allowed CPU).
    """
    try:
        allowed = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        return False
    cpu = _current_cpu()
    if cpu not in allowed or len(allowed) < 2:
        return False
    try:
        os.sched_setaffinity(0, allowed - {cpu})
        return True
    except OSError:
        return False
    finally:
        try:
            os.sched_setaffinity(0, allowed)
        except OSError:
            pass


def _current_cpu() -> int | None:
    """The CPU this thread last ran on (``/proc/thread-self/stat``, field 39)."""
    try:
        with open("/proc/thread-self/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[36])
    except (OSError, ValueError, IndexError):
        return None


class FrameReader:
    """Reads ``{packet, 4}`` frames from a file descriptor or an unbuffered binary file.

    Reads go through a small buffer (``_BUFFER`` bytes), so a small request costs one ``read``
    system call, header and payload together (a frame that arrives whole into the empty buffer
    is copied straight out of it); a frame larger than what the buffer holds gets
    its own ``bytearray`` and the rest of it is read straight into that (one copy of at most
    ``_BUFFER`` bytes, whatever the frame's size).

    ``spin_us`` (file descriptors only): after the stream runs dry, keep polling it for up to
    that many microseconds before blocking. On machines where waking a sleeping process costs
    tens of microseconds (virtual machines) this takes that wake-up off the next request's
    latency, at the price of up to ``spin_us`` of CPU after each burst of requests; an idle
    reader does not spin. 0 (the default) always blocks. Spinning only pays while this process
    has a CPU to itself: when one poll of the spin comes more than 50 us after the one before
    (another task ran on this CPU meanwhile), the reader moves to another CPU and spins on
    there, at most once a millisecond (:meth:`SpinPause.may_move`); a loss sooner than that
    stops the spin and the next reads block, 8 of them at first and up to 256 while it keeps
    happening (:class:`SpinPause`; ``paused_spins`` counts such pauses), as a spin beside a
    CPU-bound process only takes time from the process that would answer. During a
    pause the descriptor is in blocking mode and each read waits in ``read`` itself, which wakes
    sooner than ``select`` on a busy machine.

    Each of the spin's rules can be switched off, to measure what it is worth (``make
    bench-mechanisms``, docs/BENCHMARKS.md "Latency mechanisms"; the worker reads the switches
    from ``NX_JAX_OFF``, :func:`py_backend.request_loop.mechanisms_off`): ``pause=False`` keeps a
    spin that lost its CPU spinning to its end, ``move=False`` never moves it to spin on
    elsewhere.
    """

    def __init__(
        self, source: int | _Readable, max_frame: int | None = None, spin_us: int = 0,
        *, pause: bool = True, move: bool = True,
    ) -> None:
        self._raw = _raw_reader(source)
        self.max_frame = max_frame_from_env() if max_frame is None else max_frame
        self._buf = bytearray(_BUFFER)
        self._view = memoryview(self._buf)
        self._start = 0  # buffered, unread bytes are self._buf[self._start:self._end]
        self._end = 0
        self._fd = source if isinstance(source, int) and spin_us > 0 else None
        self._spin_ns = spin_us * 1000
        self._pause = SpinPause()
        self._pausing, self._moving = pause, move
        if self._fd is not None:
            os.set_blocking(self._fd, False)

    def _read_into(self, view: memoryview) -> int:
        """One read into ``view`` (0 at EOF): spinning and then blocking while nothing is ready,
        or, during a pause of the spin (:class:`SpinPause`), a plain blocking read: the
        descriptor blocks for the pause, as waking from ``read`` itself costs less than waking
        from ``select`` when the machine is busy (measured when built: ``git show
        19d163f:docs/BENCHMARKS.md``, "The worker's spin pauses: short at first, and in `read`
        itself")."""
        pause = self._pause
        fd = self._fd
        if pause.left and fd is not None:
            pause.left -= 1
            n = self._raw.readinto(view)
            if not pause.left:
                os.set_blocking(fd, False)
            if n is not None:
                return n
        n = self._raw.readinto(view)
        if n is not None:
            return n
        if self._fd is not None:
            n = self._spin(view)
            if n is None and pause.left:  # the spin lost its CPU: this wait is the pause's
                return self._read_into(view)
            while n is None:
                select.select([self._fd], [], [])
                n = self._raw.readinto(view)
            return n
        while n is None:  # a non-blocking source given by the caller: keep waiting
            n = self._raw.readinto(view)
        return n

    def _spin(self, view: memoryview) -> int | None:
        """Polls for up to ``spin_us``; ``None`` if nothing came."""
        last = time.perf_counter_ns()
        deadline = last + self._spin_ns
        while last < deadline:
            os.sched_yield()  # let whatever else is runnable on this CPU go first
            n = self._raw.readinto(view)
            now = time.perf_counter_ns()
            if now - last > PREEMPTED_NS:  # (data or not, this spin lost its CPU)
                if self._moving and self._pause.may_move(now) and move_off_this_cpu():
                    if n is not None:
                        return n
                    last = time.perf_counter_ns()  # spins on, on the other CPU
                    continue
                if self._pausing:
                    self._pause.lost()
                    if self._fd is not None:
                        os.set_blocking(self._fd, True)
                    return n
            if n is not None:
                self._pause.kept()
                return n
            last = now
        self._pause.kept()
        return None

    @property
    def paused_spins(self) -> int:
        """How many times a spin lost its CPU and paused (:class:`SpinPause`)."""
        return self._pause.paused

    def _buffer_at_least(self, want: int) -> int:
        """Read until ``want`` bytes (at most ``_BUFFER``) are buffered or the stream ends;
        return how many are buffered."""
        if len(self._buf) - self._start < want:  # move the unread tail to the front
            tail = self._end - self._start
            self._buf[:tail] = self._view[self._start:self._end]
            self._start, self._end = 0, tail
        while self._end - self._start < want:
            n = self._read_into(self._view[self._end:])
            if n == 0:
                break
            self._end += n
        return self._end - self._start

    def _take(self, n: int) -> memoryview:
        got = self._view[self._start:self._start + n]
        self._start += n
        if self._start == self._end:
            self._start = self._end = 0
        return got

    def _fill(self, view: memoryview) -> int:
        """Fill ``view``, buffered bytes first, then straight from the stream; return how many
        bytes it got."""
        filled = min(len(view), self._end - self._start)
        if filled:
            view[:filled] = self._take(filled)
        total = len(view)
        while filled < total:
            n = self._read_into(view[filled:])
            if n == 0:
                break
            filled += n
        return filled

    def read_frame(self) -> bytearray | memoryview | None:
        """The next frame's payload (a ``memoryview`` of mapped memory above ``MAP_ABOVE``
        bytes), or ``None`` on a clean EOF between frames.

        Raises :class:`FrameTooLarge` (header consumed, payload not) or :class:`TruncatedFrame`.
        """
        if self._end == 0:  # nothing buffered: one read, which most often holds a whole frame
            n = self._read_into(self._view)
            if n == 0:
                return None
            self._end = n
            if n >= 4:
                (size,) = _HEADER.unpack_from(self._buf)
                if size + 4 <= n and size <= self.max_frame:
                    frame = bytearray(self._view[4:size + 4])
                    if size + 4 == n:
                        self._end = 0
                    else:
                        self._start = size + 4
                    return frame
        got = self._buffer_at_least(4)
        if got == 0:
            return None
        if got < 4:
            raise TruncatedFrame(f"stream ended after {got} of 4 header bytes")
        (size,) = _HEADER.unpack(self._take(4))
        if size > self.max_frame:
            raise FrameTooLarge(size, self.max_frame)
        if size <= len(self._buf):  # small: read it through the buffer
            got = self._buffer_at_least(size)
            if got < size:
                raise TruncatedFrame(f"stream ended after {got} of {size} payload bytes")
            return bytearray(self._take(size))
        payload = _payload(size)
        with slow.Notice(lambda: f"receiving a request of {size / (1 << 20):.1f} MiB"):
            got = self._fill(memoryview(payload))
        if got < size:
            raise TruncatedFrame(f"stream ended after {got} of {size} payload bytes")
        return payload

    def discard(self, size: int, keep: int = 64) -> bytes:
        """Skip ``size`` payload bytes (after :class:`FrameTooLarge`) with a bounded buffer;
        return the first ``keep`` of them (where a request's id is, to answer it)."""
        scratch = memoryview(bytearray(min(size, _DISCARD_CHUNK)))
        left = size
        head = b""
        while left > 0:
            got = self._fill(scratch[: min(left, len(scratch))])
            if got == 0:
                raise TruncatedFrame(f"stream ended with {left} bytes of a discarded frame left")
            if len(head) < keep:
                head += scratch[: min(got, keep - len(head))].tobytes()
            left -= got
        return head


# A frame this large is read into anonymous memory whose pages the kernel provides as the
# bytes arrive, so a header alone (4 bytes announcing gigabytes) commits nothing: memory used is
# at most what has arrived plus one page. Smaller frames get a bytearray of their size.
MAP_ABOVE = 1 << 24


def _payload(size: int) -> bytearray | memoryview:
    return bytearray(size) if size <= MAP_ABOVE else memoryview(mmap.mmap(-1, size))


class FrameWriter:
    """Writes ``{packet, 4}`` frames; a frame may be given as several chunks (no joining of
    large ones).

    A frame goes out in one system call where the sink allows it: a small frame is joined with
    its header, a large one (file descriptors) is written with ``writev``; so the reading side
    wakes up once per frame, not once per chunk.

    Safe to share between threads: a frame is written whole under a lock, so the replies of the
    request loop and the output lines forwarded by :mod:`py_backend.stdio` never interleave.
    """

    def __init__(self, sink: int | _Writable) -> None:
        self._raw = _raw_writer(sink)
        self._fd = sink if isinstance(sink, int) else None
        self._lock = threading.Lock()

    def _write_all(self, data: Chunk) -> None:
        if self._fd is not None:  # a bare fd: most often one os.write does it all
            try:
                written = os.write(self._fd, data)
            except BlockingIOError:  # a non-blocking fd, full: wait in the loop below
                written = 0
            if written == (len(data) if type(data) is bytes else memoryview(data).nbytes):
                return
            data = memoryview(data).cast("B")[written:]
        view = memoryview(data).cast("B")
        while len(view) > 0:
            n = self._raw.write(view)
            if n is None:
                continue
            view = view[n:]

    def _writev_all(self, fd: int, chunks: list[memoryview]) -> None:
        while chunks:
            n = os.writev(fd, chunks[:_IOV_MAX])
            while chunks and n >= len(chunks[0]):
                n -= len(chunks[0])
                chunks.pop(0)
            if n:
                chunks[0] = chunks[0][n:]

    def write_framed(self, framed: bytes) -> None:
        """Writes ``framed``, a whole frame with its 4-byte length header (``frame_header``),
        as :meth:`write_frame` writes a small one."""
        fd = self._fd
        with self._lock:
            if fd is not None:
                try:
                    written = os.write(fd, framed)
                except BlockingIOError:  # a non-blocking fd, full
                    written = 0
                if written != len(framed):
                    self._write_all(memoryview(framed)[written:])
                return
            self._write_all(framed)
            self._flush()

    def write_frame(self, payload: Chunk | Sequence[Chunk]) -> None:
        if type(payload) is list and len(payload) == 1 and type(payload[0]) is bytes:
            payload = payload[0]  # a small reply in one piece (py_backend/fastcall.py)
        if type(payload) is bytes and len(payload) <= _BUFFER:
            self.write_framed(_HEADER.pack(len(payload)) + payload)
            return
        chunks: Sequence[Chunk] = (
            [payload] if isinstance(payload, bytes | bytearray | memoryview) else payload
        )
        views = [memoryview(c).cast("B") for c in chunks]
        size = sum(len(v) for v in views)
        if size >= 1 << 32:
            raise ChannelError(f"frame of {size} bytes does not fit a 4-byte length")
        header = _HEADER.pack(size)
        with self._lock:
            if size <= _BUFFER:
                self._write_all(b"".join([header, *views]))
            elif self._fd is not None:
                self._writev_all(self._fd, [memoryview(header), *(v for v in views if len(v))])
            else:
                self._write_all(header)
                for view in views:
                    self._write_all(view)
            self._flush()

    def _flush(self) -> None:
        if self._fd is None:  # a buffered sink given by the caller; a bare fd has nothing to flush
            flush = getattr(self._raw, "flush", None)
            if flush is not None:
                flush()


# --- term codec -----------------------------------------------------------------------------


class BinaryView(Binary):  # type: ignore[valid-type,misc]
    """A decoded binary of at least ``VIEW_THRESHOLD`` bytes: ``value`` is a read-only
    memoryview into the received frame (no copy). Compares, hashes and encodes like any
    ``OtpErlangBinary``."""

    def binary(self) -> bytes:
        return b"m" + _HEADER.pack(len(self.value)) + bytes(self.value)


VIEW_THRESHOLD = 1 << 16
COPY_BELOW = 1 << 20


class _Frame:
    """What erlang-py's decoder indexes: ``frame[i]`` is an int; a slice is ``bytes`` when
    small (atoms, strings, small binaries) and a read-only memoryview when large."""

    __slots__ = ("view",)

    def __init__(self, view: memoryview) -> None:
        self.view = view

    def __getitem__(self, key: int | slice) -> Any:
        if isinstance(key, int):
            return self.view[key]
        part = self.view[key]
        return part if len(part) >= VIEW_THRESHOLD else part.tobytes()

    def __len__(self) -> int:
        return len(self.view)


def decode(data: Chunk, fast: bool = True) -> Any:
    """Decode one external-format term (erlang-py types, ``nil`` -> ``None``).

    erlang-py's public ``binary_to_term`` takes only ``bytes`` and copies every binary out of
    it; for frames of ``COPY_BELOW`` bytes or more its decoder runs on the frame itself
    (:class:`_Frame`), so a 64 MB tensor costs no copy (bench/codec_bench.py). Binaries of at
    least ``VIEW_THRESHOLD`` bytes in such frames come back as :class:`BinaryView`, all others
    as ``OtpErlangBinary`` holding ``bytes``. A small frame is read by :func:`decode_fast`
    first, unless ``fast`` is false (``NX_JAX_OFF=decode_fast``: erlang-py reads it).
    """
    view = memoryview(data).cast("B").toreadonly()
    if len(view) <= 1 or view[0] != 131:
        raise CodecError("cannot decode Erlang term: not external term format (version 131)")
    if len(view) < COPY_BELOW:  # small: copying is cheaper than indexing through _Frame
        small = view.tobytes()
        if fast:
            try:
                return decode_fast(small)
            except _NotFast:
                pass
        try:
            return erlang.binary_to_term(small)
        except CodecError:
            raise
        except Exception as exc:
            raise CodecError(f"cannot decode Erlang term: {exc!r}") from exc
    try:
        end, term = erlang._binary_to_term(1, _Frame(view))
    except CodecError:
        raise
    except Exception as exc:  # erlang-py raises several unrelated classes on bad input
        raise CodecError(f"cannot decode Erlang term: {exc!r}") from exc
    if end != len(view):
        raise CodecError(f"cannot decode Erlang term: {len(view) - end} bytes after the term")
    return _own(term)


# Terms refused before erlang-py decodes them (it would do so without bound): a compressed term
# (tag 80: a few bytes of zlib may inflate to gigabytes; Elixir's term_to_binary compresses
# only when asked), an integer of more than MAX_BIG_INTEGER_BYTES (tag 111; erlang-py's
# decoding is quadratic in its length: 40 KB took a second) and a term nested deeper than
# MAX_DEPTH. Installed as erlang-py's own recursive decoder, so nested terms are checked too.
MAX_BIG_INTEGER_BYTES = 1024  # 8192 bits, far past any integer the Elixir side sends
# Both decoders recurse once per level (erlang-py through three Python frames), so a fixed bound
# far past what the Elixir side nests (a graph's sub-graphs take four levels each) refuses a
# deep term with a clear message wherever decode is called from, before Python's recursion
# limit would.
MAX_DEPTH = 200
_NESTING = frozenset((104, 105, 108, 116, 117))  # tuples, lists, maps, funs with free variables
_erlang_py_term = erlang._binary_to_term


class _Depth(threading.local):
    level = 0


_depth = _Depth()


def _too_deep() -> CodecError:
    return CodecError(f"cannot decode Erlang term: nested deeper than {MAX_DEPTH} levels")


def _bounded_term(i: int, data: Any) -> tuple[int, Any]:
    tag = data[i]
    if tag in _NESTING:
        level = _depth.level
        if level >= MAX_DEPTH:
            raise _too_deep()
        _depth.level = level + 1
        try:
            return _erlang_py_term(i, data)
        finally:
            _depth.level = level
    if tag == 80:
        raise CodecError("compressed terms are refused: send them uncompressed "
                         "(:erlang.term_to_binary/1 without the :compressed option)")
    if tag == 111:
        (n,) = _HEADER.unpack(bytes(data[i + 1:i + 5]))
        if n > MAX_BIG_INTEGER_BYTES:
            raise CodecError(f"an integer of {n} bytes is refused (at most "
                             f"{MAX_BIG_INTEGER_BYTES})")
    return _erlang_py_term(i, data)


erlang._binary_to_term = _bounded_term


class _NotFast(Exception):
    """:func:`decode_fast` met a tag it does not handle, or malformed input: use erlang-py."""


_UNPACK_I32 = struct.Struct(">i").unpack_from
_UNPACK_U32 = _HEADER.unpack_from
_UNPACK_U16 = struct.Struct(">H").unpack_from
_UNPACK_F64 = struct.Struct(">d").unpack_from
_ATOMS: dict[tuple[int, bytes], Any] = {}


def decode_fast(data: bytes) -> Any:
    """Decode a small frame (``bytes``, version byte included) to exactly the term
    erlang-py's ``binary_to_term`` gives, several times faster (the small-call fast path).

    It reads the tags of requests and replies (integers, floats, atoms, tuples, proper lists,
    strings, byte-aligned binaries) and raises ``_NotFast`` for anything else, including
    malformed or truncated input, so that the caller falls back to erlang-py, whose result (or
    error) is then the answer. ``tests/test_fastpath.py`` checks the two agree.
    """
    if len(data) < 2 or data[0] != 131:
        raise _NotFast
    try:
        end, term = _fast(data, 1, 0)
    except (IndexError, struct.error, UnicodeDecodeError, RecursionError) as exc:
        raise _NotFast from exc
    if end != len(data):
        raise _NotFast
    return term


def scan_term(data: bytes, i: int) -> tuple[int, Any]:
    """The term that starts at ``data[i]`` (no version byte) and the index just after it, for
    the tags :func:`decode_fast` reads; raises :class:`CodecError` for anything else."""
    try:
        return _fast(data, i, 0)
    except (_NotFast, IndexError, struct.error, UnicodeDecodeError, RecursionError) as exc:
        raise CodecError(f"cannot scan the term at byte {i}") from exc


def _fast(data: bytes, i: int, depth: int) -> tuple[int, Any]:
    """The term at ``data[i]``, inside ``depth`` tuples and lists."""
    tag = data[i]
    if tag == 97:  # SMALL_INTEGER_EXT
        return i + 2, data[i + 1]
    if tag == 109:  # BINARY_EXT
        (size,) = _UNPACK_U32(data, i + 1)
        start = i + 5
        if start + size > len(data):
            raise _NotFast
        return start + size, Binary(data[start : start + size], 8)
    if tag == 104 or tag == 105:  # SMALL_TUPLE_EXT, LARGE_TUPLE_EXT
        if depth >= MAX_DEPTH:
            raise _NotFast  # erlang-py refuses it (_bounded_term)
        depth += 1
        if tag == 104:
            arity, i = data[i + 1], i + 2
        else:
            (arity,), i = _UNPACK_U32(data, i + 1), i + 5
        items = []
        for _ in range(arity):
            i, item = _fast(data, i, depth)
            items.append(item)
        return i, tuple(items)
    if tag == 115 or tag == 119 or tag == 100 or tag == 118:  # atoms: small/plain, latin-1/utf8
        if tag == 115 or tag == 119:
            size, start = data[i + 1], i + 2
        else:
            (size,), start = _UNPACK_U16(data, i + 1), i + 3
        end = start + size
        if end > len(data):
            raise _NotFast
        name = data[start:end]
        key = (tag, name)
        value = _ATOMS.get(key, _ATOMS)
        if value is _ATOMS:
            value = _atom_term(tag, name)
            if len(_ATOMS) < 4096:
                _ATOMS[key] = value
        return end, value
    if tag == 98:  # INTEGER_EXT
        return i + 5, _UNPACK_I32(data, i + 1)[0]
    if tag == 106:  # NIL_EXT
        return i + 1, []
    if tag == 108:  # LIST_EXT, proper lists only
        if depth >= MAX_DEPTH:
            raise _NotFast
        depth += 1
        (count,) = _UNPACK_U32(data, i + 1)
        i += 5
        items = []
        # a run of SMALL_BIG_EXT integers (a list of handles, as a free sends) read in one loop
        while count and data[i] == 110:
            size, start = data[i + 1], i + 3
            end = start + size
            if end > len(data):
                raise _NotFast
            value = int.from_bytes(data[start:end], "little")
            items.append(-value if data[i + 2] == 1 else value)
            i, count = end, count - 1
        for _ in range(count):
            i, item = _fast(data, i, depth)
            items.append(item)
        if data[i] != 106:
            raise _NotFast  # improper list: erlang-py's OtpErlangList
        return i + 1, items
    if tag == 70:  # NEW_FLOAT_EXT
        return i + 9, _UNPACK_F64(data, i + 1)[0]
    if tag == 107:  # STRING_EXT: erlang-py gives the bytes
        (size,) = _UNPACK_U16(data, i + 1)
        start = i + 3
        if start + size > len(data):
            raise _NotFast
        return start + size, data[start : start + size]
    if tag == 110:  # SMALL_BIG_EXT
        size, sign = data[i + 1], data[i + 2]
        start = i + 3
        if start + size > len(data):
            raise _NotFast
        value = int.from_bytes(data[start : start + size], "little")
        return start + size, -value if sign == 1 else value
    raise _NotFast


def _atom_term(tag: int, name: bytes) -> Any:
    """What erlang-py makes of an atom: ``true``/``false`` -> bool, ``nil`` -> None (as set at
    import), otherwise an ``OtpErlangAtom`` holding bytes (latin-1 tags) or str (UTF-8 tags).
    Atoms are immutable in use here, so one object per name is shared."""
    if name == b"true":
        return True
    if name == b"false":
        return False
    if name == b"nil":
        return None
    return Atom(name.decode("utf-8") if tag == 119 or tag == 118 else name)


def _own(term: Any) -> Any:
    """Turn binaries holding a memoryview into :class:`BinaryView`s."""
    if isinstance(term, tuple):
        return tuple(_own(x) for x in term)
    if isinstance(term, list):
        return [_own(x) for x in term]
    if isinstance(term, dict):
        return {k: _own(v) for k, v in term.items()}
    if isinstance(term, Binary) and isinstance(term.value, memoryview):
        return BinaryView(term.value, term.bits)
    return term


def encode(term: Any) -> bytes:
    """Encode a term built from erlang-py types, ints, floats, tuples, lists, dicts, None."""
    return b"".join(encode_chunks(term))


# A binary at least this large is sent as its own chunk instead of being copied into the frame.
_BIG_BINARY = 1 << 16


def encode_chunks(term: Any) -> list[Chunk]:
    """Encode ``term`` as a list of chunks whose concatenation is ``term_to_binary(term)``.

    Containers are walked here; large binaries are not copied but referenced as chunks (their
    ``value`` may be any buffer, e.g. a NumPy array's memoryview); everything else is delegated
    to erlang-py.
    """
    out: list[Chunk] = [b"\x83"]
    small: list[bytes] = []

    def flush_small() -> None:
        if small:
            out.append(b"".join(small))
            small.clear()

    stack: list[Any] = [term]
    while stack:
        item = stack.pop()
        if isinstance(item, _Raw):
            small.append(item.data)
        elif isinstance(item, tuple):
            n = len(item)
            small.append(bytes((104, n)) if n <= 255 else b"i" + _HEADER.pack(n))
            stack.extend(reversed(item))
        elif isinstance(item, list):
            if not item:
                small.append(b"j")
            else:
                small.append(b"l" + _HEADER.pack(len(item)))
                stack.append(_Raw(b"j"))
                stack.extend(reversed(item))
        elif isinstance(item, dict):
            small.append(b"t" + _HEADER.pack(len(item)))
            pairs: list[Any] = []
            for key, value in item.items():
                pairs.extend((key, value))
            stack.extend(reversed(pairs))
        elif isinstance(item, Binary) and item.bits == 8:
            value = item.value
            size = memoryview(value).nbytes
            if size >= _BIG_BINARY:
                small.append(b"m" + _HEADER.pack(size))
                flush_small()
                out.append(memoryview(value).cast("B"))
            else:
                small.append(b"m" + _HEADER.pack(size) + bytes(value))
        else:
            small.append(_encode_leaf(item))
    flush_small()
    return out


_PACK_I32 = struct.Struct(">i").pack
_PACK_F64 = struct.Struct(">d").pack
_ATOM_BYTES: dict[Any, bytes] = {}
_LEAF_CONSTANTS = {True: b"w\x04true", False: b"w\x05false", None: b"w\x03nil"}


def _encode_leaf(item: Any) -> bytes:
    """erlang-py's encoding of a leaf term, with the frequent ones (atoms, integers that fit
    32 bits, floats, booleans, nil) written here without its type dispatch."""
    kind = type(item)
    if kind is int:
        if 0 <= item <= 255:
            return bytes((97, item))
        if -2147483648 <= item <= 2147483647:
            return b"b" + _PACK_I32(item)
        if 0 < item < 1 << 64:  # (resident handles) SMALL_BIG_EXT, digits little-endian
            size = (item.bit_length() + 7) >> 3
            return bytes((110, size, 0)) + item.to_bytes(size, "little")
    elif kind is Atom:
        value = item.value
        encoded = _ATOM_BYTES.get(value)
        if encoded is None:
            encoded = _erlang_py_leaf(item)
            if isinstance(value, str | bytes) and len(_ATOM_BYTES) < 4096:
                _ATOM_BYTES[value] = encoded
        return encoded
    elif kind is float:
        return b"F" + _PACK_F64(item)
    elif kind is bool or item is None:
        return _LEAF_CONSTANTS[item]
    return _erlang_py_leaf(item)


def _erlang_py_leaf(item: Any) -> bytes:
    try:
        return bytes(erlang._term_to_binary(item))
    except Exception as exc:
        raise CodecError(f"cannot encode {type(item).__name__}: {exc}") from exc


class _Raw:
    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


def encoded(data: bytes) -> Any:
    """A term given by its encoding (without the version byte): ``encode_chunks`` writes
    ``data`` as it is. For replies built faster than the generic walk builds them."""
    return _Raw(data)


def encode_leaf(term: Any) -> bytes:
    """The encoding of an atom, number, ``nil`` or boolean (without the version byte)."""
    return _encode_leaf(term)


# --- term helpers ---------------------------------------------------------------------------


def atom(name: str) -> Any:
    """The atom ``name``. ASCII names hold bytes (equal to what OTP 25 sends: latin-1 tags);
    others hold ``str``, which erlang-py encodes with the UTF-8 tags."""
    return Atom(name.encode("ascii")) if name.isascii() else Atom(name)


def binary(data: Chunk) -> Any:
    """Wrap bytes so they encode as an Erlang binary (not a list)."""
    return Binary(data)


def is_atom(term: Any) -> bool:
    return isinstance(term, Atom)


def atom_name(term: Any) -> str | None:
    """The atom's name as ``str`` (``nil``/``true``/``false`` are decoded as None/bools)."""
    if not isinstance(term, Atom):
        return None
    value = term.value
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, str):
        return value
    return None  # an atom-cache reference (int): never produced by term_to_binary


def binary_bytes(term: Any) -> bytes | None:
    """The bytes of an Erlang binary (a copy for a :class:`BinaryView`), or ``None`` if
    ``term`` is not a byte-aligned binary."""
    if isinstance(term, Binary) and term.bits == 8:
        value = term.value
        return value if isinstance(value, bytes) else bytes(value)
    return None


def binary_view(term: Any) -> memoryview | None:
    """The data of an Erlang binary without copying, or ``None`` if not a binary."""
    if isinstance(term, Binary) and term.bits == 8:
        return memoryview(term.value)
    return None


def int_list(term: Any) -> list[int] | None:
    """A list of integers in either ETF form (``LIST_EXT`` or ``STRING_EXT``), else ``None``."""
    if isinstance(term, bytes):
        return list(term)
    if isinstance(term, list):
        if all(isinstance(x, int) and not isinstance(x, bool) for x in term):
            return list(term)
    return None


def text(term: str) -> Any:
    """A Python string as an Elixir string (a UTF-8 binary)."""
    return Binary(term.encode("utf-8"))
