"""A graph whose declared shapes do not match what its ops produce is refused while it is
traced, before any of it runs: every node's result is checked against its declaration as the
graph is lowered (under ``jax.jit`` that happens on abstract values), so a mismatch anywhere,
not only in an output, stops the call with a ShapeError and nothing is executed."""

from __future__ import annotations

from typing import Any

import numpy as np

from py_backend.channel import Binary, decode
from py_backend.request_loop import RequestLoop
from tests.helpers import GraphBuilder, atom_str, request, wire_tensor

F32 = np.float32


def call(worker: RequestLoop, request_id: int, g: GraphBuilder, out: int, *arrays: Any) -> Any:
    frame = request(request_id, "run", [Binary(g.binary([out])), [wire_tensor(a) for a in arrays]])
    return decode(b"".join(bytes(c) for c in worker.handle(frame)))


def mismatched_middle_node() -> tuple[GraphBuilder, int]:
    g = GraphBuilder()
    x = g.param(0, "f32", (2, 3))
    # declared (3,), but summing a (2, 3) over axis 1 gives (2,)
    s = g.add("sum", [x], {"axes": [1], "keep_axes": False}, ("f32", (3,)))
    e = g.op("exp", s)  # consistent with its (wrong) input declaration
    return g, g.add("sum", [e], {"axes": None, "keep_axes": False}, ("f32", ()))


def test_a_mismatch_inside_the_graph_is_refused_and_nothing_runs() -> None:
    worker = RequestLoop()
    g, out = mismatched_middle_node()
    reply = call(worker, 1, g, out, np.ones((2, 3), F32))
    assert atom_str(reply[0]) == "e"
    _, klass, message, _ = reply[2]
    assert bytes(klass.value) == b"ShapeError"
    assert b"node 1 (sum)" in bytes(message.value)
    assert worker.cache.stats.runs == 0

    # the worker keeps serving: a correct graph runs
    ok = GraphBuilder()
    x = ok.param(0, "f32", (2, 3))
    total = ok.add("sum", [x], {"axes": None, "keep_axes": False}, ("f32", ()))
    reply = call(worker, 2, ok, total, np.ones((2, 3), F32))
    assert atom_str(reply[0]) == "r"
    assert worker.cache.stats.runs == 1


def test_a_mismatched_elementwise_broadcast_is_refused() -> None:
    worker = RequestLoop()
    g = GraphBuilder()
    a = g.param(0, "f32", (2, 3))
    b = g.param(1, "f32", (4,))
    bad = g.add("add", [a, b], {}, ("f32", (2, 3)))
    reply = call(worker, 3, g, bad, np.ones((2, 3), F32), np.ones(4, F32))
    assert atom_str(reply[0]) == "e"
    assert worker.cache.stats.runs == 0
