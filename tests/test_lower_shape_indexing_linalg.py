"""Shape, indexing, sorting and linear-algebra ops (PROTOCOL.md 4.1) against NumPy, plus their
validation and their gradients under jax.grad."""

from __future__ import annotations

from typing import Any

import jax
import ml_dtypes
import numpy as np
import pytest

from py_backend import numerics
from py_backend.program import decode_graph
from py_backend.wire_graph import GraphError

from .helpers import GraphBuilder, run_graph

TESTED = {
    "pad", "reverse", "dynamic_slice", "put_slice", "gather", "take", "take_along_axis",
    "indexed_add", "indexed_put", "sort", "argsort", "conv", "triangular_solve", "solve",
    "cholesky", "determinant", "qr", "lu", "svd",
}

F64 = np.float64
RNG = np.random.default_rng(7)


def one(g: GraphBuilder, node: int, *args: Any) -> np.ndarray:
    (result,) = run_graph(g, [node], *args)
    return result


def test_pad_with_low_high_interior_and_negative_padding() -> None:
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    g = GraphBuilder()
    x, v = g.param(0, "s32", (2, 3)), g.const(-1, "s32")
    node = g.op("pad", x, v, padding_config=[(1, 0, 1), (-1, 2, 0)], out=("s32", (4, 4)))
    expected = np.full((4, 4), -1, np.int32)
    expected[1::2, 0:2] = a[:, 1:]
    np.testing.assert_array_equal(one(g, node, a), expected)


def test_reverse_flips_the_given_axes() -> None:
    a = np.arange(6, dtype=F64).reshape(2, 3)
    g = GraphBuilder()
    x = g.param(0, "f64", (2, 3))
    np.testing.assert_array_equal(one(g, g.op("reverse", x, axes=[1]), a), a[:, ::-1])


def test_dynamic_slice_clamps_start_indices_like_nx() -> None:
    a = np.arange(12, dtype=F64).reshape(3, 4)
    g = GraphBuilder()
    x, i, j = g.param(0, "f64", (3, 4)), g.param(1, "s64"), g.param(2, "s32")
    node = g.op("dynamic_slice", x, i, j, lengths=[2, 2], out=("f64", (2, 2)))
    np.testing.assert_array_equal(one(g, node, a, np.int64(1), np.int32(1)), a[1:3, 1:3])
    # 5 -> 1 (3 - 2), -3 -> 0: the slice stays in bounds
    np.testing.assert_array_equal(one(g, node, a, np.int64(5), np.int32(-3)), a[1:3, 0:2])


def test_put_slice_writes_in_the_output_type_and_clamps() -> None:
    g = GraphBuilder()
    x, u, i = g.param(0, "s64", (5,)), g.param(1, "f32", (2,)), g.param(2, "s64")
    node = g.op("put_slice", x, u, i, out=("f32", (5,)))
    base = np.arange(5, dtype=np.int64)
    upd = np.array([0.5, 1.5], np.float32)
    np.testing.assert_array_equal(one(g, node, base, upd, np.int64(1)), [0, 0.5, 1.5, 3, 4])
    np.testing.assert_array_equal(one(g, node, base, upd, np.int64(9)), [0, 1, 2, 0.5, 1.5])


def test_gather_reads_elements_and_slices_along_axes() -> None:
    a = np.arange(12, dtype=F64).reshape(3, 4)
    idx = np.array([[2, 1], [0, 3]], np.int64)
    g = GraphBuilder()
    x, i = g.param(0, "f64", (3, 4)), g.param(1, "s64", (2, 2))
    elements = g.op("gather", x, i, axes=[0, 1], out=("f64", (2,)))
    swapped = g.op("gather", x, i, axes=[1, 0], out=("f64", (2,)))
    k = g.param(2, "s64", (2, 1))
    columns = g.op("gather", x, k, axes=[1], out=("f64", (2, 3)))
    r = run_graph(g, [elements, swapped, columns], a, idx, np.array([[3], [0]], np.int64))
    np.testing.assert_array_equal(r[0], [a[2, 1], a[0, 3]])
    np.testing.assert_array_equal(r[1], [a[1, 2], a[3 - 1, 0]])
    np.testing.assert_array_equal(r[2], [a[:, 3], a[:, 0]])


def test_take_and_take_along_axis_match_numpy() -> None:
    a = np.arange(12, dtype=F64).reshape(3, 4)
    g = GraphBuilder()
    x, i = g.param(0, "f64", (3, 4)), g.param(1, "s64", (2, 2))
    take = g.op("take", x, i, axis=1, out=("f64", (3, 2, 2)))
    j = g.param(2, "s64", (3, 2))
    along = g.op("take_along_axis", x, j, axis=1, out=("f64", (3, 2)))
    idx = np.array([[0, 3], [1, 1]], np.int64)
    jdx = np.array([[0, 1], [3, 2], [1, 1]], np.int64)
    r = run_graph(g, [take, along], a, idx, jdx)
    np.testing.assert_array_equal(r[0], np.take(a, idx, axis=1))
    np.testing.assert_array_equal(r[1], np.take_along_axis(a, jdx, axis=1))


def test_out_of_range_indices_are_clamped() -> None:
    a = np.array([10.0, 20.0, 30.0])
    g = GraphBuilder()
    x, i = g.param(0, "f64", (3,)), g.param(1, "s64", (2,))
    take = g.op("take", x, i, axis=0, out=("f64", (2,)))
    np.testing.assert_array_equal(one(g, take, a, np.array([-5, 7])), [10.0, 30.0])
    g = GraphBuilder()
    x, i = g.param(0, "f64", (3,)), g.param(1, "s64", (2, 1))
    gather = g.op("gather", x, i, axes=[0], out=("f64", (2,)))
    np.testing.assert_array_equal(one(g, gather, a, np.array([[-1], [3]])), [10.0, 30.0])


def test_indexed_add_accumulates_and_indexed_put_writes() -> None:
    a = np.zeros((2, 3), np.float32)
    g = GraphBuilder()
    x, i, u = g.param(0, "f32", (2, 3)), g.param(1, "s64", (3, 2)), g.param(2, "f32", (3,))
    add = g.op("indexed_add", x, i, u, axes=[0, 1], out=("f32", (2, 3)))
    put = g.op("indexed_put", x, i, u, axes=[0, 1], out=("f32", (2, 3)))
    k, rows = g.param(3, "s64", (1, 1)), g.param(4, "f32", (1, 2))
    along1 = g.op("indexed_add", x, k, rows, axes=[1], out=("f32", (2, 3)))
    idx = np.array([[0, 0], [1, 2], [0, 0]])
    upd = np.array([1.0, 2.0, 3.0], np.float32)
    r = run_graph(g, [add, put, along1], a, idx, upd, np.array([[2]]),
                  np.array([[5.0, 6.0]], np.float32))
    np.testing.assert_array_equal(r[0], [[4, 0, 0], [0, 0, 2]])
    assert r[1][1, 2] == 2 and r[1][0, 0] in (1, 3) and r[1].sum() == 2 + r[1][0, 0]
    np.testing.assert_array_equal(r[2], [[0, 0, 5], [0, 0, 6]])


def test_sort_and_argsort_both_directions_stable() -> None:
    a = np.array([[3, 1, 3, 2], [0, 0, 5, 0]], np.int64)
    g = GraphBuilder()
    x = g.param(0, "s64", (2, 4))
    asc = g.op("sort", x, axis=1, direction="asc")
    desc = g.op("sort", x, axis=1, direction="desc")
    arg_asc = g.op("argsort", x, axis=1, direction="asc", out=("s32", (2, 4)))
    arg_desc = g.op("argsort", x, axis=1, direction="desc", out=("s64", (2, 4)))
    r = run_graph(g, [asc, desc, arg_asc, arg_desc], a)
    np.testing.assert_array_equal(r[0], np.sort(a, axis=1))
    np.testing.assert_array_equal(r[1], np.sort(a, axis=1)[:, ::-1])
    assert r[2].dtype == np.int32
    np.testing.assert_array_equal(r[2], [[1, 3, 0, 2], [0, 1, 3, 2]])
    # equal elements keep their original order in descending order too
    np.testing.assert_array_equal(r[3], [[0, 2, 3, 1], [2, 0, 1, 3]])


def conv_reference(x: np.ndarray, k: np.ndarray, stride: int, pad: tuple[int, int]) -> np.ndarray:
    """Direct 1-D cross-correlation, (batch, in, width) x (out, in, width)."""
    x = np.pad(x, ((0, 0), (0, 0), pad))
    n, _, w = x.shape
    o, _, kw = k.shape
    out_w = (w - kw) // stride + 1
    out = np.zeros((n, o, out_w))
    for p in range(out_w):
        window = x[:, :, p * stride : p * stride + kw]
        out[:, :, p] = np.einsum("biw,oiw->bo", window, k)
    return out


CONV_OPTS: dict[str, Any] = {
    "strides": [1], "padding": [(0, 0)], "input_dilation": [1], "kernel_dilation": [1],
    "feature_group_size": 1, "batch_group_size": 1, "input_permutation": [0, 1, 2],
    "kernel_permutation": [0, 1, 2], "output_permutation": [0, 1, 2],
}


def test_conv_strides_padding_and_permutations() -> None:
    x = RNG.standard_normal((2, 3, 7))
    k = RNG.standard_normal((4, 3, 3))
    g = GraphBuilder()
    xp, kp = g.param(0, "f64", x.shape), g.param(1, "f64", k.shape)
    plain = g.op("conv", xp, kp, **{**CONV_OPTS, "strides": [2], "padding": [(1, 2)]},
                 out=("f64", (2, 4, 4)))
    # channels-last input and output: {batch, width, channels}
    xl = g.param(2, "f64", (2, 7, 3))
    last = g.op("conv", xl, kp, **{**CONV_OPTS, "input_permutation": [0, 2, 1],
                                   "output_permutation": [0, 2, 1]}, out=("f64", (2, 5, 4)))
    r = run_graph(g, [plain, last], x, k, x.transpose(0, 2, 1))
    np.testing.assert_allclose(r[0], conv_reference(x, k, 2, (1, 2)), rtol=1e-12)
    np.testing.assert_allclose(r[1], conv_reference(x, k, 1, (0, 0)).transpose(0, 2, 1),
                               rtol=1e-12)


def test_conv_output_permutation_is_the_layout_of_the_result() -> None:
    # [0, 3, 1, 2] is not its own inverse: an {n, h, w, c} input gives an {n, h, w, o}
    # result (Nx's meaning of :output_permutation, as of :input_permutation)
    x = RNG.standard_normal((1, 4, 5, 2))
    k = RNG.standard_normal((3, 2, 2, 2))
    g = GraphBuilder()
    xp, kp = g.param(0, "f64", x.shape), g.param(1, "f64", k.shape)
    opts = {**CONV_OPTS, "strides": [1, 1], "padding": [(0, 0), (0, 0)],
            "input_dilation": [1, 1], "kernel_dilation": [1, 1],
            "input_permutation": [0, 3, 1, 2], "kernel_permutation": [0, 1, 2, 3],
            "output_permutation": [0, 3, 1, 2]}
    out = g.op("conv", xp, kp, **opts, out=("f64", (1, 3, 4, 3)))
    (r,) = run_graph(g, [out], x, k)
    xc = x.transpose(0, 3, 1, 2)
    want = np.zeros((1, 3, 3, 4))
    for i in range(3):
        for j in range(4):
            want[:, :, i, j] = np.einsum("bchw,ochw->bo", xc[:, :, i : i + 2, j : j + 2], k)
    np.testing.assert_allclose(r, want.transpose(0, 2, 3, 1), rtol=1e-12)


def test_conv_feature_groups_and_dilations() -> None:
    x = RNG.standard_normal((1, 4, 6))
    k = RNG.standard_normal((2, 2, 2))  # 2 groups of 2 input channels, one output each
    g = GraphBuilder()
    xp, kp = g.param(0, "f64", x.shape), g.param(1, "f64", k.shape)
    grouped = g.op("conv", xp, kp, **{**CONV_OPTS, "feature_group_size": 2},
                   out=("f64", (1, 2, 5)))
    dilated = g.op("conv", xp, g.param(2, "f64", (1, 4, 2)),
                   **{**CONV_OPTS, "kernel_dilation": [2]}, out=("f64", (1, 1, 4)))
    k2 = RNG.standard_normal((1, 4, 2))
    r = run_graph(g, [grouped, dilated], x, k, k2)
    expected = np.concatenate([conv_reference(x[:, 0:2], k[0:1], 1, (0, 0)),
                               conv_reference(x[:, 2:4], k[1:2], 1, (0, 0))], axis=1)
    np.testing.assert_allclose(r[0], expected, rtol=1e-12)
    k2_dilated = np.zeros((1, 4, 3))
    k2_dilated[:, :, ::2] = k2
    np.testing.assert_allclose(r[1], conv_reference(x, k2_dilated, 1, (0, 0)), rtol=1e-12)


SPD = np.array([[4.0, 2.0, 0.4], [2.0, 5.0, 1.0], [0.4, 1.0, 3.0]])


def test_solvers_and_determinant_and_cholesky() -> None:
    lower = np.tril(SPD)
    b = np.array([1.0, -2.0, 0.5])
    bm = RNG.standard_normal((3, 2))
    g = GraphBuilder()
    a, v, m = g.param(0, "f64", (3, 3)), g.param(1, "f64", (3,)), g.param(2, "f64", (3, 2))
    ts = dict(lower=True, left_side=True, transform_a="none")
    tri = g.op("triangular_solve", a, v, **ts, out=("f64", (3,)))
    tri_t = g.op("triangular_solve", a, m, **{**ts, "transform_a": "transpose"},
                 out=("f64", (3, 2)))
    mr = g.param(3, "f64", (2, 3))
    tri_right = g.op("triangular_solve", a, mr, **{**ts, "left_side": False},
                     out=("f64", (2, 3)))
    sp = g.param(4, "f64", (3, 3))
    solve = g.op("solve", sp, m, out=("f64", (3, 2)))
    det = g.op("determinant", sp, out=("f64", ()))
    chol = g.op("cholesky", sp, out=("f64", (3, 3)))
    r = run_graph(g, [tri, tri_t, tri_right, solve, det, chol], lower, b, bm, bm.T, SPD)
    np.testing.assert_allclose(lower @ r[0], b, rtol=1e-12)
    np.testing.assert_allclose(lower.T @ r[1], bm, rtol=1e-12)
    np.testing.assert_allclose(r[2] @ lower, bm.T, rtol=1e-12)
    np.testing.assert_allclose(r[3], np.linalg.solve(SPD, bm), rtol=1e-12)
    np.testing.assert_allclose(r[4], np.linalg.det(SPD), rtol=1e-12)
    np.testing.assert_allclose(r[5], np.linalg.cholesky(SPD), rtol=1e-12)


@pytest.mark.parametrize("half, dtype, tol", [("f16", np.float16, 4e-3),
                                              ("bf16", ml_dtypes.bfloat16, 3e-2)])
def test_half_precision_solvers_run_in_f32_and_round_back(half: str, dtype: Any,
                                                          tol: float) -> None:
    # JAX's CPU solvers refuse f16/bf16: each op solves in f32 and rounds its outputs back
    a = SPD.astype(dtype)
    single = a.astype(np.float32)
    g = GraphBuilder()
    x, v = g.param(0, half, (3, 3)), g.param(1, half, (3,))
    outs = [
        g.op("solve", x, v, out=(half, (3,))),
        g.op("determinant", x, out=(half, ())),
        g.op("cholesky", x, out=(half, (3, 3))),
        g.op("triangular_solve", x, v, lower=True, left_side=True, transform_a="none",
             out=(half, (3,))),
    ]
    svd = g.add("svd", [x], {"full_matrices": True}, [(half, (3, 3)), (half, (3,)), (half, (3, 3))])
    outs.append(g.op("elem", svd, index=1, out=(half, (3,))))
    b = np.array([1.0, -2.0, 0.5], dtype=dtype)
    solved, det, chol, tri, s = run_graph(g, outs, a, b)
    for got in (solved, det, chol, tri, s):
        assert got.dtype == np.dtype(dtype)
    b32 = b.astype(np.float32)
    np.testing.assert_allclose(solved.astype(np.float32), np.linalg.solve(single, b32), rtol=tol)
    np.testing.assert_allclose(float(det), np.linalg.det(single), rtol=tol)
    np.testing.assert_allclose(chol.astype(np.float32), np.linalg.cholesky(single), rtol=tol,
                               atol=tol)
    np.testing.assert_allclose(tri.astype(np.float32),
                               np.linalg.solve(np.tril(single), b32), rtol=tol, atol=tol)
    np.testing.assert_allclose(s.astype(np.float32), np.linalg.svd(single)[1], rtol=tol)


def test_lu_of_a_batch_factors_each_matrix() -> None:
    # (jax.scipy.linalg.lu takes one matrix; a {2, 3, 3, 3} batch is mapped over)
    batch = RNG.standard_normal((2, 3, 3, 3))
    g = GraphBuilder()
    x = g.param(0, "f64", (2, 3, 3, 3))
    lu = g.add("lu", [x], {}, [("s64", (2, 3, 3, 3)), ("f64", (2, 3, 3, 3)), ("f64", (2, 3, 3, 3))])
    outs = [g.op("elem", lu, index=i, out=g.out_of(lu)[i]) for i in range(3)]
    p, lo, up = run_graph(g, outs, batch)
    np.testing.assert_allclose(p @ lo @ up, batch, atol=1e-12)
    assert np.all(np.triu(lo, 1) == 0) and np.all(np.tril(up, -1) == 0)


def test_qr_lu_svd_are_tuple_valued_and_reconstruct() -> None:
    m = RNG.standard_normal((4, 3))
    g = GraphBuilder()
    x, sq = g.param(0, "f64", (4, 3)), g.param(1, "f64", (3, 3))
    qr = g.add("qr", [x], {"mode": "reduced"}, [("f64", (4, 3)), ("f64", (3, 3))])
    lu = g.add("lu", [sq], {}, [("s64", (3, 3)), ("f64", (3, 3)), ("f64", (3, 3))])
    svd = g.add("svd", [x], {"full_matrices": True},
                [("f64", (4, 4)), ("f64", (3,)), ("f64", (3, 3))])
    outs = [g.op("elem", node, index=i, out=g.out_of(node)[i])
            for node, n in ((qr, 2), (lu, 3), (svd, 3)) for i in range(n)]
    q, r, p, lo, up, u, s, vt = run_graph(g, outs, m, SPD)
    np.testing.assert_allclose(q @ r, m, atol=1e-12)
    np.testing.assert_allclose(np.triu(r), r)
    assert p.dtype == np.int64
    np.testing.assert_allclose(p @ lo @ up, SPD, atol=1e-12)
    # (numerics mode nx: Nx 0.7.2's algorithm, whose eigh stops early, about 1e-4 from the
    # exact eigenvectors; Nx's own tests reconstruct within 1e-2; test_elixir/nx_svd_test.exs
    # compares it with real Nx's)
    tol = 1e-2 if numerics.exact() else 1e-12
    np.testing.assert_allclose(s, np.linalg.svd(m, compute_uv=False), rtol=tol / 10)
    np.testing.assert_allclose(u[:, :3] * s @ vt, m, atol=tol)
    np.testing.assert_allclose(u.T @ u, np.eye(4), atol=tol)


def test_gradients_flow_through_the_new_ops() -> None:
    """jax.grad of a graph mixing the new ops against central differences (f64)."""
    g = GraphBuilder()
    x = g.param(0, "f64", (3, 3))
    zero = g.const(0.0, "f64")
    padded = g.op("pad", x, zero, padding_config=[(1, 0, 1), (0, -1, 0)], out=("f64", (6, 2)))
    rev = g.op("reverse", padded, axes=[0])
    srt = g.op("sort", rev, axis=0, direction="desc")
    det = g.op("determinant", x, out=("f64", ()))
    inv_b = g.op("solve", x, g.const(1.0, "f64", (3,)), out=("f64", (3,)))
    total = g.op("add", g.op("sum", g.op("multiply", srt, srt), axes=None, keep_axes=False,
                             out=("f64", ())), det)
    total = g.op("add", total, g.op("sum", inv_b, axes=None, keep_axes=False, out=("f64", ())))
    from py_backend.program import lower

    fn = lower(decode_graph(g.binary([total])))

    def f(v: Any) -> Any:
        return fn(v)[0]

    x0 = SPD + np.diag([0.3, 0.1, 0.2])
    grad = np.asarray(jax.grad(f)(x0))
    h = 1e-6
    numeric = np.zeros_like(x0)
    for idx in np.ndindex(*x0.shape):
        e = np.zeros_like(x0)
        e[idx] = h
        numeric[idx] = (float(f(x0 + e)) - float(f(x0 - e))) / (2 * h)
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize(
    "op,inputs,opts,out,message",
    [
        ("pad", [("f32", (3,)), ("f32", (2,))], {"padding_config": [(0, 0, 0)]}, ("f32", (3,)),
         "pad value"),
        ("pad", [("f32", (3,)), ("f32", ())], {"padding_config": [(0, 0)]}, ("f32", (3,)),
         "3-tuples"),
        ("reverse", [("f32", (3,))], {"axes": [1]}, ("f32", (3,)), "axes"),
        ("dynamic_slice", [("f32", (3,)), ("f32", ())], {"lengths": [2]}, ("f32", (2,)),
         "integer type"),
        ("dynamic_slice", [("f32", (3,))], {"lengths": [2]}, ("f32", (2,)), "one start index"),
        ("gather", [("f32", (3, 4)), ("s64", (2, 3))], {"axes": [0, 1]}, ("f32", (2,)),
         "last dimension"),
        ("take", [("f32", (3,)), ("f32", (2,))], {"axis": 0}, ("f32", (2,)), "integer type"),
        ("sort", [("f32", (3,))], {"axis": 0, "direction": "up"}, ("f32", (3,)), ":asc, :desc"),
        ("cholesky", [("f32", (2, 3))], {}, ("f32", (2, 3)), "square matrix"),
        ("qr", [("f32", (2, 2))], {"mode": "reduced"}, ("f32", (2, 2)), "list of 2"),
    ],
)
def test_invalid_nodes_are_graph_errors(op: str, inputs: list[Any], opts: dict[str, Any],
                                        out: Any, message: str) -> None:
    g = GraphBuilder()
    ids = [g.param(i, t, s) for i, (t, s) in enumerate(inputs)]
    node = g.add(op, ids, opts, out)
    with pytest.raises(GraphError, match=message):
        decode_graph(g.binary([node]))
