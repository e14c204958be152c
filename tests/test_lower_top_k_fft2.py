"""The wire ops top_k, fft2 and ifft2 (PROTOCOL.md section 4): what real Nx's optional nodes of
the same names lower to, as EXLA lowers them natively. References: a stable descending sort
(Nx's order, that of its fallback) and numpy.fft in complex128."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
import pytest

from py_backend.program import decode_graph, lower
from py_backend.wire_graph import GraphError

from .helpers import GraphBuilder, run_graph

TESTED = {"top_k", "fft2", "ifft2"}


def _top_k(g: GraphBuilder, x: int, k: int, type: str, shape: tuple[int, ...]) -> list[int]:
    out_shape = (*shape[:-1], k)
    node = g.add("top_k", [x], {"k": k}, [(type, out_shape), ("s64", out_shape)])
    return [g.op("elem", node, index=i, out=g.out_of(node)[i]) for i in range(2)]


def _stable_desc(a: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    # NaN first, then decreasing, ties (and -0.0 against 0.0) by increasing index
    keys = np.where(np.isnan(a), np.inf, a) if a.dtype.kind == "f" else a
    rank = np.where(np.isnan(a), 1, 0) if a.dtype.kind == "f" else np.zeros(a.shape, int)
    order = np.lexsort((-keys.astype(np.float64), -rank), axis=-1)[..., :k]
    return np.take_along_axis(a, order, axis=-1), order


@pytest.mark.parametrize("type,values", [
    ("f32", [[1.0, 3.0, 3.0, np.nan, 2.0, np.inf, -np.inf, 3.0],
             [-0.0, 0.0, -0.0, -1.0, 5.0, 5.0, np.nan, np.nan]]),
    ("s32", [[2, 2, 1, 2, 0, -7, 9, 9], [0, 5, 5, -1, 3, 3, 3, 8]]),
    ("f64", np.random.default_rng(3).standard_normal((2, 8)).tolist()),
])
def test_top_k_is_a_stable_descending_sort_cut_at_k(type: str, values: Any) -> None:
    a = np.array(values, dtype={"f32": np.float32, "s32": np.int32, "f64": np.float64}[type])
    for k in (1, 3, 8):
        g = GraphBuilder()
        x = g.param(0, type, a.shape)
        got_values, got_indices = run_graph(g, _top_k(g, x, k, type, a.shape), a)
        want_values, want_indices = _stable_desc(a, k)
        assert got_indices.dtype == np.int64 and got_values.dtype == a.dtype
        np.testing.assert_array_equal(got_indices, want_indices)
        np.testing.assert_array_equal(got_values, want_values)
        # -0.0 stays -0.0: the values are the input's own
        np.testing.assert_array_equal(np.signbit(got_values), np.signbit(want_values))


def test_a_negative_nan_ranks_with_the_nans() -> None:
    a = np.array([1.0, -np.nan, 2.0, np.nan], np.float32)
    assert np.signbit(a[1])
    g = GraphBuilder()
    x = g.param(0, "f32", (4,))
    _, indices = run_graph(g, _top_k(g, x, 3, "f32", (4,)), a)
    np.testing.assert_array_equal(indices, [1, 3, 2])


def test_the_gradient_of_top_k_goes_to_the_chosen_entries() -> None:
    g = GraphBuilder()
    x = g.param(0, "f64", (2, 5))
    values, _ = _top_k(g, x, 2, "f64", (2, 5))
    total = g.op("sum", g.op("multiply", values, values), axes=None, keep_axes=False,
                 out=("f64", ()))
    fn = lower(decode_graph(g.binary([total])))
    a = np.array([[0.5, 3.0, -1.0, 2.0, 2.0], [1.0, 0.0, 4.0, -2.0, 1.5]])
    grad = np.asarray(jax.grad(lambda v: fn(v)[0])(a))
    want = np.zeros_like(a)
    want[0, [1, 3]] = 2 * a[0, [1, 3]]
    want[1, [2, 4]] = 2 * a[1, [2, 4]]
    np.testing.assert_allclose(grad, want)


@pytest.mark.parametrize("op,np_fn", [("fft2", np.fft.fft2), ("ifft2", np.fft.ifft2)])
@pytest.mark.parametrize("axes,lengths", [([1, 2], [3, 4]), ([0, 2], [4, 2]), ([2, 0], [5, 1])])
def test_fft2_over_two_axes_pads_or_truncates(op: str, np_fn: Any, axes: list[int],
                                              lengths: list[int]) -> None:
    rng = np.random.default_rng(11)
    a = rng.standard_normal((2, 3, 4))
    shape = list(a.shape)
    for axis, n in zip(axes, lengths, strict=True):
        shape[axis] = n
    g = GraphBuilder()
    x = g.param(0, "f64", a.shape)
    node = g.op(op, x, axes=axes, lengths=lengths, out=("c128", tuple(shape)))
    (got,) = run_graph(g, [node], a)
    assert got.dtype == np.complex128
    np.testing.assert_allclose(got, np_fn(a, s=lengths, axes=axes), atol=1e-12)


def test_fft2_of_c64_stays_c64() -> None:
    a = (np.arange(6).reshape(2, 3) + 1j).astype(np.complex64)
    g = GraphBuilder()
    x = g.param(0, "c64", (2, 3))
    node = g.op("fft2", x, axes=[0, 1], lengths=[2, 3], out=("c64", (2, 3)))
    (got,) = run_graph(g, [node], a)
    assert got.dtype == np.complex64
    np.testing.assert_allclose(got, np.fft.fft2(a), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "op,inputs,opts,out,message",
    [
        ("top_k", [("f32", (3,))], {"k": 4}, [("f32", (4,)), ("s64", (4,))], "k must be"),
        ("top_k", [("f32", (3,))], {"k": 2}, [("f32", (2,)), ("f32", (2,))], "integer type"),
        ("top_k", [("f32", ())], {"k": 1}, [("f32", ()), ("s64", ())], "at least one axis"),
        ("top_k", [("c64", (3,))], {"k": 1}, [("c64", (1,)), ("s64", (1,))], "must be real"),
        ("top_k", [("f32", (3,))], {"k": 1}, ("f32", (1,)), "list of 2"),
        ("fft2", [("f32", (2, 3))], {"axes": [0, 1], "lengths": [2, 3]}, ("f32", (2, 3)),
         "complex"),
        ("fft2", [("f32", (2, 3))], {"axes": [1, 1], "lengths": [2, 3]}, ("c64", (2, 3)),
         "axes"),
        ("fft2", [("f32", (2, 3))], {"axes": [0], "lengths": [2]}, ("c64", (2, 3)),
         "two entries"),
        ("ifft2", [("f32", (2, 3))], {"axes": [0, 1], "lengths": [0, 3]}, ("c64", (0, 3)),
         "positive"),
        ("ifft2", [("f32", (2, 3))], {"axes": [0, 1], "lengths": [4, 3]}, ("c64", (2, 3)),
         "out shape"),
    ],
)
def test_invalid_nodes_are_graph_errors(op: str, inputs: list[Any], opts: dict[str, Any],
                                        out: Any, message: str) -> None:
    g = GraphBuilder()
    ids = [g.param(i, t, s) for i, (t, s) in enumerate(inputs)]
    node = g.add(op, ids, opts, out)
    with pytest.raises(GraphError, match=message):
        decode_graph(g.binary([node]))
