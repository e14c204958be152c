"""Reductions: sum product reduce_max reduce_min mean, over all axes or :axes, :keep_axes.

sum and product aggregate integers in 64 bits (signed -> s64, unsigned -> u64); reduce_max and
reduce_min keep the type; mean is floating. Axes are normalized (negative count from the end)
and sorted on the wire; all axes travel as nil.
"""

from typing import Any

import numpy as np

from conformance.case import Case, Wire, case, iota, tensor, wire

X3 = tensor("f32", np.linspace(-1.05, 1.25, 24).round(4).tolist(), (2, 3, 4))
XD = tensor("f64", [[0.5, -1.25, 2.0], [3.0, 0.75, -1.5]])
XI = tensor("s64", [[1, -2, 3], [4, 5, -6]])
U8 = tensor("u8", [200, 200, 255])

# op -> (NumPy reduction, output type for s64 / u8 / s32 inputs)
OPS = {
    "sum": (np.sum, {"s64": "s64", "u8": "u64", "s32": "s64"}),
    "product": (np.prod, {"s64": "s64", "u8": "u64", "s32": "s64"}),
    "reduce_max": (np.max, {"s64": "s64", "u8": "u8", "s32": "s32"}),
    "reduce_min": (np.min, {"s64": "s64", "u8": "u8", "s32": "s32"}),
    "mean": (np.mean, {"s64": "f32", "u8": "f32", "s32": "f32"}),
}


def _over(fun: Any, axes: list[int] | None = None, keep: bool = False) -> Any:
    def ref(x: Any) -> Any:
        axis = None if axes is None else tuple(axes)
        return fun(x, axis=axis, keepdims=keep)

    return ref


def _node(op: str, axes: list[int] | None, keep: bool) -> Wire:
    return wire(op, axes=axes, keep_axes=keep)


CASES: list[Case] = []
for op, (fun, int_out) in OPS.items():
    CASES += [
        case(op, [X3], None, out="f32", ref=_over(fun), node=_node(op, None, False),
             grad=op in ("sum", "mean", "product")),
        case(op, [X3], {"axes": [1]}, out="f32", ref=_over(fun, [1]),
             node=_node(op, [1], False), grad=True),
        case(op, [X3], {"axes": [-1, 0], "keep_axes": True}, out="f32",
             ref=_over(fun, [0, 2], True), node=_node(op, [0, 2], True)),
        case(op, [XD], {"axes": [0]}, out="f64", ref=_over(fun, [0]), node=_node(op, [0], False),
             grad=True),
        case(op, [XD], {"keep_axes": True}, out="f64", ref=_over(fun, None, True),
             node=_node(op, None, True)),
        case(op, [XI], {"axes": [1]}, out=int_out["s64"], ref=_over(fun, [1]),
             node=_node(op, [1], False)),
        case(op, [U8], None, out=int_out["u8"], ref=_over(fun), node=_node(op, None, False)),
        case(op, [tensor("bf16", [0.5, 1.5, -2.0, 4.0])], None, out="bf16", ref=_over(fun),
             node=_node(op, None, False)),
        case(op, [iota("s32", (2, 2), 1)], {"axes": [0, 1]}, out=int_out["s32"],
             ref=_over(fun, [0, 1]), node=_node(op, [0, 1], False)),
    ]

CASES += [
    case("sum", [tensor("u32", [4_000_000_000, 4_000_000_000])], out="u64", ref=np.sum,
         node=_node("sum", None, False)),
    case("reduce_max", [tensor("u16", [[1, 65535], [7, 3]])], {"axes": [0]}, out="u16",
         ref=_over(np.max, [0]), node=_node("reduce_max", [0], False)),
]
