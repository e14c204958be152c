"""Compiled executables keyed by graph hash and argument signature, with counters.

The graph binary is hashed (sha256) as it arrived, so a graph is decoded, validated and lowered
once; each distinct argument signature ``[(dtype, shape), ...]`` is compiled once. Both tables
are bounded, the least recently used entry going first; recency is a tick stamped on each entry
(no reordering), so the small-call fast path can mark a use without hashing anything
(:meth:`Cache.touch`).
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax

from py_backend.budget import Footprint
from py_backend.program import decode_graph, lower
from py_backend.wire_graph import Graph, TensorOut

Signature = tuple[tuple[Any, tuple[int, ...]], ...]


@dataclass
class Program:
    """A decoded, validated graph and its (not yet compiled) JAX function."""

    graph: Graph
    function: Callable[..., list[jax.Array]]
    jitted: Any = None
    # the same function jitted with donate_argnums, per tuple of donated positions
    donating: dict[tuple[int, ...], Any] = field(default_factory=dict)
    outs: list[TensorOut] = field(default_factory=list)  # the graph's outputs, in order
    used: int = 0  # the cache's tick at its last use
    result_bytes: int = 0  # the outputs' bytes, all together
    out_bytes: list[int] = field(default_factory=list)  # each output's bytes, in order

    def __post_init__(self) -> None:
        self.outs = [self.graph.nodes[o].tensor for o in self.graph.outputs]
        self.out_bytes = [o.nbytes for o in self.outs]
        self.result_bytes = sum(self.out_bytes)


@dataclass
class Stats:
    compiles: int = 0
    cache_hits: int = 0
    runs: int = 0
    errors: int = 0
    graph_loads: int = 0
    unknown_graphs: int = 0
    # requests served by a fast path of py_backend/fastcall.py, each path counted apart (the
    # paths only fire while the Elixir encoder writes the bytes they expect)
    fast_one_calls: int = 0
    fast_hot_calls: int = 0
    fast_layout_calls: int = 0


class Use:
    """The last use (a tick) of one compiled signature of a program, and what a run of it needs
    besides its arguments (``footprint``: measured by the worker before the first run,
    py_backend/budget.py; ``None`` until then)."""

    __slots__ = ("used", "footprint")

    def __init__(self, used: int) -> None:
        self.used = used
        self.footprint: Footprint | None = None


# every state of every cache that drops an entry gets a version of its own (see Cache.version)
_versions = itertools.count(1)


def signature(args: list[Any]) -> Signature:
    # dtype objects hash and compare by value (str(dtype) costs microseconds per call)
    return tuple((a.dtype, a.shape) for a in args)


class Cache:
    """``(sha256(graph_bin), signature) -> compiled executable``, least recently used first out.

    ``version`` changes whenever an entry leaves either table (evicted, or :meth:`clear`), and
    differs between any two caches: what was found under one version stays valid while the
    version is the same."""

    def __init__(self, max_entries: int = 256) -> None:
        self.max_entries = max_entries
        self.stats = Stats()
        self._programs: dict[bytes, Program] = {}
        # (key, signature, donated positions) -> its use
        self._compiled: dict[tuple[bytes, Signature, tuple[int, ...]], Use] = {}
        self._tick = 0
        self.version = next(_versions)

    def _next_tick(self) -> int:
        self._tick += 1
        return self._tick

    def program(
        self, graph_bin: bytes | memoryview, key: bytes | None = None
    ) -> tuple[bytes, Program]:
        """The program of ``graph_bin``, stored under ``key`` (default: its sha256)."""
        if key is None:
            key = hashlib.sha256(graph_bin).digest()
        program = self._programs.get(key)
        if program is None:
            graph = decode_graph(graph_bin)
            program = Program(graph, lower(graph))
            self.stats.graph_loads += 1
            program.used = self._next_tick()  # (before the trim: the new program stays)
            self._programs[key] = program
            self._trim(self._programs)
        else:
            program.used = self._next_tick()
        return key, program

    def program_by_key(self, key: bytes) -> Program | None:
        """The program of a graph loaded before under ``key``, or ``None``."""
        program = self._programs.get(key)
        if program is None:
            self.stats.unknown_graphs += 1
        else:
            program.used = self._next_tick()
        return program

    def hit(self, key: bytes, sig: Signature) -> tuple[Program, Use] | None:
        """``program_by_key`` and ``executable_for`` in one step, for a call known to have run
        before with this signature (the fast call path): the program, its jitted function
        ready, and the entry of its signature (for :meth:`touch`), or ``None`` when the key is
        unknown (counted as with ``program_by_key``)."""
        program = self.program_by_key(key)
        if program is None:
            return None
        return program, self.compiled(key, program, sig)[1]

    def touch(self, program: Program, use: Use) -> None:
        """A cache hit of ``program`` and its signature's entry ``use``, both from :meth:`hit`
        under the current ``version``: what :meth:`hit` counts and marks, without a lookup."""
        program.used = use.used = self._tick = self._tick + 1
        self.stats.cache_hits += 1

    def clear(self) -> None:
        """Forget every program and executable (the counters stay)."""
        self._programs.clear()
        self._compiled.clear()
        self.version = next(_versions)

    def executable(self, key: bytes, program: Program, args: list[Any],
                   donate: tuple[int, ...] = ()) -> Any:
        """The jitted function for these arguments; a signature not seen before under ``key``
        counts as a compile (``jax.jit`` compiles it on this call, and serves later calls from
        its C++ fast path, which an AOT ``Compiled`` object does not use). With ``donate``, the
        function that may reuse those arguments' memory for its results (``donate_argnums``)."""
        return self.executable_for(key, program, signature(args), donate)

    def executable_for(self, key: bytes, program: Program, sig: Signature,
                       donate: tuple[int, ...] = ()) -> Any:
        """``executable`` for arguments whose ``signature`` is ``sig``."""
        return self.compiled(key, program, sig, donate)[0]

    def compiled(self, key: bytes, program: Program, sig: Signature,
                 donate: tuple[int, ...] = ()) -> tuple[Any, Use]:
        """``executable_for``, and the entry of the signature (its :class:`Use`)."""
        entry = (key, sig, donate)
        use = self._compiled.get(entry)
        if use is not None:
            self.stats.cache_hits += 1
            use.used = self._next_tick()
        else:
            self.stats.compiles += 1
            use = self._compiled[entry] = Use(self._next_tick())
            self._trim(self._compiled)
        if donate:
            jitted = program.donating.get(donate)
            if jitted is None:
                jitted = program.donating[donate] = jax.jit(program.function,
                                                            donate_argnums=donate)
            return jitted, use
        if program.jitted is None:
            program.jitted = jax.jit(program.function)
        return program.jitted, use

    def _trim(self, table: dict[Any, Any]) -> None:
        """Drop the least recently used entries of ``table`` beyond ``max_entries`` (a scan:
        this runs only when an entry is added to a full table, next to a load or a compile)."""
        while len(table) > self.max_entries:
            del table[min(table, key=lambda k: table[k].used)]
            self.version = next(_versions)
