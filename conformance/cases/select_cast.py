"""select (as Nx 0.7.2: the shape of a non-scalar pred, which on_true and on_false broadcast to;
type merges on_true and on_false, a
number first made a tensor of its own type: s64, f32) and
as_type (float -> integer truncates toward zero)."""

import math
from typing import Any

import numpy as np

from conformance.case import case, number, tensor, wire


def _select(p: Any, t: Any, f: Any) -> Any:
    return np.where(p != 0, t, f)


CASES = [
    case("select", [tensor("u8", [1, 0, 1]), tensor("s64", [1, 2, 3]), number(0, "s64")],
         out="s64", ref=_select, node=wire("select"), source="Nx.select docs"),
    case("select", [tensor("u8", [[1, 0, 7], [0, 1, 0]]), tensor("s64", [[1, 2, 3], [4, 5, 6]]),
                    tensor("s64", [[-1], [-2]])],
         out="s64", ref=_select, node=wire("select")),
    case("select", [tensor("u8", [[1, 1, 0], [0, 0, 1]]), tensor("f32", [0.5, 1.5, 2.5]),
                    tensor("s64", [10, 20, 30])],
         out="f32", ref=_select, node=wire("select"), grad=True),
    # (a number becomes a tensor of its own type, f32 here, before the types merge)
    case("select", [tensor("s64", [0, -3, 2]), tensor("f64", [0.5, 1.5, math.nan]),
                    number(2.5, "f32")],
         out="f64", ref=_select, node=wire("select")),
    # (Nx 0.7.2 merges bf16 with f16 into f16)
    case("select", [tensor("u8", [0, 1]), tensor("bf16", [0.5, 1.5]), tensor("f16", [2.0, 3.0])],
         out="f16", ref=_select, node=wire("select")),
    case("as_type", [tensor("f32", [1.5, -1.5, 2.7, -0.5]), "s64"], out="s64",
         ref=lambda x, _t: np.trunc(x).astype(np.int64), node=wire("as_type")),
    case("as_type", [tensor("f64", [[300.25, 0.5], [-2.75, 7.0]]), "s16"], out="s16",
         ref=lambda x, _t: np.trunc(x).astype(np.int64), node=wire("as_type")),
    case("as_type", [tensor("s64", [1, -2, 2**24 + 1]), "f32"], out="f32",
         ref=lambda x, _t: x.astype(np.float64), node=wire("as_type")),
    case("as_type", [tensor("f64", [0.1, 1e5, -1e-8]), "f16"], out="f16",
         ref=lambda x, _t: x, node=wire("as_type")),  # 1e5 overflows f16 to infinity
    case("as_type", [tensor("s32", [1, 257, -3]), "bf16"], out="bf16",
         ref=lambda x, _t: x.astype(np.float64), node=wire("as_type")),
    case("as_type", [tensor("s16", [-1, 256, 255]), "u8"], out="u8",
         ref=lambda x, _t: x, node=wire("as_type")),  # wraps: 255, 0, 255
    case("as_type", [tensor("u8", [0, 200]), "f64"], out="f64",
         ref=lambda x, _t: x.astype(np.float64), node=wire("as_type")),
    case("as_type", [tensor("f32", [0.5, -2.0]), "f64"], out="f64",
         ref=lambda x, _t: x, node=wire("as_type"), grad=True),
]
