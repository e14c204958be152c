"""Vectorized nodes (PROTOCOL.md 4.4): ``vectorized: k`` with ``vectorized_inputs`` lowers the
op under k nested jax.vmap, shared inputs with in_axes None; checked against NumPy loops over
the entries, plus validation and jax.grad through a vectorized node."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from py_backend.program import decode_graph, lower
from py_backend.wire_graph import GraphError

from .helpers import GraphBuilder, run_graph

F64 = np.float64


def test_elementwise_with_a_shared_input_uses_in_axes_none() -> None:
    g = GraphBuilder()
    x = g.param(0, "f64", (2, 3))  # vectorized over 2 entries, each of shape {3}
    y = g.param(1, "f64", (3,))  # shared by every entry
    s = g.add("add", [x, y], {"vectorized": 1, "vectorized_inputs": [True, False]},
              ("f64", (2, 3)))
    xs = np.arange(6, dtype=F64).reshape(2, 3)
    ys = np.array([10.0, 20.0, 30.0])
    (out,) = run_graph(g, [s], xs, ys)
    np.testing.assert_array_equal(out, xs + ys)


def test_shared_input_whose_shape_would_be_ambiguous() -> None:
    # x is {2} per entry of 2 entries; y {2, 2} shared: each entry is y + x_i (broadcast on
    # rows), which differs from a plain (2, 2) + (2, 2)
    g = GraphBuilder()
    x = g.param(0, "f64", (2, 2))
    y = g.param(1, "f64", (2, 2))
    s = g.add("subtract", [y, x], {"vectorized": 1, "vectorized_inputs": [False, True]},
              ("f64", (2, 2, 2)))
    xs = np.array([[1.0, 2.0], [3.0, 4.0]])
    ys = np.array([[10.0, 20.0], [30.0, 40.0]])
    (out,) = run_graph(g, [s], xs, ys)
    expected = np.stack([ys - xs[i] for i in range(2)])
    np.testing.assert_array_equal(out, expected)


def test_reduction_axes_refer_to_the_entry_shape() -> None:
    g = GraphBuilder()
    x = g.param(0, "f64", (2, 3, 4))
    s = g.add("sum", [x], {"axes": [1], "keep_axes": False, "vectorized": 1,
                           "vectorized_inputs": [True]}, ("f64", (2, 3)))
    xs = np.arange(24, dtype=F64).reshape(2, 3, 4)
    (out,) = run_graph(g, [s], xs)
    np.testing.assert_array_equal(out, xs.sum(axis=2))


def test_dot_per_entry_with_two_vectorized_levels() -> None:
    g = GraphBuilder()
    a = g.param(0, "f64", (2, 3, 4, 5))  # entries [2][3], each a 4x5 matrix
    b = g.param(1, "f64", (5,))
    d = g.add("dot", [a, b], {"contract_axes": ([1], [0]), "batch_axes": ([], []),
                              "vectorized": 2, "vectorized_inputs": [True, False]},
              ("f64", (2, 3, 4)))
    rng = np.random.default_rng(0)
    av, bv = rng.normal(size=(2, 3, 4, 5)), rng.normal(size=5)
    (out,) = run_graph(g, [d], av, bv)
    np.testing.assert_allclose(out, np.einsum("ijkl,l->ijk", av, bv), rtol=1e-12)


def test_reshape_broadcast_and_transpose_use_the_entry_out_shape() -> None:
    g = GraphBuilder()
    x = g.param(0, "f64", (2, 6))
    r = g.add("reshape", [x], {"vectorized": 1, "vectorized_inputs": [True]}, ("f64", (2, 2, 3)))
    t = g.add("transpose", [r], {"axes": [1, 0], "vectorized": 1, "vectorized_inputs": [True]},
              ("f64", (2, 3, 2)))
    b = g.add("broadcast", [t], {"axes": [1, 2], "vectorized": 1, "vectorized_inputs": [True]},
              ("f64", (2, 4, 3, 2)))
    xs = np.arange(12, dtype=F64).reshape(2, 6)
    (rv, tv, bv) = run_graph(g, [r, t, b], xs)
    np.testing.assert_array_equal(rv, xs.reshape(2, 2, 3))
    np.testing.assert_array_equal(tv, xs.reshape(2, 2, 3).transpose(0, 2, 1))
    np.testing.assert_array_equal(bv, np.broadcast_to(tv[:, None], (2, 4, 3, 2)))


def test_tuple_valued_node_per_entry() -> None:
    g = GraphBuilder()
    a = g.param(0, "f64", (3, 2, 2))
    qr = g.add("qr", [a], {"mode": "reduced", "vectorized": 1, "vectorized_inputs": [True]},
               [("f64", (3, 2, 2)), ("f64", (3, 2, 2))])
    q = g.add("elem", [qr], {"index": 0}, ("f64", (3, 2, 2)))
    r = g.add("elem", [qr], {"index": 1}, ("f64", (3, 2, 2)))
    av = np.random.default_rng(1).normal(size=(3, 2, 2))
    qv, rv = run_graph(g, [q, r], av)
    np.testing.assert_allclose(qv @ rv, av, atol=1e-12)


def test_grad_through_a_vectorized_node_is_per_entry() -> None:
    g = GraphBuilder()
    x = g.param(0, "f64", (3, 2))
    sq = g.add("multiply", [x, x], {"vectorized": 1, "vectorized_inputs": [True, True]},
               ("f64", (3, 2)))
    s = g.add("sum", [sq], {"axes": None, "keep_axes": False}, ("f64", ()))
    gr = g.add("grad", [s, x], {}, [("f64", (3, 2))])
    e = g.add("elem", [gr], {"index": 0}, ("f64", (3, 2)))
    xs = np.array([[1.0, 2.0], [3.0, 4.0], [-1.0, 0.5]])
    (out,) = run_graph(g, [e], xs)
    np.testing.assert_array_equal(out, 2 * xs)


def test_without_jit_too() -> None:
    g = GraphBuilder()
    x = g.param(0, "f64", (2, 3))
    e = g.add("exp", [x], {"vectorized": 1, "vectorized_inputs": [True]}, ("f64", (2, 3)))
    xs = np.linspace(0, 1, 6).reshape(2, 3)
    (out,) = run_graph(g, [e], xs, jit=False)
    np.testing.assert_allclose(out, np.exp(xs), rtol=1e-15)


@pytest.mark.parametrize(
    ("opts", "out", "message"),
    [
        ({"vectorized": 0, "vectorized_inputs": [True]}, ("f64", (2, 3)), "positive integer"),
        ({"vectorized": 1, "vectorized_inputs": [False]}, ("f64", (2, 3)), "at least one true"),
        ({"vectorized": 1, "vectorized_inputs": [True, True]}, ("f64", (2, 3)), "1 booleans"),
        ({"vectorized": 1, "vectorized_inputs": [True]}, ("f64", (4, 3)), "leading axes"),
        ({"vectorized": 3, "vectorized_inputs": [True]}, ("f64", (2, 3)), "fewer than 3"),
    ],
)
def test_bad_vectorized_options_are_refused(opts: dict[str, object], out: object,
                                            message: str) -> None:
    g = GraphBuilder()
    x = g.param(0, "f64", (2, 3))
    e = g.add("exp", [x], opts, out)
    with pytest.raises(GraphError, match=message):
        decode_graph(g.binary([e]))


def test_per_op_checks_see_the_entry_shapes() -> None:
    # transpose axes must be a permutation of the entry rank (2), not the full rank (3)
    g = GraphBuilder()
    x = g.param(0, "f64", (2, 3, 4))
    t = g.add("transpose", [x], {"axes": [0, 1, 2], "vectorized": 1,
                                 "vectorized_inputs": [True]}, ("f64", (2, 3, 4)))
    with pytest.raises(GraphError, match="not a permutation"):
        decode_graph(g.binary([t]))


def test_ops_that_evaluate_subgraphs_cannot_be_vectorized() -> None:
    g = GraphBuilder()
    x = g.param(0, "f64", (2,))
    m = g.add("stop_grad", [x], {"vectorized": 1, "vectorized_inputs": [True]}, ("f64", (2,)))
    with pytest.raises(GraphError, match="cannot be vectorized"):
        decode_graph(g.binary([m]))


def test_the_lowered_function_jits_once_for_vectorized_nodes() -> None:
    g = GraphBuilder()
    x = g.param(0, "f64", (4, 3))
    s = g.add("sum", [x], {"axes": None, "keep_axes": False, "vectorized": 1,
                           "vectorized_inputs": [True]}, ("f64", (4,)))
    fn = jax.jit(lower(decode_graph(g.binary([s]))))
    xs = np.arange(12, dtype=F64).reshape(4, 3)
    (out,) = fn(xs)
    np.testing.assert_array_equal(np.asarray(out), xs.sum(axis=1))
