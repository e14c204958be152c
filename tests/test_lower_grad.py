"""grad, stop_grad, custom_grad and metadata lowered directly (PROTOCOL.md section 4.2)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from .helpers import GraphBuilder, run_graph

F32 = np.float32


def softplus(g: GraphBuilder, t: int) -> int:
    return g.op("log1p", g.op("exp", t))


def softplus_custom(g: GraphBuilder, t: int, type_name: str = "f32") -> int:
    """custom_grad(log1p(exp(t)), [t], fn g -> [g * (1 - 1/(1+exp(t)))] end), as traced."""
    y = softplus(g, t)
    cot = g.add("cotangent", [], {}, (type_name, ()))
    one = g.const(1.0, type_name)
    frac = g.op("divide", one, g.op("add", one, g.op("exp", t)))
    grad = g.op("multiply", cot, g.op("subtract", one, frac))
    return g.add("custom_grad", [y], {"wrt": [t], "cotangents": [cot], "grads": [grad],
                                      "tuple": False}, (type_name, ()))


def grad_of(g: GraphBuilder, y: int, *xs: int) -> list[int]:
    node = g.add("grad", [y, *xs], {}, [g.out_of(x) for x in xs])
    return [g.op("elem", node, index=i, out=g.out_of(x)) for i, x in enumerate(xs)]


def test_softplus_value_and_autodiff_grad_at_3() -> None:
    g = GraphBuilder()
    t = g.param(0)
    y = softplus(g, t)
    (dy,) = grad_of(g, y, t)
    value, grad = run_graph(g, [y, dy], F32(3.0))
    assert value == pytest.approx(3.0485873, abs=1e-6)
    assert grad == pytest.approx(0.95257413, abs=1e-6)


def test_softplus_autodiff_grad_at_100_f32_is_nan() -> None:
    g = GraphBuilder()
    t = g.param(0)
    (dy,) = grad_of(g, softplus(g, t), t)
    (grad,) = run_graph(g, [dy], F32(100.0))
    assert np.isnan(grad)


def test_softplus_custom_grad_at_100_f32_is_exactly_one() -> None:
    g = GraphBuilder()
    t = g.param(0)
    y = softplus_custom(g, t)
    (dy,) = grad_of(g, y, t)
    value, grad = run_graph(g, [y, dy], F32(100.0))
    assert value == np.inf  # exp(100) overflows f32; the value is still the expression's
    assert grad == F32(1.0) and grad.dtype == np.float32


def test_softplus_custom_grad_at_709_f64_is_exactly_one() -> None:
    g = GraphBuilder()
    t = g.param(0, "f64")
    y = softplus_custom(g, t, "f64")
    (dy,) = grad_of(g, y, t)
    value, grad = run_graph(g, [y, dy], np.float64(709.0))
    assert value == pytest.approx(709.0)
    assert grad == 1.0 and grad.dtype == np.float64


def test_softplus_custom_grad_matches_autodiff_at_3() -> None:
    g = GraphBuilder()
    t = g.param(0)
    (custom,) = grad_of(g, softplus_custom(g, t), t)
    (auto,) = grad_of(g, softplus(g, t), t)
    c, a = run_graph(g, [custom, auto], F32(3.0))
    assert c == pytest.approx(a, rel=1e-6)


def r1psqrt(g: GraphBuilder, t: int) -> int:
    one = g.const(1.0)
    return g.op("divide", t, g.op("add", one, g.op("sqrt", t)))


def r1psqrt_custom(g: GraphBuilder, t: int) -> int:
    """custom_grad(t/(1+sqrt t), [t], fn g -> [g*(sqrt(t)+2)/(2*(sqrt(t)+1)**2)] end)."""
    y = r1psqrt(g, t)
    cot = g.add("cotangent", [], {}, ("f32", ()))
    s = g.op("sqrt", t)
    num = g.op("add", s, g.const(2.0))
    den = g.op("multiply", g.const(2.0), g.op("pow", g.op("add", s, g.const(1.0)), g.const(2.0)))
    grad = g.op("multiply", cot, g.op("divide", num, den))
    return g.add("custom_grad", [y], {"wrt": [t], "cotangents": [cot], "grads": [grad],
                                      "tuple": False}, ("f32", ()))


def test_r1psqrt_autodiff_grad_at_zero_is_nan_custom_is_one() -> None:
    g = GraphBuilder()
    t = g.param(0)
    (auto,) = grad_of(g, r1psqrt(g, t), t)
    (custom,) = grad_of(g, r1psqrt_custom(g, t), t)
    a, c = run_graph(g, [auto, custom], F32(0.0))
    assert np.isnan(a)
    assert c == F32(1.0)


def test_r1psqrt_custom_grad_matches_autodiff_at_4() -> None:
    g = GraphBuilder()
    t = g.param(0)
    (auto,) = grad_of(g, r1psqrt(g, t), t)
    (custom,) = grad_of(g, r1psqrt_custom(g, t), t)
    a, c = run_graph(g, [auto, custom], F32(4.0))
    assert a == pytest.approx(2.0 / 9.0, rel=1e-6)
    assert c == pytest.approx(a, rel=1e-6)


def test_grad_of_stop_grad_exp_plus_square_is_2x() -> None:
    g = GraphBuilder()
    x = g.param(0)
    y = g.op("add", g.op("stop_grad", g.op("exp", x)), g.op("multiply", x, x))
    (dy,) = grad_of(g, y, x)
    value, grad = run_graph(g, [y, dy], F32(3.0))
    assert value == pytest.approx(math.exp(3.0) + 9.0, rel=1e-6)
    assert grad == F32(6.0)


def test_grad_of_x_times_stop_grad_x_is_x() -> None:
    g = GraphBuilder()
    x = g.param(0)
    (dy,) = grad_of(g, g.op("multiply", x, g.op("stop_grad", x)), x)
    assert run_graph(g, [dy], F32(3.0))[0] == F32(3.0)


def test_metadata_is_identity_for_value_and_grad() -> None:
    g = GraphBuilder()
    x = g.param(0)
    y = g.op("metadata", g.op("multiply", x, x), keys=["inspect", "custom_key"])
    (dy,) = grad_of(g, y, x)
    value, grad = run_graph(g, [y, dy], F32(3.0))
    assert value == F32(9.0) and grad == F32(6.0)


def test_grad_of_grad_of_sin_is_minus_sin() -> None:
    g = GraphBuilder()
    x = g.param(0)
    (cos,) = grad_of(g, g.op("sin", x), x)
    (minus_sin,) = grad_of(g, cos, x)
    c, s = run_graph(g, [cos, minus_sin], F32(3.0))
    assert c == pytest.approx(math.cos(3.0), rel=1e-6)
    assert s == pytest.approx(-0.14112, abs=1e-5)
    assert s == pytest.approx(-math.sin(3.0), rel=1e-5)


def test_grad_of_grad_through_custom_grad_differentiates_the_backward_pass() -> None:
    # d/dt of the custom gradient 1 - 1/(1+exp t) is sigmoid'(t): 0.25 at t = 0
    g = GraphBuilder()
    t = g.param(0)
    (first,) = grad_of(g, softplus_custom(g, t), t)
    (second,) = grad_of(g, first, t)
    f, s = run_graph(g, [first, second], F32(0.0))
    assert f == pytest.approx(0.5) and s == pytest.approx(0.25)


def test_custom_grad_over_a_tuple_expression_gets_one_cotangent_per_element() -> None:
    g = GraphBuilder()
    x = g.param(0)
    e1, e2 = g.op("sin", x), g.op("multiply", x, x)
    c1 = g.add("cotangent", [], {}, ("f32", ()))
    c2 = g.add("cotangent", [], {}, ("f32", ()))
    # a deliberately "wrong" gradient, so the test sees that it is the one used
    grad = g.op("add", g.op("multiply", c1, g.const(2.0)), g.op("multiply", c2, g.const(10.0)))
    cg = g.add("custom_grad", [e1, e2], {"wrt": [x], "cotangents": [c1, c2], "grads": [grad],
                                         "tuple": True}, [("f32", ()), ("f32", ())])
    v1 = g.op("elem", cg, index=0, out=("f32", ()))
    v2 = g.op("elem", cg, index=1, out=("f32", ()))
    (both,) = grad_of(g, g.op("add", v1, v2), x)
    (first_only,) = grad_of(g, g.op("multiply", v1, g.const(3.0)), x)
    a, b, d1, d2 = run_graph(g, [v1, v2, both, first_only], F32(3.0))
    assert a == pytest.approx(math.sin(3.0)) and b == F32(9.0)
    assert d1 == F32(12.0)  # 1 * 2 + 1 * 10
    assert d2 == F32(6.0)  # 3 * 2 + 0 * 10


def test_custom_grad_gives_no_gradient_to_values_outside_wrt() -> None:
    # custom_grad(x * w, [x], fn g -> [g * w * 2] end): w is read but receives zero gradient
    g = GraphBuilder()
    x, w = g.param(0), g.param(1)
    cot = g.add("cotangent", [], {}, ("f32", ()))
    grad = g.op("multiply", g.op("multiply", cot, w), g.const(2.0))
    cg = g.add("custom_grad", [g.op("multiply", x, w)], {"wrt": [x], "cotangents": [cot],
                                                          "grads": [grad], "tuple": False})
    dx, dw = grad_of(g, cg, x, w)
    value, gx, gw = run_graph(g, [cg, dx, dw], F32(3.0), F32(5.0))
    assert value == F32(15.0) and gx == F32(10.0) and gw == F32(0.0)


def test_grad_with_respect_to_a_non_parameter_node() -> None:
    g = GraphBuilder()
    x = g.param(0)
    h = g.op("multiply", x, x)
    (dh,) = grad_of(g, g.op("sin", h), h)
    assert run_graph(g, [dh], F32(3.0))[0] == pytest.approx(math.cos(9.0), rel=1e-5)


def test_grad_with_respect_to_two_nodes() -> None:
    g = GraphBuilder()
    x, z = g.param(0), g.param(1)
    y = g.op("add", g.op("multiply", x, z), g.op("sin", x))
    dx, dz = grad_of(g, y, x, z)
    gx, gz = run_graph(g, [dx, dz], F32(3.0), F32(5.0))
    assert gx == pytest.approx(5.0 + math.cos(3.0), rel=1e-6)
    assert gz == F32(3.0)


def test_grad_of_a_tensor_function_has_the_input_shape() -> None:
    g = GraphBuilder()
    x = g.param(0, "f32", (2, 3))
    y = g.op("sum", g.op("multiply", x, x), axes=None, keep_axes=False, out=("f32", ()))
    (dx,) = grad_of(g, y, x)
    xv = np.arange(6, dtype=F32).reshape(2, 3)
    np.testing.assert_array_equal(run_graph(g, [dx], xv)[0], 2 * xv)


def test_evaluating_a_cotangent_outside_its_custom_grad_is_an_error() -> None:
    from py_backend.wire_graph import GraphError

    g = GraphBuilder()
    cot = g.add("cotangent", [], {}, ("f32", ()))
    y = g.op("add", cot, g.const(1.0))
    with pytest.raises(GraphError, match="cotangent"):
        run_graph(g, [y])


def test_custom_grad_whose_backward_pass_contains_a_grad_node() -> None:
    # custom_grad(sin(t), [t], fn g -> [g * grad(t * t * t, t)] end): gradient 3t^2 = 12 at 2
    g = GraphBuilder()
    t = g.param(0)
    cot = g.add("cotangent", [], {}, ("f32", ()))
    (cube_grad,) = grad_of(g, g.op("multiply", g.op("multiply", t, t), t), t)
    grad = g.op("multiply", cot, cube_grad)
    cg = g.add("custom_grad", [g.op("sin", t)], {"wrt": [t], "cotangents": [cot],
                                                  "grads": [grad], "tuple": False})
    (dt,) = grad_of(g, cg, t)
    value, d = run_graph(g, [cg, dt], F32(2.0))
    assert value == pytest.approx(math.sin(2.0)) and d == F32(12.0)


def test_nested_custom_grads_use_the_outermost_rule() -> None:
    g = GraphBuilder()
    t = g.param(0)
    c_in = g.add("cotangent", [], {}, ("f32", ()))
    inner = g.add("custom_grad", [g.op("multiply", t, t)],
                  {"wrt": [t], "cotangents": [c_in], "grads": [g.op("multiply", c_in,
                                                                     g.const(7.0))],
                   "tuple": False})
    c_out = g.add("cotangent", [], {}, ("f32", ()))
    outer = g.add("custom_grad", [g.op("multiply", inner, g.const(2.0))],
                  {"wrt": [t], "cotangents": [c_out],
                   "grads": [g.op("multiply", c_out, g.const(100.0))], "tuple": False})
    (d_outer,) = grad_of(g, outer, t)
    (d_inner,) = grad_of(g, inner, t)
    value, do, di = run_graph(g, [outer, d_outer, d_inner], F32(3.0))
    assert value == F32(18.0) and do == F32(100.0) and di == F32(7.0)


def test_custom_grad_around_a_grad_node() -> None:
    # custom_grad(grad(t^3, t), [t], fn g -> [g * 5] end): value 3t^2, gradient 5
    g = GraphBuilder()
    t = g.param(0)
    (e,) = grad_of(g, g.op("multiply", g.op("multiply", t, t), t), t)
    cot = g.add("cotangent", [], {}, ("f32", ()))
    cg = g.add("custom_grad", [e], {"wrt": [t], "cotangents": [cot],
                                    "grads": [g.op("multiply", cot, g.const(5.0))],
                                    "tuple": False})
    (dt,) = grad_of(g, cg, t)
    (plain,) = grad_of(g, e, t)  # the autodiff second derivative, 6t
    value, d, p = run_graph(g, [cg, dt, plain], F32(2.0))
    assert value == F32(12.0) and d == F32(5.0) and p == F32(12.0)


def test_grad_of_clip_with_respect_to_its_scalar_limits() -> None:
    """Nx 0.7.2's grad_test: d sum(clip(iota(5), lim, 10)) / d lim at 2.5 is 3.0 (0, 1, 2 are
    below it), and with lim as the upper limit 2.0. lax.clamp's gradient with respect to a
    scalar bound failed ("select cases must have the same shapes") before the lowering
    broadcast the bounds."""
    g = GraphBuilder()
    t = g.param(0, "f32", (5,))
    lim = g.param(1, "f32")
    low = g.op("clip", t, lim, g.const(10.0), out=("f32", (5,)))
    high = g.op("clip", t, g.const(-10.0), lim, out=("f32", (5,)))
    (d_low,) = grad_of(g, g.op("sum", low, axes=None, keep_axes=False, out=("f32", ())), lim)
    (d_high,) = grad_of(g, g.op("sum", high, axes=None, keep_axes=False, out=("f32", ())), lim)
    value, got_low, got_high = run_graph(g, [low, d_low, d_high],
                                         np.arange(5, dtype=F32), F32(2.5))
    np.testing.assert_array_equal(value, [2.5, 2.5, 2.5, 3.0, 4.0])
    assert got_low == 3.0 and got_high == 2.0


def test_grad_of_a_complex_scalar_is_the_derivative_not_its_conjugate() -> None:
    """As Nx 0.7.2 (seeded with 1 of y's type): d sum(exp(z)) / dz = exp(z) at z = -2i is
    cos 2 - i sin 2; d |z|^2 / dz of a complex z is 2 conj(z) (its real-valued case)."""
    g = GraphBuilder()
    z = g.param(0, "c64", (2,))
    y = g.op("sum", g.op("exp", z), axes=None, keep_axes=False, out=("c64", ()))
    sq = g.op("multiply", g.op("abs", z, out=("f32", (2,))), g.op("abs", z, out=("f32", (2,))),
              out=("f32", (2,)))
    y2 = g.op("sum", sq, axes=None, keep_axes=False, out=("f32", ()))
    (dz,) = grad_of(g, y, z)
    (dz2,) = grad_of(g, y2, z)
    at = np.array([1.0, -2.0j], np.complex64)
    got, got2 = run_graph(g, [dz, dz2], at)
    np.testing.assert_allclose(got, np.exp(at), rtol=1e-6)
    np.testing.assert_allclose(got2, 2 * np.conj(at), rtol=1e-6)


def test_grad_is_cast_to_its_declared_type_a_real_one_of_a_complex_x_takes_the_real_part() -> None:
    """The grad node's outs carry Nx 0.7.2's gradient types (decided in Elixir): d sum(z) / dz
    declared f32 for a complex z is the real part of JAX's 1+0i; d sum(x) / dx declared f32
    for an f64 x is f32 ones; d imag(z) / dz declared f32 is 0, the real part of JAX's -i."""
    g = GraphBuilder()
    z = g.param(0, "c64", (2,))
    x = g.param(1, "f64", (2,))
    y = g.op("sum", z, axes=None, keep_axes=False, out=("c64", ()))
    yx = g.op("sum", x, axes=None, keep_axes=False, out=("f64", ()))
    yi = g.op("sum", g.op("imag", z, out=("f32", (2,))), axes=None, keep_axes=False,
              out=("f32", ()))
    node = g.add("grad", [y, z], {}, [("f32", (2,))])
    dz = g.op("elem", node, index=0, out=("f32", (2,)))
    node = g.add("grad", [yx, x], {}, [("f32", (2,))])
    dx = g.op("elem", node, index=0, out=("f32", (2,)))
    node = g.add("grad", [yi, z], {}, [("f32", (2,))])
    di = g.op("elem", node, index=0, out=("f32", (2,)))
    got_z, got_x, got_i = run_graph(g, [dz, dx, di], np.array([1 + 2j, -3j], np.complex64),
                                    np.array([0.5, 2.0]))
    assert got_z.dtype == np.float32 and got_x.dtype == np.float32 and got_i.dtype == np.float32
    np.testing.assert_array_equal(got_z, [1.0, 1.0])
    np.testing.assert_array_equal(got_x, [1.0, 1.0])
    np.testing.assert_array_equal(got_i, [0.0, 0.0])


def test_an_integer_x_is_held_fixed_and_gets_zeros_of_its_declared_type() -> None:
    # grad({key, w}, fn p -> sum(w * as_type(key, f32)) end) as Elixir builds it when Nx's
    # gradient does not reach the key: the u32 x is not differentiated (JAX refuses integer
    # primals), its value is used as it is, and its gradient is f32 zeros
    g = GraphBuilder()
    key = g.param(0, "u32", (2,))
    w = g.param(1, "f32", (2,))
    y = g.op("sum", g.op("multiply", w, g.op("as_type", key, out=("f32", (2,)))),
             out=("f32", ()), axes=None, keep_axes=False)
    node = g.add("grad", [y, key, w], {}, [("f32", (2,)), ("f32", (2,))])
    dkey = g.op("elem", node, index=0, out=("f32", (2,)))
    dw = g.op("elem", node, index=1, out=("f32", (2,)))
    gk, gw = run_graph(g, [dkey, dw], np.array([3, 5], np.uint32), np.array([1.0, 2.0], F32))
    assert gk.dtype == np.float32 and gk.tolist() == [0.0, 0.0]
    assert gw.tolist() == [3.0, 5.0]
