"""Hooks (PROTOCOL.md 4.5 and 2.2): the ``hook`` op is the identity on its inputs, for values
and gradients, and hands their values to a sink while the computation runs.

The lowering takes the sink as an argument; here it is a list that records ``(index, values)``.
The worker test at the end checks the ``{:hook, id, index, tensors}`` frames of a real worker
process.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
import pytest

from py_backend.channel import Binary
from py_backend.program import decode_graph, lower
from py_backend.wire_graph import GraphError, TensorOut

from .helpers import GraphBuilder, WorkerProcess, atom_str, from_wire, request, wire_tensor
from .test_lower_control_flow import IN_F64, add_with_subgraphs, elem, grad_of, sub

F64 = ("f64", ())
Record = list[tuple[int, list[Any]]]


def recorder() -> tuple[Record, Any]:
    seen: Record = []

    def sink(index: int, values: list[tuple[TensorOut, np.ndarray]]) -> None:
        for out, value in values:
            assert tuple(value.shape) == out.shape
        seen.append((index, [np.asarray(v).tolist() for _, v in values]))

    return seen, sink


def hook(g: GraphBuilder, index: int, *xs: int) -> list[int]:
    outs = [g.out_of(x) for x in xs]
    node = g.add("hook", xs, {"index": index}, outs)
    return [elem(g, node, i, out) for i, out in enumerate(outs)]


def run(g: GraphBuilder, outputs: list[int], *args: Any) -> tuple[list[Any], Record]:
    seen, sink = recorder()
    fn = jax.jit(lower(decode_graph(g.binary(outputs)), sink))
    results = fn(*[np.asarray(a) for a in args])
    jax.block_until_ready(results)
    jax.effects_barrier()
    return [np.asarray(r).tolist() for r in results], seen


def test_a_hook_is_the_identity_and_reports_its_value() -> None:
    g = GraphBuilder()
    x = g.param(0, "f64")
    [h] = hook(g, 7, g.op("exp", x))
    y = g.op("multiply", h, g.const(2.0, "f64"))
    results, seen = run(g, [y], np.float64(0.0))
    assert results == [2.0]
    assert seen == [(7, [1.0])]


def test_a_hook_over_several_tensors_reports_them_together() -> None:
    g = GraphBuilder()
    x = g.param(0, "f64")
    v = g.param(1, "s64", (2,))
    a, b = hook(g, 0, x, v)
    results, seen = run(g, [a, b], np.float64(1.5), np.array([3, 4], np.int64))
    assert results == [1.5, [3, 4]]
    assert seen == [(0, [1.5, [3, 4]])]


def test_hooks_fire_in_program_order_and_once_per_loop_iteration() -> None:
    g = GraphBuilder()
    x = g.param(0, "f64")
    [first] = hook(g, 0, x)

    def body(s: GraphBuilder) -> list[int]:
        acc, i = s.param(0, "f64"), s.param(1, "s64")
        [h] = hook(s, 1, s.add("add", [acc, s.add("as_type", [i], {}, F64)], {}, F64))
        return [h]

    loop = add_with_subgraphs(g, "range_loop", [first], [F64], {"body": sub(body)},
                              first=1, step=1, count=3)
    y = elem(g, loop, 0, F64)
    [last] = hook(g, 2, y)
    results, seen = run(g, [last], np.float64(10.0))
    assert results == [16.0]
    assert seen == [(0, [10.0]), (1, [11.0]), (1, [13.0]), (1, [16.0]), (2, [16.0])]


def test_a_hook_inside_a_while_loop_fires_each_iteration() -> None:
    g = GraphBuilder()
    x = g.param(0, "f64")

    def condition(s: GraphBuilder) -> list[int]:
        return [s.add("less", [s.param(0, "f64"), s.const(4.0, "f64")], IN_F64, ("u8", ()))]

    def body(s: GraphBuilder) -> list[int]:
        return hook(s, 3, s.add("add", [s.param(0, "f64"), s.const(1.0, "f64")], {}, F64))

    loop = add_with_subgraphs(g, "while", [x], [F64],
                              {"condition": sub(condition), "body": sub(body)},
                              max_iterations=None)
    results, seen = run(g, [elem(g, loop, 0, F64)], np.float64(1.0))
    assert results == [4.0]
    assert seen == [(3, [2.0]), (3, [3.0]), (3, [4.0])]


def test_only_the_taken_cond_branch_reports() -> None:
    g = GraphBuilder()
    x = g.param(0, "f64")
    pred = g.add("greater", [x, g.const(0.0, "f64")], IN_F64, ("u8", ()))
    branches = [sub(lambda s: hook(s, 1, s.param(0, "f64"))),
                sub(lambda s: hook(s, 2, s.op("negate", s.param(0, "f64"))))]
    node = add_with_subgraphs(g, "cond", [pred, x], [F64], {"branches": branches})
    out = elem(g, node, 0, F64)
    assert run(g, [out], np.float64(3.0)) == ([3.0], [(1, [3.0])])
    assert run(g, [out], np.float64(-3.0)) == ([3.0], [(2, [3.0])])


def test_grad_through_a_hook_is_the_identity_and_the_hook_fires_once_with_the_forward_value(
) -> None:
    # y = 3 * hook(x^2): dy/dx = 6x; the hook sees x^2 once, though grad re-evaluates it
    g = GraphBuilder()
    x = g.param(0, "f64")
    [h] = hook(g, 0, g.add("multiply", [x, x], {}, F64))
    y = g.add("multiply", [h, g.const(3.0, "f64")], {}, F64)
    dy = grad_of(g, y, x, F64)
    assert run(g, [dy], np.float64(2.0)) == ([12.0], [(0, [4.0])])
    assert run(g, [y, dy], np.float64(2.0)) == ([12.0, 12.0], [(0, [4.0])])


def test_a_hook_on_the_gradient_reports_the_gradient() -> None:
    g = GraphBuilder()
    x = g.param(0, "f64")
    y = g.add("sin", [x], {}, F64)
    [dy] = hook(g, 5, grad_of(g, y, x, F64))
    results, seen = run(g, [dy], np.float64(0.0))
    assert results == [1.0] and seen == [(5, [1.0])]


def test_a_hook_inside_a_loop_under_grad_fires_once_per_iteration() -> None:
    g = GraphBuilder()
    x = g.param(0, "f64")

    def body(s: GraphBuilder) -> list[int]:
        acc = s.param(0, "f64")
        return hook(s, 1, s.add("multiply", [acc, s.param(2, "f64")], {}, F64))

    loop = add_with_subgraphs(g, "range_loop", [x, x], [F64], {"body": sub(body)},
                              first=0, step=1, count=2)
    y = elem(g, loop, 0, F64)  # x * x * x
    dy = grad_of(g, y, x, F64)
    results, seen = run(g, [y, dy], np.float64(2.0))
    assert results == [8.0, 12.0]
    assert seen == [(1, [4.0]), (1, [8.0])]


def test_a_hook_in_a_custom_grad_backward_reports_the_incoming_gradient() -> None:
    # custom_grad(exp(x), [x], fn g -> [hook(g) * 10])
    g = GraphBuilder()
    x = g.param(0, "f64")
    e = g.add("exp", [x], {}, F64)
    cot = g.add("cotangent", [], {}, F64)
    [hg] = hook(g, 9, cot)
    gr = g.add("multiply", [hg, g.const(10.0, "f64")], {}, F64)
    cg = g.add("custom_grad", [e], {"wrt": [x], "cotangents": [cot], "grads": [gr],
                                    "tuple": False}, F64)
    y = g.add("multiply", [cg, g.const(2.0, "f64")], {}, F64)
    dy = grad_of(g, y, x, F64)
    results, seen = run(g, [y, dy], np.float64(0.0))
    assert results == [2.0, 20.0]
    assert seen == [(9, [2.0])]


def test_a_hook_under_vmap_reports_each_entry() -> None:
    # the reducer of a reduce runs under jax.vmap: one report per output element and step
    g = GraphBuilder()
    x = g.param(0, "f64", (2, 2))

    def reducer(s: GraphBuilder) -> list[int]:
        return hook(s, 4, s.add("add", [s.param(0, "f64"), s.param(1, "f64")], {}, F64))

    red = add_with_subgraphs(g, "reduce", [x, g.const(0.0, "f64")], ("f64", (2,)),
                             {"reducer": sub(reducer)}, axes=[0], keep_axes=False)
    results, seen = run(g, [red], np.array([[1.0, 2.0], [3.0, 4.0]]))
    assert results == [[4.0, 6.0]]
    assert sorted(v[0] for _, v in seen) == [1.0, 2.0, 4.0, 6.0]


def test_a_hook_whose_out_is_not_its_inputs_is_a_graph_error() -> None:
    g = GraphBuilder()
    x = g.param(0, "f64")
    g.add("hook", [x], {"index": 0}, [("f32", ())])
    with pytest.raises(GraphError, match="out must be the list of its inputs' outs"):
        decode_graph(g.binary([x]))
    g = GraphBuilder()
    x = g.param(0, "f64")
    g.add("hook", [x], {}, [F64])
    with pytest.raises(GraphError, match="missing option index"):
        decode_graph(g.binary([x]))


def attach(g: GraphBuilder, hooked: list[int], x: int) -> int:
    return g.add("attach_token", [*hooked, x], {}, g.out_of(x))


def test_attach_token_is_its_last_input_and_fires_the_hooks_of_the_others_first() -> None:
    # Nx's side_effect_hooks: hooks on b then a, neither value used by the result a * 10
    g = GraphBuilder()
    a, b = g.param(0, "f64"), g.param(1, "f64")
    [hb] = hook(g, 0, b)
    [ha] = hook(g, 1, a)
    y = attach(g, [hb, ha], g.add("multiply", [a, g.const(10.0, "f64")], {}, F64))
    [hy] = hook(g, 2, y)
    results, seen = run(g, [hy], np.float64(1.0), np.float64(2.0))
    assert results == [10.0]
    assert seen == [(0, [2.0]), (1, [1.0]), (2, [10.0])]


def test_grad_through_attach_token_is_the_identity_on_its_value_and_hooks_fire_once() -> None:
    g = GraphBuilder()
    x = g.param(0, "f64")
    [h] = hook(g, 0, g.add("exp", [x], {}, F64))
    y = attach(g, [h], g.add("multiply", [x, x], {}, F64))
    dy = grad_of(g, y, x, F64)
    assert run(g, [y, dy], np.float64(3.0)) == ([9.0, 6.0], [(0, [float(np.exp(3.0))])])


def test_attach_token_in_the_untaken_cond_branch_fires_nothing() -> None:
    g = GraphBuilder()
    x = g.param(0, "f64")
    pred = g.add("greater", [x, g.const(0.0, "f64")], IN_F64, ("u8", ()))

    def hooked(s: GraphBuilder) -> list[int]:
        p = s.param(0, "f64")
        [h] = hook(s, 3, s.op("negate", p))
        return [attach(s, [h], p)]

    branches = [sub(hooked), sub(lambda s: [s.param(0, "f64")])]
    node = add_with_subgraphs(g, "cond", [pred, x], [F64], {"branches": branches})
    out = elem(g, node, 0, F64)
    assert run(g, [out], np.float64(2.0)) == ([2.0], [(3, [-2.0])])
    assert run(g, [out], np.float64(-2.0)) == ([-2.0], [])


def test_attach_token_with_another_out_than_its_last_input_is_a_graph_error() -> None:
    g = GraphBuilder()
    x, y = g.param(0, "f64"), g.param(1, "f32")
    g.add("attach_token", [x, y], {}, F64)
    with pytest.raises(GraphError, match="out must be the last input's out"):
        decode_graph(g.binary([x]))
    g = GraphBuilder()
    x = g.param(0, "f64")
    g.add("attach_token", [x], {}, F64)
    with pytest.raises(GraphError, match="attach_token"):
        decode_graph(g.binary([x]))


def test_the_graph_knows_whether_it_has_hooks_in_sub_graphs() -> None:
    g = GraphBuilder()
    x = g.param(0, "f64")
    assert not decode_graph(g.binary([x])).hooks
    branches = [sub(lambda s: hook(s, 1, s.param(0, "f64"))), sub(lambda s: [s.param(0, "f64")])]
    pred = g.add("greater", [x, g.const(0.0, "f64")], IN_F64, ("u8", ()))
    node = add_with_subgraphs(g, "cond", [pred, x], [F64], {"branches": branches})
    assert decode_graph(g.binary([elem(g, node, 0, F64)])).hooks


def test_the_worker_sends_hook_frames_tagged_with_the_request_before_the_reply() -> None:
    g = GraphBuilder()
    x = g.param(0, "f64", (2,))

    def body(s: GraphBuilder) -> list[int]:
        return hook(s, 1, s.add("add", [s.param(0, "f64", (2,)), s.const(1.0, "f64")], {},
                                ("f64", (2,))))

    loop = add_with_subgraphs(g, "range_loop", [x], [("f64", (2,))], {"body": sub(body)},
                              first=0, step=1, count=2)
    y = elem(g, loop, 0, ("f64", (2,)))
    proc = WorkerProcess()
    try:
        proc.send_raw(request(41, "run", [Binary(g.binary([y])),
                                          [wire_tensor(np.array([0.0, 5.0]))]]))
        frames = [proc.receive() for _ in range(3)]
        assert proc.call(request(42, "ping", []))[2] is not None
    finally:
        assert proc.close() == 0
    hooks, reply = frames[:2], frames[2]
    for n, frame in enumerate(hooks, start=1):
        tag, request_id, index, tensors = frame
        assert (atom_str(tag), request_id, index) == ("hook", 41, 1)
        assert from_wire(tensors[0]).tolist() == [float(n), 5.0 + n]
    assert atom_str(reply[0]) == "r" and reply[1] == 41
    assert from_wire(reply[2][0]).tolist() == [2.0, 7.0]
