"""Ops carrying sub-graphs (PROTOCOL.md 4.3): cond, while, range_loop, reduce, window_reduce.

Values against NumPy, gradients (through the worker's ``grad`` node) against central
differences in float64, and validation of malformed sub-graphs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from py_backend.channel import atom
from py_backend.program import decode_graph
from py_backend.wire_graph import GraphError

from .helpers import GraphBuilder, elixir_term, out_term, run_graph, type_term

TESTED = {"cond", "while", "range_loop", "reduce", "window_reduce"}

F64 = np.float64


def add_with_subgraphs(g: GraphBuilder, op: str, inputs: Sequence[int], out: Any,
                       subgraphs: dict[str, Any], **opts: Any) -> int:
    """Append a node whose opts hold graph terms (as Nx.Defn.WireEncoder encodes them)."""
    node_id = len(g.nodes)
    raw = {atom(k): elixir_term(v) for k, v in opts.items()}
    raw.update({atom(k): v for k, v in subgraphs.items()})
    g.nodes.append((node_id, atom(op), elixir_term(list(inputs)), raw, out_term(out)))
    g.outs.append(out)
    return node_id


def sub(build: Callable[[GraphBuilder], Sequence[int]]) -> Any:
    s = GraphBuilder()
    return s.term(build(s))


def elem(g: GraphBuilder, node: int, index: int, out: Any) -> int:
    return g.add("elem", [node], {"index": index}, out)


def grad_of(g: GraphBuilder, y: int, x: int, out: Any) -> int:
    node = g.add("grad", [y, x], {}, [out])
    return elem(g, node, 0, out)


def central_difference(f: Callable[[float], float], x: float, h: float = 1e-5) -> float:
    return (f(x + h) - f(x - h)) / (2 * h)


S64 = ("f64", ())
# a comparison's opts: the type its inputs meet in (the Elixir side decides it)
IN_F64 = {"operand_type": type_term("f64")}
IN_S64 = {"operand_type": type_term("s64")}


# --- cond --------------------------------------------------------------------------------------


def sqrt_or_zero(g: GraphBuilder, x: int) -> int:
    zero = g.const(0.0, "f64")
    pred = g.add("greater", [x, zero], IN_F64, ("u8", ()))
    branches = [
        sub(lambda s: [s.op("sqrt", s.param(0, "f64"))]),
        sub(lambda s: [s.const(0.0, "f64")]),
    ]
    node = add_with_subgraphs(g, "cond", [pred, x], [S64], {"branches": branches})
    return elem(g, node, 0, S64)


def test_cond_runs_the_taken_branch_and_its_gradient_is_finite_at_zero() -> None:
    g = GraphBuilder()
    x = g.param(0, "f64")
    y = sqrt_or_zero(g, x)
    dy = grad_of(g, y, x, S64)
    assert run_graph(g, [y, dy], F64(4.0)) == [2.0, 0.25]
    assert run_graph(g, [y, dy], F64(-4.0)) == [0.0, 0.0]
    value, grad = run_graph(g, [y, dy], F64(0.0))
    assert value == 0.0 and grad == 0.0  # a select over both branches gives NaN here


def test_cond_with_several_predicates_picks_the_first_true_one() -> None:
    g = GraphBuilder()
    x = g.param(0, "f64")
    p0 = g.add("less", [x, g.const(-1.0, "f64")], IN_F64, ("u8", ()))
    p1 = g.add("less", [x, g.const(1.0, "f64")], IN_F64, ("u8", ()))
    branches = [
        sub(lambda s: [s.op("negate", s.param(0, "f64"))]),
        sub(lambda s: [s.op("sin", s.param(0, "f64"))]),
        sub(lambda s: [s.op("exp", s.param(0, "f64"))]),
    ]
    node = add_with_subgraphs(g, "cond", [p0, p1, x], [S64], {"branches": branches})
    y = elem(g, node, 0, S64)
    dy = grad_of(g, y, x, S64)
    for point, (value, derivative) in {
        -2.0: (2.0, -1.0), 0.5: (np.sin(0.5), np.cos(0.5)), 2.0: (np.exp(2.0), np.exp(2.0))
    }.items():
        got_value, got_grad = run_graph(g, [y, dy], F64(point))
        assert got_value == pytest.approx(value) and got_grad == pytest.approx(derivative)


# --- while and range_loop ----------------------------------------------------------------------


def doubling(max_iterations: int | None) -> tuple[GraphBuilder, int, int]:
    """while {y, i}, i < 3 (max_iterations?) do {y * k, i + 1}: y * k^3; k is captured."""
    g = GraphBuilder()
    x = g.param(0, "f64")
    k = g.param(1, "f64")
    i0 = g.const(0, "s64")

    def condition(s: GraphBuilder) -> list[int]:
        s.param(0, "f64")
        i = s.param(1, "s64")
        return [s.add("less", [i, s.const(3, "s64")], IN_S64, ("u8", ()))]

    def body(s: GraphBuilder) -> list[int]:
        y, i, kk = s.param(0, "f64"), s.param(1, "s64"), s.param(2, "f64")
        return [s.op("multiply", y, kk), s.op("add", i, s.const(1, "s64"))]

    state = [S64, ("s64", ())]
    node = add_with_subgraphs(
        g, "while", [x, i0, k], state, {"condition": sub(condition), "body": sub(body)},
        max_iterations=max_iterations,
    )
    return g, elem(g, node, 0, S64), x


def test_while_loops_until_the_condition_is_false() -> None:
    for bound in (None, 10):
        g, y, _ = doubling(bound)
        assert run_graph(g, [y], F64(1.5), F64(2.0)) == [12.0]


def test_bounded_while_stops_after_max_iterations_and_is_differentiable() -> None:
    g, y, _ = doubling(2)
    assert run_graph(g, [y], F64(1.5), F64(2.0)) == [6.0]

    g, y, x = doubling(5)
    k = 1  # the parameter node of k
    dx = grad_of(g, y, x, S64)
    dk = grad_of(g, y, k, S64)
    got_dx, got_dk = run_graph(g, [dx, dk], F64(1.5), F64(2.0))
    assert got_dx == pytest.approx(8.0) and got_dk == pytest.approx(3 * 1.5 * 4.0)

    def value(xv: float, kv: float) -> float:
        return float(run_graph(g, [y], F64(xv), F64(kv))[0])

    assert got_dk == pytest.approx(central_difference(lambda kv: value(1.5, kv), 2.0), rel=1e-6)


def test_an_unbounded_while_is_reverse_differentiable_with_the_exact_gradient() -> None:
    # y = x * k^3 after three steps (the trip count is only known while the loop runs)
    g, y, x = doubling(None)
    k = 1  # the parameter node of k
    dx = grad_of(g, y, x, S64)
    dk = grad_of(g, y, k, S64)
    got_dx, got_dk = run_graph(g, [dx, dk], F64(1.5), F64(2.0))
    assert got_dx == pytest.approx(8.0) and got_dk == pytest.approx(3 * 1.5 * 4.0)

    def value(xv: float, kv: float) -> float:
        return float(run_graph(g, [y], F64(xv), F64(kv))[0])

    assert got_dx == pytest.approx(central_difference(lambda xv: value(xv, 2.0), 1.5), rel=1e-6)
    assert got_dk == pytest.approx(central_difference(lambda kv: value(1.5, kv), 2.0), rel=1e-6)


def test_reversible_while_matches_jax_on_an_unrolled_loop() -> None:
    from py_backend.ops.control_flow import reversible_while

    def looped(t: jax.Array) -> jax.Array:
        _, final = reversible_while(
            lambda s, _c: s[0] < 3,
            lambda s, _c: (s[0] + 1, jnp.sin(s[1])),
            (jnp.asarray(0), t**3),
            (),
        )
        return jnp.sum(final**2)

    def unrolled(t: jax.Array) -> jax.Array:
        return jnp.sum(jnp.sin(jnp.sin(jnp.sin(t**3))) ** 2)

    t = jnp.array([-2.5, -1.0, 0.0, 1.0, 1.5])
    np.testing.assert_allclose(jax.grad(looped)(t), jax.grad(unrolled)(t), rtol=1e-12)

    # a loop of data-dependent length per entry, under vmap: x^7 for x = 2, x^5 for x = 3
    def power_until(x: jax.Array) -> jax.Array:
        return reversible_while(
            lambda s, c: s[0] < 100, lambda s, c: (c[0] * s[0],), (jnp.asarray(1.0),), (x,)
        )[0]

    grads = jax.vmap(jax.grad(power_until))(jnp.array([2.0, 3.0]))
    np.testing.assert_allclose(grads, [448.0, 405.0])


@pytest.mark.parametrize("max_slots", [256, 4])
@pytest.mark.parametrize("n", [0, 1, 3, 4, 5, 17, 64, 300])
def test_reversible_while_checkpoints_give_the_exact_gradient(
        monkeypatch: pytest.MonkeyPatch, max_slots: int, n: int) -> None:
    # n steps of x -> sin(x) * c + x / 4 (a vector state, a float capture, an integer counter),
    # against jax.grad of the unrolled steps. With 4 slots the checkpoints are halved many
    # times (stride up to 128) and segments longer than the buffer take the recomputing path.
    from py_backend.ops import control_flow

    monkeypatch.setattr(control_flow, "_MAX_SLOTS", max_slots)
    assert control_flow.checkpoint_slots((jnp.zeros(3), jnp.asarray(0))) == max_slots

    def looped(c: jax.Array, x0: jax.Array) -> jax.Array:
        _, x = control_flow.reversible_while(
            lambda s, caps: s[0] < caps[1],
            lambda s, caps: (s[0] + 1, jnp.sin(s[1]) * caps[0] + s[1] / 4),
            (jnp.asarray(0, np.int64), x0), (c, jnp.asarray(n, np.int64)))
        return jnp.sum(x ** 2)

    def unrolled(c: jax.Array, x0: jax.Array) -> jax.Array:
        x = x0
        for _ in range(n):
            x = jnp.sin(x) * c + x / 4
        return jnp.sum(x ** 2)

    c, x0 = jnp.float64(0.9), jnp.array([-1.0, 0.25, 2.0])
    want = jax.grad(unrolled, argnums=(0, 1))(c, x0)
    got = jax.jit(jax.grad(looped, argnums=(0, 1)))(c, x0)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-11)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-11, atol=1e-300)


def test_range_loop_scans_the_indices_and_is_differentiable() -> None:
    # acc = sum over i in 1, 3, 5 of x^2 * i  (first 1, step 2, count 3)
    g = GraphBuilder()
    x = g.param(0, "f64")
    acc0 = g.const(0.0, "f64")

    def body(s: GraphBuilder) -> list[int]:
        acc, i, xx = s.param(0, "f64"), s.param(1, "s64"), s.param(2, "f64")
        term = s.op("multiply", s.op("multiply", xx, xx), s.add("as_type", [i], {}, S64))
        return [s.op("add", acc, term)]

    node = add_with_subgraphs(g, "range_loop", [acc0, x], [S64], {"body": sub(body)},
                              first=1, step=2, count=3)
    y = elem(g, node, 0, S64)
    dy = grad_of(g, y, x, S64)
    value, grad = run_graph(g, [y, dy], F64(0.7))
    assert value == pytest.approx(9 * 0.49) and grad == pytest.approx(18 * 0.7)


# --- reduce and window_reduce ------------------------------------------------------------------


def squares_reducer(s: GraphBuilder) -> list[int]:
    x, acc = s.param(0, "f64"), s.param(1, "f64")
    return [s.op("add", s.op("multiply", x, x), acc)]


@pytest.mark.parametrize("axes, keep", [(None, False), ([1], False), ([0], True), ([0, 2], False)])
def test_reduce_folds_with_the_reducer_over_axes(axes: list[int] | None, keep: bool) -> None:
    data = np.arange(24, dtype=F64).reshape(2, 3, 4) / 10
    expected = np.sum(data**2, axis=None if axes is None else tuple(axes), keepdims=keep) + 0.5
    g = GraphBuilder()
    x = g.param(0, "f64", data.shape)
    acc = g.const(0.5, "f64")
    y = add_with_subgraphs(g, "reduce", [x, acc], ("f64", expected.shape),
                           {"reducer": sub(squares_reducer)}, axes=axes, keep_axes=keep)
    (got,) = run_graph(g, [y], data)
    np.testing.assert_allclose(got, expected)


def test_reduce_with_a_captured_value_and_its_gradient() -> None:
    data = np.array([0.5, -1.0, 2.0], F64)
    g = GraphBuilder()
    x = g.param(0, "f64", (3,))
    scale = g.param(1, "f64")

    def reducer(s: GraphBuilder) -> list[int]:
        v, acc, k = s.param(0, "f64"), s.param(1, "f64"), s.param(2, "f64")
        return [s.op("add", s.op("multiply", s.op("multiply", v, v), k), acc)]

    y = add_with_subgraphs(g, "reduce", [x, g.const(0.0, "f64"), scale], S64,
                           {"reducer": sub(reducer)}, axes=None, keep_axes=False)
    dx_node = g.add("grad", [y, x], {}, [("f64", (3,))])
    dx = elem(g, dx_node, 0, ("f64", (3,)))
    value, grad = run_graph(g, [y, dx], data, F64(3.0))
    assert value == pytest.approx(3.0 * np.sum(data**2))
    np.testing.assert_allclose(grad, 6.0 * data)


def test_window_reduce_pads_with_acc_and_supports_strides_and_dilations() -> None:
    data = np.array([1.0, 5.0, 2.0, 0.0, 7.0], F64)

    def max_reducer(s: GraphBuilder) -> list[int]:
        return [s.op("max", s.param(0, "f64"), s.param(1, "f64"))]

    g = GraphBuilder()
    x = g.param(0, "f64", (5,))
    low = g.const("neg_infinity", "f64")
    dilated = add_with_subgraphs(
        g, "window_reduce", [x, low], ("f64", (3,)), {"reducer": sub(max_reducer)},
        window_dimensions=[2], strides=[1], padding=[(0, 0)], window_dilations=[2])
    summed = add_with_subgraphs(
        g, "window_reduce", [x, g.const(10.0, "f64")], ("f64", (3,)),
        {"reducer": sub(lambda s: [s.op("add", s.param(0, "f64"), s.param(1, "f64"))])},
        window_dimensions=[2], strides=[2], padding=[(1, 0)], window_dilations=[1])
    got_max, got_sum = run_graph(g, [dilated, summed], data)
    np.testing.assert_allclose(got_max, [2.0, 5.0, 7.0])
    # padded [10, 1, 5, 2, 0, 7]: windows [10, 1], [5, 2], [0, 7], each plus acc 10
    np.testing.assert_allclose(got_sum, [21.0, 17.0, 17.0])

    dsum = g.add("sum", [summed], {"axes": None, "keep_axes": False}, S64)
    grad_node = g.add("grad", [dsum, x], {}, [("f64", (5,))])
    (grad,) = run_graph(g, [elem(g, grad_node, 0, ("f64", (5,)))], data)
    np.testing.assert_allclose(grad, [1.0, 1.0, 1.0, 1.0, 1.0])


# --- validation --------------------------------------------------------------------------------


def loop_graph(body: Any, state_out: Any = S64, max_iterations: Any = None) -> bytes:
    g = GraphBuilder()
    x = g.param(0, "f64")
    condition = sub(lambda s: [s.add("less", [s.param(0, "f64"), s.const(9.0, "f64")], IN_F64,
                                     ("u8", ()))])
    node = add_with_subgraphs(g, "while", [x], [state_out],
                              {"condition": condition, "body": body},
                              max_iterations=max_iterations)
    return g.binary([elem(g, node, 0, state_out)])


def test_a_well_formed_loop_validates() -> None:
    graph = decode_graph(loop_graph(sub(lambda s: [s.op("exp", s.param(0, "f64"))])))
    assert graph.nodes[1].op == "while"
    assert graph.nodes[1].opts["body"].nodes[1].op == "exp"


@pytest.mark.parametrize("body, state_out, bound, message", [
    ((atom("not_a_graph"), 1, [], []), S64, None,
     "option body: graph must start with :nx_jax_graph"),
    (sub(lambda s: [s.op("exp", s.param(0, "f32"))]), S64, None, "declares parameter 0"),
    (sub(lambda s: [s.op("exp", s.param(3, "f64"))]), S64, None, "has parameter 3"),
    (sub(lambda s: [s.add("as_type", [s.param(0, "f64")], {}, ("f32", ()))]), S64, None,
     "body must return"),
    (sub(lambda s: [s.add("nope", [s.param(0, "f64")], {}, S64)]), S64, None,
     "option body: node 1 .nope.: unknown op"),
    (sub(lambda s: [s.op("exp", s.param(0, "f64"))]), ("f32", ()), None, "initial state"),
    (sub(lambda s: [s.op("exp", s.param(0, "f64"))]), S64, 0, "max_iterations must be"),
])
def test_malformed_loops_are_graph_errors(body: Any, state_out: Any, bound: Any,
                                          message: str) -> None:
    with pytest.raises(GraphError, match=message):
        decode_graph(loop_graph(body, state_out, bound))


def test_malformed_conds_and_reducers_are_graph_errors() -> None:
    branch = sub(lambda s: [s.param(0, "f64")])

    g = GraphBuilder()
    x = g.param(0, "f64", (2,))
    add_with_subgraphs(g, "cond", [x, x], [("f64", (2,))], {"branches": [branch, branch]})
    with pytest.raises(GraphError, match="predicate .node 0. must be a scalar"):
        decode_graph(g.binary([0]))

    g = GraphBuilder()
    x = g.param(0, "f64")
    add_with_subgraphs(g, "cond", [x, x], [S64], {"branches": []})
    with pytest.raises(GraphError, match="non-empty list of graphs"):
        decode_graph(g.binary([0]))

    g = GraphBuilder()
    x = g.param(0, "f64", (3,))
    acc = g.param(1, "f64", (3,))
    add_with_subgraphs(g, "reduce", [x, acc], S64, {"reducer": sub(squares_reducer)},
                       axes=None, keep_axes=False)
    with pytest.raises(GraphError, match="accumulator .a scalar."):
        decode_graph(g.binary([2]))

    g = GraphBuilder()
    x = g.param(0, "f64", (3,))
    acc = g.param(1, "f64")
    two_outputs = sub(lambda s: [s.param(0, "f64"), s.param(1, "f64")])
    add_with_subgraphs(g, "reduce", [x, acc], S64, {"reducer": two_outputs},
                       axes=None, keep_axes=False)
    with pytest.raises(GraphError, match="reducer must return"):
        decode_graph(g.binary([2]))
