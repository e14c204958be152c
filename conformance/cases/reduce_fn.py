"""Nx.reduce/4 and Nx.window_reduce/5: reductions with a function.

The function is given by name (`reducer("add")` is `&Nx.add/2`); on the wire it is a sub-graph
of two scalar parameters and one node (PROTOCOL.md 4.3), which tests/test_conformance.py builds
from the name. The output type merges the tensor's and the accumulator's types; both reach the
node in that type. Options are a positional keyword list (it comes before the function). The
references fold `acc` with NumPy in float64 / int64: for `reduce` over the reduced axes, for
`window_reduce` over each window of the input padded with `acc`.
"""

import itertools
from typing import Any

import numpy as np

from conformance.case import Case, case, number, reducer, tensor, wire

FOLD = {"add": np.add, "multiply": np.multiply, "max": np.maximum, "min": np.minimum}


def _reduce(name: str, axes: list[int] | None = None, keep: bool = False) -> Any:
    def ref(x: Any, acc: Any, *_: Any) -> Any:
        fn: Any = FOLD[name]
        axis = tuple(range(x.ndim)) if axes is None else tuple(axes)
        return fn(fn.reduce(x, axis=axis, keepdims=keep), acc)

    return ref


def _window(name: str, dims: tuple[int, ...], strides: tuple[int, ...],
            padding: list[tuple[int, int]], dil: tuple[int, ...]) -> Any:
    def ref(x: Any, acc: Any, *_: Any) -> Any:
        fn: Any = FOLD[name]
        padded = np.pad(x, padding, constant_values=acc)
        span = [(d - 1) * r + 1 for d, r in zip(dims, dil, strict=True)]
        shape = [(n - s) // k + 1 for n, s, k in zip(padded.shape, span, strides, strict=True)]
        out = np.empty(shape, dtype=x.dtype)
        for idx in itertools.product(*(range(n) for n in shape)):
            window = padded[tuple(slice(i * k, i * k + s, r) for i, k, s, r
                                  in zip(idx, strides, span, dil, strict=True))]
            out[idx] = fn(fn.reduce(window, axis=None), acc)
        return out

    return ref


def _wwire(dims: list[int], strides: list[int], padding: list[tuple[int, int]],
           dil: list[int]) -> Any:
    return wire("window_reduce", window_dimensions=dims, strides=strides, padding=padding,
                window_dilations=dil)


X = tensor("f32", [[0.5, -2.0, 3.0], [1.5, 4.0, -1.0]])
XD = tensor("f64", [[0.5, -2.0, 3.0, 1.25], [1.5, 4.0, -1.0, 0.75], [2.0, -0.5, 1.0, 3.5]])

CASES: list[Case] = [
    case("reduce", [tensor("s64", [[1, 2, 3], [4, 5, 6]]), number(0, "s64"), [("axes", [1])],
                    reducer("add")], out="s64", expected=[6, 15],
         node=wire("reduce", axes=[1], keep_axes=False), source="Nx.reduce docs"),
    case("reduce", [X, number(1.0, "f32"), reducer("multiply")], out="f32",
         ref=_reduce("multiply"), node=wire("reduce", axes=None, keep_axes=False)),
    case("reduce", [XD, number(10.0, "f64"), [("axes", [0]), ("keep_axes", True)],
                    reducer("min")], out="f64", ref=_reduce("min", [0], True),
         node=wire("reduce", axes=[0], keep_axes=True), grad=True),
    case("reduce", [XD, number(0.5, "f64"), [("axes", [1])], reducer("add")], out="f64",
         ref=_reduce("add", [1]), node=wire("reduce", axes=[1], keep_axes=False), grad=True),
    case("reduce", [tensor("u8", [200, 100, 7]), tensor("u8", 0), reducer("add")], out="u8",
         ref=_reduce("add"), node=wire("reduce", axes=None, keep_axes=False),
         source="u8 sum wraps: 307 mod 256"),
    case("window_reduce", [tensor("s64", [1, 2, 3, 4]), number(0, "s64"), (2,),
                           reducer("add")], out="s64", expected=[3, 5, 7],
         node=_wwire([2], [1], [(0, 0)], [1]), source="Nx.window_reduce docs"),
    case("window_reduce", [X, number(-100.0, "f32"), (2, 2), [("padding", "same")],
                           reducer("max")], out="f32",
         ref=_window("max", (2, 2), (1, 1), [(0, 1), (0, 1)], (1, 1)),
         node=_wwire([2, 2], [1, 1], [(0, 1), (0, 1)], [1, 1])),
    case("window_reduce", [XD, number(0.0, "f64"), (2, 2),
                           [("strides", [1, 2]), ("window_dilations", [2, 1])],
                           reducer("add")], out="f64",
         ref=_window("add", (2, 2), (1, 2), [(0, 0), (0, 0)], (2, 1)),
         node=_wwire([2, 2], [1, 2], [(0, 0), (0, 0)], [2, 1]), grad=True),
    case("window_reduce", [XD, number(1.0, "f64"), (1, 3), [("padding", [(0, 0), (1, 1)])],
                           reducer("multiply")], out="f64",
         ref=_window("multiply", (1, 3), (1, 1), [(0, 0), (1, 1)], (1, 1)),
         node=_wwire([1, 3], [1, 1], [(0, 0), (1, 1)], [1, 1]), grad=True),
]
