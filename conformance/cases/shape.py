"""Shape ops: reshape transpose broadcast slice concatenate new_axis squeeze, and iota.

new_axis and squeeze travel as :reshape nodes; a call that changes nothing (same shape,
identity permutation) builds no node, so it is not a case here.
"""

from typing import Any

import numpy as np

from conformance.case import case, iota, number, tensor, wire

A = iota("s64", (2, 3, 4))
F = tensor("f32", np.linspace(-1.0, 1.0, 6).round(4).tolist(), (2, 3))


def _iota(shape: tuple[int, ...], axis: int | None = None) -> Any:
    if axis is None:
        return np.arange(int(np.prod(shape))).reshape(shape)
    index = [1] * len(shape)
    index[axis] = shape[axis]
    return np.broadcast_to(np.arange(shape[axis]).reshape(index), shape)


def _slice(starts: list[int], lengths: list[int], strides: list[int]) -> Any:
    def ref(x: Any, *_ignored: Any) -> Any:
        index = tuple(slice(s, s + n, k) for s, n, k in zip(starts, lengths, strides, strict=True))
        return x[index]

    return ref


CASES = [
    # reshape
    case("reshape", [A, (6, 4)], out="s64", ref=lambda x, s: x.reshape(s), node=wire("reshape")),
    case("reshape", [F, (3, 2)], out="f32", ref=lambda x, s: x.reshape(s), node=wire("reshape"),
         grad=True),
    case("reshape", [tensor("s64", [1, 2, 3, 4]), (2, "auto")], out="s64",
         ref=lambda x, _s: x.reshape(2, -1), node=wire("reshape"), source="Nx.reshape docs"),
    case("reshape", [tensor("bf16", [1.5]), ()], out="bf16", ref=lambda x, _s: x.reshape(()),
         node=wire("reshape")),
    # transpose
    case("transpose", [F], out="f32", ref=np.transpose, node=wire("transpose", axes=[1, 0]),
         grad=True),
    case("transpose", [A], {"axes": [2, 0, 1]}, out="s64", ref=lambda x: x.transpose(2, 0, 1),
         node=wire("transpose", axes=[2, 0, 1])),
    case("transpose", [A], {"axes": [-1, 1, 0]}, out="s64", ref=lambda x: x.transpose(2, 1, 0),
         node=wire("transpose", axes=[2, 1, 0])),
    case("transpose", [tensor("u8", [[1, 2, 3]])], out="u8", ref=np.transpose,
         node=wire("transpose", axes=[1, 0])),
    # broadcast
    case("broadcast", [tensor("s64", [1, 2]), (2, 2)], out="s64",
         ref=lambda x, s: np.broadcast_to(x, s), node=wire("broadcast", axes=[1]),
         source="Nx.broadcast docs"),
    case("broadcast", [tensor("s64", [1, 2]), (2, 2)], {"axes": [0]}, out="s64",
         ref=lambda x, s: np.broadcast_to(x[:, None], s), node=wire("broadcast", axes=[0]),
         source="Nx.broadcast docs"),
    case("broadcast", [tensor("f32", [[0.5], [1.5]]), (3, 2, 4)], out="f32",
         ref=lambda x, s: np.broadcast_to(x, s), node=wire("broadcast", axes=[1, 2]), grad=True),
    case("broadcast", [number(1.5, "f32"), (2, 3)], out="f32",
         ref=lambda x, s: np.broadcast_to(x, s), node=wire("broadcast", axes=[])),
    case("broadcast", [tensor("f64", [1.0, 2.0, 3.0]), (3, 2)], {"axes": [-2]}, out="f64",
         ref=lambda x, s: np.broadcast_to(x[:, None], s), node=wire("broadcast", axes=[0])),
    # slice (start indices are clamped so the slice stays inside the tensor)
    case("slice", [tensor("s64", [1, 2, 3, 4, 5, 6]), [1], [4]], {"strides": 2}, out="s64",
         ref=_slice([1], [4], [2]), node=wire("slice", start_indices=[1], lengths=[4],
                                                 strides=[2]), source="Nx.slice docs"),
    case("slice", [A, [0, 1, 0], [2, 2, 4]], {"strides": [1, 1, 2]}, out="s64",
         ref=_slice([0, 1, 0], [2, 2, 4], [1, 1, 2]),
         node=wire("slice", start_indices=[0, 1, 0], lengths=[2, 2, 4], strides=[1, 1, 2])),
    case("slice", [F, [1, 1], [1, 2]], out="f32", ref=_slice([1, 1], [1, 2], [1, 1]),
         node=wire("slice", start_indices=[1, 1], lengths=[1, 2], strides=[1, 1]), grad=True),
    case("slice", [tensor("f32", [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), [5], [3]], out="f32",
         ref=_slice([3], [3], [1]),
         node=wire("slice", start_indices=[3], lengths=[3], strides=[1]),
         name="slice(clamped start 5 -> 3)"),
    case("slice", [tensor("f64", np.arange(10.0)), [1], [7]], {"strides": 3}, out="f64",
         ref=_slice([1], [7], [3]), node=wire("slice", start_indices=[1], lengths=[7],
                                                  strides=[3])),
    # concatenate
    case("concatenate", [[tensor("s64", [1, 2]), tensor("s64", [3])]], out="s64",
         ref=lambda ts: np.concatenate(ts), node=wire("concatenate", axis=0),
         source="Nx.concatenate docs"),
    case("concatenate", [[F, tensor("s64", [[7], [8]]), F]], {"axis": 1}, out="f32",
         ref=lambda ts: np.concatenate(ts, axis=1), node=wire("concatenate", axis=1),
         grad=True),
    case("concatenate", [[A, iota("u8", (2, 1, 4))]], {"axis": -2}, out="s64",
         ref=lambda ts: np.concatenate(ts, axis=1), node=wire("concatenate", axis=1)),
    case("concatenate", [[tensor("bf16", [0.5]), tensor("f16", [1.5, 2.5])]], out="f16",
         ref=lambda ts: np.concatenate(ts), node=wire("concatenate", axis=0)),
    # new_axis and squeeze are reshapes on the wire
    case("new_axis", [tensor("s64", [1, 2]), -1], out="s64", ref=lambda x, _a: x[:, None],
         node=wire("reshape"), source="Nx.new_axis docs"),
    case("new_axis", [F, 0], out="f32", ref=lambda x, _a: x[None], node=wire("reshape"),
         grad=True),
    case("new_axis", [F, 1], out="f32", ref=lambda x, _a: x[:, None], node=wire("reshape")),
    case("squeeze", [tensor("s64", [[1, 2]])], out="s64", ref=np.squeeze, node=wire("reshape"),
         source="Nx.squeeze docs"),
    case("squeeze", [tensor("f32", [[[0.5], [1.5]]])], {"axes": [0]}, out="f32",
         ref=lambda x: x[0], node=wire("reshape"), grad=True),
    case("squeeze", [tensor("f64", [[[0.5], [1.5]]])], {"axes": [-1, 0]}, out="f64",
         ref=lambda x: x[0, :, 0], node=wire("reshape")),
    # iota
    case("iota", [(2, 3)], {"axis": 1}, out="s64", ref=lambda s: _iota(s, 1),
         node=wire("iota", axis=1), source="Nx.iota docs"),
    case("iota", [(2, 3)], out="s64", ref=lambda s: _iota(s), node=wire("iota", axis=None)),
    case("iota", [(4,)], {"type": "f32"}, out="f32", ref=lambda s: _iota(s).astype(float),
         node=wire("iota", axis=None)),
    case("iota", [(2, 2, 3)], {"axis": -3, "type": "bf16"}, out="bf16",
         ref=lambda s: _iota(s, 0).astype(float), node=wire("iota", axis=0)),
    case("iota", [(3, 2)], {"axis": 0, "type": "u8"}, out="u8", ref=lambda s: _iota(s, 0),
         node=wire("iota", axis=0)),
]
