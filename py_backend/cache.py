"""Compiled executables keyed by graph hash and argument signature, with counters.

The graph binary is hashed (sha256) as it arrived, so a graph is decoded, validated and lowered
once; each distinct argument signature ``[(dtype, shape), ...]`` is compiled once.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax

from py_backend.graph import Graph, TensorOut, decode_graph
from py_backend.lower import lower

Signature = tuple[tuple[Any, tuple[int, ...]], ...]


@dataclass
class Program:
    """A decoded, validated graph and its (not yet compiled) JAX function."""

    graph: Graph
    function: Callable[..., list[jax.Array]]
    jitted: Any = None
    outs: list[TensorOut] = field(default_factory=list)  # the graph's outputs, in order

    def __post_init__(self) -> None:
        self.outs = [self.graph.nodes[o].tensor for o in self.graph.outputs]


@dataclass
class Stats:
    compiles: int = 0
    cache_hits: int = 0
    runs: int = 0
    errors: int = 0
    graph_loads: int = 0
    unknown_graphs: int = 0


def signature(args: list[Any]) -> Signature:
    # dtype objects hash and compare by value (str(dtype) costs microseconds per call)
    return tuple((a.dtype, a.shape) for a in args)


class Cache:
    """``(sha256(graph_bin), signature) -> compiled executable``, least recently used first out."""

    def __init__(self, max_entries: int = 256) -> None:
        self.max_entries = max_entries
        self.stats = Stats()
        self._programs: OrderedDict[bytes, Program] = OrderedDict()
        self._compiled: OrderedDict[tuple[bytes, Signature], Any] = OrderedDict()

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
            self._programs[key] = program
            _trim(self._programs, self.max_entries)
        else:
            self._programs.move_to_end(key)
        return key, program

    def program_by_key(self, key: bytes) -> Program | None:
        """The program of a graph loaded before under ``key``, or ``None``."""
        program = self._programs.get(key)
        if program is None:
            self.stats.unknown_graphs += 1
        else:
            self._programs.move_to_end(key)
        return program

    def hit(self, key: bytes, sig: Signature) -> Program | None:
        """``program_by_key`` and ``executable_for`` in one step, for a call known to have run
        before with this signature (the fast call path): the program, its jitted function
        ready, or ``None`` when the key is unknown (counted as with ``program_by_key``)."""
        program = self._programs.get(key)
        if program is None:
            self.stats.unknown_graphs += 1
            return None
        self._programs.move_to_end(key)
        self.executable_for(key, program, sig)
        return program

    def clear(self) -> None:
        """Forget every program and executable (the counters stay)."""
        self._programs.clear()
        self._compiled.clear()

    def executable(self, key: bytes, program: Program, args: list[Any]) -> Any:
        """The jitted function for these arguments; a signature not seen before under ``key``
        counts as a compile (``jax.jit`` compiles it on this call, and serves later calls from
        its C++ fast path, which an AOT ``Compiled`` object does not use)."""
        return self.executable_for(key, program, signature(args))

    def executable_for(self, key: bytes, program: Program, sig: Signature) -> Any:
        """``executable`` for arguments whose ``signature`` is ``sig``."""
        entry = (key, sig)
        if entry in self._compiled:
            self.stats.cache_hits += 1
            self._compiled.move_to_end(entry)
        else:
            self.stats.compiles += 1
            self._compiled[entry] = True
            _trim(self._compiled, self.max_entries)
        if program.jitted is None:
            program.jitted = jax.jit(program.function)
        return program.jitted


def _trim(table: OrderedDict[Any, Any], size: int) -> None:
    while len(table) > size:
        table.popitem(last=False)
