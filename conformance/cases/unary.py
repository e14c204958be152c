"""Element-wise unary ops: exp expm1 log log1p sqrt rsqrt sin cos tan tanh sigmoid negate abs.

Floating ops give f32 for integer inputs and keep floating input types; negate and abs keep
the input type (integers wrap: negate of u8 is 256 - x).
"""

from collections.abc import Callable
from typing import Any

import numpy as np

from conformance.case import Case, case, number, tensor, wire


def _sigmoid(x: Any) -> Any:
    return 1.0 / (1.0 + np.exp(-x))


def _rsqrt(x: Any) -> Any:
    return 1.0 / np.sqrt(x)


# (op, reference, points in the op's domain, two extra points with non-finite results)
FLOAT_OPS: list[tuple[str, Callable[..., Any], list[Any], list[float]]] = [
    ("exp", np.exp, [[-2.0, -0.5, 0.0], [0.25, 1.0, 3.5]], [100.0, -np.inf]),
    ("expm1", np.expm1, [[-2.0, -1e-4, 0.0], [1e-5, 0.5, 3.0]], [100.0, -np.inf]),
    ("log", np.log, [[0.01, 0.5, 1.0], [2.0, 10.0, 1e4]], [0.0, -1.0]),
    ("log1p", np.log1p, [[-0.9, -1e-5, 0.0], [1e-6, 1.0, 100.0]], [-1.0, -2.0]),
    ("sqrt", np.sqrt, [[0.01, 0.25, 1.0], [2.0, 9.0, 1e4]], [-1.0, np.inf]),
    ("rsqrt", _rsqrt, [[0.01, 0.25, 1.0], [2.0, 9.0, 1e4]], [0.0, -4.0]),
    ("sin", np.sin, [[-3.0, -0.5, 0.0], [0.75, 1.5, 3.0]], [np.inf, np.nan]),
    ("cos", np.cos, [[-3.0, -0.5, 0.0], [0.75, 1.5, 3.0]], [np.inf, np.nan]),
    ("tan", np.tan, [[-1.2, -0.5, 0.0], [0.25, 0.75, 1.2]], [np.inf, np.nan]),
    ("tanh", np.tanh, [[-20.0, -0.5, 0.0], [0.25, 1.0, 20.0]], [np.inf, -np.inf]),
    ("sigmoid", _sigmoid, [[-20.0, -0.5, 0.0], [0.25, 1.0, 20.0]], [np.inf, -np.inf]),
]

# integer inputs (made floating as f32) inside every op's domain
INT_POINTS: dict[str, list[int]] = {
    "log": [1, 2, 10], "sqrt": [0, 4, 9], "rsqrt": [1, 4, 16], "log1p": [0, 1, 9],
}

CASES: list[Case] = []
for op, ref, points, special in FLOAT_OPS:
    CASES += [
        case(op, [tensor("f32", points)], out="f32", ref=ref, node=wire(op), grad=True),
        case(op, [tensor("f64", points)], out="f64", ref=ref, node=wire(op)),
        case(op, [tensor("f16", points[1])], out="f16", ref=ref, node=wire(op)),
        case(op, [tensor("bf16", points[0])], out="bf16", ref=ref, node=wire(op)),
        case(op, [tensor("s64", INT_POINTS.get(op, [-1, 0, 2]))], out="f32", ref=ref,
             node=wire(op)),
        case(op, [tensor("f32", special)], out="f32", ref=ref, node=wire(op)),
        # a plain number becomes an f32 scalar
        case(op, [number(0.5, "f32")], out="f32", ref=ref, node=wire(op)),
    ]

CASES += [
    case("negate", [tensor("s64", [[-3, 0], [7, 2**40]])], out="s64", ref=np.negative,
         node=wire("negate")),
    case("negate", [tensor("f32", [-1.5, 0.0, 2.25, np.inf])], out="f32", ref=np.negative,
         node=wire("negate"), name="negate(f32[4] with inf) -> f32"),
    case("negate", [tensor("f64", [[-1.5, 0.5], [2.0, 3.0]])], out="f64", ref=np.negative,
         node=wire("negate"), grad=True),
    case("negate", [tensor("u8", [0, 1, 200])], out="u8", ref=np.negative,
         node=wire("negate")),  # wraps: [0, 255, 56]
    case("negate", [tensor("s8", [-128, -1, 127])], out="s8", ref=np.negative,
         node=wire("negate")),  # -(-128) wraps to -128
    case("abs", [tensor("s64", [[-3, 0], [7, -2**40]])], out="s64", ref=np.abs,
         node=wire("abs")),
    case("abs", [tensor("f32", [-1.5, -0.0, 2.25, -np.inf])], out="f32", ref=np.abs,
         node=wire("abs")),
    case("abs", [tensor("f64", [[-1.5, 0.5], [-2.0, 3.0]])], out="f64", ref=np.abs,
         node=wire("abs"), grad=True),
    case("abs", [tensor("bf16", [-1.5, 0.5, -256.0])], out="bf16", ref=np.abs,
         node=wire("abs")),
    case("abs", [tensor("s16", [-300, 0, 300])], out="s16", ref=np.abs, node=wire("abs")),
    case("abs", [number(-2, "s64")], out="s64", ref=np.abs, node=wire("abs")),
]
