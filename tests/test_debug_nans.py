"""debug_run (py_backend/debug_nans.py): the first NaN or infinity, forward or backward, is
reported with the node that made it; finite graphs give the same values as the jitted run."""

from __future__ import annotations

import numpy as np
import pytest

from py_backend import debug_nans
from py_backend.channel import Binary
from py_backend.program import decode_graph

from .helpers import (
    GraphBuilder,
    WorkerProcess,
    atom_str,
    from_wire,
    request,
    run_graph,
    wire_tensor,
)
from .test_lower_control_flow import grad_of

F32 = np.float32
S = ("f32", ())


def run(g: GraphBuilder, outputs: list[int], *args: np.ndarray) -> list[np.ndarray]:
    graph = decode_graph(g.binary(outputs))
    return [np.asarray(r) for r in debug_nans.run(graph, [np.asarray(a) for a in args])]


def softplus_grad() -> tuple[GraphBuilder, int, int]:
    g = GraphBuilder()
    t = g.param(0, "f32")
    y = g.op("log1p", g.op("exp", t))
    return g, y, grad_of(g, y, t, S)


def root_ratio_grad() -> tuple[GraphBuilder, int, int, int]:
    # x / (1 + sqrt(x)): finite at 0, its autodiff gradient is not (0 * inf in sqrt's rule)
    g = GraphBuilder()
    x = g.param(0, "f32")
    root = g.op("sqrt", x)
    y = g.op("divide", x, g.op("add", g.const(1.0), root))
    return g, y, grad_of(g, y, x, S), root


def test_finite_graphs_give_the_jitted_values() -> None:
    g, y, dy = softplus_grad()
    for t in (F32(-3.0), F32(0.5), F32(20.0)):
        assert run(g, [y, dy], t) == run_graph(g, [y, dy], t)


def test_an_overflow_in_the_forward_pass_names_its_op_and_inputs() -> None:
    # exp(100) overflows f32: the value of log1p(exp(100)) is already inf
    g, y, dy = softplus_grad()
    with pytest.raises(debug_nans.NonFinite) as caught:
        run(g, [y, dy], F32(100.0))
    message = str(caught.value)
    assert message.startswith("debug_nans: inf first appeared in the forward pass, in the "
                              "value of exp {node 1}")
    assert "input 0: float32 100.0" in message


def test_a_nan_made_by_a_gradient_rule_names_the_rule_and_the_grad() -> None:
    g, y, dy, root = root_ratio_grad()
    assert run(g, [y], F32(0.0)) == [0.0]
    with pytest.raises(debug_nans.NonFinite) as caught:
        run(g, [y, dy], F32(0.0))
    message = str(caught.value)
    assert message.startswith(f"debug_nans: nan first appeared in the backward pass of grad "
                              f"{{node {dy - 1}}}: the gradient rule of sqrt {{node {root}}} "
                              "turned a finite incoming gradient")
    assert "its forward inputs: input 0: float32 0.0" in message
    assert "custom_grad/3" in message
    # jitted, the same graph silently gives nan
    assert np.isnan(run_graph(g, [dy], F32(0.0))[0])
    # and at 4.0 everything is finite
    assert run(g, [dy], F32(4.0)) == run_graph(g, [dy], F32(4.0))


def test_a_nan_from_a_nan_input_is_not_blamed_on_an_op() -> None:
    g = GraphBuilder()
    x = g.param(0, "f32")
    y = g.op("exp", x)
    assert np.isnan(run(g, [y], F32(np.nan))[0])


def test_the_worker_answers_debug_run_with_a_non_finite_error_and_serves_on() -> None:
    g, y, dy, _root = root_ratio_grad()
    graph = Binary(g.binary([y, dy]))
    w = WorkerProcess()
    try:
        reply = w.call(request(1, "debug_run", [graph, [wire_tensor(F32(0.0))]]))
        assert atom_str(reply[0]) == "e"
        assert reply[2][1].value == b"NonFinite"
        assert b"the gradient rule of sqrt" in reply[2][2].value
        reply = w.call(request(2, "debug_run", [graph, [wire_tensor(F32(4.0))]]))
        assert atom_str(reply[0]) == "r"
        assert from_wire(reply[2][0]) == run_graph(g, [y], F32(4.0))[0]
    finally:
        assert w.close() == 0
