"""Gradient checkpointing (PROTOCOL.md 4.2 and 4.3): checkpoint nodes give the values and
gradients of their function, un-checkpointed and as jax.checkpoint computes them, lower to a
checkpoint (remat) equation carrying the policy, and checkpoint_name tags values for it;
validation of malformed checkpoint nodes."""

from __future__ import annotations

import contextlib
import io
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.ad_checkpoint import checkpoint_name, print_saved_residuals
from jax.extend.core import jaxprs_in_params

from py_backend.program import decode_graph, lower
from py_backend.wire_graph import GraphError

from .helpers import GraphBuilder, atom, run_graph
from .test_lower_control_flow import add_with_subgraphs, elem, sub

F64 = np.float64
S = ("f64", ())
M = ("f64", (3, 3))
V = ("f64", (2, 3))
DOT = {"contract_axes": [[1], [0]], "batch_axes": [[], []]}
SUM = {"axes": None, "keep_axes": False}
# as the Elixir side writes them (helpers.elixir_term: a str is an atom, bytes a binary)
POLICIES: list[Any] = [
    None,
    "everything_saveable",
    "nothing_saveable",
    "dots_saveable",
    "dots_with_no_batch_dims_saveable",
    ("save_only", [b"h"]),
    ("save_anything_except", [b"h"]),
]

RNG = np.random.default_rng(0)
X = RNG.normal(size=(2, 3))
W1 = RNG.normal(size=(3, 3))
W2 = RNG.normal(size=(3, 3))


def layers(s: GraphBuilder, x: int, w1: int, w2: int, named: bool = True) -> int:
    """tanh(tanh(x w1) w2), the first tanh named "h"."""
    h = s.op("tanh", s.add("dot", [x, w1], DOT, V))
    if named:
        h = s.add("checkpoint_name", [h], {"name": b"h"}, V)
    return s.op("tanh", s.add("dot", [h, w2], DOT, V))


def two_layers(s: GraphBuilder) -> list[int]:
    # parameters 0, 1 are the arguments x and w1; parameter 2 a capture (w2)
    return [layers(s, s.param(0, *V), s.param(1, *M), s.param(2, *M))]


def checkpointed(g: GraphBuilder, inputs: list[int], build: Any, outs: list[Any],
                 policy: Any = None, prevent_cse: bool = True) -> int:
    return add_with_subgraphs(g, "checkpoint", inputs, outs, {"fun": sub(build)},
                              policy=policy, prevent_cse=prevent_cse)


def loss_and_grads(policy: Any, prevent_cse: bool = True) -> tuple[GraphBuilder, list[int]]:
    """sum(checkpoint(two layers)(x, w1; w2)) and its gradients in w1 and w2."""
    g = GraphBuilder()
    x, w1, w2 = g.param(0, *V), g.param(1, *M), g.param(2, *M)
    node = checkpointed(g, [x, w1, w2], two_layers, [V], policy, prevent_cse)
    y = elem(g, node, 0, V)
    loss = g.add("sum", [y], SUM, S)
    grads = g.add("grad", [loss, w1, w2], {}, [M, M])
    return g, [loss, elem(g, grads, 0, M), elem(g, grads, 1, M)]


def reference(x: jax.Array, w1: jax.Array, w2: jax.Array) -> jax.Array:
    return jnp.sum(jnp.tanh(jnp.tanh(x @ w1) @ w2))


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: str(p))
def test_values_and_gradients_equal_the_plain_ones_and_jax_checkpoints(policy: Any) -> None:
    g, outputs = loss_and_grads(policy)
    loss, d1, d2 = run_graph(g, outputs, X, W1, W2)
    want = jax.value_and_grad(reference, argnums=(1, 2))(X, W1, W2)
    np.testing.assert_allclose(loss, want[0], rtol=1e-14)
    np.testing.assert_allclose(d1, want[1][0], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(d2, want[1][1], rtol=1e-12, atol=1e-14)

    def with_checkpoint(x: jax.Array, w1: jax.Array, w2: jax.Array) -> jax.Array:
        def f(x: jax.Array, w1: jax.Array) -> jax.Array:
            h = checkpoint_name(jnp.tanh(x @ w1), "h")
            return jnp.tanh(h @ w2)

        return jnp.sum(jax.checkpoint(f, policy=jax_policy(policy))(x, w1))

    # (to rounding: both are jitted, but XLA may fuse them differently)
    direct = jax.jit(jax.grad(with_checkpoint, argnums=(1, 2)))(X, W1, W2)
    np.testing.assert_allclose(d1, direct[0], rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(d2, direct[1], rtol=1e-14, atol=1e-15)


def jax_policy(policy: Any) -> Any:
    policies = jax.checkpoint_policies
    if policy is None or isinstance(policy, str):
        return None if policy is None else getattr(policies, policy)
    names = [n.decode() for n in policy[1]]
    return (policies.save_only_these_names(*names) if policy[0] == "save_only"
            else policies.save_any_names_but_these(*names))


def checkpoint_equations(jaxpr: Any) -> list[Any]:
    """The checkpoint equations of a jaxpr, nested ones included (JAX 0.10's primitive is
    ``remat2``, ``differentiated=True`` in a backward pass)."""
    found = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in ("remat2", "checkpoint"):
            found.append(eqn)
        for inner in jaxprs_in_params(eqn.params):
            found.extend(checkpoint_equations(inner))
    return found


@pytest.mark.parametrize("policy,prevent_cse", [
    ("dots_saveable", True), (None, False), (("save_only", [b"h"]), True),
    (("save_anything_except", [b"h"]), False)], ids=str)
def test_the_lowered_gradient_holds_a_checkpoint_equation_with_the_policy(
        policy: Any, prevent_cse: bool) -> None:
    g, outputs = loss_and_grads(policy, prevent_cse)
    jaxpr = jax.make_jaxpr(lower(decode_graph(g.binary(outputs))))(X, W1, W2)
    eqns = checkpoint_equations(jaxpr.jaxpr)
    # the forward pass's value (the loss) and the backward pass's recomputation
    assert [e.params["differentiated"] for e in eqns] == [False, True], jaxpr
    assert eqns[0].params["prevent_cse"] is prevent_cse
    # (the named policies are objects made per call: equal when they save the same names)
    assert repr(eqns[0].params["policy"]) == repr(jax_policy(policy))
    assert "name[name=h]" in str(jaxpr)
    # and without a grad node, the forward holds one undifferentiated checkpoint equation
    g = GraphBuilder()
    x, w1, w2 = g.param(0, *V), g.param(1, *M), g.param(2, *M)
    node = checkpointed(g, [x, w1, w2], two_layers, [V], policy, prevent_cse)
    forward = jax.make_jaxpr(lower(decode_graph(g.binary([elem(g, node, 0, V)]))))(X, W1, W2)
    eqns = checkpoint_equations(forward.jaxpr)
    assert [(e.params["differentiated"], e.params["prevent_cse"]) for e in eqns] == [
        (False, prevent_cse)]


def saved_residuals(policy: Any) -> list[str]:
    """What the backward pass of sum(checkpoint(two layers)) keeps, one line per value
    (``jax.ad_checkpoint.print_saved_residuals``)."""
    g = GraphBuilder()
    x, w1, w2 = g.param(0, *V), g.param(1, *M), g.param(2, *M)
    node = checkpointed(g, [x, w1, w2], two_layers, [V], policy)
    fn = lower(decode_graph(g.binary([g.add("sum", [elem(g, node, 0, V)], SUM, S)])))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print_saved_residuals(lambda x, w1, w2: fn(x, w1, w2)[0], X, W1, W2)
    return out.getvalue().strip().splitlines()


def test_what_each_policy_saves_is_what_it_names() -> None:
    nothing = saved_residuals("nothing_saveable")
    assert nothing == saved_residuals(None)
    # the inputs only: x, w1, w2
    assert len(nothing) == 3 and all("from the argument" in line for line in nothing)
    only_h = saved_residuals(("save_only", [b"h"]))
    assert [line for line in only_h if line not in nothing] == [
        line for line in only_h if "named 'h'" in line]
    assert len(only_h) == 4
    # everything saveable keeps intermediate values besides the arguments (h among them)
    everything = saved_residuals("everything_saveable")
    assert len([line for line in everything if "from the argument" not in line]) >= 2
    dots = saved_residuals("dots_saveable")
    assert len([line for line in dots if "dot_general" in line]) == 2


def test_tuple_results_captures_and_integer_arguments() -> None:
    # fun(x, n) = {x * n, sin(x) * c}: an s64 argument, a captured c, two results
    g = GraphBuilder()
    x, n, c = g.param(0, "f64", (3,)), g.param(1, "s64"), g.param(2, "f64")

    def build(s: GraphBuilder) -> list[int]:
        x, n, c = s.param(0, "f64", (3,)), s.param(1, "s64"), s.param(2, "f64")
        scaled = s.op("multiply", x, s.op("as_type", n, out=S), out=("f64", (3,)))
        return [scaled, s.op("multiply", s.op("sin", x), c, out=("f64", (3,)))]

    node = checkpointed(g, [x, n, c], build, [("f64", (3,)), ("f64", (3,))],
                        "nothing_saveable")
    a, b = elem(g, node, 0, ("f64", (3,))), elem(g, node, 1, ("f64", (3,)))
    loss = g.add("sum", [g.op("add", a, b)], SUM, S)
    grads = g.add("grad", [loss, x, c], {}, [("f64", (3,)), S])
    xs = np.array([0.1, 0.2, 0.3])
    got_a, got_b, dx, dc = run_graph(
        g, [a, b, elem(g, grads, 0, ("f64", (3,))), elem(g, grads, 1, S)],
        xs, np.int64(2), F64(1.5))
    np.testing.assert_allclose(got_a, 2 * xs, rtol=1e-15)
    np.testing.assert_allclose(got_b, 1.5 * np.sin(xs), rtol=1e-15)
    np.testing.assert_allclose(dx, 2 + 1.5 * np.cos(xs), rtol=1e-14)
    assert dc == pytest.approx(float(np.sum(np.sin(xs))), rel=1e-14)


def test_a_second_derivative_through_a_checkpoint() -> None:
    g = GraphBuilder()
    a = g.param(0, "f64")

    def cube(s: GraphBuilder) -> list[int]:
        x = s.param(0, "f64")
        return [s.op("sin", s.op("multiply", s.op("multiply", x, x), x))]

    y = elem(g, checkpointed(g, [a], cube, [S], "nothing_saveable"), 0, S)
    dy = elem(g, g.add("grad", [y, a], {}, [S]), 0, S)
    ddy = elem(g, g.add("grad", [dy, a], {}, [S]), 0, S)
    got = run_graph(g, [y, dy, ddy], F64(0.7))
    t = 0.7
    assert got[1] == pytest.approx(3 * t**2 * np.cos(t**3), rel=1e-14)
    assert got[2] == pytest.approx(6 * t * np.cos(t**3) - 9 * t**4 * np.sin(t**3), rel=1e-13)


def test_a_checkpoint_in_a_range_loop_body_is_recomputed_inside_the_scan() -> None:
    # x <- tanh(x w) three times, the step checkpointed: the gradient in w is the plain one,
    # and the checkpoint equation sits in the body of the scan (per step of the backward pass)
    def body(checkpoint: bool) -> Any:
        def build(s: GraphBuilder) -> list[int]:
            x, w = s.param(0, *V), s.param(2, *M)  # (parameter 1 is the index)
            if not checkpoint:
                return [s.op("tanh", s.add("dot", [x, w], DOT, V))]
            node = checkpointed(s, [x, w], lambda f: [f.op("tanh", f.add(
                "dot", [f.param(0, *V), f.param(1, *M)], DOT, V))], [V], "nothing_saveable",
                prevent_cse=False)
            return [elem(s, node, 0, V)]
        return sub(build)

    results, jaxprs = [], []
    for checkpoint in (False, True):
        g = GraphBuilder()
        x, w = g.param(0, *V), g.param(1, *M)
        loop = add_with_subgraphs(g, "range_loop", [x, w], [V], {"body": body(checkpoint)},
                                  first=0, step=1, count=3)
        loss = g.add("sum", [elem(g, loop, 0, V)], SUM, S)
        dw = elem(g, g.add("grad", [loss, w], {}, [M]), 0, M)
        results.append(run_graph(g, [loss, dw], X, W1))
        jaxprs.append(jax.make_jaxpr(lower(decode_graph(g.binary([dw]))))(X, W1))

    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-14)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-13, atol=1e-15)
    # (scans: the loss's value, the forward pass of the gradient, its backward pass)
    scans = [e for e in jaxprs[1].jaxpr.eqns if e.primitive.name == "scan"]
    backward = [checkpoint_equations(e.params["jaxpr"].jaxpr) for e in scans
                if e.params["reverse"]]
    assert [[e.params["differentiated"] for e in eqns] for eqns in backward] == [[True]]
    assert not any(checkpoint_equations(e.params["jaxpr"].jaxpr)
                   for e in jaxprs[0].jaxpr.eqns if e.primitive.name == "scan")


def test_checkpoint_name_is_the_identity_for_values_and_gradients() -> None:
    g = GraphBuilder()
    x = g.param(0, "f64", (2,))
    named = g.add("checkpoint_name", [g.op("exp", x)], {"name": b"e"}, ("f64", (2,)))
    loss = g.add("sum", [named], SUM, S)
    dx = elem(g, g.add("grad", [loss, x], {}, [("f64", (2,))]), 0, ("f64", (2,)))
    xs = np.array([0.0, 1.0])
    got, grad = run_graph(g, [named, dx], xs)
    np.testing.assert_allclose(got, np.exp(xs), rtol=1e-15)
    np.testing.assert_array_equal(grad, got)


def test_malformed_checkpoint_nodes_are_refused() -> None:
    def node_with(policy: Any = None, outs: Any = None, name: Any = b"h",
                  prevent_cse: Any = True) -> bytes:
        g = GraphBuilder()
        x, w1, w2 = g.param(0, *V), g.param(1, *M), g.param(2, *M)
        g.add("checkpoint_name", [x], {"name": name}, V)
        add_with_subgraphs(g, "checkpoint", [x, w1, w2], outs or [V],
                           {"fun": sub(two_layers), "policy": policy}, prevent_cse=prevent_cse)
        return g.binary([3])  # (every node is checked, reached from the outputs or not)

    decode_graph(node_with())  # (the well-formed one)
    with pytest.raises(GraphError, match="option policy must be nil, one of :everything_saveable"):
        decode_graph(node_with(policy=atom("offload_everything")))
    with pytest.raises(GraphError, match="option policy"):
        decode_graph(node_with(policy=(atom("save_only"), [atom("h")])))
    with pytest.raises(GraphError, match="option prevent_cse must be true or false"):
        decode_graph(node_with(prevent_cse=atom("yes")))
    with pytest.raises(GraphError, match="option name must be a non-empty UTF-8 string"):
        decode_graph(node_with(name=b""))
    with pytest.raises(GraphError, match=r"fun must return \['\{:f, 64\}\[3, 3\]'\], its "
                       r"outputs are \['\{:f, 64\}\[2, 3\]'\]"):
        decode_graph(node_with(outs=[("f64", (3, 3))]))
    # a parameter of fun that the node does not pass, or passes with another out
    g = GraphBuilder()
    x = g.param(0, *V)
    add_with_subgraphs(g, "checkpoint", [x], [V], {"fun": sub(two_layers)}, policy=None,
                       prevent_cse=True)
    with pytest.raises(GraphError, match="fun has parameter 1, but only 1 values are passed"):
        decode_graph(g.binary([len(g.nodes) - 1]))
