"""``:fft`` and ``:ifft`` (PROTOCOL.md 4.1, issue #3): the lowering against ``numpy.fft``, the
complex output types, ``length`` padding/truncating the last axis, validation errors, and
``jax.grad`` of real-valued functions of the transforms against central finite differences."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from py_backend.program import decode_graph, lower
from py_backend.wire_graph import GraphError

from .helpers import GraphBuilder, central, run_graph

TESTED = {"fft", "ifft"}

RNG = np.random.default_rng(11)


def transform(op: str, x: np.ndarray, in_type: str, out_type: str, length: int) -> np.ndarray:
    g = GraphBuilder()
    p = g.param(0, in_type, x.shape)
    out_shape = (*x.shape[:-1], length)
    node = g.op(op, p, length=length, out=(out_type, out_shape))
    (result,) = run_graph(g, [node], x)
    return result


NUMPY = {"fft": np.fft.fft, "ifft": np.fft.ifft}


@pytest.mark.parametrize("op", sorted(TESTED))
@pytest.mark.parametrize("length", [3, 5, 8])  # shorter than, equal to, longer than the axis
def test_transform_of_f64_matches_numpy_with_padding_and_truncation(op: str, length: int) -> None:
    x = RNG.normal(size=(2, 3, 5))
    got = transform(op, x, "f64", "c128", length)
    assert got.dtype == np.complex128 and got.shape == (2, 3, length)
    np.testing.assert_allclose(got, NUMPY[op](x, n=length, axis=-1), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("op", sorted(TESTED))
def test_complex128_input_matches_numpy(op: str) -> None:
    x = RNG.normal(size=(4, 6)) + 1j * RNG.normal(size=(4, 6))
    got = transform(op, x, "c128", "c128", 6)
    np.testing.assert_allclose(got, NUMPY[op](x, axis=-1), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    ("in_type", "x"),
    [
        ("s64", np.array([1, 1, 0, 0], np.int64)),
        ("u8", np.array([1, 1, 0, 0], np.uint8)),
        ("f32", np.array([1.0, 1.0, 0.0, 0.0], np.float32)),
        ("f16", np.array([1.0, 1.0, 0.0, 0.0], np.float16)),
        ("c64", np.array([1, 1, 0, 0], np.complex64)),
    ],
)
def test_inputs_other_than_f64_are_transformed_in_complex64(in_type: str, x: np.ndarray) -> None:
    got = transform("fft", x, in_type, "c64", 4)
    assert got.dtype == np.complex64
    np.testing.assert_array_equal(got, [2, 1 - 1j, 0, 1 + 1j])


def test_ifft_inverts_fft_and_single_element_axes_pass_through() -> None:
    x = RNG.normal(size=(3, 7)) + 1j * RNG.normal(size=(3, 7))
    g = GraphBuilder()
    p = g.param(0, "c128", (3, 7))
    forward = g.op("fft", p, length=7)
    back = g.op("ifft", forward, length=7)
    single = g.op("fft", g.param(1, "c128", (3, 1)), length=1)
    got, same = run_graph(g, [back, single], x, x[:, :1])
    np.testing.assert_allclose(got, x, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(same, x[:, :1])


def test_eager_run_without_jit_gives_the_same_values() -> None:
    x = RNG.normal(size=(5,)).astype(np.float32)
    g = GraphBuilder()
    node = g.op("fft", g.param(0, "f32", (5,)), length=4, out=("c64", (4,)))
    (jitted,) = run_graph(g, [node], x)
    (eager,) = run_graph(g, [node], x, jit=False)
    np.testing.assert_allclose(jitted, np.fft.fft(x[:4]), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(jitted, eager)


def _grad_graph(op: str, length: int, power: bool) -> Any:
    """``sum(|op(x)|^2)`` (``power``) or ``sum(real(op(x)) * w)`` as a ``:grad`` graph in f64."""
    g = GraphBuilder()
    x = g.param(0, "f64", (2, 5))
    f = g.op(op, x, length=length, out=("c128", (2, length)))
    if power:
        a = g.op("abs", f, out=("f64", (2, length)))
        sq = g.op("multiply", a, a)
        y = g.op("sum", sq, axes=None, keep_axes=False, out=("f64", ()))
    else:
        w = g.param(1, "f64", (2, length))
        r = g.op("real", f, out=("f64", (2, length)))
        y = g.op("sum", g.op("multiply", r, w), axes=None, keep_axes=False, out=("f64", ()))
    grad = g.op("grad", y, x, out=[("f64", (2, 5))])
    dx = g.op("elem", grad, index=0, out=("f64", (2, 5)))
    return g, y, dx


@pytest.mark.parametrize("op", sorted(TESTED))
@pytest.mark.parametrize("length", [3, 5, 8])
@pytest.mark.parametrize("power", [True, False])
def test_grad_through_the_transform_matches_finite_differences(
    op: str, length: int, power: bool
) -> None:
    g, y, dx = _grad_graph(op, length, power)
    x = RNG.normal(size=(2, 5))
    w = RNG.normal(size=(2, length))
    args = [x] if power else [x, w]
    fn = jax.jit(lower(decode_graph(g.binary([y, dx]))))

    def value(v: np.ndarray) -> float:
        return float(fn(v, *args[1:])[0])

    got = np.asarray(fn(*args)[1])
    np.testing.assert_allclose(got, central(value, x), rtol=1e-6, atol=1e-6)


def test_grad_of_power_matches_parseval() -> None:
    # sum |fft(x)|^2 = n * sum |x|^2 for the full-length transform: the gradient is 2 n x
    g, _, dx = _grad_graph("fft", 5, True)
    x = RNG.normal(size=(2, 5))
    (got,) = run_graph(g, [dx], x)
    np.testing.assert_allclose(got, 10 * x, rtol=1e-12)


def _graph(op: str = "fft", in_shape: tuple[int, ...] = (4,), in_type: str = "f32",
           out: Any = ("c64", (4,)), length: Any = 4) -> bytes:
    g = GraphBuilder()
    p = g.param(0, in_type, in_shape)
    opts = {} if length is None else {"length": length}
    node = g.add(op, [p], opts, out)
    return g.binary([node])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"out": ("f32", (4,))}, r"out type must be complex"),
        ({"op": "ifft", "out": ("f64", (4,))}, r"out type must be complex"),
        ({"in_shape": (), "out": ("c64", (4,))}, r"at least one axis"),
        ({"length": 0, "out": ("c64", (0,))}, r"length must be a positive integer"),
        ({"length": -2}, r"length must be a positive integer"),
        ({"length": 4, "out": ("c64", (5,))}, r"last axis replaced by length 4"),
        ({"in_shape": (2, 4), "out": ("c64", (4,))}, r"input shape \(2, 4\)"),
        ({"length": None}, r"length"),
        ({"length": 2.5}, r"length"),
        ({"out": [("c64", (4,))]}, r"out must be a tensor"),
    ],
)
def test_invalid_fourier_nodes_are_graph_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(GraphError, match=message):
        decode_graph(_graph(**kwargs))


def test_fft_of_a_float64_input_under_jit_keeps_complex128_precision() -> None:
    # exp(2 pi i k / 8) needs f64 twiddles: c64 would lose digits after the 7th
    x = np.cos(2 * np.pi * np.arange(8) / 8 * 3) + 1e-9 * np.arange(8)
    got = transform("fft", x, "f64", "c128", 8)
    np.testing.assert_allclose(got, np.fft.fft(x), rtol=0, atol=1e-13)
    assert jnp.asarray(got).dtype == jnp.complex128
