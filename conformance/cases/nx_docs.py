"""Behaviour pinned by Nx's documented examples: type promotion of mixed inputs and numbers,
integer division, aggregate types of integer reductions. Values as Nx's docs print them."""

from conformance.case import case, number, tensor, wire

U8 = tensor("u8", [1, 2, 3])

CASES = [
    # integers divide into floats
    case("divide", [tensor("s64", [1, 2, 3]), number(2, "s64")], out="f32",
         expected=[0.5, 1.0, 1.5], node=wire("divide"), name="docs: divide s64 by 2 is f32"),
    case("divide", [number(1, "s64"), number(2, "s64")], out="f32", expected=0.5,
         node=wire("divide"), name="docs: divide(1, 2) is f32 0.5"),
    case("divide", [U8, number(1, "u8")], out="f32", expected=[1.0, 2.0, 3.0],
         node=wire("divide"), name="docs: divide u8 by 1 is f32"),
    # numbers are weakly typed
    case("add", [U8, number(1, "u8")], out="u8", expected=[2, 3, 4], node=wire("add"),
         name="docs: u8 + 1 stays u8"),
    case("add", [U8, number(1.0, "f32")], out="f32", expected=[2.0, 3.0, 4.0], node=wire("add"),
         name="docs: u8 + 1.0 is f32"),
    case("add", [U8, tensor("f32", [1.0, 2.0, 3.0])], out="f32", expected=[2.0, 4.0, 6.0],
         node=wire("add"), name="docs: u8 + f32 tensor is f32"),
    case("add", [tensor("s8", [1, 2, 3]), U8], out="s16", expected=[2, 4, 6], node=wire("add"),
         name="docs: s8 + u8 is s16"),
    case("add", [tensor("f16", [1.0, 2.0]), tensor("bf16", [0.5, 0.5])], out="f16",
         expected=[1.5, 2.5], node=wire("add"), name="real Nx 0.7.2: f16 + bf16 is f16"),
    case("multiply", [tensor("s64", [1, 2, 3]), number(2.0, "f32")], out="f32",
         expected=[2.0, 4.0, 6.0], node=wire("multiply"), name="docs: s64 * 2.0 is f32"),
    case("pow", [number(2, "s64"), number(4, "s64")], out="s64", expected=16,
         node=wire("pow"), name="docs: pow(2, 4) is s64 16"),
    case("pow", [U8, number(2, "u8")], out="u8", expected=[1, 4, 9], node=wire("pow"),
         name="docs: pow u8 by 2 stays u8"),
    # integer reductions aggregate in 64 bits; mean is floating
    case("sum", [U8], out="u64", expected=6, node=wire("sum", axes=None, keep_axes=False),
         name="docs: sum of u8 is u64"),
    case("sum", [tensor("s64", [[1, 2], [3, 4]])], out="s64", expected=10,
         node=wire("sum", axes=None, keep_axes=False), name="docs: sum of s64 matrix is 10"),
    case("mean", [tensor("s64", 42)], out="f32", expected=42.0,
         node=wire("mean", axes=None, keep_axes=False), name="docs: mean(42) is f32 42.0"),
    case("mean", [tensor("s64", [1, 2, 3])], out="f32", expected=2.0,
         node=wire("mean", axes=None, keep_axes=False), name="docs: mean of s64 is f32"),
    case("exp", [number(1, "s64")], out="f32", expected=2.7182817,
         node=wire("exp"), name="docs: exp(1) is f32 2.7182817"),
    case("as_type", [tensor("f32", [1.5, -1.5]), "s64"], out="s64", expected=[1, -1],
         node=wire("as_type"), name="docs: as_type truncates toward zero"),
]
