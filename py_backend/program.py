"""A graph of the registry's ops: decoded and validated against it, and lowered with its rules.

The layer above the wire graph (:mod:`py_backend.wire_graph`), the lowering driver
(:mod:`py_backend.lower`) and the op registry (:mod:`py_backend.registry`), which know nothing of
each other's registries: here the registry is given to both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

from py_backend import lower as driver
from py_backend import wire_graph
from py_backend.lower import HookSink
from py_backend.registry import REGISTRY
from py_backend.wire_graph import Graph


def decode_graph(data: bytes | bytearray | memoryview, max_elements: int | None = None) -> Graph:
    """``graph_bin`` (``term_to_binary(graph)``) -> validated :class:`Graph`."""
    return wire_graph.decode_graph(data, REGISTRY, max_elements)


def parse_graph(term: Any, max_elements: int | None = None) -> Graph:
    """A decoded graph term -> validated :class:`Graph`."""
    return wire_graph.parse_graph(term, REGISTRY, max_elements)


def lower(graph: Graph, sink: HookSink | None = None,
          mode: str | None = None) -> Callable[..., list[jax.Array]]:
    """The graph as a function of its ``run`` arguments, ready for ``jax.jit``, traced in
    numerics mode ``mode`` (default: the process's; :func:`py_backend.lower.lower`)."""
    return driver.lower(graph, REGISTRY, sink, mode)
