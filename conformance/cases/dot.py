"""dot/2, dot/4, dot/6: contraction and batch axes; output axes are batch, free of left, free
of right; the type merges both inputs. A scalar operand makes dot a multiply."""

from collections.abc import Sequence
from typing import Any

import numpy as np

from conformance.case import Wire, case, iota, number, tensor, wire

M23 = tensor("f32", [[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
M32 = tensor("f32", [[1.0, 2.0], [-0.5, 0.5], [0.25, -1.5]])
V3 = tensor("f32", [2.0, -1.0, 0.5])


def _contract(ca: Sequence[int], cb: Sequence[int], ba: Sequence[int] = (),
              bb: Sequence[int] = ()) -> Any:
    """dot_general in NumPy via einsum: batch axes, then free axes of a, then of b."""

    def ref(a: Any, b: Any) -> Any:
        letters = iter("abcdefghijklmnopqrstuvwxyz")
        la = [next(letters) for _ in range(a.ndim)]
        lb = [next(letters) for _ in range(b.ndim)]
        for i, j in zip(list(ca) + list(ba), list(cb) + list(bb), strict=True):
            lb[j] = la[i]
        batch = [la[i] for i in ba]
        free_a = [la[i] for i in range(a.ndim) if i not in ca and i not in ba]
        free_b = [lb[j] for j in range(b.ndim) if j not in cb and j not in bb]
        spec = f"{''.join(la)},{''.join(lb)}->{''.join(batch + free_a + free_b)}"
        return np.einsum(spec, a, b)

    return ref


def _node(ca: Sequence[int], cb: Sequence[int], ba: Sequence[int] = (),
          bb: Sequence[int] = ()) -> Wire:
    return wire("dot", contract_axes=(list(ca), list(cb)), batch_axes=(list(ba), list(bb)))


BATCHED = tensor("s64", [[[1, 2]], [[3, 4]]])

CASES = [
    case("dot", [M23, M32], out="f32", ref=_contract([1], [0]), node=_node([1], [0]), grad=True),
    case("dot", [tensor("f64", [[0.5, -1.0], [2.0, 1.5]]), tensor("f64", [[1.0, 2.0], [3.0, 4.0]])],
         out="f64", ref=_contract([1], [0]), node=_node([1], [0]), grad=True),
    case("dot", [V3, V3], out="f32", ref=_contract([0], [0]), node=_node([0], [0])),
    case("dot", [tensor("s64", [[1, 2], [3, 4]]), tensor("s64", [1, 1])], out="s64",
         ref=_contract([1], [0]), node=_node([1], [0]), source="Nx.dot docs"),
    case("dot", [iota("s64", (2, 3, 4)), iota("s32", (4, 2))], out="s64",
         ref=_contract([2], [0]), node=_node([2], [0])),
    case("dot", [tensor("s64", [[1, 2, 3], [3, 4, 5]]), M32], out="f32",
         ref=_contract([1], [0]), node=_node([1], [0])),
    case("dot", [tensor("bf16", [[0.5, 1.0], [2.0, -1.0]]), tensor("bf16", [1.5, 0.5])],
         out="bf16", ref=_contract([1], [0]), node=_node([1], [0])),
    # a scalar operand: dot is multiply
    case("dot", [number(2, "s64"), tensor("s64", [1, 2, 3])], out="s64",
         ref=lambda a, b: a * b, node=wire("multiply")),
    case("dot", [M23, tensor("f32", 0.5)], out="f32", ref=lambda a, b: a * b,
         node=wire("multiply")),
    # dot/4: explicit contraction axes (negative axes are normalized)
    case("dot", [tensor("s64", [[1, 2], [3, 4]]), [0], tensor("s64", [[1, 2], [3, 4]]), [0]],
         out="s64", ref=lambda a, _ca, b, _cb: _contract([0], [0])(a, b), node=_node([0], [0]),
         source="Nx.dot/4 docs"),
    case("dot", [M23, [-1], tensor("f32", [[1.0, 0.5, -2.0]]), [1]], out="f32",
         ref=lambda a, _ca, b, _cb: _contract([1], [1])(a, b), node=_node([1], [1]), grad=True),
    # dot/6: batch axes come first in the output
    case("dot", [BATCHED, [2], [0], BATCHED, [2], [0]], out="s64",
         ref=lambda a, _c1, _b1, b, _c2, _b2: _contract([2], [2], [0], [0])(a, b),
         node=_node([2], [2], [0], [0]), source="Nx.dot/6 docs"),
    # (Nx 0.7.2 requires the batch axes to be the leading ones, in order, on both sides)
    case("dot", [iota("f32", (4, 2, 3)), [2], [0], tensor("f64", np.linspace(-1, 1, 60), (4, 3, 5)),
                 [1], [0]],
         out="f64", ref=lambda a, _c1, _b1, b, _c2, _b2: _contract([2], [1], [0], [0])(a, b),
         node=_node([2], [1], [0], [0])),
]
