"""Learned byte layouts of repeated ``call`` requests (the small-call fast path).

A training loop or a service sends the same key-only ``call`` request over and over: the same
graph key, the same argument types and shapes, the same ``keep`` flag; only the request id and
the tensors' bytes change. After the worker has served such a request the generic way (decode,
parse, check), :meth:`Layouts.learn` records its frame as constant bytes with holes: the request
id and each tensor's data. A later frame that equals the recorded one byte for byte outside the
holes (:meth:`Layouts.match`) is, by construction, the same request with other numbers in it: it
skips the term decoder, the request parser and the argument checks, and its tensors are read
straight out of the frame. Anything else (another shape, a graph-carrying call, a resident
handle as argument, a frame that differs in one byte) does not match and takes the generic path,
which stays the reference.

This module knows the request form and wire tensors (PROTOCOL.md sections 2 and 7); it knows
nothing of JAX or ports. The reply side, :func:`encode_tensor_reply`, writes exactly the bytes
the generic encoder writes for ``{:r, id, [tensor]}`` (tests/test_fastcall.py checks both).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from py_backend import channel
from py_backend.nxtypes import SUPPORTED, NxType, wire_dtype

_U32 = struct.Struct(">I")
_REQUEST = b"\x83h\x05"  # version, 5-tuple: {:"C", id, :nx_jax, function, args}
_CALL_ARGS = b"l\x00\x00\x00\x04"  # call's argument list: [key, graph | nil, tensors, keep]
_KEY = b"m\x00\x00\x00\x18"  # the 24-byte graph key (PROTOCOL.md section 7)
_TENSOR = b"h\x03"  # {type, shape, data}
_PAIR = b"h\x02"  # {:ref, handle}
MAX_LAYOUTS = 1024
LEARN_BELOW = 1 << 16  # frames larger than this are not learned (the codec is not their cost)


@dataclass(frozen=True, slots=True)
class Layout:
    """One learned request form. Offsets count from the end of the request id."""

    key: bytes  # the graph key
    keep: bool
    size: int  # frame length after the request id
    head: bytes  # the bytes right after the request id: function, key and graph (nil)
    consts: tuple[tuple[int, bytes], ...]  # (offset, bytes) that must match, head included
    tensors: tuple[tuple[int, np.dtype, tuple[int, ...], int], ...]  # (offset, dtype, shape, n)
    signature: tuple[tuple[np.dtype, tuple[int, ...]], ...]  # as py_backend.cache.signature
    # resident arguments ({:ref, handle}): (argument position, offset of the handle's digits,
    # their count, what the tensor was when learned: its worker's entry, opaque here)
    refs: tuple[tuple[int, int, int, Any], ...] = ()
    positions: tuple[int, ...] = ()  # the argument position of each of ``tensors``


class Match(NamedTuple):
    request_id: int
    id_bytes: bytes  # the request id as encoded in the frame (the reply reuses it)
    layout: Layout


_new_match = tuple.__new__  # Match(...) without NamedTuple's keyword handling (hot path)


def _id_end(frame: Any, i: int) -> int:
    """Where the request id at ``frame[i]`` ends, for the two integer tags Elixir uses for ids
    below 2**31; 0 for anything else (a negative or larger id, another term)."""
    tag = frame[i]
    if tag == 97:  # SMALL_INTEGER_EXT
        return i + 2
    if tag == 98 and frame[i + 1] < 128:  # INTEGER_EXT, not negative
        return i + 5
    return 0


def id_value(id_bytes: channel.Chunk) -> int:
    """The value of a request id ``_id_end`` accepted, from its encoding (the inverse of
    :func:`id_bytes`)."""
    return id_bytes[1] if len(id_bytes) == 2 else int.from_bytes(id_bytes[1:], "big")


class Layouts:
    """The learned layouts of one worker, bounded (``MAX_LAYOUTS``; full -> start over)."""

    def __init__(self) -> None:
        self._prefix: bytes | None = None  # version, tuple header and :"C", as the client sends
        self._head_len = 0  # function atom ... nil: the same length for every call by key
        self._by_head: dict[tuple[int, bytes], list[Layout]] = {}  # (size, head) -> layouts
        self._count = 0
        self._last: Layout | None = None  # the layout matched last

    def clear(self) -> None:
        self._by_head.clear()
        self._count = 0
        self._last = None

    def __len__(self) -> int:
        return self._count

    def match(self, frame: channel.Chunk) -> Match | None:
        """The learned layout ``frame`` follows, or ``None`` (then decode it the generic way).
        Frames come as ``bytes`` or ``bytearray`` (the reader's); a ``memoryview`` is compared
        through a copy."""
        prefix = self._prefix
        if prefix is None or len(frame) > LEARN_BELOW:  # (no larger frame is ever learned)
            return None
        if type(frame) is memoryview:
            frame = frame.tobytes()
        at = len(prefix)
        if len(frame) <= at + 5 or not frame.startswith(prefix):
            return None
        start = _id_end(frame, at)
        if not start:
            return None
        size = len(frame) - start
        # a loop repeats one call: try the layout matched last before looking one up
        layout = self._last
        if layout is None or layout.size != size or not _follows(frame, start, layout.consts):
            candidates = self._by_head.get((size, bytes(frame[start:start + self._head_len])))
            if candidates is None:
                return None
            for layout in candidates:
                if _follows(frame, start, layout.consts):
                    break
            else:
                return None
            self._last = layout
        id_bytes = bytes(frame[at:start])
        return _new_match(Match, (id_value(id_bytes), id_bytes, layout))

    def matcher(self, layout: Layout) -> Callable[[channel.Chunk], bytes | None]:
        """A test of frames against ``layout`` alone, in one call (the worker keeps one for the
        layout it served last): the request id's encoding when the frame follows ``layout``, as
        :meth:`match` would find, else ``None`` (then :meth:`match` decides). Valid while the
        client's encoding (the prefix) stays the one ``layout`` was learned under."""
        return self._reader(layout, with_view=False) or (lambda frame: None)

    def one_reader(
        self, layout: Layout
    ) -> Callable[[channel.Chunk], tuple[channel.Chunk, np.ndarray] | None] | None:
        """For a layout of one tensor, :meth:`matcher` and :func:`argument_views` in one call:
        the request id's encoding (a slice of the frame) and the tensor's view for a frame that
        follows ``layout``, else ``None``. ``None`` for a layout of another number of tensors (or
        before any)."""
        if len(layout.tensors) != 1 or layout.refs:
            return None
        return self._reader(layout, with_view=True)

    def _reader(self, layout: Layout, with_view: bool) -> Callable[[channel.Chunk], Any] | None:
        """:meth:`matcher`, or with ``with_view`` :meth:`one_reader`; ``None`` before any
        layout was learned."""
        prefix, consts = self._prefix, layout.consts
        if prefix is None:
            return None
        tensor_at, dtype, shape, _ = layout.tensors[0] if with_view else (0, None, (), 0)
        at, size = len(prefix), layout.size
        small, large = at + 2 + size, at + 5 + size  # the two id encodings
        ndarray = np.ndarray
        # the constant pieces (_follows, inline: this runs on every request), the first two
        # tested without a loop (a layout of one tensor has two: before its data and after;
        # one of none has one, and an empty piece follows any frame)
        (at0, piece0), (at1, piece1), *more = (*consts, (0, b""))[:max(2, len(consts))]

        def read(frame: channel.Chunk) -> Any:
            n = len(frame)
            if n == small:
                if frame[at] != 97:
                    return None
            elif n != large or frame[at] != 98 or frame[at + 1] > 127:
                return None
            start = n - size
            if type(frame) is memoryview or not (
                frame.startswith(prefix)
                and frame.startswith(piece0, start + at0)
                and frame.startswith(piece1, start + at1)
            ):
                return None
            for offset, piece in more:
                if not frame.startswith(piece, start + offset):
                    return None
            if not with_view:
                return bytes(frame[at:start])
            # (the id's encoding as a slice of the frame: a reply joins it as it is)
            return frame[at:start], ndarray(shape, dtype, frame, start + tensor_at)

        return read

    def arguments(self, frame: channel.Chunk, match: Match) -> list[np.ndarray]:
        """Views of the tensors' data in ``frame`` (no copy)."""
        return argument_views(frame, match.layout)

    def learn(self, frame: bytes, signature: Sequence[Any] = (),
              resident: Sequence[Any] = ()) -> Layout | None:
        """Record ``frame``, a key-only ``call`` of wire tensors and resident ones (``{:ref,
        handle}``) that was just served without error; returns the layout, or ``None`` when
        the frame is not of that form. ``signature``: the call's, as its run had it (one
        ``(dtype, shape)`` per argument); ``resident``: for each argument, what the worker
        knew of it if it was resident (its entry, kept opaque here), else ``None``. A resident
        argument's digits are a hole: a later frame with other handles follows the layout,
        and the worker checks that each names a tensor like the one learned."""
        try:
            return self._learn(frame, tuple(signature), tuple(resident))
        except (IndexError, struct.error, ValueError, TypeError, channel.CodecError):
            return None

    def _learn(self, d: bytes, signature: tuple[Any, ...] = (),
               resident: tuple[Any, ...] = ()) -> Layout | None:
        if d[:3] != _REQUEST:
            return None
        i, tag = channel.scan_term(d, 3)
        if channel.atom_name(tag) != "C":
            return None
        prefix = d[:i]
        start = _id_end(d, i)
        if not start:
            return None
        j, module = channel.scan_term(d, start)
        j, function = channel.scan_term(d, j)
        if channel.atom_name(module) != "nx_jax" or channel.atom_name(function) != "call":
            return None
        if d[j:j + 5] != _CALL_ARGS or d[j + 5:j + 10] != _KEY:
            return None
        key = d[j + 10:j + 34]
        j, graph = channel.scan_term(d, j + 34)
        if graph is not None:  # the graph travels with it: a one-off frame
            return None
        head_end = j
        tensors: list[tuple[int, np.dtype, tuple[int, ...], int]] = []
        positions: list[int] = []
        refs: list[tuple[int, int, int, Any]] = []
        holes: list[tuple[int, int]] = []
        arity = 0
        if d[j] == 108:  # LIST_EXT
            (arity,) = _U32.unpack_from(d, j + 1)
            j += 5
            for position in range(arity):
                if d[j:j + 2] == _PAIR:
                    # {:ref, handle}, the handle a SMALL_BIG_EXT: its digit count, sign 0, the
                    # digits (a handle is at least 2**40: never a smaller integer's tag)
                    j, tag = channel.scan_term(d, j + 2)
                    if channel.atom_name(tag) != "ref" or d[j] != 110:
                        return None
                    digits = d[j + 1]
                    if d[j + 2] != 0 or position >= len(resident) or resident[position] is None:
                        return None
                    refs.append((position, j + 3 - start, digits, resident[position]))
                    holes.append((j + 3, j + 3 + digits))
                    j += 3 + digits
                    continue
                if d[j:j + 2] != _TENSOR:
                    return None
                positions.append(position)
                j, raw_type = channel.scan_term(d, j + 2)
                j, shape = channel.scan_term(d, j)
                nx_type = _type(raw_type)
                if nx_type is None or not _is_shape(shape) or d[j] != 109:  # BINARY_EXT
                    return None
                (nbytes,) = _U32.unpack_from(d, j + 1)
                dtype = wire_dtype(nx_type)
                count = int(np.prod(shape, dtype=np.int64)) if shape else 1
                if nbytes != count * dtype.itemsize:
                    return None
                tensors.append((j + 5 - start, dtype, shape, count))
                holes.append((j + 5, j + 5 + nbytes))
                j += 5 + nbytes
        if d[j] != 106:  # NIL_EXT: the end of the tensor list
            return None
        j, keep = channel.scan_term(d, j + 1)
        if not isinstance(keep, bool) or d[j:] != b"j":
            return None
        consts, at = [], start
        for hole_start, hole_end in [*holes, (len(d), len(d))]:
            if hole_start > at:
                consts.append((at - start, d[at:hole_start]))
            at = hole_end
        if refs:
            # the resident arguments' dtypes and shapes are the call's (its signature); the
            # wire tensors' must be what the frame says
            if len(signature) != arity or any(
                signature[p] != (dtype, shape)
                for p, (_, dtype, shape, _) in zip(positions, tensors, strict=True)
            ):
                return None
        else:
            signature = tuple((dtype, shape) for _, dtype, shape, _ in tensors)
        layout = Layout(key, keep, len(d) - start, d[start:head_end], tuple(consts),
                        tuple(tensors), signature, tuple(refs), tuple(positions))
        if self._prefix != prefix or self._head_len != head_end - start:
            # another client encoding (or the first layout): start over with this one's form
            self._prefix, self._head_len = prefix, head_end - start
            self.clear()
        if self._count >= MAX_LAYOUTS:
            self.clear()
        same_head = self._by_head.setdefault((layout.size, layout.head), [])
        if layout not in same_head:
            same_head.append(layout)
            self._count += 1
        return layout


def argument_views(frame: channel.Chunk, layout: Layout) -> list[np.ndarray]:
    """Views of the tensors' data in ``frame``, a frame that follows ``layout`` (no copy)."""
    start = len(frame) - layout.size
    return [np.ndarray(shape, dtype, frame, start + at) for at, dtype, shape, _ in layout.tensors]


def argument_reader(layout: Layout) -> Callable[[channel.Chunk], Sequence[np.ndarray]]:
    """:func:`argument_views` for frames of ``layout``, with what the layout fixes bound once (a
    request of one tensor, the common case, skips the loop)."""
    size = layout.size
    if len(layout.tensors) == 1:
        ((at, dtype, shape, _),) = layout.tensors
        return lambda frame: (np.ndarray(shape, dtype, frame, len(frame) - size + at),)
    return lambda frame: argument_views(frame, layout)


def _follows(frame: bytes | bytearray, start: int, consts: tuple[tuple[int, bytes], ...]) -> bool:
    """Whether ``frame``, whose request id ends at ``start``, has a layout's constant bytes
    ``consts`` (its size is checked by the caller)."""
    for offset, piece in consts:
        if not frame.startswith(piece, start + offset):
            return False
    return True


def _type(term: Any) -> NxType | None:
    if isinstance(term, tuple) and len(term) == 2 and isinstance(term[1], int):
        kind = channel.atom_name(term[0])
        if kind is not None and NxType(kind, term[1]) in SUPPORTED:
            return NxType(kind, term[1])
    return None


def _is_shape(term: Any) -> bool:
    return isinstance(term, tuple) and all(
        type(d) is int and d >= 0 for d in term  # noqa: E721 (bool is not a dimension)
    )


_REPLY = b"\x83h\x03" + channel.encode(channel.atom("r"))[1:]  # {:r, id, result}
_ONE = b"l" + _U32.pack(1)  # the head of a one-element list
REPLY_HEAD, ONE_ELEMENT = _REPLY, _ONE  # (py_backend.request_loop's one-tensor hot path)


def encode_tensor_reply(
    id_bytes: bytes, headers: list[bytes], data: list[bytes | memoryview]
) -> list[channel.Chunk]:
    """The chunks of ``{:r, id, [{type, shape, data}, ...]}``: ``id_bytes`` is the id's
    encoding, ``headers[k]`` the bytes of tensor ``k`` up to its data (``tensor_header``). One
    chunk when every piece is ``bytes`` (small results), else chunks that reference the large
    data."""
    if not data:
        return [_REPLY + id_bytes + b"j"]
    if len(data) == 1 and len(headers) == 1 and type(data[0]) is bytes:
        return encode_one_small_reply(id_bytes, headers[0], data[0])
    chunks: list[Any] = [_REPLY + id_bytes + b"l" + _U32.pack(len(data))]
    large = False
    for header, piece in zip(headers, data, strict=True):
        chunks.append(header)
        chunks.append(piece)
        large = large or type(piece) is not bytes
    chunks.append(b"j")
    return chunks if large else [b"".join(chunks)]


def encode_one_small_reply(id_bytes: bytes, header: bytes, data: bytes) -> list[channel.Chunk]:
    """``encode_tensor_reply(id_bytes, [header], [data])`` for one small result: one chunk."""
    return [b"".join((_REPLY, id_bytes, _ONE, header, data, b"j"))]


def tensor_header(type_term: Any, shape: tuple[int, ...], nbytes: int) -> bytes:
    """The bytes of ``{type, shape, <<data>>}`` before ``data`` (``nbytes`` of it)."""
    encoded = channel.encode((type_term, shape, channel.binary(b"\0" * nbytes)))
    return encoded[1:len(encoded) - nbytes]


def id_bytes(request_id: int) -> bytes:
    """``request_id`` encoded as the generic encoder does."""
    return channel.encode(request_id)[1:]
