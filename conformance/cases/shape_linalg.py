"""Issue #3 part B: shape, indexing, sorting and linear-algebra ops (one wire node each)."""

import numpy as np

from conformance.case import case, iota, number, tensor, wire

M = tensor("f32", [[3.0, 1.0, 2.0], [0.5, 4.0, -1.0]])
M64 = tensor("f64", [[3.0, 1.0, 2.0], [0.5, 4.0, -1.0]])
IDX = tensor("s64", [[1, 0], [2, 2]])
J = tensor("s64", [[1, 0], [0, 2]])

CASES = [
    case("pad", [M, number(0.0, "f32"), [(1, 0, 0), (0, 1, 1)]], out="f32",
         ref=lambda x, v, _c: np.pad(
             np.insert(x, [1, 2], v, axis=1), ((1, 0), (0, 1)), constant_values=v),
         node=wire("pad", padding_config=[(1, 0, 0), (0, 1, 1)]), grad=True),
    case("pad", [iota("s32", (4,)), number(9, "s32"), [(-1, 2, 0)]], out="s32",
         expected=[1, 2, 3, 9, 9], node=wire("pad", padding_config=[(-1, 2, 0)])),
    case("reverse", [M], {"axes": [1]}, out="f32", ref=lambda x: x[:, ::-1],
         node=wire("reverse", axes=[1]), grad=True),
    case("reverse", [iota("u8", (2, 3))], out="u8", ref=lambda x: x[::-1, ::-1],
         node=wire("reverse", axes=[0, 1])),
    case("take", [M, tensor("s64", [2, 0, 2])], {"axis": 1}, out="f32",
         ref=lambda x, i: np.take(x, i, axis=1), node=wire("take", axis=1), grad=True),
    case("take", [iota("s16", (3, 2)), tensor("u8", [[2], [0]])], out="s16",
         ref=lambda x, i: np.take(x, i, axis=0), node=wire("take", axis=0)),
    case("take_along_axis", [M64, IDX], {"axis": 1}, out="f64",
         ref=lambda x, i: np.take_along_axis(x, i, axis=1),
         node=wire("take_along_axis", axis=1), grad=True),
    case("gather", [M, tensor("s32", [[1, 2], [0, 0]])], out="f32",
         ref=lambda x, i: x[i[:, 0], i[:, 1]], node=wire("gather", axes=[0, 1]), grad=True),
    case("gather", [iota("s64", (2, 3)), tensor("s64", [[2]])], {"axes": [1]}, out="s64",
         expected=[[2, 5]], node=wire("gather", axes=[1])),
    case("indexed_add", [M, J, tensor("f32", [10.0, 20.0])], out="f32",
         expected=[[3.0, 1.0, 22.0], [10.5, 4.0, -1.0]], node=wire("indexed_add", axes=[0, 1]),
         grad=True),
    case("indexed_put", [iota("s64", (2, 3)), J, tensor("s64", [7, 8])], out="s64",
         expected=[[0, 1, 8], [7, 4, 5]], node=wire("indexed_put", axes=[0, 1])),
    case("indexed_put", [M64, tensor("s32", [[1]]), tensor("f64", [[9.0, 8.0, 7.0]])],
         out="f64", expected=[[3.0, 1.0, 2.0], [9.0, 8.0, 7.0]],
         node=wire("indexed_put", axes=[0]), grad=True),
    case("sort", [M], {"axis": 1, "direction": "desc"}, out="f32",
         ref=lambda x: -np.sort(-x, axis=1), node=wire("sort", axis=1, direction="desc"),
         grad=True),
    case("sort", [tensor("s8", [3, -1, 2])], out="s8", ref=np.sort,
         node=wire("sort", axis=0, direction="asc")),
    case("argsort", [tensor("f32", [2.0, 1.0, 2.0, 0.0])], {"direction": "desc"}, out="s64",
         expected=[0, 2, 1, 3], node=wire("argsort", axis=0, direction="desc"),
         source="stable descending order"),
    case("argsort", [tensor("u16", [[3, 1], [1, 1]])], {"axis": 1}, out="s64",
         expected=[[1, 0], [0, 1]], node=wire("argsort", axis=1, direction="asc")),
]
