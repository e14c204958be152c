"""``:eigh`` (PROTOCOL.md 4.1): the eigendecomposition of Hermitian matrices as Nx 0.7.2's
binary backend computes it (its values, order and signs, checked against what real Nx printed),
against ``numpy.linalg.eigh`` where the iteration is run to convergence; output types
(integer, half precision, complex), batches and vectorized nodes, validation, and ``jax.grad``
against central finite differences."""

from __future__ import annotations

from typing import Any

import jax
import ml_dtypes
import numpy as np
import pytest

from py_backend import numerics
from py_backend.nxtypes import NxType, to_dtype
from py_backend.ops.linalg import _lapack_eigh
from py_backend.program import decode_graph, lower
from py_backend.wire_graph import GraphError

from .helpers import GraphBuilder, run_graph

TESTED = {"eigh"}

pytestmark = pytest.mark.skipif(not numerics.exact(), reason="the suite runs in mode nx")

RNG = np.random.default_rng(5)
SPD = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])
# Nx.LinAlg.eigh's defaults
NX_DEFAULTS = {"eps": 1.0e-4, "max_iter": 1000}
# a tolerance that leaves Nx's iteration within about 1e-7 of the exact decomposition (much
# smaller ones do not help: the reflections then lose accuracy, in Nx as here)
CONVERGED = {"eps": 1.0e-8, "max_iter": 10_000}


def eigh_graph(in_type: str, shape: tuple[int, ...], out_type: str | None = None,
               opts: dict[str, Any] | None = None) -> tuple[GraphBuilder, list[int]]:
    g = GraphBuilder()
    x = g.param(0, in_type, shape)
    out_type = out_type or in_type
    opts = {**CONVERGED, **(opts or {})}
    node = g.add("eigh", [x], opts, [(out_type, shape[:-1]), (out_type, shape)])
    outs = [g.op("elem", node, index=i, out=g.out_of(node)[i]) for i in range(2)]
    return g, outs


def eigh(a: np.ndarray, in_type: str = "f64", out_type: str | None = None,
         opts: dict[str, Any] | None = None) -> list[np.ndarray]:
    g, outs = eigh_graph(in_type, a.shape, out_type, opts)
    return run_graph(g, outs, a)


def same_up_to_sign(v: np.ndarray, ref: np.ndarray, atol: float) -> None:
    signs = np.where(np.sum(v * ref, axis=-2) < 0, -1.0, 1.0)
    np.testing.assert_allclose(v * signs[..., None, :], ref, atol=atol)


def pivots(v: np.ndarray, tol: float = 1e-6) -> np.ndarray:
    """Each column's entry of largest magnitude: the first one within ``tol`` of it."""
    magnitude = np.abs(v)
    rows = np.argmax(magnitude >= magnitude.max(axis=0) - tol, axis=0)
    return v[rows, np.arange(v.shape[1])]


def reference(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """NumPy's eigh (float64), reordered by decreasing |w| and with each column's largest
    entry positive: the convention the lowering promises, for matrices without ties."""
    w, v = np.linalg.eigh(a)
    order = np.argsort(-np.abs(w), kind="stable")
    w, v = w[order], v[:, order]
    return w, v * np.where(pivots(v) < 0, -1.0, 1.0)


def test_the_values_order_and_signs_of_real_nx() -> None:
    # Nx 0.7.2's own lin_alg_test matrix, f32, Nx's default options; real Nx printed these
    a = np.array([[5, -1, 0, 1, 2], [-1, 5, 0, 5, 3], [0, 0, 4, 7, 2], [1, 5, 7, 0, 9],
                  [2, 3, 2, 9, 2]], dtype=np.float32)
    w, v = eigh(a, "f32", opts=NX_DEFAULTS)
    np.testing.assert_array_equal(
        w, np.array([16.39409637451172, -9.7379150390625, 5.901451110839844, 4.33405876159668,
                     -0.891690731048584], np.float32))
    np.testing.assert_allclose(v[:, 0], [0.11221971362829208, 0.39525237679481506,
                                         0.4267124533653259, 0.6031083464622498,
                                         0.5341901183128357], rtol=1e-6)
    np.testing.assert_allclose(v[:, 2], [-0.8307172656059265, 0.5304110646247864,
                                         -0.13328218460083008, -0.006855522748082876,
                                         -0.10373926162719727], rtol=1e-5)
    # [[1, 2], [2, 1]]: the iteration stops where Nx's does, a rotation, not LAPACK's reflection
    w, v = eigh(np.array([[1.0, 2.0], [2.0, 1.0]], np.float32), "f32", opts=NX_DEFAULTS)
    np.testing.assert_array_equal(w, np.array([2.9999923706054688, -0.9999924898147583],
                                              np.float32))
    np.testing.assert_array_equal(v, np.array([[0.7080760598182678, -0.706136167049408],
                                               [0.706136167049408, 0.7080760598182678]],
                                              np.float32))
    # where Nx's iteration gives no decomposition, LAPACK's: [[0, 1], [1, 0]] never converges
    # there (Nx returns eigenvalues 0 and 0 and the identity); after a single iteration
    # (max_iter: 1) Nx's [2.6, -0.6] is not one either
    w, v = eigh(np.array([[0.0, 1.0], [1.0, 0.0]]), opts=NX_DEFAULTS)
    np.testing.assert_allclose(w, [-1.0, 1.0], atol=1e-12)
    np.testing.assert_allclose(v * w @ v.T, [[0.0, 1.0], [1.0, 0.0]], atol=1e-12)
    w, _ = eigh(np.array([[1.0, 2.0], [2.0, 1.0]]), opts={"eps": 1.0e-4, "max_iter": 1})
    np.testing.assert_allclose(w, [3.0, -1.0], atol=1e-12)


def test_a_node_without_the_options_gets_nxs_defaults() -> None:
    # eps and max_iter were added to protocol version 1: a client that sends %{} still works
    a = np.array([[2.0, 1.0], [1.0, 2.0]], np.float32)
    g = GraphBuilder()
    x = g.param(0, "f32", a.shape)
    node = g.add("eigh", [x], {}, [("f32", (2,)), ("f32", (2, 2))])
    outs = [g.op("elem", node, index=i, out=g.out_of(node)[i]) for i in range(2)]
    w, v = run_graph(g, outs, a)
    nx_w, nx_v = eigh(a, "f32", opts=NX_DEFAULTS)
    np.testing.assert_array_equal(w, nx_w)
    np.testing.assert_array_equal(v, nx_v)
    np.testing.assert_array_equal(w, np.array([2.9999661445617676, 1.0000338554382324],
                                              np.float32))


def test_converged_it_is_numpys_decomposition() -> None:
    a = np.array([[-4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, -2.0]])  # indefinite
    w, v = eigh(a)
    ref_w, ref_v = reference(a)
    np.testing.assert_allclose(w, ref_w, atol=1e-6)
    same_up_to_sign(v, ref_v, atol=1e-4)
    np.testing.assert_allclose(v * w @ v.T, a, atol=1e-4)


def test_a_diagonal_matrix_keeps_its_order_with_the_identity_as_eigenvectors() -> None:
    w, v = eigh(np.diag([3.0, -5.0, 1.0, 1.0]))
    np.testing.assert_array_equal(w, [3.0, -5.0, 1.0, 1.0])
    np.testing.assert_array_equal(v, np.eye(4))
    # a block that is already split keeps its place: real Nx printed these (eps 1.0e-8)
    a = np.diag([1.0, 2.0, 4.0])
    a[0, 1] = a[1, 0] = 0.5
    w, _ = eigh(a)
    np.testing.assert_array_equal(w, [2.207106779822983, 0.7928931374421898, 4.0])


def test_a_batch_is_decomposed_matrix_by_matrix() -> None:
    b = RNG.standard_normal((2, 3, 4, 4))
    a = b + np.swapaxes(b, -1, -2)
    a[1, 2] = np.diag([1.0, 4.0, 2.0, 3.0])
    w, v = eigh(a)
    assert w.shape == (2, 3, 4) and v.shape == (2, 3, 4, 4)
    np.testing.assert_array_equal(w[1, 2], [1.0, 4.0, 2.0, 3.0])
    for idx in [(0, 1), (1, 0)]:
        single = eigh(a[idx])
        # (a batched product rounds differently in the last bits, and the iteration's stopping
        # point can move with them)
        np.testing.assert_allclose(w[idx], single[0], atol=1e-6)
        same_up_to_sign(v[idx], single[1], atol=1e-4)
    for idx in np.ndindex(2, 3):
        np.testing.assert_allclose(np.sort(w[idx]), np.linalg.eigvalsh(a[idx]), atol=1e-5)


def test_only_the_hermitian_part_is_read() -> None:
    a = np.array([[2.0, 3.0], [-1.0, 2.0]])  # not symmetric: its symmetric part is [[2, 1], [1, 2]]
    w, _ = eigh(a)
    np.testing.assert_allclose(w, [3.0, 1.0], atol=1e-7)


_LAPACK = jax.jit(_lapack_eigh)


def lapack(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    w, v = _LAPACK(jax.numpy.asarray(a))
    return np.asarray(w), np.asarray(v)


def test_mode_native_is_lapack_in_nx_order_with_a_positive_largest_entry() -> None:
    a = np.array([[-4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, -2.0]])
    w, v = lapack(a)
    ref_w, ref_v = reference(a)
    assert np.all(np.diff(np.abs(w)) < 0)
    np.testing.assert_allclose(w, ref_w, rtol=1e-12)
    np.testing.assert_allclose(v, ref_v, atol=1e-12)
    assert np.all(pivots(v) > 0)
    # equal magnitudes keep increasing order; an exact tie picks the first entry
    w, v = lapack(np.array([[0.0, 1.0], [1.0, 0.0]], np.float32))
    s = np.float32(np.sqrt(0.5))
    np.testing.assert_allclose(w, [-1.0, 1.0], atol=1e-6)
    np.testing.assert_allclose(v, [[s, s], [-s, s]], atol=1e-6)
    # a diagonal matrix keeps its order, the identity as eigenvectors, no -0.0
    w, v = lapack(np.diag([3.0, -5.0, 1.0, 1.0]))
    np.testing.assert_array_equal(w, [3.0, -5.0, 1.0, 1.0])
    np.testing.assert_array_equal(v, np.eye(4))
    assert not np.any(np.signbit(v))
    # complex: the largest entry real and positive
    w, v = lapack(np.array([[1, 2j, 2], [-2j, -3, 2j], [2, -2j, 1]], np.complex128))
    np.testing.assert_allclose(w, [-5.0, 3.0, 1.0], atol=1e-12)
    np.testing.assert_allclose(v[:, 2], np.array([1, -1j, -1]) / np.sqrt(3), atol=1e-12)


@pytest.mark.parametrize(
    ("in_type", "in_dtype", "out_type", "tol"),
    [("s64", np.int64, "f32", 1e-6), ("u8", np.uint8, "f32", 1e-6),
     ("f16", np.float16, "f16", 2e-3), ("bf16", ml_dtypes.bfloat16, "bf16", 1.6e-2),
     ("f32", np.float32, "f32", 1e-6)],
)
def test_output_types_follow_the_declared_out(in_type: str, in_dtype: Any, out_type: str,
                                              tol: float) -> None:
    """Integers give f32 (Nx declares it); every type is computed in double, rounded back."""
    a = np.array([[4, 1, 0], [1, 3, 0], [0, 0, 2]])
    g, outs = eigh_graph(in_type, a.shape, out_type)
    w, v = run_graph(g, outs, a.astype(in_dtype))
    out_dtype = to_dtype(NxType(out_type[:-2], int(out_type[-2:])))
    assert w.dtype == out_dtype and v.dtype == out_dtype
    ref_w, ref_v = reference(a.astype(np.float64))
    np.testing.assert_allclose(w.astype(np.float64), ref_w, rtol=max(tol, 1e-6))
    same_up_to_sign(v.astype(np.float64), ref_v, atol=max(2 * tol, 1e-4))


def test_complex_hermitian_matrices_as_real_nx() -> None:
    # Nx's own test: eigenvalues exactly -5, 3, 1 in c64; real Nx printed these eigenvectors
    a = np.array([[1, 2j, 2], [-2j, -3, 2j], [2, -2j, 1]])
    w, v = eigh(a.astype(np.complex64), "c64", opts={"eps": 1.0e-4, "max_iter": 10_000})
    assert w.dtype == np.complex64
    np.testing.assert_array_equal(w, np.array([-5, 3, 1], np.complex64))
    nx = np.array([[-0.40822193026542664, 0.7071762084960938j, 0.5772558450698853],
                   [-0.8164960741996765j, 0, -0.5773979425430298j],
                   [0.40827566385269165, 0.7070373892784119j, -0.5773970484733582]])
    np.testing.assert_allclose(v, nx, atol=1e-7)
    w, v = eigh(a.astype(np.complex128), "c128")
    np.testing.assert_allclose(v @ np.diag(w) @ v.conj().T, a, atol=1e-7)
    np.testing.assert_allclose(v.conj().T @ v, np.eye(3), atol=1e-7)


def test_a_vectorized_node_decomposes_each_entry() -> None:
    a = np.stack([SPD, np.diag([1.0, 3.0, 2.0])])
    g, outs = eigh_graph("f64", a.shape, opts={"vectorized": 1, "vectorized_inputs": [True]})
    w, v = run_graph(g, outs, a)
    np.testing.assert_allclose(w[0], reference(SPD)[0], atol=1e-6)
    same_up_to_sign(v[0], reference(SPD)[1], atol=5e-4)
    np.testing.assert_array_equal(w[1], [1.0, 3.0, 2.0])


@pytest.mark.parametrize(
    ("shape", "outs", "message"),
    [
        ((2, 3), [("f32", (2,)), ("f32", (2, 3))], "square matrix"),
        ((3,), [("f32", ()), ("f32", (3,))], "square matrix"),
        ((2, 2), [("f32", (2, 2))], "list of 2"),
    ],
)
def test_invalid_eigh_nodes_are_graph_errors(shape: tuple[int, ...], outs: list[Any],
                                             message: str) -> None:
    g = GraphBuilder()
    node = g.add("eigh", [g.param(0, "f32", shape)], NX_DEFAULTS, outs)
    with pytest.raises(GraphError, match=message):
        decode_graph(g.binary([node]))


def _numeric_grad(f: Any, x0: np.ndarray, h: float = 1e-6) -> np.ndarray:
    numeric = np.zeros_like(x0)
    for idx in np.ndindex(*x0.shape):
        e = np.zeros_like(x0)
        e[idx] = h
        numeric[idx] = (float(f(x0 + e)) - float(f(x0 - e))) / (2 * h)
    return numeric


def test_gradients_are_lapacks_for_nxs_pairs_and_match_finite_differences() -> None:
    """Mode nx: the values are Nx's iteration's, the gradient that of LAPACK's decomposition
    for the same pairs (the same order, each eigenvector with Nx's sign); that gradient
    agrees with finite differences of LAPACK's decomposition."""
    g, (w, v) = eigh_graph("f64", (3, 3))
    fn = jax.jit(lower(decode_graph(g.binary([w, v]))))
    cw = np.array([1.0, -0.5, 2.0])
    cv = np.sin(np.arange(9.0)).reshape(3, 3)
    x0 = SPD + np.array([[0.0, 0.1, -0.2], [0.3, 0.0, 0.05], [0.0, -0.1, 0.0]])

    def f(x: Any) -> Any:
        vals, vecs = fn(x)
        return (vals * cw).sum() + (vecs * cv).sum() + (vals**2).sum()

    # LAPACK's pairs in Nx's order and signs at x0 (constants near x0: no ties there)
    nx_w, nx_v = (np.asarray(t) for t in fn(x0))
    ref_w, ref_v = lapack(x0)
    order = [int(np.argmin(np.abs(ref_w - value))) for value in nx_w]
    signs = np.sign(np.sum(ref_v[:, order] * nx_v, axis=0))

    @jax.jit
    def f_lapack(x: Any) -> Any:
        vals, vecs = _lapack_eigh(x)
        vals, vecs = vals[np.array(order)], vecs[:, np.array(order)] * signs
        return (vals * cw).sum() + (vecs * cv).sum() + (vals**2).sum()

    # (`vals**2` is differentiated at Nx's values, within 1e-7 of LAPACK's)
    got = np.asarray(jax.grad(f)(x0))
    np.testing.assert_allclose(got, np.asarray(jax.grad(f_lapack)(x0)), rtol=1e-6)
    np.testing.assert_allclose(got, _numeric_grad(f_lapack, x0), rtol=1e-6, atol=1e-7)

    def trace(x: Any) -> Any:
        return fn(x)[0].sum()

    np.testing.assert_allclose(np.asarray(jax.grad(trace)(SPD)), np.eye(3), atol=1e-12)


def test_the_gradient_of_a_zero_eigenvector_entry_is_not_lost() -> None:
    # at a diagonal matrix the eigenvectors are unit vectors (zero entries), which still move;
    # its diagonal decreases, so nearby matrices have the same order (no jump)
    g, (_, v) = eigh_graph("f64", (2, 2))
    fn = lower(decode_graph(g.binary([v])))

    def f(x: Any) -> Any:
        return fn(x)[0][1, 0]

    @jax.jit
    def f_lapack(x: Any) -> Any:
        return _lapack_eigh(x)[1][1, 0]

    x0 = np.diag([3.0, 1.0])
    got = np.asarray(jax.grad(f)(x0))
    np.testing.assert_allclose(got, _numeric_grad(f_lapack, x0), atol=1e-7)
    assert abs(got[0, 1] + got[1, 0]) > 0.1
