"""Element-wise binary ops: add subtract multiply divide pow max min.

The output type merges the input types (Nx.Type.merge); divide is always floating. Shapes
broadcast from the right. A number next to a tensor takes the tensor's type where it can.
"""

import math

import numpy as np

from conformance.case import Case, case, number, tensor, wire

OPS = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "pow": np.power,
    "max": np.maximum,
    "min": np.minimum,
}

A_F = tensor("f32", [[0.5, 1.25, 2.0], [3.0, 0.75, 1.5]])
B_F = tensor("f32", [1.5, 0.5, 2.5])  # broadcast {3} against {2, 3}
A_D = tensor("f64", [[0.5, 1.25, 2.0], [3.0, 0.75, 1.5]])
B_D = tensor("f64", [[1.5, 0.25, 2.5], [0.5, 2.0, 1.25]])
A_I = tensor("s64", [[1, 2, 3], [4, 5, 6]])
B_I = tensor("s64", [[3], [2]])  # broadcast {2, 1} against {2, 3}
COL = tensor("f32", [[0.5], [1.5], [2.0], [3.0]])  # {4, 1} against {1, 5}
ROW = tensor("f32", [[0.25, 0.5, 1.0, 2.0, 4.0]])

CASES: list[Case] = []
for op, ref in OPS.items():
    int_out = "f32" if op == "divide" else "s64"
    CASES += [
        case(op, [A_F, B_F], out="f32", ref=ref, node=wire(op), grad=True),
        case(op, [A_D, B_D], out="f64", ref=ref, node=wire(op), grad=True),
        case(op, [A_I, B_I], out=int_out, ref=ref, node=wire(op)),
        case(op, [COL, ROW], out="f32", ref=ref, node=wire(op)),
        case(op, [tensor("f16", [0.5, 1.5, 3.0]), tensor("f16", [2.0, 0.5, 1.5])], out="f16",
             ref=ref, node=wire(op)),
        case(op, [tensor("bf16", [0.5, 1.5, 3.0]), tensor("bf16", [2.0, 0.5, 1.5])],
             out="bf16", ref=ref, node=wire(op)),
        # mixed types: s64 with f32 -> f32, u8 with s8 -> s16, bf16 with f16 -> f32
        case(op, [A_I, B_F], out="f32", ref=ref, node=wire(op)),
        case(op, [tensor("u8", [200, 3, 9]),
                  tensor("s8", [1, 3, 2] if op == "pow" else [2, -1, 2])],
             out="f32" if op == "divide" else "s16", ref=ref, node=wire(op)),
        # (real Nx 0.7.2 merges bf16 with f16 into f16)
        case(op, [tensor("bf16", [0.5, 2.0]), tensor("f16", [1.5, 3.0])], out="f16",
             ref=ref, node=wire(op)),
        # numbers are weakly typed: an integer stays u8 next to u8, a float makes f32
        case(op, [tensor("u8", [1, 2, 3]), number(2, "u8")],
             out="f32" if op == "divide" else "u8", ref=ref, node=wire(op)),
        case(op, [number(1.5, "f32"), tensor("s32", [1, 2, 3])], out="f32", ref=ref,
             node=wire(op)),
        case(op, [number(3, "s64"), number(2, "s64")], out=int_out, ref=ref, node=wire(op)),
    ]

CASES += [
    # integers wrap around in their type
    case("add", [tensor("u8", [250, 255]), tensor("u8", [10, 1])], out="u8",
         ref=np.add, node=wire("add")),
    case("multiply", [tensor("s8", [100, -100]), tensor("s8", [2, 2])], out="s8",
         ref=np.multiply, node=wire("multiply")),
    case("subtract", [tensor("u8", [0, 5]), tensor("u8", [1, 10])], out="u8",
         ref=np.subtract, node=wire("subtract")),
    # IEEE division by zero
    case("divide", [tensor("f32", [1.0, -1.0, 0.0, 2.0]), tensor("f32", [0.0, 0.0, 0.0, -0.0])],
         out="f32", ref=np.divide, node=wire("divide"), name="divide(f32 by zero) -> f32"),
    # integer pow is exact beyond f64's 53 bits
    case("pow", [tensor("s64", [3, 2, 7]), tensor("s64", [39, 62, 0])], out="s64",
         ref=lambda a, b: np.array([int(x) ** int(y) for x, y in zip(a, b, strict=True)],
                                   dtype=np.int64),
         node=wire("pow"), source="python integers"),
    case("pow", [tensor("f64", [2.0, 0.5, 10.0]), tensor("f64", [0.5, -2.0, 1.5])],
         out="f64", ref=np.power, node=wire("pow"), name="pow(f64 fractional exponents)"),
    case("pow", [tensor("f32", [-8.0, 0.0, math.inf]), tensor("f32", [0.5, -1.0, -1.0])],
         out="f32", ref=np.power, node=wire("pow"), name="pow(f32 nan, inf and zero)"),
    # unsigned 16 and 32 bits: u16 wraps, u32 with u16 merges to u32
    case("add", [tensor("u16", [65535, 1]), tensor("u16", [1, 2])], out="u16", ref=np.add,
         node=wire("add")),
    case("max", [tensor("u32", [4_000_000_000, 1]), tensor("u16", [7, 65535])], out="u32",
         ref=np.maximum, node=wire("max")),
    case("multiply", [tensor("u32", [65536, 3]), tensor("u32", [65536, 5])], out="u32",
         ref=np.multiply, node=wire("multiply")),
    case("max", [tensor("s64", [-(2**62), 5]), tensor("s64", [2**62, -5])], out="s64",
         ref=np.maximum, node=wire("max")),
    case("min", [tensor("s64", [-(2**62), 5]), tensor("s64", [2**62, -5])], out="s64",
         ref=np.minimum, node=wire("min")),
]
