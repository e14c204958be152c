"""Nx.vectorize/2,3, Nx.devectorize/2, Nx.revectorize/3 and ops on vectorized tensors.

`vectorized(t, :x, ...)` is an argument whose leading axes are vectorized; a result's
vectorized axes are declared with `vectorized_out` (the leading axes of the reference). The
three functions only relabel axes (no node; the values keep their row-major order); ops on
vectorized tensors apply per entry of the vectorized axes, broadcasting against
non-vectorized operands (references: NumPy on the full arrays). No gradient cases: the sum
of a vectorized result is itself vectorized (test_elixir/nx_vectorize_test.exs checks
gradients through vectorized ops).
"""

import numpy as np

from conformance.case import Case, case, iota, tensor, vectorized

V = vectorized(iota("s64", (2, 3)), "x")
VF = vectorized(tensor("f32", np.linspace(-1.0, 1.0, 12).round(4).tolist(), (2, 2, 3)), "x")


def same(t: np.ndarray, *_: object) -> np.ndarray:
    return t


CASES: list[Case] = [
    case("vectorize", [iota("s64", (2, 3)), "x"], out="s64", ref=same, node=None,
         vectorized_out=[("x", 2)]),
    case("vectorize", [tensor("f32", np.linspace(0, 1, 12).round(4).tolist(), (2, 2, 3)),
                       ["x", "y"]], out="f32", ref=same, node=None,
         vectorized_out=[("x", 2), ("y", 2)]),
    case("vectorize", [iota("u8", (3, 2)), [("rows", 3)]], out="u8", ref=same, node=None,
         vectorized_out=[("rows", 3)]),
    case("devectorize", [V], out="s64", ref=same, node=None),
    case("devectorize", [VF], {"keep_names": False}, out="f32", ref=same, node=None),
    case("revectorize", [iota("s64", (2, 3)), [("y", 3)]], {"target_shape": (2,)}, out="s64",
         ref=lambda t, _a: t.reshape(3, 2), node=None, vectorized_out=[("y", 3)]),
    case("revectorize", [VF, [("a", 3), ("b", 2)]], {"target_shape": (2,)}, out="f32",
         ref=lambda t, _a: t.reshape(3, 2, 2), node=None,
         vectorized_out=[("a", 3), ("b", 2)]),
    # ops on vectorized tensors
    case("add", [VF, tensor("f32", [10.0, 20.0, 30.0])], out="f32",
         ref=lambda a, b: a + b, node=None, vectorized_out=[("x", 2)]),
    case("multiply", [V, tensor("f64", 0.5)], out="f64", ref=lambda a, b: a * b, node=None,
         vectorized_out=[("x", 2)]),
    case("sum", [VF], {"axes": [1]}, out="f32", ref=lambda t: t.sum(axis=2), node=None,
         vectorized_out=[("x", 2)]),
    case("dot", [V, tensor("s64", [1, -1, 2])], out="s64", ref=lambda a, b: a @ b,
         node=None, vectorized_out=[("x", 2)]),
]
