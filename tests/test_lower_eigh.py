"""``:eigh`` (PROTOCOL.md 4.1): the eigendecomposition of Hermitian matrices against
``numpy.linalg.eigh``, in Nx 0.7.2's order (decreasing ``|eigenvalue|``, a diagonal matrix in
its diagonal's order) with each eigenvector's entry of largest magnitude real and positive;
output types (integer, half precision, complex), batches and vectorized nodes, validation, and
``jax.grad`` against central finite differences."""

from __future__ import annotations

from typing import Any

import jax
import ml_dtypes
import numpy as np
import pytest

from py_backend.graph import GraphError, decode_graph
from py_backend.lower import lower
from py_backend.nxtypes import NxType, to_dtype

from .helpers import GraphBuilder, run_graph

TESTED = {"eigh"}

RNG = np.random.default_rng(5)
SPD = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])


def eigh_graph(in_type: str, shape: tuple[int, ...], out_type: str | None = None,
               opts: dict[str, Any] | None = None) -> tuple[GraphBuilder, list[int]]:
    g = GraphBuilder()
    x = g.param(0, in_type, shape)
    out_type = out_type or in_type
    node = g.add("eigh", [x], opts, [(out_type, shape[:-1]), (out_type, shape)])
    outs = [g.op("elem", node, index=i, out=g.out_of(node)[i]) for i in range(2)]
    return g, outs


def eigh(a: np.ndarray, in_type: str = "f64", out_type: str | None = None) -> list[np.ndarray]:
    g, outs = eigh_graph(in_type, a.shape, out_type)
    return run_graph(g, outs, a)


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


def test_eigenvalues_decrease_in_magnitude_and_eigenvectors_have_a_positive_largest_entry(
) -> None:
    a = np.array([[-4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, -2.0]])  # indefinite
    w, v = eigh(a)
    ref_w, ref_v = reference(a)
    assert np.all(np.diff(np.abs(w)) < 0)
    np.testing.assert_allclose(w, ref_w, rtol=1e-12)
    np.testing.assert_allclose(v, ref_v, atol=1e-12)
    np.testing.assert_allclose(v * w @ v.T, a, atol=1e-12)
    assert np.all(pivots(v) > 0)


def test_equal_magnitudes_keep_increasing_order_and_an_exact_tie_picks_the_first_entry() -> None:
    # eigenvalues -1 and 1; each eigenvector has two entries of magnitude 1/sqrt(2)
    w, v = eigh(np.array([[0.0, 1.0], [1.0, 0.0]]), "f32")
    np.testing.assert_allclose(w, [-1.0, 1.0], atol=1e-6)
    s = np.float32(np.sqrt(0.5))
    np.testing.assert_allclose(v, [[s, s], [-s, s]], atol=1e-6)
    # [[2, 1], [1, 2]]: Nx 0.7.2 prints [3, 1] and columns [0.71, 0.70], [0.70, -0.71]
    w, v = eigh(np.array([[2.0, 1.0], [1.0, 2.0]]), "f32")
    np.testing.assert_allclose(w, [3.0, 1.0], atol=1e-6)
    np.testing.assert_allclose(v, [[s, s], [s, -s]], atol=1e-6)


def test_a_diagonal_matrix_keeps_its_order_with_the_identity_as_eigenvectors() -> None:
    w, v = eigh(np.diag([3.0, -5.0, 1.0, 1.0]))
    np.testing.assert_array_equal(w, [3.0, -5.0, 1.0, 1.0])
    np.testing.assert_array_equal(v, np.eye(4))
    assert not np.any(np.signbit(v)), "no -0.0 entries"
    # one entry off the diagonal: sorted by magnitude again
    a = np.diag([1.0, 2.0, 4.0])
    a[0, 1] = a[1, 0] = 0.5
    w, _ = eigh(a)
    np.testing.assert_allclose(w, [4.0, *sorted(np.linalg.eigvalsh(a[:2, :2]), reverse=True)],
                               rtol=1e-12)


def test_a_batch_is_decomposed_matrix_by_matrix() -> None:
    b = RNG.standard_normal((2, 3, 4, 4))
    a = b + np.swapaxes(b, -1, -2)
    a[1, 2] = np.diag([1.0, 4.0, 2.0, 3.0])
    w, v = eigh(a)
    assert w.shape == (2, 3, 4) and v.shape == (2, 3, 4, 4)
    for idx in np.ndindex(2, 3):
        if idx == (1, 2):
            np.testing.assert_array_equal(w[idx], [1.0, 4.0, 2.0, 3.0])
            continue
        ref_w, ref_v = reference(a[idx])
        np.testing.assert_allclose(w[idx], ref_w, rtol=1e-10)
        np.testing.assert_allclose(v[idx], ref_v, atol=1e-10)


def test_only_the_hermitian_part_is_read() -> None:
    a = np.array([[2.0, 3.0], [-1.0, 2.0]])  # not symmetric: its symmetric part is [[2, 1], [1, 2]]
    w, _ = eigh(a)
    np.testing.assert_allclose(w, [3.0, 1.0], rtol=1e-12)


@pytest.mark.parametrize(
    ("in_type", "in_dtype", "out_type", "tol"),
    [("s64", np.int64, "f32", 1e-6), ("u8", np.uint8, "f32", 1e-6),
     ("f16", np.float16, "f16", 2e-3), ("bf16", ml_dtypes.bfloat16, "bf16", 1.6e-2),
     ("f32", np.float32, "f32", 1e-6)],
)
def test_output_types_follow_the_declared_out(in_type: str, in_dtype: Any, out_type: str,
                                              tol: float) -> None:
    """Integers give f32 (Nx declares it); half precision is computed in f32, rounded back."""
    a = np.array([[4, 1, 0], [1, 3, 0], [0, 0, 2]])
    g, outs = eigh_graph(in_type, a.shape, out_type)
    w, v = run_graph(g, outs, a.astype(in_dtype))
    out_dtype = to_dtype(NxType(out_type[:-2], int(out_type[-2:])))
    assert w.dtype == out_dtype and v.dtype == out_dtype
    ref_w, ref_v = reference(a.astype(np.float64))
    np.testing.assert_allclose(w.astype(np.float64), ref_w, rtol=tol)
    np.testing.assert_allclose(v.astype(np.float64), ref_v, atol=2 * tol)


def test_complex_hermitian_eigenvalues_are_real_and_the_largest_entry_real_positive() -> None:
    a = np.array([[1, 2j, 2], [-2j, -3, 2j], [2, -2j, 1]])  # Nx's own test: eigenvalues -5, 3, 1
    w, v = eigh(a.astype(np.complex128), "c128")
    assert w.dtype == np.complex128
    np.testing.assert_allclose(w, [-5.0, 3.0, 1.0], atol=1e-12)
    np.testing.assert_allclose(v @ np.diag(w) @ v.conj().T, a, atol=1e-12)
    np.testing.assert_allclose(v.conj().T @ v, np.eye(3), atol=1e-12)
    # the third eigenvector's entries all have magnitude 1/sqrt(3): the first is the pivot
    largest = pivots(v)
    np.testing.assert_allclose(largest.imag, 0.0, atol=1e-15)
    assert np.all(largest.real > 0)
    np.testing.assert_allclose(v[:, 2], np.array([1, -1j, -1]) / np.sqrt(3), atol=1e-12)


def test_a_vectorized_node_decomposes_each_entry() -> None:
    a = np.stack([SPD, np.diag([1.0, 3.0, 2.0])])
    g, outs = eigh_graph("f64", a.shape, opts={"vectorized": 1, "vectorized_inputs": [True]})
    w, v = run_graph(g, outs, a)
    np.testing.assert_allclose(w[0], reference(SPD)[0], rtol=1e-12)
    np.testing.assert_allclose(v[0], reference(SPD)[1], atol=1e-12)
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
    node = g.add("eigh", [g.param(0, "f32", shape)], {}, outs)
    with pytest.raises(GraphError, match=message):
        decode_graph(g.binary([node]))


def _numeric_grad(f: Any, x0: np.ndarray, h: float = 1e-6) -> np.ndarray:
    numeric = np.zeros_like(x0)
    for idx in np.ndindex(*x0.shape):
        e = np.zeros_like(x0)
        e[idx] = h
        numeric[idx] = (float(f(x0 + e)) - float(f(x0 - e))) / (2 * h)
    return numeric


def test_gradients_of_eigenvalues_and_eigenvectors_match_finite_differences() -> None:
    g, (w, v) = eigh_graph("f64", (3, 3))
    fn = lower(decode_graph(g.binary([w, v])))
    cw = np.array([1.0, -0.5, 2.0])
    cv = np.sin(np.arange(9.0)).reshape(3, 3)

    def f(x: Any) -> Any:
        vals, vecs = fn(x)
        return (vals * cw).sum() + (vecs * cv).sum() + (vals**2).sum()

    x0 = SPD + np.array([[0.0, 0.1, -0.2], [0.3, 0.0, 0.05], [0.0, -0.1, 0.0]])
    np.testing.assert_allclose(np.asarray(jax.grad(f)(x0)), _numeric_grad(f, x0),
                               rtol=1e-6, atol=1e-8)

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

    x0 = np.diag([3.0, 1.0])
    got = np.asarray(jax.grad(f)(x0))
    np.testing.assert_allclose(got, _numeric_grad(f, x0), atol=1e-7)
    assert abs(got[0, 1] + got[1, 0]) > 0.1
