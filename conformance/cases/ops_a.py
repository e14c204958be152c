"""Issue #3 part A: element-wise ops, predicate/arg reductions, statistics, scans and windows.

Floating unary ops give f32 for integer inputs and keep floating types; sign/floor/ceil/round
keep the type (identity on integers); bitwise ops are integer-only and keep the merged type;
predicates and logical ops give u8; argmax/argmin give s64 by default; scans and windows keep
the input type. as_type from floats to integers saturates (NaN -> 0). Complex types: see
fft_complex.py.
"""

import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from conformance.case import Case, case, number, tensor, wire

_erf = np.vectorize(math.erf, otypes=[np.float64])
_erfc = np.vectorize(math.erfc, otypes=[np.float64])

FLOAT_OPS: list[tuple[str, Callable[..., Any], list[Any]]] = [
    ("cosh", np.cosh, [[-2.0, -0.5, 0.0], [0.25, 1.0, 3.0]]),
    ("sinh", np.sinh, [[-2.0, -0.5, 0.0], [0.25, 1.0, 3.0]]),
    ("acos", np.arccos, [[-0.9, -0.5, 0.0], [0.25, 0.5, 0.9]]),
    ("asin", np.arcsin, [[-0.9, -0.5, 0.0], [0.25, 0.5, 0.9]]),
    ("atan", np.arctan, [[-20.0, -0.5, 0.0], [0.25, 1.0, 20.0]]),
    ("acosh", np.arccosh, [[1.1, 1.5, 2.0], [3.0, 10.0, 100.0]]),
    ("asinh", np.arcsinh, [[-20.0, -0.5, 0.0], [0.25, 1.0, 20.0]]),
    ("atanh", np.arctanh, [[-0.9, -0.5, 0.0], [0.25, 0.5, 0.9]]),
    ("cbrt", np.cbrt, [[-27.0, -0.5, 0.125], [0.25, 8.0, 1000.0]]),
    ("erf", _erf, [[-3.0, -0.5, 0.0], [0.25, 1.0, 3.0]]),
    ("erfc", _erfc, [[-3.0, -0.5, 0.0], [0.25, 1.0, 3.0]]),
]

INT_POINTS = {"acosh": [1, 2, 10], "acos": [-1, 0, 1], "asin": [-1, 0, 1], "atanh": [0, 0, 0]}

CASES: list[Case] = []
for op, ref, points in FLOAT_OPS:
    CASES += [
        case(op, [tensor("f32", points)], out="f32", ref=ref, node=wire(op), grad=True),
        case(op, [tensor("f64", points)], out="f64", ref=ref, node=wire(op)),
        case(op, [tensor("bf16", points[1])], out="bf16", ref=ref, node=wire(op)),
        case(op, [tensor("s64", INT_POINTS.get(op, [-1, 0, 2]))], out="f32", ref=ref,
             node=wire(op)),
    ]

# erf_inv: the reference inverts math.erf by bisection in float64
def _erf_inv(y: Any) -> Any:
    def one(v: float) -> float:
        lo, hi = -6.0, 6.0
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if math.erf(mid) < v else (lo, mid)
        return (lo + hi) / 2

    return np.vectorize(one, otypes=[np.float64])(y)


CASES += [
    case("erf_inv", [tensor("f32", [[-0.9, -0.5, 0.0], [0.25, 0.5, 0.9]])], out="f32",
         ref=_erf_inv, node=wire("erf_inv"), grad=True),
    case("erf_inv", [tensor("f64", [-0.99, 0.1, 0.7])], out="f64", ref=_erf_inv,
         node=wire("erf_inv"), tol=(1e-12, 1e-14)),
]

ROUND = [-2.5, -1.5, -0.4, 0.0, 0.5, 1.5, 2.49]
CASES += [
    case("floor", [tensor("f32", ROUND)], out="f32", ref=np.floor, node=wire("floor")),
    case("ceil", [tensor("f64", ROUND)], out="f64", ref=np.ceil, node=wire("ceil")),
    case("floor", [tensor("bf16", ROUND)], out="bf16", ref=np.floor, node=wire("floor")),
    case("ceil", [tensor("s32", [-3, 0, 7])], out="s32", ref=lambda x: x, node=wire("ceil")),
    case("round", [tensor("f32", ROUND)], out="f32", expected=[-3.0, -2.0, -0.0, 0.0, 1.0, 2.0,
                                                               2.0],
         node=wire("round"), source="Nx.round: halves away from zero"),
    case("round", [tensor("s8", [-3, 0, 7])], out="s8", ref=lambda x: x, node=wire("round")),
    case("sign", [tensor("f32", ROUND)], out="f32", ref=np.sign, node=wire("sign")),
    case("sign", [tensor("s16", [-300, 0, 5])], out="s16", ref=np.sign, node=wire("sign")),
    case("is_nan", [tensor("f32", [1.0, math.nan, math.inf])], out="u8", ref=np.isnan,
         node=wire("is_nan")),
    case("is_infinity", [tensor("bf16", [1.0, math.nan, -math.inf])], out="u8", ref=np.isinf,
         node=wire("is_infinity")),
    case("is_nan", [tensor("s64", [1, 2])], out="u8", ref=np.isnan, node=wire("is_nan")),
    case("logical_not", [tensor("f32", [0.0, 2.0, -1.0])], out="u8", ref=np.logical_not,
         node=wire("logical_not")),
]


def _clz(bits: int) -> Callable[[Any], Any]:
    def ref(x: Any) -> Any:
        return np.array([bits - int(v % (1 << bits)).bit_length() for v in x.reshape(-1)])

    return ref


def _popcount(bits: int) -> Callable[[Any], Any]:
    def ref(x: Any) -> Any:
        return np.array([bin(int(v) % (1 << bits)).count("1") for v in x.reshape(-1)])

    return ref


for t, bits in [("u8", 8), ("s32", 32)]:
    X = tensor(t, [0, 1, 100])
    CASES += [
        case("bitwise_not", [X], out=t, ref=np.invert, node=wire("bitwise_not")),
        case("count_leading_zeros", [X], out=t, ref=_clz(bits), node=wire("count_leading_zeros")),
        case("population_count", [X], out=t, ref=_popcount(bits), node=wire("population_count")),
    ]

A = tensor("s64", [[7, -7, 12], [-12, 5, 1]])
B = tensor("s64", [2, -2, 5])
CASES += [
    case("remainder", [A, B], out="s64", ref=np.fmod, node=wire("remainder")),
    case("remainder", [tensor("f32", [[5.5, -5.5, 0.3]]), number(2.0, "f32")], out="f32",
         ref=np.fmod, node=wire("remainder"), grad=True),
    case("quotient", [A, B], out="s64", ref=lambda a, b: np.trunc(a / b).astype(np.int64),
         node=wire("quotient")),
    case("quotient", [tensor("u8", [250, 7]), number(3, "u8")], out="u8",
         ref=lambda a, b: a // b, node=wire("quotient")),
    case("atan2", [tensor("f32", [[1.0, -1.0], [0.5, -2.0]]), tensor("f32", [-1.0, 2.0])],
         out="f32", ref=np.arctan2, node=wire("atan2"), grad=True),
    case("atan2", [tensor("s64", [1, -1]), tensor("f64", [1.0, 1.0])], out="f64",
         ref=np.arctan2, node=wire("atan2")),
]
for op, fn1 in [("bitwise_and", np.bitwise_and), ("bitwise_or", np.bitwise_or),
               ("bitwise_xor", np.bitwise_xor)]:
    CASES += [
        case(op, [A, B], out="s64", ref=fn1, node=wire(op)),
        case(op, [tensor("u8", [12, 255]), tensor("s8", [-1, 6])], out="s16", ref=fn1,
             node=wire(op)),
    ]
CASES += [
    case("left_shift", [A, tensor("s64", [1, 2, 3])], out="s64", ref=np.left_shift,
         node=wire("left_shift")),
    case("left_shift", [tensor("u8", [0x81, 3]), number(1, "u8")], out="u8",
         ref=np.left_shift, node=wire("left_shift")),
    case("right_shift", [A, tensor("s64", [1, 2, 3])], out="s64", ref=np.right_shift,
         node=wire("right_shift")),
    case("right_shift", [tensor("u8", [0xF0, 7]), number(4, "u8")], out="u8",
         ref=np.right_shift, node=wire("right_shift")),
]

L1 = tensor("f32", [[0.0, 0.5], [-2.0, 0.0]])
L2 = tensor("u8", [1, 0])
for op, fn2 in [("logical_and", np.logical_and), ("logical_or", np.logical_or),
               ("logical_xor", np.logical_xor)]:
    CASES += [
        case(op, [L1, L2], out="u8", ref=fn2, node=wire(op)),
        case(op, [tensor("s64", [0, 3, 0]), number(1, "s64")], out="u8", ref=fn2, node=wire(op)),
    ]

CASES += [
    case("clip", [tensor("s64", [-3, 1, 5]), number(0, "s64"), number(2, "s64")], out="s64",
         ref=np.clip, node=wire("clip")),
    case("clip", [tensor("f32", [[-0.9, -0.2], [0.3, 0.8]]), number(-0.5, "f32"),
                  number(0.5, "f32")], out="f32", ref=np.clip, node=wire("clip"), grad=True),
    case("bitcast", [tensor("f32", [1.0, -2.0]), "u32"], out="u32",
         ref=lambda x, _t: x.astype(np.float32).view(np.uint32), node=wire("bitcast")),
    case("bitcast", [tensor("s16", [-1, 5]), "u16"], out="u16",
         ref=lambda x, _t: x.astype(np.int16).view(np.uint16), node=wire("bitcast")),
]


def _saturate(dtype: Any) -> Callable[[Any, Any], Any]:
    info = np.iinfo(dtype)

    def ref(x: Any, _t: Any) -> Any:
        x = np.where(np.isnan(x), 0.0, x)
        return np.array([info.max if v >= info.max else info.min if v <= info.min else int(v)
                         for v in x.reshape(-1)])

    return ref


SAT = tensor("f32", [math.nan, math.inf, -math.inf, 1e20, -1e20, -3.7, 3.7])
CASES += [
    case("as_type", [SAT, "s32"], out="s32", ref=_saturate(np.int32), node=wire("as_type"),
         name="as_type(f32[7] saturating, :s32) -> s32"),
    case("as_type", [SAT, "u8"], out="u8", ref=_saturate(np.uint8), node=wire("as_type"),
         name="as_type(f32[7] saturating, :u8) -> u8"),
    case("as_type", [tensor("s64", [300, -1]), "u8"], out="u8", ref=lambda x, _t: x,
         node=wire("as_type"), name="as_type(s64[2] wrapping, :u8) -> u8"),
]

# --- reductions, statistics, scans ---------------------------------------------------------

M = tensor("f32", [[3.0, -1.0, 4.0, 4.0], [1.5, 5.0, -9.0, 5.0]])
MD = tensor("f64", [[3.0, -1.0, 4.0, 4.5], [1.5, 5.0, -9.0, 5.5]])
MI = tensor("s64", [[1, 0, 2], [3, 4, 5]])

for op, fn3 in [("all", np.all), ("any", np.any)]:
    CASES += [
        case(op, [MI], None, out="u8", ref=fn3, node=wire(op, axes=None, keep_axes=False)),
        case(op, [MI], {"axes": [1], "keep_axes": True}, out="u8",
             ref=lambda x, fn3=fn3: fn3(x, axis=1, keepdims=True),
             node=wire(op, axes=[1], keep_axes=True)),
    ]


def _arg(fn: Any, axis: int | None, high: bool, keep: bool = False) -> Callable[[Any], Any]:
    def ref(x: Any) -> Any:
        if axis is None:
            flat = x.reshape(-1)
            return flat.size - 1 - fn(flat[::-1]) if high else fn(flat)
        result = x.shape[axis] - 1 - fn(np.flip(x, axis), axis=axis) if high else fn(x, axis)
        return np.expand_dims(result, axis) if keep else result

    return ref


for op, fn4 in [("argmax", np.argmax), ("argmin", np.argmin)]:
    CASES += [
        case(op, [M], None, out="s64", ref=_arg(fn4, None, False),
             node=wire(op, axis=None, keep_axis=False, tie_break="low")),
        case(op, [M], {"axis": 1, "tie_break": "high"}, out="s64", ref=_arg(fn4, 1, True),
             node=wire(op, axis=1, keep_axis=False, tie_break="high")),
        case(op, [MI], {"axis": 0, "keep_axis": True, "type": "u8"}, out="u8",
             ref=_arg(fn4, 0, False, True), node=wire(op, axis=0, keep_axis=True,
                                                      tie_break="low")),
    ]

CASES += [
    case("variance", [MD], {"axes": [1]}, out="f64", ref=lambda x: np.var(x, axis=1),
         node=None, grad=True),
    case("variance", [MI], {"ddof": 1}, out="f32", ref=lambda x: np.var(x, ddof=1), node=None),
    case("standard_deviation", [M], {"axes": [0], "keep_axes": True}, out="f32",
         ref=lambda x: np.std(x, axis=0, keepdims=True), node=None, grad=True),
    case("logsumexp", [MD], {"axes": [0]}, out="f64",
         ref=lambda x: np.log(np.sum(np.exp(x), axis=0)), node=None, grad=True),
    case("logsumexp", [tensor("f32", [1000.0, 1000.0])], None, out="f32",
         expected=1000.6931471805599, node=None, source="log(2 e^1000) without overflow"),
]


def _scan(fn: Any, axis: int, reverse: bool) -> Callable[[Any], Any]:
    def ref(x: Any) -> Any:
        data = np.flip(x, axis) if reverse else x
        out = fn(data, axis=axis)
        return np.flip(out, axis) if reverse else out

    return ref


for op, fn5 in [("cumulative_sum", np.cumsum), ("cumulative_product", np.cumprod),
               ("cumulative_max", np.maximum.accumulate),
               ("cumulative_min", np.minimum.accumulate)]:
    CASES += [
        case(op, [M], {"axis": 1}, out="f32", ref=_scan(fn5, 1, False),
             node=wire(op, axis=1, reverse=False), grad=True),
        case(op, [MI], {"reverse": True}, out="s64", ref=_scan(fn5, 0, True),
             node=wire(op, axis=0, reverse=True)),
        case(op, [tensor("u8", [200, 100, 3])], None, out="u8", ref=_scan(fn5, 0, False),
             node=wire(op, axis=0, reverse=False)),
    ]

# --- windows -------------------------------------------------------------------------------


def _window(fn: Any, pad: float, dims: tuple[int, ...], strides: tuple[int, ...],
            padding: list[tuple[int, int]], dil: tuple[int, ...]) -> Callable[..., Any]:
    def ref(x: Any, *_: Any) -> Any:
        padded = np.pad(x.astype(np.float64), padding, constant_values=pad)
        span = [(d - 1) * r + 1 for d, r in zip(dims, dil, strict=True)]
        shape = [(n - s) // k + 1 for n, s, k in zip(padded.shape, span, strides, strict=True)]
        out = np.empty(shape)
        for idx in itertools.product(*(range(n) for n in shape)):
            out[idx] = fn(padded[tuple(slice(i * k, i * k + s, r) for i, k, s, r
                                       in zip(idx, strides, span, dil, strict=True))])
        return out.astype(np.int64) if x.dtype.kind in "iu" else out

    return ref


W = tensor("f32", np.linspace(-2.0, 2.5, 20).round(3).tolist(), (4, 5))
WI = tensor("s64", list(range(16)), (4, 4))
for op, fn6, pad in [("window_sum", np.sum, 0.0), ("window_product", np.prod, 1.0),
                    ("window_max", np.max, -np.inf), ("window_min", np.min, np.inf)]:
    CASES += [
        case(op, [W, (2, 2)], {"strides": [1, 2], "padding": "same"}, out="f32",
             ref=_window(fn6, pad, (2, 2), (1, 2), [(0, 1), (0, 1)], (1, 1)),
             node=wire(op, window_dimensions=[2, 2], strides=[1, 2],
                       padding=[(0, 1), (0, 1)], window_dilations=[1, 1]), grad=True),
        case(op, [W, (2, 2)], {"padding": [(1, 0), (0, 1)], "window_dilations": [2, 1]},
             out="f32", ref=_window(fn6, pad, (2, 2), (1, 1), [(1, 0), (0, 1)], (2, 1)),
             node=wire(op, window_dimensions=[2, 2], strides=[1, 1],
                       padding=[(1, 0), (0, 1)], window_dilations=[2, 1]), grad=True),
        case(op, [WI, (2, 2)], {"strides": 2}, out="s64",
             ref=_window(fn6, pad, (2, 2), (2, 2), [(0, 0), (0, 0)], (1, 1)),
             node=wire(op, window_dimensions=[2, 2], strides=[2, 2],
                       padding=[(0, 0), (0, 0)], window_dilations=[1, 1])),
    ]

T = tensor("s64", [[7, 2, 5, 3], [3, 8, 9, 3], [1, 5, 7, 5], [0, 6, 2, 8]])
SRC = tensor("s64", [[2, 6], [3, 1]])
SCATTER = {"strides": [2, 2], "padding": [(0, 0), (0, 1)]}
SCATTER_WIRE = {"window_dimensions": [2, 3], "strides": [2, 2], "padding": [(0, 0), (0, 1)]}
SCATTER_WIRE_F32 = SCATTER_WIRE
CASES += [
    case("window_scatter_max", [T, SRC, number(0, "s64"), (2, 3)], SCATTER, out="s64",
         expected=[[0, 0, 0, 0], [0, 0, 8, 0], [0, 0, 3, 0], [0, 0, 0, 1]],
         node=wire("window_scatter_max", **SCATTER_WIRE), source="Nx.window_scatter_max docs"),
    case("window_scatter_min", [T, SRC, number(0, "s64"), (2, 3)], SCATTER, out="s64",
         expected=[[0, 2, 0, 0], [0, 0, 0, 6], [0, 0, 0, 0], [3, 0, 1, 0]],
         node=wire("window_scatter_min", **SCATTER_WIRE),
         source="last minimum of each window (Nx's rule for ties), padding never selected"),
]
TF = tensor("f32", [[7, 2, 5, 3], [3, 8, 9, 3], [1, 5, 7, 5], [0, 6, 2, 8]])
SRCF = tensor("f32", [[2.0, 6.0], [3.0, 1.0]])
CASES += [
    case("window_scatter_max", [TF, SRCF, number(0.5, "f32"), (2, 3)], SCATTER, out="f32",
         expected=[[0.5, 0.5, 0.5, 0.5], [0.5, 0.5, 8.5, 0.5], [0.5, 0.5, 3.5, 0.5],
                   [0.5, 0.5, 0.5, 1.5]],
         node=wire("window_scatter_max", **SCATTER_WIRE_F32), source="Nx docs example + 0.5"),
    case("window_scatter_min", [TF, SRCF, number(0.5, "f32"), (2, 3)], SCATTER, out="f32",
         expected=[[0.5, 2.5, 0.5, 0.5], [0.5, 0.5, 0.5, 6.5], [0.5, 0.5, 0.5, 0.5],
                   [3.5, 0.5, 1.5, 0.5]],
         node=wire("window_scatter_min", **SCATTER_WIRE_F32), source="last minimum, + 0.5"),
]
