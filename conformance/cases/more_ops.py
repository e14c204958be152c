"""The rest of issue #3's list: outer, conv, put_slice, stack, eye, make_diagonal, all_close,
second types for ops the other families exercise in one (is_infinity, logical_not, all, any,
standard_deviation, take_along_axis, indexed_add) and f64 gradient checks for differentiable
ops no other case checks (sign, floor, ceil, round: zero almost everywhere).

conv's reference is our own direct convolution in float64 (input dilated, padded, then each
output element the sum over its window and the channels of its feature group), with the
layouts of `:input_permutation`/`:kernel_permutation`/`:output_permutation` applied as
transposes.
"""

import itertools
import math
from typing import Any

import numpy as np

from conformance.case import Case, case, iota, number, tensor, wire

# --- conv ----------------------------------------------------------------------------------


def _conv(strides: list[int], padding: list[tuple[int, int]], input_dilation: list[int],
          kernel_dilation: list[int], groups: int = 1, in_perm: list[int] | None = None,
          k_perm: list[int] | None = None, out_perm: list[int] | None = None) -> Any:
    def ref(x: Any, k: Any) -> Any:
        x = np.transpose(x, in_perm) if in_perm else x
        k = np.transpose(k, k_perm) if k_perm else k
        spatial = x.ndim - 2
        # input dilation: d - 1 zeros between elements
        shape = [x.shape[0], x.shape[1]] + [(n - 1) * d + 1 for n, d in
                                            zip(x.shape[2:], input_dilation, strict=True)]
        dilated = np.zeros(shape)
        dilated[(slice(None), slice(None)) + tuple(slice(None, None, d) for d in
                                                   input_dilation)] = x
        padded = np.pad(dilated, [(0, 0), (0, 0)] + list(padding))
        span = [(n - 1) * d + 1 for n, d in zip(k.shape[2:], kernel_dilation, strict=True)]
        out_sp = [(n - s) // st + 1 for n, s, st in
                  zip(padded.shape[2:], span, strides, strict=True)]
        out_ch, per_group = k.shape[0], k.shape[1]
        out = np.zeros([x.shape[0], out_ch] + out_sp)
        for o in range(out_ch):
            g = o // (out_ch // groups)
            chans = slice(g * per_group, (g + 1) * per_group)
            for pos in itertools.product(*(range(n) for n in out_sp)):
                window = padded[(slice(None), chans) + tuple(
                    slice(p * st, p * st + s, d) for p, st, s, d in
                    zip(pos, strides, span, kernel_dilation, strict=True))]
                out[(slice(None), o) + pos] = np.tensordot(
                    window, k[o], axes=(list(range(1, spatial + 2)),
                                        list(range(spatial + 1))))
        return np.transpose(out, out_perm) if out_perm else out

    return ref


def _cwire(rank: int, strides: list[int], padding: list[tuple[int, int]],
           input_dilation: list[int], kernel_dilation: list[int], groups: int = 1,
           in_perm: list[int] | None = None, k_perm: list[int] | None = None,
           out_perm: list[int] | None = None) -> Any:
    identity = list(range(rank))
    return wire("conv", strides=strides, padding=padding, input_dilation=input_dilation,
                kernel_dilation=kernel_dilation, feature_group_size=groups, batch_group_size=1,
                input_permutation=in_perm or identity, kernel_permutation=k_perm or identity,
                output_permutation=out_perm or identity)


IMG = tensor("f64", np.linspace(-1.0, 1.5, 40).round(4).tolist(), (2, 2, 2, 5))
KER = tensor("f64", [0.5, -1.0, 0.25, 2.0, 1.0, -0.5, 0.75, 0.0, -0.25, 1.5, 0.5, 1.0] * 3,
             (3, 2, 2, 3))
SEQ = iota("s64", (1, 4, 5))
SEQ_K = tensor("f32", [1.0, -1.0, 0.5, 2.0, 0.0, 1.0, -0.5, 1.5, 1.0, 0.25, -2.0, 0.5],
               (2, 2, 3))
NWC = tensor("f32", np.linspace(-2.0, 2.0, 12).round(4).tolist(), (2, 3, 2))

CASES: list[Case] = [
    case("conv", [iota("f32", (1, 1, 4)), tensor("f32", [[[1.0, 1.0]]])], out="f32",
         expected=[[[1.0, 3.0, 5.0]]], node=_cwire(3, [1], [(0, 0)], [1], [1]),
         source="Nx.conv docs"),
    case("conv", [IMG, KER], {"strides": [1, 2], "padding": [(1, 0), (0, 2)],
                              "kernel_dilation": [1, 2]}, out="f64",
         ref=_conv([1, 2], [(1, 0), (0, 2)], [1, 1], [1, 2]),
         node=_cwire(4, [1, 2], [(1, 0), (0, 2)], [1, 1], [1, 2]), grad=True),
    case("conv", [SEQ, SEQ_K], {"padding": "same", "feature_group_size": 2}, out="f32",
         ref=_conv([1], [(1, 1)], [1], [1], groups=2),
         node=_cwire(3, [1], [(1, 1)], [1], [1], groups=2)),
    # NWC input, WIO kernel (Nx.transpose semantics), NWC output; input dilation
    case("conv", [NWC, tensor("f32", [[[1.0], [-2.0]]])],
         {"padding": [(1, 1)], "input_dilation": 2, "input_permutation": [0, 2, 1],
          "kernel_permutation": [2, 1, 0], "output_permutation": [0, 2, 1]}, out="f32",
         ref=_conv([1], [(1, 1)], [2], [1], in_perm=[0, 2, 1], k_perm=[2, 1, 0],
                   out_perm=[0, 2, 1]),
         node=_cwire(3, [1], [(1, 1)], [2], [1], in_perm=[0, 2, 1], k_perm=[2, 1, 0],
                     out_perm=[0, 2, 1]),
         name="conv(f32[2][3][2] NWC, f32[1][2][1] WIO, input_dilation: 2) -> f32"),
    # outer (Nx composes it: both arguments flattened)
    case("outer", [tensor("s64", [1, 2]), tensor("s64", [10, 20, 30])], out="s64",
         expected=[[10, 20, 30], [20, 40, 60]], node=None, source="Nx.outer docs"),
    case("outer", [tensor("f32", [[0.5, -1.0], [2.0, 1.5]]), tensor("f64", [1.0, -2.0, 0.25])],
         out="f64", ref=lambda a, b: np.outer(a, b), node=None, grad=True),
    case("outer", [tensor("u8", [16, 2]), tensor("u8", [16, 3])], out="u8",
         ref=lambda a, b: np.outer(a, b), node=None, source="u8 products wrap: 256 -> 0"),
    # put_slice: start indices are clamped so the slice fits
    case("put_slice", [iota("s64", (5,)), [number(3, "s64")], tensor("s64", [7, 8])],
         out="s64", expected=[0, 1, 2, 7, 8], node=wire("put_slice").inputs(0, 2, 1),
         source="Nx.put_slice docs"),
    case("put_slice", [iota("s64", (5,)), [number(4, "s64")], tensor("s64", [7, 8])],
         out="s64", expected=[0, 1, 2, 7, 8], node=wire("put_slice").inputs(0, 2, 1),
         source="Nx.put_slice docs (clamped start)"),
    case("put_slice", [tensor("f32", np.linspace(0, 1, 12).round(4).tolist(), (3, 4)),
                       [number(1, "s64"), number(-1, "s64")],
                       tensor("f32", [[9.0, 8.0], [7.0, 6.0]])], out="f32",
         ref=lambda x, _s, u: np.concatenate([x[:1], np.concatenate([u, x[1:, 2:]], 1)]),
         node=wire("put_slice").inputs(0, 3, 1, 2), grad=True,
         name="put_slice(f32[3][4], [1, -1], f32[2][2])"),
    case("put_slice", [tensor("f64", [[1.0, 2.0], [3.0, 4.0]]), [0, 1],
                       tensor("s64", [[5], [6]])], out="f64", expected=[[1.0, 5.0], [3.0, 6.0]],
         node=None, grad=True, source="slice cast to the merged type"),
    # stack (Nx composes it: new axes, then concatenate)
    case("stack", [[tensor("s64", [1, 2]), tensor("s64", [3, 4])]], {"axis": 1}, out="s64",
         expected=[[1, 3], [2, 4]], node=None, source="Nx.stack docs"),
    case("stack", [[tensor("f32", [[1.0, 2.0]]), tensor("f64", [[0.5, -1.0]])]], out="f64",
         ref=lambda ts: np.stack(ts), node=None, grad=True),
    case("stack", [[tensor("u8", [1]), tensor("s8", [-1]), tensor("u8", [2])]], {"axis": -1},
         out="s16", expected=[[1, -1, 2]], node=None, source="types merge as in Nx.add"),
    # eye (iota, equal, as_type)
    case("eye", [3], out="s64", ref=lambda _n: np.eye(3, dtype=np.int64), node=None),
    case("eye", [(2, 3)], {"type": "f32"}, out="f32", ref=lambda _s: np.eye(2, 3), node=None),
    case("eye", [(2, 2, 3)], {"type": "u8"}, out="u8",
         ref=lambda _s: np.broadcast_to(np.eye(2, 3, dtype=np.int64), (2, 2, 3)), node=None),
    # make_diagonal
    case("make_diagonal", [tensor("s64", [1, 2])], {"offset": -1}, out="s64",
         expected=[[0, 0, 0], [1, 0, 0], [0, 2, 0]], node=None, source="Nx.make_diagonal docs"),
    case("make_diagonal", [tensor("f32", [1.5, -2.0, 0.25])], {"offset": 1}, out="f32",
         ref=lambda v: np.diag(v, 1), node=None, grad=True),
    case("make_diagonal", [tensor("f64", [0.5, 3.0])], out="f64", ref=np.diag, node=None,
         grad=True),
    # all_close: u8 scalar
    case("all_close", [tensor("f32", [1.0, 2.0]), tensor("f32", [1.0, 2.00001])], out="u8",
         expected=1, node=None, source="Nx.all_close docs"),
    case("all_close", [tensor("f32", [1.0, math.nan]), tensor("f32", [1.0, math.nan])],
         {"equal_nan": True}, out="u8", expected=1, node=None, source="Nx.all_close docs"),
    case("all_close", [tensor("f32", [1.0, math.nan]), tensor("f32", [1.0, math.nan])],
         out="u8", expected=0, node=None, source="NaN is not close without equal_nan",
         name="all_close(f32[2] with NaN, f32[2] with NaN) -> u8"),
    case("all_close", [tensor("s64", [[1, 2], [3, 4]]), tensor("f64", [1.0, 2.0])], out="u8",
         expected=0, node=None, source="broadcast: row 2 differs"),
    case("all_close", [tensor("f64", [[1.0, 2.0], [1.0, 2.0]]), tensor("s64", [1, 2])],
         {"rtol": 0.0, "atol": 0.0}, out="u8", expected=1, node=None,
         source="broadcast, exact"),
    case("all_close", [tensor("f64", [1.0, math.inf]), tensor("f64", [1.1, math.inf])],
         {"atol": 0.2}, out="u8", expected=1, node=None, source="equal infinities are close"),
    # second types for ops exercised in one elsewhere
    case("is_infinity", [tensor("f32", [math.inf, -1.0, math.nan])], out="u8", ref=np.isinf,
         node=wire("is_infinity")),
    case("is_infinity", [tensor("f64", [[-math.inf, 0.0], [1e308, math.inf]])], out="u8",
         ref=np.isinf, node=wire("is_infinity")),
    case("is_infinity", [tensor("s64", [1, -1])], out="u8", expected=[0, 0],
         node=wire("is_infinity"), source="integers are finite"),
    case("logical_not", [tensor("s64", [0, 3, -1])], out="u8", ref=np.logical_not,
         node=wire("logical_not")),
    case("logical_not", [tensor("f64", [[0.0, math.nan], [-0.0, 1e-300]])], out="u8",
         ref=np.logical_not, node=wire("logical_not")),
    case("all", [tensor("f32", [[1.0, 0.5], [0.0, -2.0]])], {"axes": [0]}, out="u8",
         ref=lambda x: np.all(x, axis=0), node=wire("all", axes=[0], keep_axes=False)),
    case("any", [tensor("f32", [[0.0, 0.0], [0.0, -2.0]])], {"axes": [1]}, out="u8",
         ref=lambda x: np.any(x, axis=1), node=wire("any", axes=[1], keep_axes=False)),
    case("standard_deviation", [tensor("f64", [[1.0, 2.5, -1.0], [0.5, 4.0, 3.0]])],
         {"axes": [1], "ddof": 1}, out="f64", ref=lambda x: np.std(x, axis=1, ddof=1),
         node=None, grad=True),
    case("standard_deviation", [tensor("s64", [1, 2, 3, 4])], out="f32",
         ref=np.std, node=None),
    case("take_along_axis", [tensor("f32", [[0.5, 1.5], [2.5, -1.0]]),
                             tensor("s32", [[1, 1, 0], [0, 1, 0]])], {"axis": 1}, out="f32",
         ref=lambda x, i: np.take_along_axis(x, i, axis=1),
         node=wire("take_along_axis", axis=1), grad=True),
    case("take_along_axis", [iota("u8", (3, 2)), tensor("s64", [[2, 0]])], {"axis": 0},
         out="u8", ref=lambda x, i: np.take_along_axis(x, i, axis=0),
         node=wire("take_along_axis", axis=0)),
    case("indexed_add", [iota("s64", (2, 3)), tensor("s64", [[0, 1], [0, 1], [1, 2]]),
                         tensor("s64", [10, 5, 7])], out="s64",
         expected=[[0, 16, 2], [3, 4, 12]], node=wire("indexed_add", axes=[0, 1]),
         source="repeated indices accumulate"),
    case("indexed_add", [tensor("f64", [1.0, 2.0, 3.0]), tensor("s64", [[2], [0]]),
                         tensor("f64", [0.5, -1.5])], out="f64", expected=[-0.5, 2.0, 3.5],
         node=wire("indexed_add", axes=[0]), grad=True),
    # gradients of piecewise-constant ops: zero away from the jumps
    case("floor", [tensor("f64", [-1.5, 0.25, 2.7])], out="f64", ref=np.floor,
         node=wire("floor"), grad=True),
    case("ceil", [tensor("f32", [-1.5, 0.25, 2.7])], out="f32", ref=np.ceil,
         node=wire("ceil"), grad=True),
    case("round", [tensor("f64", [-1.7, 0.25, 2.6])], out="f64", ref=np.round,
         node=wire("round"), grad=True),
    case("sign", [tensor("f64", [-1.5, 0.25, 2.7])], out="f64", ref=np.sign,
         node=wire("sign"), grad=True),
]
