"""jvp, jacfwd, jacrev, hessian and custom_jvp lowered directly (PROTOCOL.md section 4.2),
checked against JAX's own transformations of the same functions written in jax.numpy."""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from py_backend.program import decode_graph
from py_backend.wire_graph import GraphError

from .helpers import GraphBuilder, run_graph, type_term
from .test_lower_control_flow import add_with_subgraphs, elem, grad_of, sub

TESTED = {"jvp", "jacfwd", "jacrev", "hessian", "custom_jvp"}

F32, F64 = np.float32, np.float64
S64 = ("f64", ())


def total(g: GraphBuilder, x: int, type_name: str = "f64") -> int:
    return g.op("sum", x, axes=None, keep_axes=False, out=(type_name, ()))


def jvp_of(g: GraphBuilder, y: int, xs: list[int], ts: list[int]) -> int:
    return g.add("jvp", [y, *xs, *ts], {}, g.out_of(y))


def jacobians(g: GraphBuilder, op: str, y: int, xs: list[int], outs: list[Any]) -> list[int]:
    node = g.add(op, [y, *xs], {}, outs)
    return [elem(g, node, i, o) for i, o in enumerate(outs)]


def r3_to_r2(g: GraphBuilder, x: int) -> int:
    """f(x) = [x0 * sin(x1), x1 * exp(x2) + x0^2] for x of shape {3} (f64)."""
    def part(i: int) -> int:
        return g.op("reshape", g.op("slice", x, start_indices=[i], lengths=[1], strides=[1],
                                    out=("f64", (1,))), out=S64)

    x0, x1, x2 = part(0), part(1), part(2)
    a = g.op("multiply", x0, g.op("sin", x1))
    b = g.op("add", g.op("multiply", x1, g.op("exp", x2)), g.op("multiply", x0, x0))
    two = ("f64", (2,))
    return g.op("concatenate", g.op("reshape", a, out=("f64", (1,))),
                g.op("reshape", b, out=("f64", (1,))), axis=0, out=two)


def r3_to_r2_jax(x: jax.Array) -> jax.Array:
    return jnp.stack([x[0] * jnp.sin(x[1]), x[1] * jnp.exp(x[2]) + x[0] ** 2])


AT = np.array([0.5, -1.25, 0.75])


def test_jvp_of_sin_times_y_matches_jax() -> None:
    g = GraphBuilder()
    x, y, tx, ty = (g.param(i, "f64") for i in range(4))
    f = g.op("multiply", g.op("sin", x), y)
    tangent = jvp_of(g, f, [x, y], [tx, ty])
    value, got = run_graph(g, [f, tangent], F64(2.0), F64(3.0), F64(1.0), F64(0.5))
    want_value, want = jax.jvp(lambda a, b: jnp.sin(a) * b, (2.0, 3.0), (1.0, 0.5))
    assert value == pytest.approx(float(want_value)) and got == pytest.approx(float(want))
    assert got == pytest.approx(math.cos(2.0) * 3.0 + math.sin(2.0) * 0.5)


def test_jacfwd_and_jacrev_of_an_r3_to_r2_function_match_jax() -> None:
    g = GraphBuilder()
    x = g.param(0, "f64", (3,))
    y = r3_to_r2(g, x)
    (fwd,) = jacobians(g, "jacfwd", y, [x], [("f64", (2, 3))])
    (rev,) = jacobians(g, "jacrev", y, [x], [("f64", (2, 3))])
    got_fwd, got_rev = run_graph(g, [fwd, rev], AT)
    want = np.asarray(jax.jacfwd(r3_to_r2_jax)(jnp.asarray(AT)))
    np.testing.assert_allclose(got_fwd, want, rtol=1e-14)
    np.testing.assert_allclose(got_rev, np.asarray(jax.jacrev(r3_to_r2_jax)(jnp.asarray(AT))),
                               rtol=1e-14)
    np.testing.assert_allclose(got_fwd, got_rev, rtol=1e-14)


def test_hessian_of_sum_of_cubes_is_diag_6x() -> None:
    g = GraphBuilder()
    x = g.param(0, "f32", (2,))
    y = total(g, g.op("pow", x, g.const(3.0, "f32")), "f32")
    (h,) = jacobians(g, "hessian", y, [x], [("f32", (2, 2))])
    (got,) = run_graph(g, [h], np.array([1.0, 2.0], F32))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, [[6.0, 0.0], [0.0, 12.0]])
    want = jax.hessian(lambda v: jnp.sum(v ** 3))(jnp.array([1.0, 2.0], jnp.float32))
    np.testing.assert_array_equal(got, np.asarray(want))


def test_hessian_with_two_xs_has_one_block_per_pair() -> None:
    # y = x0^2 * x1 (x0, x1 scalars): blocks [[2 x1, 2 x0], [2 x0, 0]]
    g = GraphBuilder()
    a, b = g.param(0, "f64"), g.param(1, "f64")
    y = g.op("multiply", g.op("multiply", a, a), b)
    blocks = jacobians(g, "hessian", y, [a, b], [S64] * 4)
    got = run_graph(g, blocks, F64(3.0), F64(5.0))
    assert [float(v) for v in got] == [10.0, 6.0, 6.0, 0.0]


def test_jacobian_types_are_the_declared_ones_jacrev_x_jacfwd_y() -> None:
    # an f32 x, an f64 y: JAX's jacrev is in x's type, jacfwd in y's; each is cast to its out
    g = GraphBuilder()
    x = g.param(0, "f32", (2,))
    y = g.op("multiply", g.op("as_type", x, out=("f64", (2,))), g.const(2.0, "f64"))
    (fwd,) = jacobians(g, "jacfwd", y, [x], [("f64", (2, 2))])
    (rev,) = jacobians(g, "jacrev", y, [x], [("f32", (2, 2))])
    got_fwd, got_rev = run_graph(g, [fwd, rev], np.array([1.0, 2.0], F32))
    assert got_fwd.dtype == np.float64 and got_rev.dtype == np.float32
    np.testing.assert_array_equal(got_fwd, 2 * np.eye(2))
    np.testing.assert_array_equal(got_rev, 2 * np.eye(2))


def power_loop(g: GraphBuilder, x: int) -> int:
    """while {y, i}, i < 3 do {y * x, i + 1} from {x, 0}, no max_iterations: x^4."""
    cmp = {"operand_type": type_term("s64")}

    def condition(s: GraphBuilder) -> list[int]:
        s.param(0, "f64")
        i = s.param(1, "s64")
        return [s.add("less", [i, s.const(3, "s64")], cmp, ("u8", ()))]

    def body(s: GraphBuilder) -> list[int]:
        y, i, xx = s.param(0, "f64"), s.param(1, "s64"), s.param(2, "f64")
        return [s.op("multiply", y, xx), s.op("add", i, s.const(1, "s64"))]

    node = add_with_subgraphs(g, "while", [x, g.const(0, "s64"), x], [S64, ("s64", ())],
                              {"condition": sub(condition), "body": sub(body)},
                              max_iterations=None)
    return elem(g, node, 0, S64)


def test_jvp_and_jacfwd_through_an_unbounded_while() -> None:
    g = GraphBuilder()
    x, t = g.param(0, "f64"), g.param(1, "f64")
    y = power_loop(g, x)
    tangent = jvp_of(g, y, [x], [t])
    (fwd,) = jacobians(g, "jacfwd", y, [x], [S64])
    (rev,) = jacobians(g, "jacrev", y, [x], [S64])
    value, got, got_fwd, got_rev = run_graph(g, [y, tangent, fwd, rev], F64(1.5), F64(2.0))
    assert value == pytest.approx(1.5 ** 4)
    assert got == pytest.approx(4 * 1.5 ** 3 * 2.0)
    assert got_fwd == pytest.approx(4 * 1.5 ** 3) and got_rev == pytest.approx(got_fwd)


def test_grad_of_a_jvp_through_an_unbounded_while_names_max_iterations() -> None:
    g = GraphBuilder()
    x, t = g.param(0, "f64"), g.param(1, "f64")
    tangent = jvp_of(g, power_loop(g, x), [x], [t])
    dx = grad_of(g, tangent, x, S64)
    with pytest.raises(GraphError, match="max_iterations"):
        run_graph(g, [dx], F64(1.5), F64(2.0))


def test_grad_of_a_jvp_is_the_second_derivative_along_the_tangent() -> None:
    # d/dx [jvp(sin, x, t)] = -sin(x) t
    g = GraphBuilder()
    x, t = g.param(0, "f64"), g.param(1, "f64")
    tangent = jvp_of(g, g.op("sin", x), [x], [t])
    dx = grad_of(g, tangent, x, S64)
    (got,) = run_graph(g, [dx], F64(0.7), F64(3.0))
    assert got == pytest.approx(-math.sin(0.7) * 3.0)


def test_jvp_of_a_custom_grad_is_refused_with_the_fix() -> None:
    g = GraphBuilder()
    x, t = g.param(0, "f64"), g.param(1, "f64")
    cot = g.add("cotangent", [], {}, S64)
    cg = g.add("custom_grad", [g.op("sin", x)], {"wrt": [x], "cotangents": [cot],
                                                 "grads": [cot], "tuple": False}, S64)
    tangent = jvp_of(g, cg, [x], [t])
    with pytest.raises(GraphError, match="custom_jvp"):
        run_graph(g, [tangent], F64(0.7), F64(1.0))


def custom_sin_times_y(g: GraphBuilder, x: int, y: int) -> int:
    """custom_jvp(sin(x) * y, [x, y], fn [xd, yd] -> cos(x) * xd * y + sin(x) * yd end): the
    rule's sub-graph has the two tangents, then the captures x and y."""
    e = g.op("multiply", g.op("sin", x), y)

    def rule(s: GraphBuilder) -> list[int]:
        xd, yd, xx, yy = (s.param(i, "f64") for i in range(4))
        left = s.op("multiply", s.op("multiply", s.op("cos", xx), xd), yy)
        return [s.op("add", left, s.op("multiply", s.op("sin", xx), yd))]

    node = add_with_subgraphs(g, "custom_jvp", [e, x, y, x, y], [S64], {"jvp": sub(rule)},
                              primals=2)
    return elem(g, node, 0, S64)


def test_custom_jvp_value_and_reverse_mode_derived_by_jax() -> None:
    g = GraphBuilder()
    x, y = g.param(0, "f64"), g.param(1, "f64")
    f = custom_sin_times_y(g, x, y)
    dx, dy = grad_of(g, f, x, S64), grad_of(g, f, y, S64)
    ddx = grad_of(g, dx, x, S64)
    value, gx, gy, gxx = run_graph(g, [f, dx, dy, ddx], F64(2.0), F64(3.0))
    assert value == pytest.approx(2.7278922, abs=1e-7)
    assert gx == pytest.approx(-1.2484405, abs=1e-7) and gy == pytest.approx(0.9092974, abs=1e-7)
    assert gxx == pytest.approx(-math.sin(2.0) * 3.0)


def test_custom_jvp_rule_is_the_one_used_log1pexp_at_100() -> None:
    # log1p(exp(x)) with the rule x_dot * (1 - 1/(1 + exp(x))): grad 1.0 at 100 in f32, where
    # autodiff gives NaN
    g = GraphBuilder()
    x = g.param(0, "f32")
    e = g.op("log1p", g.op("exp", x))

    def rule(s: GraphBuilder) -> list[int]:
        xd, xx = s.param(0, "f32"), s.param(1, "f32")
        one = s.const(1.0, "f32")
        frac = s.op("divide", one, s.op("add", one, s.op("exp", xx)))
        return [s.op("multiply", xd, s.op("subtract", one, frac))]

    node = add_with_subgraphs(g, "custom_jvp", [e, x, x], [("f32", ())], {"jvp": sub(rule)},
                              primals=1)
    f = elem(g, node, 0, ("f32", ()))
    custom, plain = grad_of(g, f, x, ("f32", ())), grad_of(g, e, x, ("f32", ()))
    got, auto = run_graph(g, [custom, plain], F32(100.0))
    assert got == F32(1.0) and np.isnan(auto)


def test_custom_jvp_in_forward_mode_uses_the_rule() -> None:
    g = GraphBuilder()
    x, y, t = g.param(0, "f64"), g.param(1, "f64"), g.param(2, "f64")
    f = custom_sin_times_y(g, x, y)
    tangent = jvp_of(g, f, [x], [t])
    (got,) = run_graph(g, [tangent], F64(2.0), F64(3.0), F64(2.0))
    assert got == pytest.approx(math.cos(2.0) * 2.0 * 3.0)


def test_malformed_nodes_are_graph_errors() -> None:
    def refused(build: Any, match: str) -> None:
        g = GraphBuilder()
        out = build(g)
        with pytest.raises(GraphError, match=match):
            decode_graph(g.binary([out]))

    # a tangent of another shape than its x
    refused(lambda g: g.add("jvp", [g.param(0, "f64"), g.param(0, "f64"),
                                    g.param(1, "f64", (2,))], {}, S64), "tangent")
    # an even number of inputs
    refused(lambda g: g.add("jvp", [g.param(0, "f64")] * 4, {}, S64), "odd number")
    # an integer x
    refused(lambda g: g.add("jvp", [g.param(0, "s64")] * 3, {}, S64), "floating or complex")
    # jacobian out shapes
    refused(lambda g: elem(g, g.add("jacfwd", [g.param(0, "f64", (2,))] * 2, {},
                                    [("f64", (2,))]), 0, ("f64", (2,))), "out shapes")
    # custom_jvp without primals, or a rule that returns the wrong out
    refused(lambda g: elem(g, add_with_subgraphs(
        g, "custom_jvp", [g.param(0, "f64")] * 2, [S64],
        {"jvp": sub(lambda s: [s.param(0, "f64")])}, primals=0), 0, S64), "primal inputs")
    refused(lambda g: elem(g, add_with_subgraphs(
        g, "custom_jvp", [g.param(0, "f64")] * 2, [S64],
        {"jvp": sub(lambda s: [s.param(0, "f32")])}, primals=1), 0, S64), "jvp")


def test_forward_mode_of_pow_with_a_constant_exponent_at_a_negative_base() -> None:
    # Nx's pow rule (numerics mode nx) has a term log(x) * x^y for the exponent's tangent; JAX
    # passes zero tangents to a rule, and 0 * log(-0.8) is NaN: the term is left out when the
    # exponent's tangent is a known zero
    g = GraphBuilder()
    x = g.param(0, "f64", (2,))
    y = g.op("pow", x, g.const(2.0, "f64"))
    (fwd,) = jacobians(g, "jacfwd", y, [x], [("f64", (2, 2))])
    (rev,) = jacobians(g, "jacrev", y, [x], [("f64", (2, 2))])
    got_fwd, got_rev = run_graph(g, [fwd, rev], np.array([0.3, -0.8]))
    np.testing.assert_array_equal(got_fwd, [[0.6, 0.0], [0.0, -1.6]])
    np.testing.assert_array_equal(got_rev, got_fwd)
    # with the exponent differentiated too, both terms
    b, e, tb, te = (g.param(i, "f64") for i in range(1, 5))
    tangent = jvp_of(g, g.op("pow", b, e), [b, e], [tb, te])
    (got,) = run_graph(g, [tangent], np.array([0.3, -0.8]), F64(2.0), F64(3.0), F64(1.0),
                       F64(0.5))
    assert got == pytest.approx(3.0 * 2.0 ** 2 * 1.0 + math.log(2.0) * 8.0 * 0.5)


def test_second_derivatives_through_an_unbounded_while_name_max_iterations() -> None:
    # hessian (jacfwd of jacrev), and jacfwd of a grad: both reverse a loop JAX cannot reverse
    # twice; the worker says so at once, naming the fix
    for build in (
        lambda g, x, y: jacobians(g, "hessian", y, [x], [S64])[0],
        lambda g, x, y: jacobians(g, "jacfwd", grad_of(g, y, x, S64), [x], [S64])[0],
    ):
        g = GraphBuilder()
        x = g.param(0, "f64")
        out = build(g, x, power_loop(g, x))
        with pytest.raises(GraphError, match="max_iterations"):
            run_graph(g, [out], F64(1.5))


def test_forward_mode_through_a_custom_grad_in_a_loop_body_is_refused_with_the_fix() -> None:
    # range_loop 3 steps: s = custom_grad(sin(s), [s], fn g -> [g] end)
    def body(s: GraphBuilder) -> list[int]:
        y = s.param(0, "f64")
        s.param(1, "s64")
        cot = s.add("cotangent", [], {}, S64)
        return [s.add("custom_grad", [s.op("sin", y)], {"wrt": [y], "cotangents": [cot],
                                                        "grads": [cot], "tuple": False}, S64)]

    g = GraphBuilder()
    x, t = g.param(0, "f64"), g.param(1, "f64")
    loop = add_with_subgraphs(g, "range_loop", [x], [S64], {"body": sub(body)}, first=0, step=1,
                              count=3)
    tangent = jvp_of(g, elem(g, loop, 0, S64), [x], [t])
    with pytest.raises(GraphError, match=r"\(range_loop\).*custom_jvp"):
        run_graph(g, [tangent], F64(0.7), F64(1.0))


# --- batch: vectorized values, one Jacobian per entry (NxJax.Autodiff with vectorized x) ----------

def batched_fn(a: jax.Array, c: jax.Array) -> tuple[jax.Array]:
    """Entries along axis 0: y_i (shape {2}) of a_i (shape {3}) and c_i (shape {2, 2})."""
    return (jnp.stack([jnp.sum(a ** 3, axis=-1) * c[:, 0, 0],
                       jnp.sin(a[:, 1]) * jnp.exp(c[:, 1, 0]) + a[:, 0] * c[:, 0, 1]], axis=-1),)


BATCH_A = np.array([[0.5, -1.25, 0.75], [1.5, 0.25, -0.5]])
BATCH_C = np.array([[[1.0, 2.0], [0.5, -1.0]], [[-0.5, 0.25], [1.5, 2.0]]])


def per_entry(transform: Any, **kw: Any) -> Any:
    """JAX's own answer: the transform of one entry's function, vmapped over the entries."""
    def one(a: jax.Array, c: jax.Array) -> jax.Array:
        return batched_fn(a[None], c[None])[0][0]

    return jax.vmap(transform(one, argnums=(0, 1), **kw))(jnp.asarray(BATCH_A),
                                                         jnp.asarray(BATCH_C))


@pytest.mark.parametrize("name", ["jacfwd", "jacrev"])
def test_batched_jacobians_are_vmap_of_jax_s(name: str) -> None:
    from py_backend.ops import grad as grad_ops
    batched = grad_ops.batched_jacfwd if name == "jacfwd" else grad_ops.batched_jacrev
    (got,) = batched(batched_fn, [jnp.asarray(BATCH_A), jnp.asarray(BATCH_C)], 1)
    want = per_entry(jax.jacfwd if name == "jacfwd" else jax.jacrev)
    assert [g.shape for g in got] == [(2, 2, 3), (2, 2, 2, 2)]
    for g_, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g_), np.asarray(w), rtol=1e-13, atol=1e-15)


def test_batched_jacobian_over_two_batch_axes() -> None:
    from py_backend.ops import grad as grad_ops
    x = jnp.asarray(np.linspace(-1.0, 1.0, 2 * 3 * 4).reshape(2, 3, 4))

    def f(v: jax.Array) -> tuple[jax.Array]:
        return (jnp.tanh(v) * jnp.sum(v, axis=-1, keepdims=True),)

    (got,) = grad_ops.batched_jacrev(f, [x], 2)[0]
    one = jax.jacrev(lambda e: jnp.tanh(e) * jnp.sum(e))
    np.testing.assert_allclose(np.asarray(got), np.asarray(jax.vmap(jax.vmap(one))(x)),
                               rtol=1e-13)
    (fwd,) = grad_ops.batched_jacfwd(f, [x], 2)[0]
    np.testing.assert_allclose(np.asarray(fwd), np.asarray(got), rtol=1e-13)


def test_jacobian_and_hessian_nodes_with_batch() -> None:
    # y_i = sum(x_i^3) + x_i0 * x_i1 for 2 entries of shape {2}: entry by entry, the graph's
    # answer is JAX's vmap of jacfwd / hessian
    g = GraphBuilder()
    x = g.param(0, "f64", (2, 2))
    cubes = g.op("sum", g.op("pow", x, g.const(3.0, "f64")), axes=[1], keep_axes=False,
                 out=("f64", (2,)))
    col = [g.op("reshape", g.op("slice", x, start_indices=[0, i], lengths=[2, 1],
                                 strides=[1, 1], out=("f64", (2, 1))), out=("f64", (2,)))
           for i in range(2)]
    y = g.op("add", cubes, g.op("multiply", col[0], col[1]))
    (jac,) = [elem(g, g.add("jacfwd", [y, x], {"batch": 1}, [("f64", (2, 2))]), 0,
                   ("f64", (2, 2)))]
    (hess,) = [elem(g, g.add("hessian", [y, x], {"batch": 1}, [("f64", (2, 2, 2))]), 0,
                    ("f64", (2, 2, 2)))]
    at = np.array([[1.0, 2.0], [-0.5, 3.0]])
    got_jac, got_hess = run_graph(g, [jac, hess], at)

    def one(e: jax.Array) -> jax.Array:
        return jnp.sum(e ** 3) + e[0] * e[1]

    np.testing.assert_allclose(got_jac, np.asarray(jax.vmap(jax.jacfwd(one))(at)), rtol=1e-14)
    np.testing.assert_allclose(got_hess, np.asarray(jax.vmap(jax.hessian(one))(at)), rtol=1e-14)
    np.testing.assert_allclose(got_hess[0], [[6.0, 1.0], [1.0, 12.0]])


def test_a_batch_the_inputs_do_not_share_is_refused() -> None:
    g = GraphBuilder()
    x = g.param(0, "f64", (2, 3))
    y = total(g, x)
    node = g.add("jacfwd", [y, x], {"batch": 1}, [("f64", (3,))])
    out = elem(g, node, 0, ("f64", (3,)))
    with pytest.raises(GraphError, match="with batch 1, y and every x must share their first 1"):
        decode_graph(g.binary([out]))
