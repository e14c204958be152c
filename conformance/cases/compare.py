"""Comparisons: equal not_equal less less_equal greater greater_equal -> u8 of 0 and 1.

Inputs are compared in their merged type (u8 200 against s8 -1 in s16), with broadcasting;
an integer number next to an integer tensor stays s64.
"""

import math

import numpy as np

from conformance.case import Case, Wire, case, number, tensor, wire

OPS = {
    "equal": np.equal,
    "not_equal": np.not_equal,
    "less": np.less,
    "less_equal": np.less_equal,
    "greater": np.greater,
    "greater_equal": np.greater_equal,
}

# the wire node carries the merged type (decided by the Elixir side, Nx.Type.merge/2)
def _node(op: str, kind: str, bits: int) -> Wire:
    return wire(op, operand_type=(kind, bits))


CASES: list[Case] = []
for op, ref in OPS.items():
    CASES += [
        case(op, [tensor("s64", [[1, 2, 3], [4, 5, 6]]), tensor("s64", [[2], [5]])],
             out="u8", ref=ref, node=_node(op, "s", 64)),
        case(op, [tensor("f32", [[0.5, 1.0], [1.5, -0.0]]), tensor("f32", [1.0, 0.0])],
             out="u8", ref=ref, node=_node(op, "f", 32)),
        case(op, [tensor("f64", [1.0, math.nan, math.inf]), tensor("f64", [1.0, math.nan, 1.0])],
             out="u8", ref=ref, node=_node(op, "f", 64), name=f"{op}(f64 with nan and inf)"),
        case(op, [tensor("u8", [200, 0, 1]), tensor("s8", [-1, 0, 2])], out="u8", ref=ref,
             node=_node(op, "s", 16)),
        case(op, [tensor("u8", [1, 2, 3]), number(2, "s64")], out="u8", ref=ref,
             node=_node(op, "s", 64)),
        case(op, [tensor("bf16", [0.5, 2.0, 3.0]), number(2, "bf16")], out="u8", ref=ref,
             node=_node(op, "bf", 16)),
        case(op, [tensor("s32", [1, 2, 3]), tensor("f16", [1.5, 2.0, 2.5])], out="u8",
             ref=ref, node=_node(op, "f", 16)),
    ]
