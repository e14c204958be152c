"""Every op of the lowering table against NumPy (PROTOCOL.md section 4.1)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from py_backend.lower import ShapeError
from py_backend.registry import REGISTRY

from .helpers import GraphBuilder, run_graph, type_term
from .test_lower_eigh import TESTED as TESTED_IN_EIGH
from .test_lower_elementwise_windows import TESTED as TESTED_IN_ELEMENTWISE
from .test_lower_fft import TESTED as TESTED_IN_FFT
from .test_lower_jax_derivatives import TESTED as TESTED_IN_JAX_DERIVATIVES
from .test_lower_shape_indexing_linalg import TESTED as TESTED_IN_SHAPE
from .test_lower_top_k_fft2 import TESTED as TESTED_IN_TOP_K_FFT2

F32 = np.float32
X = np.array([[0.5, 1.0, 2.0], [0.25, 3.0, 0.75]], F32)
Y = np.array([1.5, -2.0, 0.5], F32)

UNARY_NP: dict[str, Callable[[Any], Any]] = {
    "exp": np.exp,
    "expm1": np.expm1,
    "log": np.log,
    "log1p": np.log1p,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x),
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "negate": np.negative,
    "abs": np.abs,
}

BINARY_NP: dict[str, Callable[[Any, Any], Any]] = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "pow": np.power,
    "max": np.maximum,
    "min": np.minimum,
}

COMPARISON_NP: dict[str, Callable[[Any, Any], Any]] = {
    "equal": np.equal,
    "not_equal": np.not_equal,
    "less": np.less,
    "less_equal": np.less_equal,
    "greater": np.greater,
    "greater_equal": np.greater_equal,
}

REDUCTION_NP: dict[str, Callable[..., Any]] = {
    "sum": np.sum,
    "product": np.prod,
    "reduce_max": np.max,
    "reduce_min": np.min,
    "mean": np.mean,
}

TESTED_BELOW = {
    "parameter", "constant", "tensor", "iota", "select", "as_type", "reshape", "transpose",
    "broadcast", "slice", "concatenate", "dot", "elem",
    # in test_lower_grad.py:
    "grad", "stop_grad", "custom_grad", "metadata", "cotangent",
    # in test_lower_control_flow.py:
    "cond", "while", "range_loop", "reduce", "window_reduce",
    # in test_lower_hooks.py:
    "hook", "attach_token",
    # in test_lower_implicit.py:
    "custom_root", "custom_linear_solve", "linear_map",
    # in test_lower_checkpoint.py:
    "checkpoint", "checkpoint_name",
}


def test_every_op_in_the_registry_is_tested() -> None:
    covered = set(UNARY_NP) | set(BINARY_NP) | set(COMPARISON_NP) | set(REDUCTION_NP)
    tested = (TESTED_BELOW | TESTED_IN_ELEMENTWISE | TESTED_IN_SHAPE | TESTED_IN_FFT
              | TESTED_IN_EIGH | TESTED_IN_JAX_DERIVATIVES | TESTED_IN_TOP_K_FFT2)
    assert covered | tested == set(REGISTRY)


@pytest.mark.parametrize("op", sorted(UNARY_NP))
def test_unary_op_matches_numpy(op: str) -> None:
    g = GraphBuilder()
    x = g.param(0, "f32", X.shape)
    (result,) = run_graph(g, [g.op(op, x)], X)
    assert result.dtype == np.float32
    np.testing.assert_allclose(result, UNARY_NP[op](X.astype(np.float64)), rtol=2e-6)


@pytest.mark.parametrize("op", sorted(BINARY_NP))
def test_binary_op_broadcasts_and_matches_numpy(op: str) -> None:
    g = GraphBuilder()
    x, y = g.param(0, "f32", X.shape), g.param(1, "f32", Y.shape)
    (result,) = run_graph(g, [g.op(op, x, y)], X, Y)
    np.testing.assert_allclose(result, BINARY_NP[op](X.astype(np.float64), Y), rtol=2e-6)


def test_element_wise_inputs_are_cast_to_the_output_type_first() -> None:
    # Nx: s32 / s32 -> f32 and exp(s32) -> f32; u8 + u8 declared u16 must not wrap around.
    g = GraphBuilder()
    a, b = g.param(0, "s32", (3,)), g.param(1, "s32", (3,))
    div = g.op("divide", a, b, out=("f32", (3,)))
    exp = g.op("exp", a, out=("f32", (3,)))
    u, v = g.param(2, "u8", (2,)), g.param(3, "u8", (2,))
    add = g.op("add", u, v, out=("u16", (2,)))
    av, bv = np.array([7, -7, 1], np.int32), np.array([2, 2, 3], np.int32)
    uv = np.array([200, 255], np.uint8)
    d, e, s = run_graph(g, [div, exp, add], av, bv, uv, uv)
    np.testing.assert_allclose(d, [3.5, -3.5, 1 / 3], rtol=1e-6)
    np.testing.assert_allclose(e, np.exp(av.astype(np.float64)), rtol=1e-6)
    assert s.dtype == np.uint16 and list(s) == [400, 510]


@pytest.mark.parametrize("op", sorted(COMPARISON_NP))
def test_comparison_outputs_u8_and_matches_numpy(op: str) -> None:
    g = GraphBuilder()
    x, y = g.param(0, "f32", X.shape), g.param(1, "f32", Y.shape)
    compared = g.op(op, x, y, out=("u8", X.shape), operand_type=type_term("f32"))
    (result,) = run_graph(g, [compared], X, Y)
    assert result.dtype == np.uint8
    np.testing.assert_array_equal(result, COMPARISON_NP[op](X, Y).astype(np.uint8))


def test_comparison_happens_in_the_type_elixir_sends() -> None:
    # u8 200 vs s8 -1: compared in s16 (Nx.Type.merge), 200 > -1; in u8 -1 would wrap to 255.
    g = GraphBuilder()
    u, s = g.param(0, "u8", (1,)), g.param(1, "s8", (1,))
    # f32 1.5 vs s32 1: compared in f32, not truncated to 1 == 1.
    f, i = g.param(2, "f32", (1,)), g.param(3, "s32", (1,))
    gt = g.op("greater", u, s, out=("u8", (1,)), operand_type=type_term("s16"))
    eq = g.op("equal", f, i, out=("u8", (1,)), operand_type=type_term("f32"))
    r1, r2 = run_graph(g, [gt, eq], np.array([200], np.uint8), np.array([-1], np.int8),
                       np.array([1.5], F32), np.array([1], np.int32))
    assert list(r1) == [1] and list(r2) == [0]


@pytest.mark.parametrize("op", sorted(REDUCTION_NP))
@pytest.mark.parametrize("axes,keep", [(None, False), ([1], False), ([0], True), ([0, 1], True)])
def test_reduction_matches_numpy(op: str, axes: list[int] | None, keep: bool) -> None:
    expected = REDUCTION_NP[op](X.astype(np.float64), axis=None if axes is None else tuple(axes),
                                keepdims=keep)
    g = GraphBuilder()
    x = g.param(0, "f32", X.shape)
    node = g.op(op, x, axes=axes, keep_axes=keep, out=("f32", np.shape(expected)))
    (result,) = run_graph(g, [node], X)
    np.testing.assert_allclose(result, expected, rtol=2e-6)


def test_sum_of_u8_in_u64_does_not_overflow() -> None:
    g = GraphBuilder()
    x = g.param(0, "u8", (3,))
    node = g.op("sum", x, axes=None, keep_axes=False, out=("u64", ()))
    (result,) = run_graph(g, [node], np.array([200, 200, 200], np.uint8))
    assert result.dtype == np.uint64 and result == 600


def test_parameter_constant_tensor_and_iota_leaves() -> None:
    g = GraphBuilder()
    p = g.param(0, "s64", (2,))
    c = g.const(2.5, "f64", (2, 2))
    nan, inf, ninf = (g.const(v, "f32", (1,)) for v in ("nan", "infinity", "neg_infinity"))
    data = np.array([[1, 2, 3], [4, 5, 6]], np.int16)
    t = g.add("tensor", [], {"data": data.tobytes()}, ("s16", (2, 3)))
    bf = np.array([1.5, -2.0], ml_dtypes.bfloat16)
    tb = g.add("tensor", [], {"data": bf.tobytes()}, ("bf16", (2,)))
    flat = g.add("iota", [], {"axis": None}, ("s32", (2, 3)))
    along = g.add("iota", [], {"axis": 1}, ("f32", (2, 3)))
    pv = np.array([2**40, -3], np.int64)
    r = run_graph(g, [p, c, nan, inf, ninf, t, tb, flat, along], pv)
    np.testing.assert_array_equal(r[0], pv)
    assert r[0].dtype == np.int64
    np.testing.assert_array_equal(r[1], np.full((2, 2), 2.5))
    assert np.isnan(r[2][0]) and r[3][0] == np.inf and r[4][0] == -np.inf
    np.testing.assert_array_equal(r[5], data)
    assert r[6].dtype == ml_dtypes.bfloat16 and list(r[6].astype(F32)) == [1.5, -2.0]
    np.testing.assert_array_equal(r[7], np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(r[8], [[0, 1, 2], [0, 1, 2]])


def test_select_picks_on_true_where_pred_is_nonzero() -> None:
    g = GraphBuilder()
    pred = g.param(0, "u8", (3,))
    a, b = g.param(1, "f32", (3,)), g.const(-1.0, "f32")
    (result,) = run_graph(g, [g.op("select", pred, a, b, out=("f32", (3,)))],
                          np.array([1, 0, 7], np.uint8), np.array([1, 2, 3], F32))
    np.testing.assert_array_equal(result, [1, -1, 3])


def test_as_type_truncates_floats_toward_zero() -> None:
    g = GraphBuilder()
    x = g.param(0, "f32", (4,))
    (result,) = run_graph(g, [g.op("as_type", x, out=("s32", (4,)))],
                          np.array([2.7, -2.7, 0.5, -0.5], F32))
    assert result.dtype == np.int32 and list(result) == [2, -2, 0, 0]


def test_shape_ops_match_numpy() -> None:
    a = np.arange(24, dtype=F32).reshape(2, 3, 4)
    g = GraphBuilder()
    x = g.param(0, "f32", a.shape)
    reshape = g.op("reshape", x, out=("f32", (6, 4)))
    transpose = g.op("transpose", x, axes=[2, 0, 1], out=("f32", (4, 2, 3)))
    v = g.param(1, "f32", (3,))
    broadcast = g.op("broadcast", v, axes=[1], out=("f32", (2, 3, 4)))
    sl = g.op("slice", x, start_indices=[0, 1, 0], lengths=[2, 2, 4], strides=[1, 1, 2],
              out=("f32", (2, 2, 2)))
    w = g.param(2, "s32", (2, 1, 4))
    concat = g.op("concatenate", x, w, axis=1, out=("f32", (2, 4, 4)))
    vv = np.array([10, 20, 30], F32)
    wv = np.full((2, 1, 4), 7, np.int32)
    r = run_graph(g, [reshape, transpose, broadcast, sl, concat], a, vv, wv)
    np.testing.assert_array_equal(r[0], a.reshape(6, 4))
    np.testing.assert_array_equal(r[1], a.transpose(2, 0, 1))
    np.testing.assert_array_equal(r[2], np.broadcast_to(vv[None, :, None], (2, 3, 4)))
    np.testing.assert_array_equal(r[3], a[0:2, 1:3, 0:4:2])
    np.testing.assert_array_equal(r[4], np.concatenate([a, wv.astype(F32)], axis=1))


def test_slice_output_dim_is_ceil_of_length_over_stride() -> None:
    a = np.arange(10, dtype=F32)
    g = GraphBuilder()
    x = g.param(0, "f32", (10,))
    sl = g.op("slice", x, start_indices=[1], lengths=[7], strides=[3], out=("f32", (3,)))
    np.testing.assert_array_equal(run_graph(g, [sl], a)[0], a[1:8:3])


def test_dot_is_dot_general_with_batch_then_free_axes() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 2, 3)).astype(F32)  # batch 4, free 2, contract 3
    b = rng.standard_normal((3, 4, 5)).astype(F32)  # contract 3, batch 4, free 5
    m, n = rng.standard_normal((2, 3)), rng.standard_normal((3, 2))
    g = GraphBuilder()
    x, y = g.param(0, "f32", a.shape), g.param(1, "f32", b.shape)
    batched = g.op("dot", x, y, contract_axes=([2], [0]), batch_axes=([0], [1]),
                   out=("f32", (4, 2, 5)))
    p, q = g.param(2, "f64", (2, 3)), g.param(3, "f64", (3, 2))
    matmul = g.op("dot", p, q, contract_axes=([1], [0]), batch_axes=([], []),
                  out=("f64", (2, 2)))
    r1, r2 = run_graph(g, [batched, matmul], a, b, m, n)
    np.testing.assert_allclose(r1, np.einsum("bij,jbk->bik", a, b), rtol=1e-5)
    np.testing.assert_allclose(r2, m @ n, rtol=1e-12)


def test_elem_picks_from_a_tuple_valued_node() -> None:
    g = GraphBuilder()
    x, z = g.param(0), g.param(1)
    gr = g.add("grad", [g.op("multiply", x, z), x, z], {}, [("f32", ()), ("f32", ())])
    first = g.op("elem", gr, index=0, out=("f32", ()))
    second = g.op("elem", gr, index=1, out=("f32", ()))
    r = run_graph(g, [first, second], F32(2.0), F32(5.0))
    assert r == [5.0, 2.0]


def test_results_are_cast_to_the_declared_type() -> None:
    g = GraphBuilder()
    x = g.param(0, "f64", (2,))
    node = g.op("multiply", x, x, out=("f16", (2,)))
    (result,) = run_graph(g, [node], np.array([1.5, 3.0]))
    assert result.dtype == np.float16 and list(result) == [2.25, 9.0]


def test_a_shape_other_than_the_declared_one_is_a_shape_error() -> None:
    g = GraphBuilder()
    x = g.param(0, "f32", (2, 3))
    node = g.op("sum", x, axes=[1], keep_axes=False, out=("f32", (3,)))
    with pytest.raises(ShapeError, match=r"node 1 \(sum\).*\(2,\).*\(3,\)"):
        run_graph(g, [node], np.zeros((2, 3), F32))


def test_graph_runs_without_jit_too() -> None:
    g = GraphBuilder()
    x = g.param(0, "f32", (2,))
    (r,) = run_graph(g, [g.op("exp", x)], np.zeros(2, F32), jit=False)
    np.testing.assert_array_equal(r, [1, 1])
