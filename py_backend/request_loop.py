"""The request loop (PROTOCOL.md sections 2 and 5).

Reads ``{:"C", id, :nx_jax, function, args}`` frames, dispatches through a closed table and
writes exactly one ``{:r, id, result}`` or ``{:e, id, {:python, class, message, traceback}}``
per request. Nothing is evaluated or unpickled; bad input gets an error reply and the loop goes
on. EOF on the request stream ends the loop with status 0.

Besides ``run`` (graph + tensors), ``call`` runs a graph known by its key (``graph_key``: MD5
and size of the graph binary) and may keep its results here as *resident* tensors, named by
integer handles, that later calls take as ``{:ref, handle}`` arguments (PROTOCOL.md section 7).
A request frame is released as soon as its tensors are on the device, so a call holds at most
one copy of its arguments next to its results.

The client frees resident tensors when their Elixir terms are garbage collected. The worker
counts the bytes it holds and, each time they have grown by ``NX_JAX_RESIDENT_GC_BYTES`` since
it last looked, sends ``{:pressure, bytes}`` (PROTOCOL.md 2.5): the client then has the
processes holding its tensors collected, so that what they dropped comes back.

Every call is checked against the worker's byte budget (``NX_JAX_MAX_BYTES``,
py_backend/budget.py) before it runs: resident tensors, the arguments it ships, its results and
XLA's temporary memory, the last two measured once per compiled signature. A call over it gets
an ``OverBudget`` error and runs nothing; so does a ``put`` whose tensors would take the
resident bytes over it.

``NX_JAX_OFF`` (read once, as the worker starts) switches latency mechanisms off by name, each
on its own, to measure what it is worth (``MECHANISMS``; ``make bench-mechanisms``); unset, all
are on. ``NX_JAX_FAST_PATHS=0`` switches off the learned byte layouts (py_backend/fastcall.py).
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import hashlib
import os
import struct
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from importlib import metadata
from typing import Any, NamedTuple

import jax
import numpy as np

from py_backend import (
    PROTOCOL_VERSION,
    budget,
    channel,
    debug_nans,
    fastcall,
    handshake,
    lifeline,
    placement,
    slow,
    stdio,
    timeline,
)
from py_backend.budget import Footprint, OverBudget
from py_backend.cache import Cache, signature
from py_backend.channel import Chunk, FrameReader, FrameWriter, atom, atom_name, text
from py_backend.lower import ArgumentError, NodeReport, set_hook_sink
from py_backend.nxtypes import SUPPORTED, NxType, wire_dtype
from py_backend.wire_graph import TensorOut

MODULE = "nx_jax"
SMALL_TENSOR = 1 << 16
# resident bytes grown by this much since the last look make a ``{:pressure, bytes}`` notice
DEFAULT_RESIDENT_GC_BYTES = 64 << 20
# a kept result of at most this many bytes comes back with a copy of its data (a loss read
# after every step then costs no request of its own)
SMALL_KEPT_BYTES = 64
# a handle: a count in the high bits (never reused), 40 random bits below (never guessed)
HANDLE_RANDOM_BITS = 40
READ_FD = 3
WRITE_FD = 4


class WorkerMismatch(Exception):
    """This worker's protocol or sources are not those the Elixir side expects (handshake)."""


class BadRequest(Exception):
    """The frame is not a well-formed request."""


class UnknownFunction(Exception):
    """The request names a module or function outside the closed table."""


class UnknownGraph(Exception):
    """``call`` named a graph key this worker does not hold (the client re-sends the graph)."""


class UnknownHandle(ArgumentError):
    """An argument or ``fetch``/``free`` names a resident tensor this worker does not hold."""


# --- wire tensors ----------------------------------------------------------------------------


def decode_type(term: Any) -> NxType:
    if isinstance(term, tuple) and len(term) == 2:
        kind, bits = atom_name(term[0]), term[1]
        if kind is not None and isinstance(bits, int) and NxType(kind, bits) in SUPPORTED:
            return NxType(kind, bits)
    raise ArgumentError(f"unsupported tensor type {term!r}")


def encode_type(t: NxType) -> Any:
    return (atom(t.kind), t.bits)


# (type atom's name, bits, shape) -> (dtype, byte size) of wire tensors seen before: a repeated
# call skips decoding and checking its arguments' type and shape again
_LAYOUTS: dict[tuple[Any, Any, tuple[int, ...]], tuple[np.dtype, int]] = {}


def decode_tensor(term: Any) -> np.ndarray:
    """``{type, shape, data}`` -> a read-only NumPy view of ``data`` (no copy)."""
    if not (isinstance(term, tuple) and len(term) == 3):
        raise ArgumentError(f"a tensor must be {{type, shape, data}}, got {type(term).__name__}")
    raw_type, shape, raw_data = term
    if (type(raw_type) is tuple and len(raw_type) == 2 and type(raw_type[0]) is channel.Atom
            and type(raw_type[1]) is int and type(shape) is tuple):
        known = _LAYOUTS.get((raw_type[0].value, raw_type[1], shape))
        data = channel.binary_view(raw_data)
        if known is not None and data is not None and len(data) == known[1]:
            return np.frombuffer(data, dtype=known[0]).reshape(shape)
    nx_type = decode_type(raw_type)
    if not (isinstance(shape, tuple) and all(isinstance(d, int) and d >= 0 for d in shape)):
        raise ArgumentError(f"a tensor shape must be a tuple of non-negative integers: {shape!r}")
    data = channel.binary_view(raw_data)
    if data is None:
        raise ArgumentError("tensor data must be a binary")
    dtype = wire_dtype(nx_type)
    size = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if len(data) != size * dtype.itemsize:
        raise ArgumentError(
            f"tensor data has {len(data)} bytes, {nx_type}{list(shape)} needs "
            f"{size * dtype.itemsize}"
        )
    if len(_LAYOUTS) < 4096 and type(raw_type[0]) is channel.Atom and type(raw_type[1]) is int:
        _LAYOUTS[(raw_type[0].value, raw_type[1], shape)] = (dtype, size * dtype.itemsize)
    return np.frombuffer(data, dtype=dtype).reshape(shape)  # a view into the request frame


def to_host(array: Any, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """A result as a NumPy array of its wire ``dtype``, checked against its declared ``shape``
    (conform() already checked; this guards the wire). Its bytes are taken in C order
    (``tobytes``, or ``reshape(-1)``, which copies an array that is not C-contiguous)."""
    # (np.asarray with a dtype and an order costs more per result, even when both hold)
    host = np.asarray(array)
    if host.dtype != dtype:
        host = host.astype(dtype)
    if host.shape != shape:
        raise ValueError(f"result shape {host.shape} is not the declared {shape}")
    return host


def _compiling(program: Any, tensors: list[Any]) -> str:
    """What a compile is of, for a notice (py_backend/slow.py)."""
    shapes = [f"{t.dtype}{list(t.shape)}" for t in tensors[:6]]
    more = f" and {len(tensors) - 6} more" if len(tensors) > 6 else ""
    size = sum(t.size * t.dtype.itemsize for t in tensors) / (1 << 20)
    return (f"compiling a graph of {len(program.graph.nodes)} nodes for arguments "
            f"{', '.join(shapes) or 'none'}{more} ({size:.1f} MiB)")


def encode_tensor(out: TensorOut, array: Any) -> Any:
    """A result as ``{type, shape, data}``; ``data`` references the array's memory."""
    host = to_host(array, wire_dtype(out.type), out.shape)
    return (encode_type(out.type), out.shape, channel.binary(host.reshape(-1).view(np.uint8).data))


# --- the worker ------------------------------------------------------------------------------

# a learned request's steps once its program is found: (frame, id bytes) -> reply chunks
Runner = Callable[[Chunk, bytes], list[Chunk]]


class _Kept(NamedTuple):
    """A fast-path runner and what it was built from (``RequestLoop._fast_call``)."""

    layout: fastcall.Layout
    program: Any
    use: Any  # the cache entry of the layout's signature (Cache.touch)
    version: int  # the cache's version when found
    run: Runner


class Unfit(Exception):
    """A frame that follows a learned layout names a resident tensor that is not the kind the
    layout was learned with (or none): the generic path serves it instead."""


def _joins_as(result: Any, data: bytes, dtype: np.dtype, shape: tuple[int, ...]) -> bool:
    """Whether ``result``, a run's result, can go into a reply as it is (``RequestLoop._hot_one``):
    a JAX array of the wire's dtype and ``shape`` whose buffer gives the bytes ``data`` (its
    NumPy conversion's)."""
    # (a dtype of the other byte order is not the wire's: the dtype check covers it)
    if not isinstance(result, jax.Array) or result.dtype != dtype or result.shape != shape:
        return False
    try:
        return memoryview(result).c_contiguous and b"".join((result,)) == data
    except Exception:  # a probe: an array that cannot lend its buffer (bfloat16; an
        return False  # accelerator's, whose export raises its runtime's error) takes the copy


class RequestLoop:
    """Request handling, independent of where frames come from.

    ``test_functions`` (default: the environment variable ``NX_JAX_TEST`` is ``"1"``) adds the
    test-only functions (``TEST_FUNCTIONS``) to the closed table; without it they are refused
    like any other unknown function. ``fast_paths`` (default: ``NX_JAX_FAST_PATHS`` is not
    ``"0"``): whether repeated calls are learned as byte layouts (py_backend/fastcall.py);
    without, every request takes the generic path (for measuring the fast paths, and as a
    switch should one ever be suspected). ``off``: the latency mechanisms switched off, to
    measure each (:func:`mechanisms_off`; default: from ``NX_JAX_OFF``). ``refusal``: why this
    worker must not compute (its handshake failed, :mod:`py_backend.handshake`): then every
    function but ``ping`` and ``info`` answers a ``WorkerMismatch`` error saying so.
    """

    def __init__(self, test_functions: bool | None = None,
                 fast_paths: bool | None = None, refusal: str | None = None,
                 off: frozenset[str] | None = None) -> None:
        if test_functions is None:
            test_functions = os.environ.get("NX_JAX_TEST") == "1"
        if fast_paths is None:
            fast_paths = os.environ.get("NX_JAX_FAST_PATHS", "1") != "0"
        self.fast_paths = fast_paths
        if off is None:
            off = mechanisms_off(os.environ)
        self.off = off
        self._decode_fast = "decode_fast" not in off
        self.served: tuple[str, ...] = FUNCTIONS + (TEST_FUNCTIONS if test_functions else ())
        self.cache = Cache()
        # the small-call fast path (py_backend/fastcall.py): layouts of key-only calls served
        # before; ``_learnable`` says the request being served may be recorded as one
        self.layouts = fastcall.Layouts()
        self._learnable = False
        # the signature and resident entries of the call served last (RequestLoop._run)
        self._served: tuple[Any, Sequence[TensorOut | None]] = ((), ())
        self._runners: dict[int, _Kept] = {}  # id(layout) -> its runner
        # the runner served last, as one call (_hot_path), and what it was made from
        self._hot: Callable[[Chunk], list[Chunk] | None] | None = None
        self._hot_kept: _Kept | None = None
        # the same for serve(), for one tensor in and one small one out: the whole reply frame
        # with its length header (RequestLoop._hot_one, RequestLoop.handle_framed)
        self._one: Callable[[Chunk], bytes | list[Chunk] | None] | None = None
        # handle -> (array, its type and shape, its bytes)
        self.resident: dict[int, tuple[Any, TensorOut, int]] = {}
        self.resident_bytes = 0
        self.resident_gc_bytes = resident_gc_bytes()
        # the resident bytes that make the next {:pressure, bytes} notice
        self.pressure_mark = self.resident_gc_bytes
        self.pressure_notices = 0
        # the bytes this worker may hold at once (py_backend/budget.py); main() reads an
        # accelerator's memory into the default once the device is chosen
        self.max_bytes = budget.max_bytes()
        self._handles = 0  # handles given out (the high bits of the next one)
        self._low_bits: list[int] = []  # random low bits drawn ahead, one call for many
        # hooks (PROTOCOL.md 2.2): frames go out through ``emit`` (serve() sets it), tagged
        # with the id of the request being served
        self.emit: Callable[[list[Chunk]], None] | None = None
        self.reader: FrameReader | None = None  # (the request stream serve() reads, for stats)
        # the results of the call being answered, which serve() lets go of once the reply is
        # written: their buffers are freed while the caller reads its reply, not before
        self.spent: Any = None
        self.request_id = -1
        # the channel's pipe buffers, request and reply (main() grows them; info reports them)
        self.pipe_bytes: list[int | None] = [None, None]
        set_hook_sink(self.hook)
        self.functions: dict[str, Callable[[list[Any]], Any]] = {
            "ping": self.ping,
            "info": self.info,
            "run": self.run,
            "debug_run": self.debug_run,
            "stats": self.stats,
            "call": self.call,
            "put": self.put,
            "fetch": self.fetch,
            "free": self.free,
            "forget_graphs": self.forget_graphs,
            "memory": self.memory,
        }
        if test_functions:
            self.functions["debug_print"] = self.debug_print
        self.refusal = refusal
        self.device: Any = None  # the device NX_JAX_PLATFORM/NX_JAX_DEVICE chose (placement)
        if refusal is not None:
            for name in self.functions:
                if name not in ("ping", "info"):
                    self.functions[name] = self._refuse

    # The closed table --------------------------------------------------------------------

    def ping(self, args: list[Any]) -> Any:
        _arity("ping", args, 0)
        return atom("pong")

    def _device(self) -> Any:
        """The device this worker computes on (its default one, unless placement chose)."""
        return self.device if self.device is not None else jax.devices()[0]

    def _refuse(self, args: list[Any]) -> Any:
        raise WorkerMismatch(self.refusal)

    def info(self, args: list[Any]) -> Any:
        _arity("info", args, 0)
        return {
            atom("protocol"): PROTOCOL_VERSION,
            atom("jax_version"): text(jax.__version__),
            atom("backend"): text(jax.default_backend()),
            atom("devices"): [text(str(d)) for d in jax.devices()],
            atom("codec"): text(f"erlang-py {metadata.version('erlang-py')}"),
            atom("functions"): [atom(f) for f in self.served],
            atom("pipe_bytes"): self.pipe_bytes,
            atom("sources"): text(handshake.source_digest()),
            atom("package"): text(str(handshake.PACKAGE)),
            atom("refusal"): None if self.refusal is None else text(self.refusal),
            atom("device"): text(str(self._device())),
            atom("platform"): text(self._device().platform),
        }

    def stats(self, args: list[Any]) -> Any:
        _arity("stats", args, 0)
        s = self.cache.stats
        return {
            atom("compiles"): s.compiles,
            atom("cache_hits"): s.cache_hits,
            atom("runs"): s.runs,
            atom("errors"): s.errors,
            atom("graph_loads"): s.graph_loads,
            atom("unknown_graphs"): s.unknown_graphs,
            atom("fast_one_calls"): s.fast_one_calls,
            atom("fast_hot_calls"): s.fast_hot_calls,
            atom("fast_layout_calls"): s.fast_layout_calls,
            atom("resident"): len(self.resident),
            atom("resident_bytes"): self.resident_bytes,
            atom("pressure_notices"): self.pressure_notices,
            atom("paused_spins"): self.reader.paused_spins if self.reader is not None else 0,
        }

    def run(self, args: list[Any]) -> Any:
        graph_bin, raw_tensors = _graph_and_tensors("run", args)
        key, program = self.cache.program(graph_bin)
        results = self._execute(key, program, raw_tensors)
        return [encode_tensor(o, r) for o, r in results]

    def debug_run(self, args: list[Any]) -> Any:
        """``[graph_bin, args]``: as ``run``, but op by op outside ``jit``, stopping with a
        ``NonFinite`` error at the first NaN or infinity (``py_backend.debug_nans``)."""
        graph_bin, raw_tensors = _graph_and_tensors("debug_run", args)
        _key, program = self.cache.program(graph_bin)
        outs: list[TensorOut | None] = []
        tensors = [self._argument(t, outs) for t in raw_tensors]
        check_arguments(program.graph.parameters, tensors, outs)
        shipped = _shipped_bytes(tensors, outs)
        if self.resident_bytes + shipped + program.result_bytes > self.max_bytes:
            raise budget.refusal(
                "this call", [("resident tensors", self.resident_bytes), ("arguments", shipped),
                              ("results", program.result_bytes)], self.max_bytes,
                "XLA's temporary memory is not counted: debug_run runs op by op")
        results = debug_nans.run(program.graph, tensors)
        if program.graph.hooks:
            jax.effects_barrier()
        self.cache.stats.runs += 1
        return [encode_tensor(o, r) for o, r in zip(program.outs, results, strict=True)]

    def call(self, args: list[Any]) -> Any:
        """``[key, graph_bin | nil, args, keep]`` or ``[key, graph_bin | nil, args, keep,
        donate]``: run the graph known by ``key``; ``donate`` lists the positions of the
        resident arguments whose memory the results may reuse (they are no longer resident
        afterwards)."""
        if len(args) == 5:
            raw_key, raw_graph, raw_tensors, keep, raw_donate = args
            donate = _donated_positions(raw_donate, raw_tensors)
        else:
            _arity("call", args, 4)
            raw_key, raw_graph, raw_tensors, keep = args
            donate = ()
        key = channel.binary_bytes(raw_key)
        if key is None or len(key) != 24:
            raise BadRequest("call: the key must be the 24-byte graph_key of the graph binary")
        if not isinstance(raw_tensors, list):
            raise BadRequest("call: the third argument must be a list of tensors")
        if not isinstance(keep, bool):
            raise BadRequest("call: the fourth argument (keep) must be a boolean")
        if raw_graph is None:
            program = self.cache.program_by_key(key)
            if program is None:
                raise UnknownGraph(
                    f"this worker holds no graph with key {key.hex()[:16]}...; send the graph"
                )
        else:
            graph_bin = channel.binary_view(raw_graph)
            if graph_bin is None:
                raise BadRequest("call: the second argument must be the graph binary or nil")
            if graph_key(graph_bin) != key:
                raise BadRequest("call: the key is not graph_key(graph binary): md5 + size")
            key, program = self.cache.program(graph_bin, key)
        learnable = raw_graph is None and not program.graph.hooks and not donate
        donated = [raw_tensors[i][1] for i in donate]
        results = self._execute(key, program, raw_tensors, donate)
        # (their arrays were deleted by the call, their memory reused for results)
        for handle in donated:
            self._drop(handle)
        self._learnable = learnable
        if keep:
            refs = self._kept_refs([(o, n, r) for (o, r), n
                                    in zip(results, program.out_bytes, strict=True)])
            self._check_pressure()
            return refs
        return [encode_tensor(o, r) for o, r in results]

    def _execute(
        self, key: bytes, program: Any, raw_tensors: list[Any], donate: tuple[int, ...] = ()
    ) -> list[tuple[TensorOut, Any]]:
        # The wire tensors are views into the request frame: put them on the device, then drop
        # every reference to the frame (clear the list in place) before running.
        # (a resident argument's type and shape are known: its entry says them)
        outs: list[TensorOut | None] = []
        try:
            tensors = [self._argument(t, outs) for t in raw_tensors]
        finally:
            raw_tensors.clear()
        check_arguments(program.graph.parameters, tensors, outs)
        return self._run(key, program, tensors, outs, donate)

    def _run(self, key: bytes, program: Any, tensors: list[Any], outs: list[TensorOut | None],
             donate: tuple[int, ...] = ()) -> list[tuple[TensorOut, Any]]:
        """Run ``tensors`` (``outs[i]``: ``None`` for those that came with the request, the
        entry of a resident one) through the program's executable, within the byte budget."""
        sig = signature(tensors)
        # (what a fast layout learned from this request needs: py_backend/fastcall.py)
        self._served = (sig, outs)
        executable, use = self.cache.compiled(key, program, sig, donate)
        footprint = use.footprint
        if footprint is None:  # (compiled here, ahead of the first run, which then compiles
            with slow.Notice(lambda: _compiling(program, tensors)):  # nothing)
                footprint = use.footprint = budget.footprint(executable, tensors,
                                                             program.result_bytes)
        if self.resident_bytes + footprint.bound > self.max_bytes:  # (else within it anyway)
            shipped = _shipped_bytes(tensors, outs)
            if self.resident_bytes + shipped + footprint.need > self.max_bytes:
                raise self._over_budget(shipped, footprint)
        results = executable(*tensors)
        tensors.clear()
        if program.graph.hooks:  # every {:hook, ...} frame goes out before the reply
            jax.block_until_ready(results)
            jax.effects_barrier()
        self.cache.stats.runs += 1
        return list(zip(program.outs, results, strict=True))

    def _argument(self, term: Any, outs: list[TensorOut | None] | None = None) -> Any:
        if isinstance(term, tuple) and len(term) == 2 and atom_name(term[0]) == "ref":
            array, out, _ = self._resident(term[1])
            if outs is not None:
                outs.append(out)
            return array
        if outs is not None:
            outs.append(None)
        return _call_argument(decode_tensor(term))

    def _fast_call(self, frame: Chunk, match: fastcall.Match) -> list[Chunk] | None:
        """A request that follows a learned layout (``fastcall.Layouts.match``): the same steps
        as ``call`` by key, minus decoding, parsing and checking what the layout fixes (the
        types and shapes, hence the signature; hooks never take this path). The arguments are
        views into the frame (learned frames are small, and each frame is a buffer of its own).
        ``None`` when a resident argument is not what the layout learned (``Unfit``): then the
        generic path serves the frame, and says what is wrong."""
        request_id, id_bytes, layout = match
        self.request_id = request_id
        try:
            cache = self.cache
            kept = self._runners.get(id(layout))
            # what the runner holds stays valid while the cache has dropped nothing
            if kept is not None and kept.layout is layout and kept.version == cache.version:
                cache.touch(kept.program, kept.use)
            else:
                found = cache.hit(layout.key, layout.signature)
                if found is None:
                    raise UnknownGraph(
                        f"this worker holds no graph with key {layout.key.hex()[:16]}...; send "
                        f"the graph"
                    )
                program, use = found
                if use.footprint is None:  # (its entry left the cache and came back)
                    use.footprint = budget.footprint(program.jitted,
                                                     budget.specs(layout.signature),
                                                     program.result_bytes)
                if len(self._runners) >= fastcall.MAX_LAYOUTS:
                    self._runners.clear()
                kept = _Kept(layout, program, use, cache.version,
                             self._runner(layout, program, use.footprint))
                self._runners[id(layout)] = kept
            if self._hot_kept is not kept:
                self._hot_kept = kept
                self._hot = None if "fast_hot" in self.off else self._hot_path(kept)
                self._one = None if "fast_one" in self.off else self._hot_one(kept)
            return kept.run(frame, id_bytes)
        except Unfit:
            return None
        except Exception as exc:
            return self.error_reply(request_id, exc)

    def _hot_path(self, kept: _Kept) -> Callable[[Chunk], list[Chunk] | None]:
        """The layout served last, in one call: a frame that follows it
        (``fastcall.Layouts.matcher``) is run at once, while the cache has dropped nothing (and
        is the same cache); otherwise ``None``, and :meth:`handle` goes the usual way. A loop
        repeating one call skips the layout lookup, the runner lookup and the match object."""
        follows = self.layouts.matcher(kept.layout)
        run, program, use, version = kept.run, kept.program, kept.use, kept.version

        def hot(frame: Chunk) -> list[Chunk] | None:
            id_bytes = follows(frame)
            if id_bytes is None or self.cache.version != version:
                return None
            try:
                self.cache.touch(program, use)
                return run(frame, id_bytes)
            except Unfit:
                return None
            except Exception as exc:
                return self.error_reply(fastcall.id_value(id_bytes), exc)

        return hot

    def _hot_one(self, kept: _Kept) -> Callable[[Chunk], bytes | list[Chunk] | None] | None:
        """:meth:`_hot_path` for the commonest loop, one wire tensor in and one small wire tensor
        out, in one function that gives the whole reply frame, its length header included
        (:meth:`handle_framed`): the same steps as the runner of :meth:`_runner` and
        ``FrameWriter.write_frame``, without their calls, and from the second run on without
        :func:`to_host`'s NumPy conversion of the result, whose buffer goes into the reply as
        it is where the first run showed it can (:func:`_joins_as`). What the byte-matched
        path saves: docs/BENCHMARKS.md "Latency mechanisms". An error is an error reply (chunks).
        ``None`` for any other request."""
        layout, program = kept.layout, kept.program
        read = self.layouts.one_reader(layout)
        if read is None or layout.keep or len(program.outs) != 1:
            return None
        (out,) = program.outs
        dtype, shape = wire_dtype(out.type), out.shape
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if nbytes >= SMALL_TENSOR:
            return None
        header = fastcall.tensor_header(encode_type(out.type), shape, nbytes)
        jitted, use, version, cache = program.jitted, kept.use, kept.version, self.cache
        stats, join = cache.stats, b"".join
        footprint = use.footprint
        assert footprint is not None  # (measured before the runner was made)
        shipped = layout.tensors[0][3] * layout.tensors[0][1].itemsize
        fixed = shipped + footprint.need  # what a call needs besides the resident tensors
        head, one, tail = fastcall.REPLY_HEAD, fastcall.ONE_ELEMENT, b"j"
        # the frame's length header for each of the two id encodings (2 or 5 bytes)
        rest = len(head) + len(one) + len(header) + nbytes + len(tail)
        lengths = {2: channel.frame_header(rest + 2), 5: channel.frame_header(rest + 5)}

        # whether the run's result goes into the reply as it is (``b"".join`` reads a JAX array
        # through the buffer protocol, as ``np.asarray`` does, without making a NumPy array and
        # its bytes, and the checks this makes unneeded).
        # Decided by the first run: the same program on arguments of one layout gives results
        # of one type, dtype and shape. Not for a dtype the buffer protocol does not carry
        # (bfloat16) or one that is not the wire's.
        direct: bool | None = None
        free_after_reply = "free_after_reply" not in self.off

        def hot(frame: Chunk) -> bytes | list[Chunk] | None:
            nonlocal direct
            got = read(frame)
            # (versions are unique across caches: a matching one is this same cache)
            if got is None or self.cache.version != version:
                return None
            id_bytes, argument = got
            try:
                if self.resident_bytes + fixed > self.max_bytes:
                    raise self._over_budget(shipped, footprint)
                cache.touch(program, use)
                results = jitted(argument)
                stats.runs += 1
                if free_after_reply:  # (freed after the reply is written, off its path)
                    self.spent = results
                if direct:
                    return join(
                        (lengths[len(id_bytes)], head, id_bytes, one, header, results[0], tail)
                    )
                if len(results) != 1:
                    raise ValueError(f"the run gave {len(results)} results for 1 output")
                data = to_host(results[0], dtype, shape).tobytes()
                if direct is None:
                    direct = _joins_as(results[0], data, dtype, shape)
                return join((lengths[len(id_bytes)], head, id_bytes, one, header, data, tail))
            except Exception as exc:
                return self.error_reply(fastcall.id_value(id_bytes), exc)

        return hot

    def _resident_reader(self, layout: fastcall.Layout) -> Callable[[Chunk], list[Any]]:
        """The arguments of a frame of ``layout`` that names resident tensors: views of its
        wire tensors' data, and the arrays of the handles in its holes. Raises ``Unfit`` when
        a handle is not resident here or names a tensor of another type or shape than the one
        the layout was learned with (the generic path then answers, with its message)."""
        resident, size, arity = self.resident, layout.size, len(layout.signature)
        wire = [(p, at, dtype, shape)
                for p, (at, dtype, shape, _) in zip(layout.positions, layout.tensors, strict=True)]
        refs = layout.refs
        from_bytes, ndarray = int.from_bytes, np.ndarray

        def arguments(frame: Chunk) -> list[Any]:
            start = len(frame) - size
            args: list[Any] = [None] * arity
            for position, at, dtype, shape in wire:
                args[position] = ndarray(shape, dtype, frame, start + at)
            for position, at, digits, learned in refs:
                at += start
                entry = resident.get(from_bytes(frame[at:at + digits], "little"))
                if entry is None or (entry[1] is not learned and entry[1] != learned):
                    raise Unfit
                args[position] = entry[0]
            return args

        return arguments

    def _runner(self, layout: fastcall.Layout, program: Any, footprint: Footprint) -> Runner:
        """What a request of ``layout`` does once its program is found, with everything the
        layout and the program fix bound once (kept per layout, while the program is the
        cache's): check the byte budget, read the arguments out of the frame, run, reply. A
        reply of wire tensors is built from their cached headers (``fastcall.tensor_header``);
        with ``keep`` the results stay here and the reply names their handles. ``footprint``:
        the compiled signature's (py_backend/budget.py)."""
        jitted, stats = program.jitted, self.cache.stats
        arguments = (self._resident_reader(layout) if layout.refs
                     else fastcall.argument_reader(layout))
        outs, sizes = program.outs, program.out_bytes
        n_outs = len(outs)
        shipped = sum(count * dtype.itemsize for _, dtype, _, count in layout.tensors)
        fixed = shipped + footprint.need  # what a call needs besides the resident tensors
        free_after_reply = "free_after_reply" not in self.off

        def run(frame: Chunk) -> Any:
            if self.resident_bytes + fixed > self.max_bytes:
                raise self._over_budget(shipped, footprint)
            results = jitted(*arguments(frame))
            stats.runs += 1
            if free_after_reply:
                self.spent = results
            if len(results) != n_outs:
                raise ValueError(f"the run gave {len(results)} results for {n_outs} outputs")
            return results

        if layout.keep:  # the reply of RequestLoop.call's keep, by the same steps
            kept_refs, check = self._kept_refs, self._check_pressure

            def keep(frame: Chunk, id_bytes: bytes) -> list[Chunk]:
                refs = kept_refs(list(zip(outs, sizes, run(frame), strict=True)))
                check()
                return channel.encode_chunks((atom("r"), fastcall.id_value(id_bytes), refs))

            if timeline.rows is not None:
                return _timed_keep(run, outs, sizes, kept_refs, check)
            return keep
        parts = [(wire_dtype(o.type), o.shape) for o in outs]
        headers = [
            fastcall.tensor_header(
                encode_type(o.type), o.shape, int(np.prod(o.shape, dtype=np.int64)) * dtype.itemsize
            )
            for o, (dtype, _shape) in zip(outs, parts, strict=True)
        ]

        if len(parts) == 1 and np.prod(parts[0][1], dtype=np.int64) * parts[0][0].itemsize \
                < SMALL_TENSOR:
            # one small result, the common case of a loop: its reply in one piece
            ((dtype, shape),), (header,) = parts, headers
            return lambda frame, id_bytes: fastcall.encode_one_small_reply(
                id_bytes, header, to_host(run(frame)[0], dtype, shape).tobytes()
            )

        def reply(frame: Chunk, id_bytes: bytes) -> list[Chunk]:
            data: list[bytes | memoryview] = []
            for (dtype, shape), array in zip(parts, run(frame)):  # noqa: B905 (checked in run)
                value = to_host(array, dtype, shape)
                data.append(value.tobytes() if value.nbytes < SMALL_TENSOR
                            else value.reshape(-1).view(np.uint8).data)
            return fastcall.encode_tensor_reply(id_bytes, headers, data)

        return reply

    def _over_budget(self, shipped: int, footprint: Footprint) -> OverBudget:
        """The refusal of a call of ``shipped`` argument bytes and ``footprint``."""
        return budget.call_refusal(self.resident_bytes, shipped, footprint, self.max_bytes)

    def _resident(self, handle: Any) -> tuple[Any, TensorOut, int]:
        """The entry of a resident tensor: its array, its type and shape, its bytes."""
        entry = self.resident.get(handle) if isinstance(handle, int) else None
        if entry is None:
            raise UnknownHandle(
                f"no resident tensor {handle!r} on this worker (it was freed, or the worker "
                f"restarted); keep tensors alive in the process that owns them"
            )
        return entry

    def _keep(self, array: Any, out: TensorOut, nbytes: int | None = None) -> int:
        # a count and 40 random bits: a handle is never given out twice (a late free of a freed
        # one can never hit another tensor), and cannot be guessed, so only a process that was
        # given it (and whoever it hands the tensor to) can use or free it
        self._handles += 1
        if not self._low_bits:
            drawn = os.urandom(5 * 64)
            self._low_bits = [int.from_bytes(drawn[i:i + 5], "big") for i in range(0, 320, 5)]
        handle = (self._handles << HANDLE_RANDOM_BITS) | self._low_bits.pop()
        if nbytes is None:
            nbytes = out.nbytes
        self.resident[handle] = (array, out, nbytes)
        self.resident_bytes += nbytes
        return handle

    def _kept_refs(self, results: list[tuple[TensorOut, int, Any]]) -> Any:
        """A run's ``(out, nbytes, array)`` results kept here, as the pre-encoded list of
        ``{:ref, handle}``, or ``{:ref, handle, data}`` with a copy of a small result's bytes
        (``nbytes``: its program's ``out_bytes``). Every result is kept and every large one's
        ref written first, while the run may still compute; the copies, which wait for it to
        finish (as reading a result would), come last."""
        pieces: list[bytes] = []
        small: list[tuple[int, bytes, Any, TensorOut]] = []
        for out, nbytes, array in results:
            handle = encode_handle(self._keep(array, out, nbytes))
            if nbytes > SMALL_KEPT_BYTES:
                pieces.append(b"".join((_REF2, handle)))
            else:
                small.append((len(pieces), handle, array, out))
                pieces.append(b"")
        for at, handle, array, out in small:
            data = to_host(array, wire_dtype(out.type), out.shape).tobytes()
            pieces[at] = b"".join((_REF3, handle, b"m", _U32.pack(len(data)), data))
        return channel.encoded(b"".join((b"l", _U32.pack(len(results)), *pieces, b"j")))

    def _drop(self, handle: Any) -> bool:
        """Forget a resident tensor and let go of its array (``free`` does the same, inline)."""
        entry = self.resident.pop(handle, None) if isinstance(handle, int) else None
        if entry is None:
            return False
        self.resident_bytes -= entry[2]
        return True

    def _check_pressure(self) -> None:
        """After results were kept: a ``{:pressure, bytes}`` notice when the resident bytes
        reached the mark, which then moves ``resident_gc_bytes`` above them."""
        if self.resident_bytes >= self.pressure_mark:
            self.pressure_mark = self.resident_bytes + self.resident_gc_bytes
            self.pressure_notices += 1
            if self.emit is not None:
                self.emit(channel.encode_chunks((atom("pressure"), self.resident_bytes)))

    def put(self, args: list[Any]) -> Any:
        """``[[tensor]]`` -> one handle per tensor, now resident here."""
        _arity("put", args, 1)
        raw_tensors = _list_arg("put", args[0])
        try:
            decoded = [(decode_tensor(t), decode_type(t[0])) for t in raw_tensors]
            size = sum(a.nbytes for a, _ in decoded)
            if self.resident_bytes + size > self.max_bytes:
                raise budget.refusal("this put", [("resident tensors", self.resident_bytes),
                                                  ("tensors put", size)], self.max_bytes)
            arrays = [(jax.device_put(a), TensorOut(t, tuple(a.shape))) for a, t in decoded]
            del decoded
        finally:
            raw_tensors.clear()
        handles = [self._keep(a, out) for a, out in arrays]
        self._check_pressure()
        return handles

    def fetch(self, args: list[Any]) -> Any:
        """``[[handle]]`` -> the resident tensors' data, as wire tensors."""
        _arity("fetch", args, 1)
        entries = [self._resident(h) for h in _list_arg("fetch", args[0])]
        return [encode_tensor(out, array) for array, out, _ in entries]

    def free(self, args: list[Any]) -> Any:
        """``[[handle]]`` -> how many of them were resident (unknown handles are ignored)."""
        _arity("free", args, 1)
        resident = self.resident
        freed = nbytes = 0
        for handle in _list_arg("free", args[0]):  # (_drop's steps, inline: a loop frees many)
            entry = resident.pop(handle, None) if type(handle) is int else None
            if entry is not None:
                freed += 1
                nbytes += entry[2]
        self.resident_bytes -= nbytes
        # (the next notice comes once the bytes have grown again from here)
        self.pressure_mark = min(self.pressure_mark, self.resident_bytes + self.resident_gc_bytes)
        return freed

    def forget_graphs(self, args: list[Any]) -> Any:
        """Drop every cached graph and executable (as a restart would); returns ``:ok``."""
        _arity("forget_graphs", args, 0)
        self.cache.clear()
        self.layouts.clear()
        self._runners.clear()
        self._hot = self._hot_kept = self._one = None
        return atom("ok")

    def memory(self, args: list[Any]) -> Any:
        """``[reset_peak]`` -> ``%{rss: bytes, peak_rss: bytes}`` of this process (Linux)."""
        _arity("memory", args, 1)
        if args[0] is True:
            with open("/proc/self/clear_refs", "w") as f:  # resets VmHWM to the current RSS
                f.write("5")
        status = {}
        with open("/proc/self/status") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name in ("VmRSS", "VmHWM"):
                    status[name] = int(value.split()[0]) * 1024
        return {atom("rss"): status["VmRSS"], atom("peak_rss"): status["VmHWM"]}

    def debug_print(self, args: list[Any]) -> Any:
        """Test only (``NX_JAX_TEST=1``): ``[how, text]`` writes ``text`` and a newline to
        stdout or stderr the way Python code or a native library would: ``:print``
        (``print``), ``:stderr`` (``sys.stderr``), ``:fd`` (``os.write(1, ...)``) or ``:libc``
        (the C library's ``write(1, ...)`` through ctypes, as native code does)."""
        _arity("debug_print", args, 2)
        how, raw = atom_name(args[0]), channel.binary_bytes(args[1])
        if raw is None:
            raise BadRequest("debug_print: the text must be a binary")
        line = raw + b"\n"
        if how == "print":
            print(raw.decode("utf-8", "replace"), flush=True)
        elif how == "stderr":
            sys.stderr.write(raw.decode("utf-8", "replace") + "\n")
            sys.stderr.flush()
        elif how == "fd":
            os.write(1, line)
        elif how == "libc":
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.write(1, line, len(line)) != len(line):
                raise OSError(ctypes.get_errno(), "libc write to fd 1 failed")
        else:
            raise BadRequest("debug_print: how must be :print, :stderr, :fd or :libc")
        return atom("ok")

    def hook(self, index: int, values: list[tuple[TensorOut, np.ndarray]]) -> None:
        """The hook sink: sends ``{:hook, request_id, index, [tensor]}`` while the request runs
        (on the thread JAX calls back on; the writer is locked)."""
        if self.emit is not None:
            tensors = [encode_tensor(out, value) for out, value in values]
            self.emit(channel.encode_chunks((atom("hook"), self.request_id, index, tensors)))

    # Dispatch ----------------------------------------------------------------------------

    def handle_framed(self, frame: Chunk) -> bytes | list[Chunk]:
        """:meth:`handle` for :func:`serve`: the reply as chunks, or, for a call of the layout
        served last with one tensor in and one small one out (:meth:`_hot_one`), as the whole
        frame with its length header (``FrameWriter.write_framed``)."""
        one = self._one
        if one is not None:
            reply = one(frame)
            if reply is not None:
                self.cache.stats.fast_one_calls += 1
                return reply
        return self.handle(frame)

    def handle(self, frame: Chunk) -> list[Chunk]:
        """One request frame -> the encoded reply (always exactly one)."""
        hot = self._hot
        if hot is not None:
            reply = hot(frame)
            if reply is not None:
                self.cache.stats.fast_hot_calls += 1
                return reply
        match = self.layouts.match(frame)
        if match is not None:
            fast = self._fast_call(frame, match)
            if fast is not None:
                self.cache.stats.fast_layout_calls += 1
                return fast
        # a small frame is kept until the reply, to be learned (copied) if it is a repeatable call
        learn = frame if len(frame) <= fastcall.LEARN_BELOW else None
        self._learnable = False
        request_id: int = -1
        try:
            try:
                term = channel.decode(frame, self._decode_fast)
            except channel.CodecError as exc:
                # answered under its request id when the frame starts like a request
                request_id = request_id_in_head(bytes(frame[:HEAD_BYTES]))
                raise BadRequest(str(exc)) from exc
            del frame  # the decoded term's binaries are views: they alone keep the frame alive
            request_id = request_id_of(term)
            self.request_id = request_id
            function, args = parse_request(term, self.served)
            del term
            result = self.functions[function](args)
            reply = channel.encode_chunks((atom("r"), request_id, result))
            if self._learnable and learn is not None and self.fast_paths:
                self.layouts.learn(bytes(learn), *self._served)
            return reply
        except Exception as exc:
            return self.error_reply(request_id, exc)

    def error_reply(self, request_id: int, exc: BaseException) -> list[Chunk]:
        self.cache.stats.errors += 1
        message = str(exc)
        notes = getattr(exc, "__notes__", None)
        if notes:
            message = "\n".join([message, *notes])
        # (a report that names its node needs no Python traceback)
        trace = ("" if isinstance(exc, BadRequest | UnknownFunction | NodeReport | OverBudget)
                 else traceback.format_exc())
        return channel.encode_chunks(
            (atom("e"), request_id,
             (atom("python"), text(type(exc).__name__), text(message), text(trace)))
        )


_U32 = struct.Struct(">I")
# the heads of {:ref, handle} and {:ref, handle, data}, as the generic encoder writes them
_REF2 = b"h\x02" + channel.encode_leaf(atom("ref"))
_REF3 = b"h\x03" + channel.encode_leaf(atom("ref"))


def _timed_keep(run: Callable[[Chunk], Any], outs: list[TensorOut], sizes: list[int],
                kept_refs: Callable[[list[Any]], Any], check: Callable[[], None]) -> Runner:
    """The runner of a call that keeps its results, with a ``kept`` row of py_backend/timeline.py
    for each call: it waits for the run to finish before it keeps the results (the runner of
    :meth:`RequestLoop._runner` keeps them while the run computes), so that the run's time
    and the keeping's are told apart."""
    now = time.perf_counter_ns

    def keep(frame: Chunk, id_bytes: bytes) -> list[Chunk]:
        start = now()
        results = run(frame)
        dispatched = now()
        jax.block_until_ready(results)
        ready = now()
        refs = kept_refs(list(zip(outs, sizes, results, strict=True)))
        check()
        kept = now()
        reply = channel.encode_chunks((atom("r"), fastcall.id_value(id_bytes), refs))
        timeline.add(("kept", start, dispatched, ready, kept, now()))
        return reply

    return keep


def encode_handle(handle: int) -> bytes:
    """A handle's encoding, as the generic encoder writes it: a handle is at least 2**40
    (``RequestLoop._keep``), so always a SMALL_BIG_EXT (its digit count, sign 0, little-endian
    digits)."""
    digits = (handle.bit_length() + 7) >> 3
    return b"".join((b"n", bytes((digits, 0)), handle.to_bytes(digits, "little")))


# The latency mechanisms of the worker that ``NX_JAX_OFF`` can switch off, one by one, to measure
# what each is worth (``make bench-mechanisms``, docs/BENCHMARKS.md "Latency mechanisms"):
# the spin's rules (py_backend.channel.FrameReader), the byte-matched tiers above the learned
# layouts (RequestLoop._hot_one, RequestLoop._hot_path), the results released off a reply's path
# (RequestLoop.spent), and the hand decoder of the generic path's small requests.
MECHANISMS = {
    "spin_pause": "a spin that lost its CPU pauses (channel.SpinPause)",
    "spin_move": "a spin that lost its CPU moves to another one and spins on (SpinPause.may_move)",
    "fast_one": "one tensor in, one small out: the reply frame in one call (RequestLoop._hot_one)",
    "fast_hot": "the layout served last, in one call (RequestLoop._hot_path)",
    "free_after_reply": "a call's results released after its reply is written (RequestLoop.spent)",
    "decode_fast": "a small request of the generic path decoded by hand (channel.decode_fast)",
}


def mechanisms_off(environ: Any) -> frozenset[str]:
    """The mechanisms ``environ``'s ``NX_JAX_OFF`` switches off: a comma-separated list of
    names of ``MECHANISMS`` (empty or unset: none). Read once, as the worker starts; an
    unknown name is an error that lists the known ones."""
    raw = environ.get("NX_JAX_OFF") or ""
    names = frozenset(n.strip() for n in raw.split(",") if n.strip())
    unknown = sorted(names - MECHANISMS.keys())
    if unknown:
        raise ValueError(
            f"NX_JAX_OFF names unknown mechanisms {unknown}; known: {', '.join(MECHANISMS)}"
        )
    return names


def resident_gc_bytes() -> int:
    """``NX_JAX_RESIDENT_GC_BYTES`` (the client sets it from ``config :nx_jax,
    resident_gc_bytes:``), else ``DEFAULT_RESIDENT_GC_BYTES``."""
    raw = os.environ.get("NX_JAX_RESIDENT_GC_BYTES")
    if raw is None:
        return DEFAULT_RESIDENT_GC_BYTES
    if not raw.isdigit() or int(raw) <= 0:
        raise ValueError(
            f"NX_JAX_RESIDENT_GC_BYTES must be a positive integer of bytes, got: {raw!r} "
            "(config :nx_jax, resident_gc_bytes:)"
        )
    return int(raw)


def _donated_positions(raw: Any, raw_tensors: Any) -> tuple[int, ...]:
    """``call``'s ``donate``: distinct positions of resident (``{:ref, handle}``) arguments."""
    if not isinstance(raw, list) or not isinstance(raw_tensors, list):
        raise BadRequest("call: donate must be a list of argument positions")
    positions: list[int] = []
    for i in raw:
        if not (isinstance(i, int) and not isinstance(i, bool) and 0 <= i < len(raw_tensors)):
            raise BadRequest(f"call: donate names argument {i!r}, not a position of the call's "
                             f"{len(raw_tensors)} arguments")
        term = raw_tensors[i]
        if not (isinstance(term, tuple) and len(term) == 2 and atom_name(term[0]) == "ref"):
            raise BadRequest(f"call: donate names argument {i}, which is not resident: only a "
                             "resident tensor's memory can be given to the results")
        if i not in positions:
            positions.append(i)
    handles = [raw_tensors[i][1] for i in positions]
    for j, term in enumerate(raw_tensors):
        if (j not in positions and isinstance(term, tuple) and len(term) == 2
                and term[1] in handles):
            raise BadRequest(f"call: argument {j} is a tensor that is also donated (as argument "
                             f"{positions[handles.index(term[1])]}): a donated tensor can be "
                             "passed only once")
    return tuple(sorted(positions))


def _shipped_bytes(tensors: Sequence[Any], outs: Sequence[TensorOut | None]) -> int:
    """The bytes of the arguments that came with a request (``outs[i]`` is ``None`` for them;
    a resident argument's entry otherwise: those are counted among the resident bytes)."""
    return sum(t.nbytes for t, o in zip(tensors, outs, strict=True) if o is None)


def _call_argument(view: np.ndarray) -> Any:
    """An argument read from a request frame, as the jitted function takes it: a NumPy copy
    when small, else the view into the frame itself. The jitted call moves a NumPy array to
    the device in its C++ dispatch, as ``jax.device_put`` would (zero-copy on the CPU, the
    frame kept alive by the array), but without ``device_put``'s Python path (what that saves:
    ``git show 19d163f:docs/BENCHMARKS.md``, "Large call arguments without `jax.device_put`")."""
    return view.copy() if view.nbytes < SMALL_TENSOR else view


def graph_key(graph_bin: bytes | memoryview) -> bytes:
    """The key ``call`` names a graph by: its MD5 digest, then its size as 8 big-endian bytes
    (PROTOCOL.md section 7)."""
    return hashlib.md5(graph_bin).digest() + len(graph_bin).to_bytes(8, "big")


def _arity(name: str, args: list[Any], n: int) -> None:
    if len(args) != n:
        raise BadRequest(f"{name} takes {n} arguments, got {len(args)}")


def _graph_and_tensors(name: str, args: list[Any]) -> tuple[Any, list[Any]]:
    """The graph binary and the list of tensors of a ``[graph_bin, tensors]`` request."""
    _arity(name, args, 2)
    graph_bin = channel.binary_view(args[0])
    if graph_bin is None:
        raise BadRequest(f"{name}: the first argument must be the graph binary")
    if not isinstance(args[1], list):
        raise BadRequest(f"{name}: the second argument must be a list of tensors")
    return graph_bin, args[1]


def _list_arg(name: str, term: Any) -> list[Any]:
    if isinstance(term, bytes):  # a list of small integers arrives as STRING_EXT
        return list(term)
    if not isinstance(term, list):
        raise BadRequest(f"{name}: the argument must be a list")
    return term


FUNCTIONS = (
    "ping", "info", "run", "debug_run", "stats", "call", "put", "fetch", "free",
    "forget_graphs", "memory",
)
# served only when NX_JAX_TEST=1 (tests of the output forwarding); refused in production
TEST_FUNCTIONS = ("debug_print",)


def request_id_of(term: Any) -> int:
    """The id of a request-like tuple, or -1 when none can be recovered."""
    if isinstance(term, tuple) and len(term) >= 2:
        candidate = term[1]
        if isinstance(candidate, int) and not isinstance(candidate, bool) and candidate >= 0:
            return candidate
    return -1


# how much of a frame request_id_in_head reads: the version byte, the tuple header, :"C" and
# an id of up to 50 bytes
HEAD_BYTES = 64


def request_id_in_head(head: bytes) -> int:
    """The id of the request whose frame starts with ``head`` (the first ``HEAD_BYTES`` of a
    frame refused unread or undecodable: version, ``{:"C", id, ...`` header, the atom, the
    id), or -1."""
    if head[:3] != b"\x83h\x05":
        return -1
    try:
        at, _c = channel.scan_term(head, 3)
        _, request_id = channel.scan_term(head, at)
    except (channel.CodecError, IndexError):
        return -1
    return request_id_of((None, request_id))


def parse_request(term: Any, served: Sequence[str] = FUNCTIONS) -> tuple[str, list[Any]]:
    """``{:"C", id, :nx_jax, function, args}`` -> (function, args); raises BadRequest or
    UnknownFunction when ``function`` is not in ``served``."""
    if not (isinstance(term, tuple) and len(term) == 5 and atom_name(term[0]) == "C"):
        raise BadRequest('a request must be {:"C", id, module, function, args}')
    _, request_id, module, function, args = term
    if request_id_of(term) < 0:
        raise BadRequest(f"request id must be a non-negative integer, got {request_id!r}")
    if isinstance(args, bytes):  # a list of small integers arrives as STRING_EXT
        args = list(args)
    if not isinstance(args, list):
        raise BadRequest("request args must be a list")
    module_name, function_name = atom_name(module), atom_name(function)
    if module_name != MODULE or function_name not in served:
        raise UnknownFunction(
            f"{module_name or module!r}.{function_name or function!r} is not served; "
            f"the worker serves only {MODULE}.{{{', '.join(served)}}}"
        )
    assert function_name is not None
    return function_name, args


def check_arguments(parameters: dict[int, TensorOut] | Any, tensors: Sequence[np.ndarray],
                    outs: Sequence[TensorOut | None] = ()) -> None:
    """Each argument the graph reads is of its parameter's type and shape (``outs[i]``, where
    given, is what argument ``i`` is known to be: a resident tensor's entry)."""
    for index, declared in sorted(parameters.items()):
        if index >= len(tensors):
            raise ArgumentError(
                f"the graph reads argument {index} but run got {len(tensors)} arguments"
            )
        if index < len(outs) and outs[index] == declared:
            continue
        arg = tensors[index]
        if arg.dtype != wire_dtype(declared.type) or tuple(arg.shape) != declared.shape:
            raise ArgumentError(
                f"argument {index} is {arg.dtype}{list(arg.shape)}, the graph's parameter is "
                f"{declared}"
            )


# --- the loop --------------------------------------------------------------------------------


def serve(
    reader: FrameReader | int = READ_FD,
    writer: FrameWriter | int = WRITE_FD,
    worker: RequestLoop | None = None,
    spin_us: int = 0,
) -> int:
    """Serve until EOF on the request stream; return the exit status (0). ``spin_us``: see
    :class:`~py_backend.channel.FrameReader`, whose spin follows the rules ``worker.off``
    leaves on."""
    worker = worker or RequestLoop()
    off = worker.off
    frames = reader if isinstance(reader, FrameReader) else FrameReader(
        reader, spin_us=spin_us, pause="spin_pause" not in off, move="spin_move" not in off)
    replies = writer if isinstance(writer, FrameWriter) else FrameWriter(writer)
    worker.emit = replies.write_frame
    worker.reader = frames
    reply: bytes | list[Chunk]
    # (py_backend/timeline.py: a row per request when the worker records a timeline)
    timed, now, read, size = timeline.rows is not None, time.perf_counter_ns, 0, 0
    while True:
        try:
            frame = frames.read_frame()
        except channel.FrameTooLarge as exc:
            try:
                head = frames.discard(exc.size, HEAD_BYTES)
            except channel.TruncatedFrame:
                return 0
            # answered under its request id, read from the frame's first bytes
            reply = worker.error_reply(request_id_in_head(head), BadRequest(str(exc)))
        except channel.TruncatedFrame as exc:
            print(f"nx_jax worker: {exc}; exiting", file=sys.stderr)
            return 0
        else:
            if frame is None:
                return 0
            if timed:
                read, size = now(), len(frame)
            # hand the frame over without keeping a reference here, so the worker can free it
            # before it runs the call
            owned = [frame]
            del frame
            reply = worker.handle_framed(owned.pop())
        if timed:
            handled = now()
        try:
            if type(reply) is bytes:
                replies.write_framed(reply)
            else:
                replies.write_frame(reply)
        except BrokenPipeError:
            return 0
        if timed:
            timeline.add(("request", read, handled, now(), size))
        # the reply and the run's results are freed only now, once the caller has its answer
        # (freeing a JAX array takes a while: docs/BENCHMARKS.md "Latency mechanisms")
        del reply
        worker.spent = None


def main(argv: Sequence[str] = ()) -> int:
    parser = argparse.ArgumentParser(prog="python -m py_backend", description=__doc__)
    parser.add_argument("--read-fd", type=int, default=READ_FD)
    parser.add_argument("--write-fd", type=int, default=WRITE_FD)
    parser.add_argument(
        "--forward-stdio",
        action="store_true",
        help="send lines written to fds 1 and 2 to the client as {:log, stream, line} frames",
    )
    parser.add_argument(
        "--spin-us",
        type=int,
        default=int(os.environ.get("NX_JAX_SPIN_US") or 0),
        help="after the last request, poll for the next one for this many microseconds before "
        "sleeping (lower latency for back-to-back calls, some idle CPU); default "
        "$NX_JAX_SPIN_US or 0",
    )
    opts = parser.parse_args(list(argv))
    if opts.spin_us < 0:
        parser.error("--spin-us must be >= 0")
    for fd in (opts.read_fd, opts.write_fd):
        try:
            os.fstat(fd)
        except OSError:
            print(
                f"nx_jax worker: file descriptor {fd} is not open. The worker is started by "
                f"the Elixir side (Port.open with :nouse_stdio); see docs/PROTOCOL.md.",
                file=sys.stderr,
            )
            return 2
    # a worker whose BEAM is gone ends within CHECK_EVERY_S, computing or not
    lifeline.tie_to_parent()
    device, misplaced = placement.apply(os.environ)
    worker = RequestLoop(refusal=handshake.mismatch(os.environ) or misplaced)
    worker.device = device
    if device is not None:  # (an accelerator's memory may be the smaller: budget.py)
        worker.max_bytes = budget.max_bytes(os.environ, device)
    # large frames cross in fewer, larger system calls (bench section 3's shipped MLP step:
    # 3.3-5.1x in-process JAX with 64 KiB pipes, 2.9-3.6x with 1 MiB)
    worker.pipe_bytes = [channel.grow_pipe(opts.read_fd), channel.grow_pipe(opts.write_fd)]
    writer = FrameWriter(opts.write_fd)
    if opts.forward_stdio:
        stdio.forward(writer)
    # What JAX and the worker made at start lives as long as the process: out of the cyclic
    # collector's way, whose full passes over it cost a loop of calls dearly
    # (docs/BENCHMARKS.md, "A training loop")
    gc.freeze()
    return serve(opts.read_fd, writer, worker=worker, spin_us=opts.spin_us)
