"""Implicit differentiation (PROTOCOL.md 4.3): custom_root, custom_linear_solve and the
linear_map nodes of their solvers, against jax.lax.custom_root / custom_linear_solve called
directly and against closed forms; validation of malformed solver sub-graphs."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from py_backend.program import decode_graph
from py_backend.wire_graph import GraphError

from .helpers import GraphBuilder, run_graph
from .test_lower_control_flow import add_with_subgraphs, grad_of, sub

F64 = np.float64
S = ("f64", ())
V3 = ("f64", (3,))


def newton_steps(s: GraphBuilder, steps: int) -> list[int]:
    """solve: `steps` Newton steps for x^2 - a from parameter 0 (a = parameter 1, a capture);
    the solver's steps are never differentiated, so their number does not change the
    gradient."""
    x, a = s.param(0, "f64"), s.param(1, "f64")
    two = s.const(2.0, "f64")
    for _ in range(steps):
        residual = s.op("subtract", s.op("multiply", x, x), a)
        x = s.op("subtract", x, s.op("divide", residual, s.op("multiply", two, x)))
    return [x]


def sqrt_root(g: GraphBuilder, a: int, steps: int = 8, tangent: Any = None) -> int:
    x0 = g.const(1.0, "f64")
    f = sub(lambda s: [s.op("subtract", s.op("multiply", s.param(0, "f64"), s.param(0, "f64")),
                               s.param(1, "f64"))])
    if tangent is None:
        # y / g(1): the scalar tangent solve
        tangent = sub(lambda s: [s.op("divide", s.param(0, "f64"),
                                      s.add("linear_map", [s.const(1.0, "f64")], {}, S))])
    return add_with_subgraphs(g, "custom_root", [x0, a], S, {
        "f": f, "solve": sub(lambda s: newton_steps(s, steps)), "tangent_solve": tangent})


def test_custom_root_value_and_implicit_gradients_match_jax_and_the_closed_form() -> None:
    g = GraphBuilder()
    a = g.param(0, "f64")
    x = sqrt_root(g, a)
    dx = grad_of(g, x, a, S)
    ddx = grad_of(g, dx, a, S)
    value, grad, second = run_graph(g, [x, dx, ddx], F64(2.0))

    def direct(a: jax.Array) -> jax.Array:
        def solve(f: Any, x: jax.Array) -> jax.Array:
            for _ in range(8):
                x = x - f(x) / (2 * x)
            return x
        return jax.lax.custom_root(lambda x: x * x - a, jnp.float64(1.0), solve,
                                   lambda g, y: y / g(1.0))

    # (py_backend.lower turns JAX's x64 mode on)
    assert value == pytest.approx(float(direct(jnp.float64(2.0))), rel=1e-15)
    assert grad == pytest.approx(float(jax.grad(direct)(jnp.float64(2.0))), rel=1e-15)
    assert value == pytest.approx(np.sqrt(2.0), rel=1e-14)
    assert grad == pytest.approx(0.5 / np.sqrt(2.0), rel=1e-14)  # 0.35355339...
    assert second == pytest.approx(-0.25 * 2.0 ** -1.5, rel=1e-12)


def test_the_gradient_does_not_depend_on_the_solver_steps() -> None:
    # 3 Newton steps from 1.0 are not yet sqrt(2) to 1e-14: the gradient is the implicit one
    # at the point the solver returned, 1 / (2 x), not the derivative of 3 unrolled steps
    g = GraphBuilder()
    a = g.param(0, "f64")
    x = sqrt_root(g, a, steps=3)
    dx = grad_of(g, x, a, S)
    value, grad = run_graph(g, [x, dx], F64(2.0))
    assert abs(value - np.sqrt(2.0)) > 1e-8
    assert grad == pytest.approx(1 / (2 * value), rel=1e-14)


def dense_solve(s: GraphBuilder, n: int) -> list[int]:
    """A solver that builds the matrix of the map it is given from its columns (the map
    applied to the unit vectors) and solves with it (parameter 0 is the right-hand side)."""
    rhs = s.param(0, "f64", (n,))
    columns = []
    for i in range(n):
        unit = s.add("tensor", [], {"data": np.eye(n)[i].astype(F64).tobytes()}, ("f64", (n,)))
        column = s.add("linear_map", [unit], {}, ("f64", (n,)))
        columns.append(s.add("reshape", [column], {}, ("f64", (n, 1))))
    matrix = s.add("concatenate", columns, {"axis": 1}, ("f64", (n, n)))
    return [s.add("solve", [matrix, rhs], {}, ("f64", (n,)))]


def test_custom_linear_solve_gradients_match_jnp_linalg_solve() -> None:
    rng = np.random.default_rng(0)
    m = rng.normal(size=(3, 3)) + 3 * np.eye(3)
    b = rng.normal(size=3)

    g = GraphBuilder()
    a_node, b_node = g.param(0, "f64", (3, 3)), g.param(1, "f64", (3,))
    matvec = sub(lambda s: [s.add("dot", [s.param(1, "f64", (3, 3)), s.param(0, "f64", (3,))],
                                  {"contract_axes": [[1], [0]], "batch_axes": [[], []]},
                                  ("f64", (3,)))])
    x = add_with_subgraphs(g, "custom_linear_solve", [b_node, a_node], V3, {
        "matvec": matvec, "solve": sub(lambda s: dense_solve(s, 3)),
        "transpose_solve": sub(lambda s: dense_solve(s, 3))}, symmetric=False)
    loss = g.add("sum", [g.op("sin", x, out=V3)], {"axes": None, "keep_axes": False}, S)
    grads = g.add("grad", [loss, a_node, b_node], {}, [("f64", (3, 3)), V3])
    da = g.add("elem", [grads], {"index": 0}, ("f64", (3, 3)))
    db = g.add("elem", [grads], {"index": 1}, V3)
    got_x, got_da, got_db = run_graph(g, [x, da, db], m, b)

    def reference(a: jax.Array, b: jax.Array) -> jax.Array:
        return jnp.sum(jnp.sin(jnp.linalg.solve(a, b)))

    want_da, want_db = jax.grad(reference, argnums=(0, 1))(jnp.asarray(m), jnp.asarray(b))
    np.testing.assert_allclose(got_x, np.linalg.solve(m, b), rtol=1e-12)
    np.testing.assert_allclose(got_da, want_da, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got_db, want_db, rtol=1e-10, atol=1e-12)


def test_a_linear_map_outside_a_solver_is_refused() -> None:
    g = GraphBuilder()
    x = g.param(0, "f64")
    y = g.add("linear_map", [x], {}, S)
    with pytest.raises(GraphError, match="only the solvers of custom_root"):
        run_graph(g, [y], F64(1.0))
    # and f (which JAX calls itself) may not apply one
    g = GraphBuilder()
    a = g.param(0, "f64")
    bad_f = sub(lambda s: [s.add("linear_map", [s.param(0, "f64")], {}, S)])
    add_with_subgraphs(g, "custom_root", [g.const(1.0, "f64"), a], S, {
        "f": bad_f, "solve": sub(lambda s: newton_steps(s, 1)),
        "tangent_solve": sub(lambda s: [s.param(0, "f64")])})
    with pytest.raises(GraphError, match="f applies a linear_map .* no linear map is passed"):
        decode_graph(g.binary([len(g.nodes) - 1]))


def test_malformed_solver_sub_graphs_are_refused() -> None:
    # a tangent solve returning another shape; a solver whose linear_map changes the shape
    g = GraphBuilder()
    a = g.param(0, "f64")
    wrong = sub(lambda s: [s.add("broadcast", [s.param(0, "f64")], {"shape": [2], "axes": []},
                                 ("f64", (2,)))])
    sqrt_root(g, a, tangent=wrong)
    with pytest.raises(GraphError, match="tangent_solve must return"):
        decode_graph(g.binary([len(g.nodes) - 1]))

    g = GraphBuilder()
    a = g.param(0, "f64")
    reshaping = sub(lambda s: [s.add("linear_map", [s.param(0, "f64")], {}, ("f64", (1,)))])
    sqrt_root(g, a, tangent=reshaping)
    with pytest.raises(GraphError, match="must return|linear_map"):
        decode_graph(g.binary([len(g.nodes) - 1]))

    # an integer unknown
    g = GraphBuilder()
    a = g.param(0, "s64")
    x0 = g.const(1, "s64")
    ident = sub(lambda s: [s.param(0, "s64")])
    add_with_subgraphs(g, "custom_root", [x0, a], ("s64", ()),
                       {"f": ident, "solve": ident, "tangent_solve": ident})
    with pytest.raises(GraphError, match="a float type"):
        decode_graph(g.binary([len(g.nodes) - 1]))
