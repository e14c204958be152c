"""Element-wise ops, reductions, scans and windows (PROTOCOL.md 4.1) against NumPy, plus
complex types, as_type saturation, validation and gradients under jax.grad."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from py_backend.channel import atom
from py_backend.nxtypes import NxType, to_dtype
from py_backend.program import decode_graph, lower
from py_backend.wire_graph import GraphError

from .helpers import GraphBuilder, central, run_graph

MORE_UNARY = (
    "cosh sinh acos asin atan acosh asinh atanh cbrt erf erfc erf_inv sign floor ceil round "
    "bitwise_not population_count count_leading_zeros conjugate"
).split()
MORE_BINARY = (
    "remainder quotient atan2 bitwise_and bitwise_or bitwise_xor left_shift right_shift"
).split()
TESTED = {
    *MORE_UNARY, *MORE_BINARY, "is_nan", "is_infinity", "logical_not", "logical_and", "logical_or",
    "logical_xor", "real", "imag", "bitcast", "clip", "all", "any", "argmax", "argmin",
    "cumulative_sum", "cumulative_product", "cumulative_max", "cumulative_min", "window_sum",
    "window_product", "window_max", "window_min", "window_scatter_max", "window_scatter_min",
}

F64 = np.float64
X = np.array([0.1, 0.35, 0.6, 0.85], F64)


def one(g: GraphBuilder, node: int, *args: Any) -> np.ndarray:
    (result,) = run_graph(g, [node], *args)
    return result


def unary(op: str, x: np.ndarray, out_type: str = "f64") -> np.ndarray:
    g = GraphBuilder()
    p = g.param(0, {np.dtype(F64): "f64", np.dtype(np.int64): "s64"}.get(x.dtype, "f32"), x.shape)
    return one(g, g.op(op, p, out=(out_type, x.shape)), x)


FLOAT_NP: dict[str, Callable[[Any], Any]] = {
    "cosh": np.cosh,
    "sinh": np.sinh,
    "acos": np.arccos,
    "asin": np.arcsin,
    "atan": np.arctan,
    "asinh": np.arcsinh,
    "atanh": np.arctanh,
    "cbrt": np.cbrt,
    "erf": np.vectorize(math.erf),
    "erfc": np.vectorize(math.erfc),
}


@pytest.mark.parametrize("op", sorted(FLOAT_NP))
def test_floating_unary_op_matches_numpy_in_f64(op: str) -> None:
    np.testing.assert_allclose(unary(op, X), FLOAT_NP[op](X), rtol=1e-14)


def test_acosh_erf_inv_and_integer_inputs_cast_to_float() -> None:
    np.testing.assert_allclose(unary("acosh", X + 1.5), np.arccosh(X + 1.5), rtol=1e-14)
    back = np.vectorize(math.erf)(unary("erf_inv", X))
    np.testing.assert_allclose(back, X, rtol=1e-13)
    # s64 input, f32 out: cast first (Nx's type), then computed in f32
    result = unary("cosh", np.array([0, 1, 2]), "f32")
    assert result.dtype == np.float32
    np.testing.assert_allclose(result, np.cosh([0.0, 1.0, 2.0]), rtol=1e-6)


def test_rounding_and_sign() -> None:
    x = np.array([-2.5, -1.5, -0.4, 0.0, 0.5, 1.5, 2.49])
    assert unary("floor", x).tolist() == [-3.0, -2.0, -1.0, 0.0, 0.0, 1.0, 2.0]
    assert unary("ceil", x).tolist() == [-2.0, -1.0, -0.0, 0.0, 1.0, 2.0, 3.0]
    assert unary("round", x).tolist() == [-3.0, -2.0, -0.0, 0.0, 1.0, 2.0, 2.0]  # half away
    assert unary("sign", x).tolist() == [-1.0, -1.0, -1.0, 0.0, 1.0, 1.0, 1.0]
    ints = np.array([-3, 0, 7])
    for op in ("floor", "ceil", "round"):
        assert unary(op, ints, "s64").tolist() == [-3, 0, 7]
    assert unary("sign", ints, "s64").tolist() == [-1, 0, 1]


@pytest.mark.parametrize("type_name,bits", [("u8", 8), ("s16", 16), ("u32", 32), ("s64", 64)])
def test_bit_counting_ops_per_width(type_name: str, bits: int) -> None:
    x = np.array([0, 1, 255], to_dtype(NxType(type_name[0], bits)))
    g = GraphBuilder()
    p = g.param(0, type_name, (3,))
    nodes = [g.op(op, p) for op in ("count_leading_zeros", "population_count", "bitwise_not")]
    clz, pop, inv = run_graph(g, nodes, x)
    assert clz.tolist() == [bits, bits - 1, bits - 8]
    assert pop.tolist() == [0, 1, 8]
    np.testing.assert_array_equal(inv, np.invert(x))


def binary(op: str, a: np.ndarray, b: np.ndarray, t: str, out: str | None = None) -> np.ndarray:
    g = GraphBuilder()
    x, y = g.param(0, t, a.shape), g.param(1, t, b.shape)
    shape = np.broadcast_shapes(a.shape, b.shape)
    return one(g, g.op(op, x, y, out=(out or t, shape)), a, b)


def test_integer_binary_ops_broadcast_and_match_numpy() -> None:
    a = np.array([[7, -7, 12], [-12, 5, 1]])
    b = np.array([2, -2, 5])
    np.testing.assert_array_equal(binary("remainder", a, b, "s64"), np.fmod(a, b))
    np.testing.assert_array_equal(binary("quotient", a, b, "s64"), np.trunc(a / b))
    for op, fn in [("bitwise_and", np.bitwise_and), ("bitwise_or", np.bitwise_or),
                   ("bitwise_xor", np.bitwise_xor)]:
        np.testing.assert_array_equal(binary(op, a, b, "s64"), fn(a, b))
    shifts = np.array([1, 2, 3])
    np.testing.assert_array_equal(binary("left_shift", a, shifts, "s64"), a << shifts)
    np.testing.assert_array_equal(binary("right_shift", a, shifts, "s64"), a >> shifts)
    u = np.array([0xF0, 0x81], np.uint8)
    assert binary("right_shift", u, np.array([4, 1], np.uint8), "u8").tolist() == [0x0F, 0x40]
    assert binary("left_shift", u, np.array([1, 1], np.uint8), "u8").tolist() == [0xE0, 0x02]


def test_float_binary_ops_match_numpy() -> None:
    a, b = np.array([5.5, -5.5, 1.0, -1.0]), np.array([2.0, 2.0, -1.0, -1.0])
    np.testing.assert_array_equal(binary("remainder", a, b, "f64"), np.fmod(a, b))
    np.testing.assert_allclose(binary("atan2", a, b, "f64"), np.arctan2(a, b), rtol=1e-15)


def test_predicates_and_logical_ops_give_u8() -> None:
    x = np.array([1.0, np.nan, np.inf, -np.inf], np.float32)
    assert unary("is_nan", x, "u8").tolist() == [0, 1, 0, 0]
    assert unary("is_infinity", x, "u8").tolist() == [0, 0, 1, 1]
    assert unary("logical_not", np.array([0.0, 2.0]), "u8").tolist() == [1, 0]
    a, b = np.array([[0.0, 0.5], [-2.0, 0.0]]), np.array([1.0, 0.0])
    for op, fn in [("logical_and", np.logical_and), ("logical_or", np.logical_or),
                   ("logical_xor", np.logical_xor)]:
        result = binary(op, a, b, "f64", "u8")
        assert result.dtype == np.uint8
        np.testing.assert_array_equal(result, fn(a, b))


def test_clip_bitcast() -> None:
    g = GraphBuilder()
    x = g.param(0, "f32", (4,))
    lo, hi = g.const(-0.5, "f32"), g.const(0.5, "f32")
    clip = g.op("clip", x, lo, hi)
    cast = g.op("bitcast", x, out=("u32", (4,)))
    values = np.array([-1.0, -0.25, 0.25, 2.0], np.float32)
    clipped, bits = run_graph(g, [clip, cast], values)
    assert clipped.tolist() == [-0.5, -0.25, 0.25, 0.5]
    np.testing.assert_array_equal(bits, values.view(np.uint32))


def complex_const(re: float | str, im: float | str) -> dict[str, Any]:
    return {"__struct__": "Elixir.Complex", "re": re, "im": im}


def test_complex_types_constants_and_parts() -> None:
    assert to_dtype(NxType("c", 64)) == np.complex64
    g = GraphBuilder()
    z = g.param(0, "c128", (2,))
    k = g.const(complex_const(0.0, "infinity"), "c64", ())
    prod = g.op("multiply", z, g.const(complex_const(0.0, 1.0), "c128", ()))
    parts = [g.op(op, z, out=("f64", (2,))) for op in ("real", "imag", "abs")]
    conj = g.op("conjugate", z)
    values = np.array([3 + 4j, -1 + 0.5j])
    kv, pv, re, im, ab, cj = run_graph(g, [k, prod, *parts, conj], values)
    assert kv.dtype == np.complex64 and kv.real == 0 and kv.imag == np.inf
    np.testing.assert_array_equal(pv, values * 1j)
    assert re.tolist() == [3.0, -1.0] and im.tolist() == [4.0, 0.5]
    np.testing.assert_allclose(ab, np.abs(values), rtol=1e-15)
    np.testing.assert_array_equal(cj, np.conj(values))


def test_as_type_saturates_like_nx_and_integers_wrap() -> None:
    g = GraphBuilder()
    x = g.param(0, "f32", (7,))
    outs = [g.op("as_type", x, out=(t, (7,))) for t in ("s32", "u8", "s64", "u64")]
    i = g.param(1, "s64", (2,))
    wrap = g.op("as_type", i, out=("u8", (2,)))
    z = g.param(2, "c64", (1,))
    real = g.op("as_type", z, out=("s8", (1,)))
    values = np.array([np.nan, np.inf, -np.inf, 1e20, -1e20, -3.7, 3.7], np.float32)
    s32, u8, s64, u64, w, r = run_graph(g, [*outs, wrap, real], values,
                                        np.array([300, -1]), np.array([2.9 + 7j], np.complex64))
    i32, i64 = np.iinfo(np.int32), np.iinfo(np.int64)
    assert s32.tolist() == [0, i32.max, i32.min, i32.max, i32.min, -3, 3]
    assert u8.tolist() == [0, 255, 0, 255, 0, 0, 3]
    assert s64.tolist() == [0, i64.max, i64.min, i64.max, i64.min, -3, 3]
    assert u64.tolist() == [0, 2**64 - 1, 0, 2**64 - 1, 0, 0, 3]
    assert w.tolist() == [44, 255] and r.tolist() == [2]


def test_bf16_and_f16_saturate_too() -> None:
    g = GraphBuilder()
    x = g.param(0, "bf16", (3,))
    y = g.param(1, "f16", (2,))
    a = g.op("as_type", x, out=("u8", (3,)))
    b = g.op("as_type", y, out=("s8", (2,)))
    ra, rb = run_graph(g, [a, b], np.array([300, -1, np.nan], ml_dtypes.bfloat16),
                       np.array([np.inf, -200], np.float16))
    assert ra.tolist() == [255, 0, 0] and rb.tolist() == [127, -128]


M = np.array([[3.0, -1.0, 4.0, 4.0], [1.5, 5.0, -9.0, 5.0]])


@pytest.mark.parametrize("op,fn", [("all", np.all), ("any", np.any)])
@pytest.mark.parametrize("axes,keep", [(None, False), ([1], False), ([0], True)])
def test_predicate_reductions(op: str, fn: Any, axes: list[int] | None, keep: bool) -> None:
    x = np.array([[1, 0, 2], [3, 4, 5]])
    expected = fn(x, axis=None if axes is None else tuple(axes), keepdims=keep)
    g = GraphBuilder()
    p = g.param(0, "s64", x.shape)
    node = g.op(op, p, axes=axes, keep_axes=keep, out=("u8", np.shape(expected)))
    np.testing.assert_array_equal(one(g, node, x), expected)


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("tie", ["low", "high"])
@pytest.mark.parametrize("axis,keep", [(None, False), (1, False), (0, True)])
def test_arg_reductions_with_tie_break(op: str, tie: str, axis: int | None, keep: bool) -> None:
    fn = np.argmax if op == "argmax" else np.argmin
    if tie == "low":
        expected = fn(M, axis=axis)
    else:
        flipped = M.reshape(-1)[::-1] if axis is None else np.flip(M, axis)
        n = M.size if axis is None else M.shape[axis]
        expected = n - 1 - fn(flipped, axis=None if axis is None else axis)
    if keep and axis is not None:
        expected = np.expand_dims(expected, axis)
    g = GraphBuilder()
    p = g.param(0, "f64", M.shape)
    node = g.op(op, p, axis=axis, keep_axis=keep, tie_break=tie, out=("s32", np.shape(expected)))
    result = one(g, node, M)
    assert result.dtype == np.int32
    np.testing.assert_array_equal(result, expected)


def _nx_scan(row: list[float], op: str, tie: str) -> int:
    """Nx 0.7.2's argmax/argmin: one pass keeping the index of the value held, which a new
    value replaces when it compares strictly better (or equal, for ``:high``; NaN is equal
    to NaN there, and compares neither better nor worse than anything)."""
    better = (lambda a, b: a > b) if op == "argmax" else (lambda a, b: a < b)
    held, index = row[0], 0
    for i, v in enumerate(row[1:], 1):
        same = v == held or (np.isnan(v) and np.isnan(held))
        if better(v, held) or (tie == "high" and same):
            held, index = v, i
    return index


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("tie", ["low", "high"])
def test_arg_reductions_skip_nan_as_nx_scans(op: str, tie: str) -> None:
    rng = np.random.default_rng(7)
    choices = np.array([np.nan, np.inf, -np.inf, 0.0, 1.0, 2.0])
    x = rng.choice(choices, size=(200, 4))
    g = GraphBuilder()
    p = g.param(0, "f32", x.shape)
    node = g.op(op, p, axis=1, keep_axis=False, tie_break=tie, out=("s64", (200,)))
    expected = [_nx_scan(list(row), op, tie) for row in x.astype(np.float32)]
    np.testing.assert_array_equal(one(g, node, x.astype(np.float32)), expected)


@pytest.mark.parametrize("op,fn", [
    ("cumulative_sum", np.cumsum), ("cumulative_product", np.cumprod),
    ("cumulative_max", np.maximum.accumulate), ("cumulative_min", np.minimum.accumulate),
])
@pytest.mark.parametrize("axis,reverse", [(0, False), (1, False), (1, True)])
def test_scans_match_numpy(op: str, fn: Any, axis: int, reverse: bool) -> None:
    data = np.flip(M, axis) if reverse else M
    expected = fn(data, axis=axis)
    expected = np.flip(expected, axis) if reverse else expected
    g = GraphBuilder()
    p = g.param(0, "f64", M.shape)
    node = g.op(op, p, axis=axis, reverse=reverse)
    np.testing.assert_allclose(one(g, node, M), expected, rtol=1e-15)


WINDOW_NP = {"window_sum": (np.sum, 0.0), "window_product": (np.prod, 1.0),
             "window_max": (np.max, -np.inf), "window_min": (np.min, np.inf)}


def brute_window(x: np.ndarray, fn: Any, pad: float, dims: tuple[int, ...],
                 strides: tuple[int, ...], padding: list[tuple[int, int]],
                 dilations: tuple[int, ...]) -> np.ndarray:
    padded = np.pad(x, padding, constant_values=pad)
    span = [(d - 1) * r + 1 for d, r in zip(dims, dilations, strict=True)]
    out_shape = [(n - s) // k + 1 for n, s, k in zip(padded.shape, span, strides, strict=True)]
    out = np.empty(out_shape)
    for idx in itertools.product(*(range(n) for n in out_shape)):
        window = padded[tuple(slice(i * k, i * k + s, r) for i, k, s, r
                              in zip(idx, strides, span, dilations, strict=True))]
        out[idx] = fn(window)
    return out


@pytest.mark.parametrize("op", sorted(WINDOW_NP))
@pytest.mark.parametrize("dims,strides,padding,dilations", [
    ((2, 2), (1, 1), [(0, 0), (0, 0)], (1, 1)),
    ((2, 3), (2, 1), [(1, 0), (0, 2)], (1, 1)),
    ((2, 2), (2, 2), [(0, 1), (1, 1)], (1, 2)),
])
def test_window_reductions_match_brute_force(op: str, dims: tuple[int, ...],
                                             strides: tuple[int, ...],
                                             padding: list[tuple[int, int]],
                                             dilations: tuple[int, ...]) -> None:
    x = np.arange(20, dtype=F64).reshape(4, 5) * 0.37 - 2.0
    fn, pad = WINDOW_NP[op]
    expected = brute_window(x, fn, pad, dims, strides, padding, dilations)
    g = GraphBuilder()
    p = g.param(0, "f64", x.shape)
    node = g.op(op, p, window_dimensions=list(dims), strides=list(strides), padding=padding,
                window_dilations=list(dilations), out=("f64", expected.shape))
    np.testing.assert_allclose(one(g, node, x), expected, rtol=1e-13)


def test_integer_window_max_pads_with_the_type_minimum() -> None:
    x = np.array([[-128, -100], [-90, -127]], np.int8)
    g = GraphBuilder()
    p = g.param(0, "s8", (2, 2))
    node = g.op("window_max", p, window_dimensions=[2, 2], strides=[1, 1],
                padding=[(1, 1), (1, 1)], window_dilations=[1, 1], out=("s8", (3, 3)))
    assert one(g, node, x).tolist() == [[-128, -100, -100], [-90, -90, -100], [-90, -90, -127]]


def scatter_graph(op: str, t_type: str, out_type: str) -> tuple[GraphBuilder, int]:
    g = GraphBuilder()
    t = g.param(0, t_type, (4, 4))
    s = g.param(1, out_type, (2, 2))
    init = g.const(10, out_type)
    node = g.op(op, t, s, init, window_dimensions=[2, 3], strides=[2, 2],
                padding=[(0, 0), (0, 1)], out=(out_type, (4, 4)))
    return g, node


T = np.array([[7, 2, 5, 3], [3, 8, 9, 3], [1, 5, 7, 5], [0, 6, 2, 8]])


def test_window_scatter_max_and_min() -> None:
    src = np.array([[2, 6], [3, 1]])
    g, node = scatter_graph("window_scatter_max", "s64", "s64")
    assert one(g, node, T, src).tolist() == [[10, 10, 10, 10], [10, 10, 18, 10],
                                             [10, 10, 13, 10], [10, 10, 10, 11]]
    # the window at rows 0-1, columns 2-4 has two minima, 3 at (0, 3) and (1, 3): the last
    # one gets the source value (Nx's selection)
    g, node = scatter_graph("window_scatter_min", "s64", "f64")
    assert one(g, node, T, src.astype(F64)).tolist() == [[10, 12, 10, 10], [10, 10, 10, 16],
                                                         [10, 10, 10, 10], [13, 10, 11, 10]]


def scatter_1d(op: str, x: np.ndarray, src: np.ndarray, init: float, window: int, stride: int,
               padding: tuple[int, int] = (0, 0), t_type: str = "f32",
               out_type: str = "f32") -> list[Any]:
    """window_scatter over one row ({1, n} tensors, windows {1, window})."""
    g = GraphBuilder()
    t = g.param(0, t_type, (1, len(x)))
    s = g.param(1, out_type, (1, len(src)))
    node = g.op(op, t, s, g.const(init, out_type), window_dimensions=[1, window],
                strides=[1, stride], padding=[(0, 0), padding], out=(out_type, (1, len(x))))
    dtype = {"f32": np.float32, "f64": F64, "s64": np.int64}
    return list(one(g, node, np.array([x], dtype[t_type]), np.array([src], dtype[out_type]))[0])


@pytest.mark.parametrize("mode", ["nx", "native"])
def test_window_scatter_selects_as_nx(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Nx 0.7.2's binary backend (the values below are its answers): the last of tied elements
    monkeypatch.setenv("NX_JAX_NUMERICS", mode)
    ties = np.array([2.0, 2.0, 5.0, 5.0])
    for op in ("window_scatter_min", "window_scatter_max"):
        assert scatter_1d(op, ties, np.array([1.0, 7.0]), 0, 2, 2) == [0, 1, 0, 7]
    # overlapping windows: the values reaching one position add up
    assert scatter_1d("window_scatter_max", np.array([1.0, 2, 2, 1, 2]),
                      np.array([1.0, 10, 100, 1000]), 0, 2, 1) == [0, 1, 110, 0, 1000]
    assert scatter_1d("window_scatter_min", np.ones(5), np.array([1.0, 10, 100, 1000]), 0, 2,
                      1) == [0, 1, 10, 100, 1000]
    # a NaN is selected only as its window's first element; -0.0 ties with 0.0
    nan = np.nan
    assert scatter_1d("window_scatter_min", np.array([1.0, nan, 1.0, 0.5]),
                      np.array([5.0, 6.0]), 0, 2, 2) == [5, 0, 0, 6]
    assert scatter_1d("window_scatter_min", np.array([nan, 0.0, -0.0, 0.0]),
                      np.array([5.0, 6.0]), 0, 2, 2) == [5, 0, 0, 6]
    # integers; and init_value, then the source values in window order, added in f32 steps
    # (0.1 + 0.1 + 0.7 is 0.9 there, 0.90000004 in any other order)
    assert scatter_1d("window_scatter_max", np.array([3, 3, 3]), np.array([4, 5]), -1, 2, 1,
                      t_type="s64", out_type="s64") == [-1, 3, 4]
    got = scatter_1d("window_scatter_max", np.array([0.3, 0.3, 0.1]), np.array([0.1, 0.7]),
                     0.1, 2, 1)
    assert got == [np.float32(0.1), np.float32(0.9), np.float32(0.1)]


def test_window_scatter_padding_is_never_selected() -> None:
    # the positions are those of the unpadded tensor (Nx's binary backend selects padding,
    # which holds init_value there, and crashes or shifts; see docs/COMPATIBILITY.md)
    neg = np.array([-2.0, -2.0, -5.0, -5.0])
    assert scatter_1d("window_scatter_max", neg, np.array([1.0, 7.0, 9.0]), 0, 2, 2,
                      padding=(1, 1)) == [1, 7, 0, 9]
    assert scatter_1d("window_scatter_max", np.array([5.0, 1, 1, 1]), np.array([1.0, 7.0]), 0,
                      2, 2, padding=(1, 0)) == [1, 0, 7, 0]


def test_window_scatter_compares_f64_as_nx_in_mode_nx(monkeypatch: pytest.MonkeyPatch) -> None:
    # Nx's binary backend compares the f64 elements it reads as f32 tensors: 1.0000000000001
    # and 1.0 tie there (Nx 0.7.2: [[0.0, 5.0]])
    x = np.array([1.0000000000001, 1.0])
    monkeypatch.setenv("NX_JAX_NUMERICS", "nx")
    assert scatter_1d("window_scatter_max", x, np.array([5.0]), 0, 2, 2, t_type="f64") == [0, 5]
    monkeypatch.setenv("NX_JAX_NUMERICS", "native")
    assert scatter_1d("window_scatter_max", x, np.array([5.0]), 0, 2, 2, t_type="f64") == [5, 0]


def grad_of(g: GraphBuilder, node: int, *args: Any, wrt: int = 0) -> np.ndarray:
    """jax.grad of sum(node) with respect to argument ``wrt`` (the graph run with its
    other arguments fixed)."""
    fn = lower(decode_graph(g.binary([node])))

    def scalar(v: jax.Array) -> jax.Array:
        full = [jnp.asarray(a) for a in args]
        full[wrt] = v
        return jnp.sum(fn(*full)[0])

    return np.asarray(jax.grad(scalar)(jnp.asarray(args[wrt])))


def test_gradients_of_windows_scans_and_scatter_match_finite_differences() -> None:
    x = np.array([[0.5, 1.0, -2.0, 3.0, 0.25], [4.0, -1.5, 2.5, 0.75, -3.0],
                  [1.25, 2.0, -0.5, 5.0, 1.5]])
    for op in sorted(WINDOW_NP):
        fn, pad = WINDOW_NP[op]
        cfg = {"window_dimensions": [2, 2], "strides": [1, 2], "padding": [(0, 1), (1, 0)],
               "window_dilations": [2, 1]}
        expected = brute_window(x, fn, pad, (2, 2), (1, 2), [(0, 1), (1, 0)], (2, 1))
        g = GraphBuilder()
        p = g.param(0, "f64", x.shape)
        node = g.op(op, p, out=("f64", expected.shape), **cfg)

        def f(v: np.ndarray, fn: Any = fn, pad: float = pad) -> float:
            return float(brute_window(v, fn, pad, (2, 2), (1, 2), [(0, 1), (1, 0)],
                                      (2, 1)).sum())

        np.testing.assert_allclose(grad_of(g, node, x), central(f, x), rtol=1e-6, atol=1e-8)

    g = GraphBuilder()
    p = g.param(0, "f64", x.shape)
    node = g.op("cumulative_max", p, axis=1, reverse=True)
    cm = central(lambda v: float(np.flip(np.maximum.accumulate(np.flip(v, 1), 1), 1).sum()), x)
    np.testing.assert_allclose(grad_of(g, node, x), cm, rtol=1e-6, atol=1e-8)

    g, node = scatter_graph("window_scatter_max", "f64", "f64")
    src = np.array([[2.0, 6.0], [3.0, 1.0]])
    assert grad_of(g, node, T.astype(F64), src, wrt=1).tolist() == [[1.0, 1.0], [1.0, 1.0]]
    # a weighted sum: each source value's gradient is the weight at its selected position
    # (the last of tied minima, as the forward pass), init_value's the sum of the weights
    weights = np.arange(16.0).reshape(4, 4)
    g = GraphBuilder()
    t, s, i = g.param(0, "f64", (4, 4)), g.param(1, "f64", (2, 2)), g.param(2, "f64")
    node = g.op("window_scatter_min", t, s, i, window_dimensions=[2, 3], strides=[2, 2],
                padding=[(0, 0), (0, 1)])
    fn = lower(decode_graph(g.binary([node])))

    def weighted(s: jax.Array, i: jax.Array) -> jax.Array:
        return jnp.sum(fn(jnp.asarray(T.astype(F64)), s, i)[0] * weights)

    ds, di = jax.grad(weighted, argnums=(0, 1))(jnp.asarray(src), jnp.asarray(10.0))
    assert ds.tolist() == [[1.0, 7.0], [12.0, 14.0]] and float(di) == 120.0


@pytest.mark.parametrize("mode", ["nx", "native"])
def test_window_max_and_min_gradients_pick_ties_as_nx_in_mode_nx(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # real Nx 0.7.2 (window_scatter_max/min's choice): a window's gradient goes to the last of
    # its tied elements; JAX's rule (mode native) gives it to the first
    monkeypatch.setenv("NX_JAX_NUMERICS", mode)
    x = np.array([[2.0, 2.0, 5.0, 5.0]])
    weights = jnp.asarray([[1.0, 2.0]])
    expected = [[0.0, 1.0, 0.0, 2.0]] if mode == "nx" else [[1.0, 0.0, 2.0, 0.0]]
    for op in ("window_max", "window_min"):
        g = GraphBuilder()
        p = g.param(0, "f32", (1, 4))
        node = g.op(op, p, out=("f32", (1, 2)), window_dimensions=[1, 2], strides=[1, 2],
                    padding=[(0, 0), (0, 0)], window_dilations=[1, 1])
        fn = lower(decode_graph(g.binary([node])))

        def loss(v: jax.Array, fn: Any = fn) -> jax.Array:
            return jnp.sum(fn(v)[0] * weights)

        assert np.asarray(jax.grad(loss)(jnp.asarray(x, jnp.float32))).tolist() == expected
        # forward mode gives the same derivative, one input direction at a time
        forward = [float(jax.jvp(loss, (jnp.asarray(x, jnp.float32),),
                                 (jnp.asarray(np.eye(4)[i].reshape(1, 4), jnp.float32),))[1])
                   for i in range(4)]
        assert [forward] == expected


BAD: list[tuple[str, list[tuple[str, tuple[int, ...]]], dict[str, Any], Any, str]] = [
    ("bitwise_and", [("f32", (2,)), ("f32", (2,))], {}, ("f32", (2,)), "integer types only"),
    ("is_nan", [("f32", (2,))], {}, ("f32", (2,)), r"\{:u, 8\}"),
    ("real", [("c64", (2,))], {}, ("c64", (2,)), "float type"),
    ("bitcast", [("f32", (2,))], {}, ("s64", (2,)), "bit width"),
    ("argmax", [("f32", (2,))], {"axis": 0, "keep_axis": False, "tie_break": "mid"},
     ("s64", ()), ":low or :high"),
    ("argmax", [("f32", (2,))], {"axis": 1, "keep_axis": False, "tie_break": "low"},
     ("s64", ()), "axis"),
    ("cumulative_sum", [("f32", (2,))], {"axis": 3, "reverse": False}, ("f32", (2,)), "axis"),
    ("window_sum", [("f32", (4, 4))], {"window_dimensions": [2], "strides": [1, 1],
                                       "padding": [(0, 0), (0, 0)], "window_dilations": [1, 1]},
     ("f32", (3, 4)), "one entry per axis"),
    ("window_max", [("f32", (4,))], {"window_dimensions": [2], "strides": [0],
                                     "padding": [(0, 0)], "window_dilations": [1]},
     ("f32", (3,)), "positive"),
    ("window_min", [("f32", (4,))], {"window_dimensions": [2], "strides": [1],
                                     "padding": [0], "window_dilations": [1]},
     ("f32", (3,)), "pairs"),
    # the type a comparison's inputs meet in comes from the Elixir side, never re-derived
    ("less", [("u8", (2,)), ("s8", (2,))], {}, ("u8", (2,)), "missing option operand_type"),
    ("less", [("u8", (2,)), ("s8", (2,))], {"operand_type": (atom("s"), 12)}, ("u8", (2,)),
     r"operand_type must be a supported Nx type such as \{:f, 32\}, got \('s', 12\)"),
    ("window_scatter_max", [("f32", (4,)), ("f32", (2,)), ("f32", (1,))],
     {"window_dimensions": [2], "strides": [2], "padding": [(0, 0)]}, ("f32", (4,)),
     "scalar"),
]


@pytest.mark.parametrize("op,inputs,opts,out,match", BAD)
def test_invalid_nodes_are_graph_errors(op: str, inputs: list[tuple[str, tuple[int, ...]]],
                                        opts: dict[str, Any], out: Any, match: str) -> None:
    g = GraphBuilder()
    params = [g.param(i, t, s) for i, (t, s) in enumerate(inputs)]
    node = g.add(op, params, opts, out)
    with pytest.raises(GraphError, match=match):
        decode_graph(g.binary([node]))


def test_a_malformed_complex_constant_is_a_graph_error() -> None:
    g = GraphBuilder()
    node = g.const({"__struct__": "Elixir.Complex", "re": 1.0}, "c64")
    with pytest.raises(GraphError, match="Complex"):
        decode_graph(g.binary([node]))
