"""Graph decoding and validation (PROTOCOL.md section 4): every broken rule -> GraphError."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from py_backend.channel import atom, encode
from py_backend.nxtypes import NxType
from py_backend.program import decode_graph, parse_graph
from py_backend.wire_graph import GraphError, TensorOut, TupleOut

from .helpers import GraphBuilder, out_term, scaled, type_term


def simple() -> GraphBuilder:
    g = GraphBuilder()
    x = g.param(0, "f32", (2, 3))
    g.op("exp", x)
    return g


def test_decodes_into_plain_dataclasses_with_normalized_opts() -> None:
    g = GraphBuilder()
    x = g.param(0, "f32", (2, 3))
    s = g.op("sum", x, axes=[0, 1], keep_axes=True, out=("f32", (1, 1)))
    i = g.add("iota", [], {"axis": None}, ("s64", (4,)))
    t = g.add("tensor", [], {"data": b"\x01\x02"}, ("u8", (2,)))
    m = g.op("metadata", s, keys=["inspect"])
    c = g.const("neg_infinity")
    graph = decode_graph(g.binary([s, i, t, m, c]))
    assert graph.version == 1 and graph.outputs == (1, 2, 3, 4, 5)
    node = graph.nodes[s]
    assert node.op == "sum" and node.inputs == (0,)
    assert node.opts == {"axes": (0, 1), "keep_axes": True}
    assert node.out == TensorOut(NxType("f", 32), (1, 1))
    assert graph.nodes[i].opts == {"axis": None}
    assert graph.nodes[t].opts == {"data": b"\x01\x02"}
    assert graph.nodes[m].opts == {"keys": ("inspect",)}
    assert graph.nodes[c].opts == {"value": float("-inf")}
    assert graph.parameters == {0: TensorOut(NxType("f", 32), (2, 3))}


def test_integer_lists_are_accepted_as_lists_and_as_strings() -> None:
    # Erlang sends [0, 1] as STRING_EXT; a list with a big integer as LIST_EXT.
    g = GraphBuilder()
    x = g.param(0, "f32", (2, 3))
    g.op("transpose", x, axes=[1, 0], out=("f32", (3, 2)))
    term = g.term([1])
    assert isinstance(term[2][1][3][atom("axes")], bytes)
    nodes = list(term[2])
    node = nodes[1]
    nodes[1] = (node[0], node[1], [0], {atom("axes"): [1, 0]}, node[4])
    for variant in (term, (term[0], 1, nodes, [1])):
        assert decode_graph(encode(variant)).nodes[1].opts == {"axes": (1, 0)}


def test_tuple_valued_outs_decode_as_tuple_out() -> None:
    g = GraphBuilder()
    x = g.param(0)
    g.add("grad", [g.op("sin", x), x], {}, [("f32", ())])
    g.op("elem", 2, index=0, out=("f32", ()))
    graph = decode_graph(g.binary([3]))
    assert graph.nodes[2].out == TupleOut((TensorOut(NxType("f", 32), ()),))


def test_a_graph_written_by_real_elixir_decodes() -> None:
    # Exactly what Nx.Defn.WireEncoder produces for `Nx.exp(x) |> Nx.sum(axes: [0, 1])`.
    script = """
    graph = {:nx_jax_graph, 1,
      [{0, :parameter, [], %{index: 0}, {{:f, 32}, {2, 3}}},
       {1, :exp, [0], %{}, {{:f, 32}, {2, 3}}},
       {2, :sum, [1], %{axes: [0, 1], keep_axes: false}, {{:f, 32}, {}}},
       {3, :constant, [], %{value: :nan}, {{:f, 32}, {}}},
       {4, :iota, [], %{axis: nil}, {{:s, 64}, {3}}},
       {5, :metadata, [2], %{keys: [:stop_grad]}, {{:f, 32}, {}}}],
      [5, 3, 4]}
    IO.write(Base.encode16(:erlang.term_to_binary(graph)))
    """
    # (as hex: since OTP 26 standard_io under `elixir -e` is unicode and writes no raw bytes)
    data = bytes.fromhex(subprocess.run(["elixir", "-e", script], capture_output=True,
                                        check=True, timeout=scaled(60)).stdout.decode())
    graph = decode_graph(data)
    assert [n.op for n in graph.nodes] == ["parameter", "exp", "sum", "constant", "iota",
                                           "metadata"]
    assert graph.nodes[2].opts == {"axes": (0, 1), "keep_axes": False}
    assert graph.nodes[3].opts["value"] != graph.nodes[3].opts["value"]  # NaN
    assert graph.nodes[4].opts == {"axis": None}
    assert graph.nodes[5].opts == {"keys": ("stop_grad",)}
    assert graph.outputs == (5, 3, 4)


def replace_node(g: GraphBuilder, index: int, **changes: Any) -> Any:
    node = list(g.nodes[index])
    fields = {"id": 0, "op": 1, "inputs": 2, "opts": 3, "out": 4}
    for key, value in changes.items():
        node[fields[key]] = value
    nodes = list(g.nodes)
    nodes[index] = tuple(node)
    return nodes


def graph_term(nodes: list[Any], outputs: list[int]) -> Any:
    return (atom("nx_jax_graph"), 1, nodes, outputs)


def check_error(term: Any, match: str) -> None:
    with pytest.raises(GraphError, match=match):
        decode_graph(encode(term))


def test_wrong_version_or_tag_is_refused() -> None:
    g = simple()
    check_error((atom("nx_jax_graph"), 2, g.nodes, [1]), "version 2")
    check_error((atom("graph"), 1, g.nodes, [1]), "nx_jax_graph")
    check_error((atom("nx_jax_graph"), 1, g.nodes), "nx_jax_graph, version")


def test_not_an_erlang_term_is_a_graph_error() -> None:
    with pytest.raises(GraphError, match="not an Erlang term"):
        decode_graph(b"\x83\xff")


def test_unknown_op_is_refused_naming_the_node() -> None:
    g = simple()
    check_error(graph_term(replace_node(g, 1, op=atom("system")), [1]),
                r"node 1 \(system\): unknown op")


def test_wrong_arity_is_refused() -> None:
    g = simple()
    check_error(graph_term(replace_node(g, 1, inputs=[0, 0]), [1]),
                r"node 1 \(exp\): takes 1 inputs, got 2")
    check_error(graph_term(replace_node(g, 1, op=atom("add")), [1]),
                r"node 1 \(add\): takes 2 inputs, got 1")


def test_dangling_and_forward_references_are_refused() -> None:
    g = simple()
    check_error(graph_term(replace_node(g, 1, inputs=[7]), [1]), r"node 1 \(exp\).*node 7")
    check_error(graph_term(replace_node(g, 1, inputs=[1]), [1]), r"node 1 \(exp\).*node 1")


def test_a_cycle_cannot_be_expressed() -> None:
    g = GraphBuilder()
    x = g.param(0)
    a = g.op("exp", x)
    g.op("sin", a)
    check_error(graph_term(replace_node(g, 1, inputs=[2]), [2]), r"node 1 \(exp\).*node 2")


def test_ids_must_be_in_order() -> None:
    g = simple()
    check_error(graph_term(replace_node(g, 1, id=5), [1]), "position 1: id 5")
    check_error(graph_term(list(reversed(g.nodes)), [1]), "position 0: id 1")


def test_references_inside_custom_grad_opts_are_checked() -> None:
    g = GraphBuilder()
    x = g.param(0)
    cot = g.add("cotangent", [], {}, ("f32", ()))
    y = g.op("sin", x)
    g.add("custom_grad", [y], {"wrt": [x], "cotangents": [cot], "grads": [9],
                               "tuple": False})
    check_error(g.term([3]), r"node 3 \(custom_grad\): option refers to node 9")


def test_custom_grad_structure_is_checked() -> None:
    g = GraphBuilder()
    x = g.param(0)
    cot = g.add("cotangent", [], {}, ("f32", ()))
    y = g.op("sin", x)
    good = {"wrt": [x], "cotangents": [cot], "grads": [cot], "tuple": False}
    for opts, match in [
        ({**good, "cotangents": [y]}, "not :cotangent"),
        ({**good, "cotangents": []}, "one cotangent per expression"),
        ({**good, "grads": []}, "one grad per wrt"),
        ({**good, "tuple": True}, "list of 1 outs"),
        ({k: v for k, v in good.items() if k != "grads"}, "missing option grads"),
    ]:
        b = GraphBuilder()
        b.nodes, b.outs = list(g.nodes), list(g.outs)
        n = b.add("custom_grad", [y], opts)
        check_error(b.term([n]), match)


def test_bad_opts_are_refused() -> None:
    g = GraphBuilder()
    x = g.param(0, "f32", (2, 3))
    g.op("sum", x, axes=[0], keep_axes=False, out=("f32", (3,)))
    cases = [
        ({atom("axes"): [0]}, "missing option keep_axes"),
        ({atom("axes"): atom("all"), atom("keep_axes"): False}, "axes must be a list"),
        ({atom("axes"): [5], atom("keep_axes"): False}, r"axes \[5\] invalid"),
        ({atom("axes"): [0], atom("keep_axes"): 1}, "keep_axes must be true or false"),
    ]
    for opts, match in cases:
        check_error(graph_term(replace_node(g, 1, opts=opts), [1]), match)
    p = GraphBuilder()
    p.add("parameter", [], {"index": -1}, ("f32", ()))
    check_error(p.term([0]), "index must be a non-negative integer")
    c = GraphBuilder()
    c.add("constant", [], {"value": "lots"}, ("f32", ()))
    check_error(c.term([0]), "value must be a number")
    t = GraphBuilder()
    t.add("tensor", [], {"data": b"\x00" * 3}, ("f32", ()))
    check_error(t.term([0]), "data has 3 bytes")


def test_bad_shapes_and_types_are_refused() -> None:
    g = simple()
    neg = (type_term("f32"), (2, -3))
    check_error(graph_term(replace_node(g, 1, out=neg), [1]), "negative dimension")
    check_error(graph_term(replace_node(g, 1, out=(type_term("f32"), [2, 3])), [1]),
                "shape must be a tuple")
    check_error(graph_term(replace_node(g, 1, out=((atom("c"), 32), (2, 3))), [1]),
                "unsupported type")
    check_error(graph_term(replace_node(g, 1, out=(type_term("f32"), (2, 3.0))), [1]),
                "shape must be a tuple of integers")


def test_huge_shapes_are_refused_before_lowering() -> None:
    g = simple()
    huge = out_term(("f32", (1 << 20, 1 << 20)))
    check_error(graph_term(replace_node(g, 1, out=huge), [1]), "more than the limit")
    g2 = simple()
    with pytest.raises(GraphError, match="more than the limit of 5"):
        parse_graph(g2.term([1]), max_elements=5)


def test_element_limit_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NX_JAX_MAX_ELEMENTS", "4")
    with pytest.raises(GraphError, match="limit of 4"):
        decode_graph(simple().binary([1]))


def test_outputs_must_be_tensor_valued_node_ids() -> None:
    g = GraphBuilder()
    x = g.param(0)
    gr = g.add("grad", [g.op("sin", x), x], {}, [("f32", ())])
    check_error(g.term([gr]), "tuple-valued")
    check_error(g.term([9]), "output 9 is not a node id")
    check_error(g.term([]), "non-empty")


def test_tuple_valued_inputs_need_elem() -> None:
    g = GraphBuilder()
    x = g.param(0)
    gr = g.add("grad", [g.op("sin", x), x], {}, [("f32", ())])
    g.op("exp", gr, out=("f32", ()))
    check_error(g.term([3]), r"node 3 \(exp\): input 2 \(grad\) is tuple-valued")
    e = GraphBuilder()
    y = e.param(0)
    e.op("elem", y, index=0)
    check_error(e.term([1]), "not tuple-valued")


def test_grad_needs_a_floating_or_complex_scalar_y() -> None:
    g = GraphBuilder()
    x = g.param(0, "f32", (2,))
    g.add("grad", [x, x], {}, [("f32", (2,))])
    check_error(g.term([0]), "must be a floating or complex scalar")
    i = GraphBuilder()
    n = i.param(0, "s64")
    i.add("grad", [n, n], {}, [("s64", ())])
    check_error(i.term([0]), "must be a floating or complex scalar")


def test_parameters_with_one_index_must_agree() -> None:
    g = GraphBuilder()
    g.param(0, "f32", (2,))
    g.param(0, "f64", (2,))
    check_error(g.term([1]), "index 0 declared as")
