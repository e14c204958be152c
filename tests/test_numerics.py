"""Numerics mode ``nx`` (py_backend/numerics.py, py_backend/nx_rules.py, the rules of
py_backend/ops/elementwise.py): f32 results rounded
as Nx's binary backend rounds them, and Nx's derivative formulas. The expected values are
computed here on doubles with NumPy (the rounding Nx performs) or are real Nx 0.7.2's."""

from __future__ import annotations

import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from py_backend import numerics, nx_rules
from py_backend.ops import elementwise

from .helpers import GraphBuilder, run_graph

pytestmark = pytest.mark.skipif(not numerics.exact(), reason="the suite runs in mode nx")

RNG = np.random.default_rng(7)
X = RNG.uniform(-3, 3, 4096).astype(np.float32)


@pytest.mark.parametrize(
    "name,ref",
    [("exp", np.exp), ("tanh", np.tanh), ("log1p", np.log1p), ("sin", np.sin), ("cos", np.cos),
     ("atan", np.arctan), ("sinh", np.sinh), ("expm1", np.expm1)],
)
def test_f32_functions_are_the_double_rounded_once(name: str, ref) -> None:
    fn = elementwise.function(name)
    got = np.asarray(jax.jit(fn)(X))
    with np.errstate(invalid="ignore"):  # log1p below -1: NaN on both sides, as it should be
        want = ref(X.astype(np.float64)).astype(np.float32)
    assert np.array_equal(got, want, equal_nan=True)


def test_no_fused_multiply_add_on_the_cpu() -> None:
    a, b, c = (RNG.standard_normal(4096).astype(np.float32) for _ in range(3))
    got = np.asarray(jax.jit(lambda a, b, c: a * b + c)(a, b, c))
    assert np.array_equal(got, (a * b) + c)  # NumPy rounds the product, then the sum


def test_gradients_are_nx_formulas_in_f32() -> None:
    # (JAX's own rules give other last bits for thousands of these inputs: g * (1 + y) * (1 - y)
    # for tanh, -g * x * y^-2 for the divisor)
    grad = lambda fn, **kw: np.asarray(jax.jit(jax.vmap(jax.grad(fn, **kw)))(X))  # noqa: E731
    y = np.tanh(X.astype(np.float64)).astype(np.float32)
    assert np.array_equal(grad(elementwise.function("tanh")), np.float32(1) - y * y)
    cos = np.cos(X.astype(np.float64)).astype(np.float32)
    assert np.array_equal(grad(elementwise.function("tan")), np.float32(1) / cos / cos)
    three = np.float32(3.0)
    d_divisor = jax.grad(elementwise.function("divide"), argnums=1)
    divisor = np.asarray(jax.jit(jax.vmap(d_divisor))(X, np.full_like(X, 3)))
    assert np.array_equal(divisor, -((X / three) / three))


# real Nx 0.7.2's values (its grad_test.exs asserts them with ==, as f32 tensors)
def test_nx_grad_test_values() -> None:
    tanh, power = elementwise.function("tanh"), elementwise.function("pow")

    def product_rule(t):
        return tanh(tanh(power(t, 2.0) * power(t, 3.0)))

    assert jax.jit(jax.grad(product_rule))(np.float32(1.0)) == np.float32(1.2343397629215758)

    def grad_tanh(t):
        return jax.grad(tanh)(t)

    assert jax.grad(grad_tanh)(np.float32(1.0)) == np.float32(-0.6397000084492246)


def test_results_carry_nx_positive_nan() -> None:
    # x86 makes the NaN with the sign bit set for inf - inf and min(-inf, nan); Nx writes
    # 0x7FC00000 (0x7FF8... in f64), and tensors compare by their bytes
    g = GraphBuilder()
    x = g.param(0, "f32", (3,))
    y = g.param(1, "f32", (3,))
    difference = g.op("subtract", x, y, out=("f32", (3,)))
    smallest = g.op("min", x, y, out=("f32", (3,)))
    z = g.param(2, "c64", (2,))
    square = g.op("subtract", z, z, out=("c64", (2,)))
    w = g.param(3, "f64", (2,))
    wide = g.op("subtract", w, w, out=("f64", (2,)))
    inf, nan = np.inf, np.nan
    args = (np.array([inf, -inf, 1], np.float32), np.array([inf, nan, 2], np.float32),
            np.array([complex(inf, -inf), complex(nan, 1)], np.complex64), np.array([inf, 1.0]))
    d, m, c, f = run_graph(g, [difference, smallest, square, wide], *args)
    assert d.view(np.uint32).tolist() == [0x7FC00000, 0x7FC00000, 0xBF800000]
    assert m.view(np.uint32).tolist() == [0x7F800000, 0x7FC00000, 0x3F800000]
    assert c.view(np.uint32).tolist() == [0x7FC00000] * 3 + [0]
    assert f.view(np.uint64).tolist() == [0x7FF8000000000000, 0]


def test_division_by_a_broadcast_value_is_rounded_once() -> None:
    # XLA's simplifier would turn x / 3 into x * (1 / 3): a third of these in the last bit
    x = RNG.uniform(-10, 10, 4096).astype(np.float32)
    divide = jax.jit(elementwise.function("divide"))
    for d in (np.float32(3), np.float32(0.1), np.full(4096, 7, np.float32)):
        assert np.array_equal(np.asarray(divide(x, d)), x / d)
    # and the gradient's divisions too: d(x / y)/dy = -(x / y) / y
    three = np.full(4096, 3, np.float32)
    dy = jax.jit(jax.grad(lambda y: elementwise.function("divide")(x, y).sum()))(three)
    assert np.array_equal(np.asarray(dy), -((x / three) / three))


def test_sums_add_in_doubles_rounded_once() -> None:
    # Nx's binary backend adds f32 numbers as doubles: 1e8 + 1 - 1e8 is 1, not 0
    g = GraphBuilder()
    x = g.param(0, "f32", (3,))
    total = g.op("sum", x, axes=None, keep_axes=False, out=("f32", ()))
    mean = g.op("mean", x, axes=None, keep_axes=False, out=("f32", ()))
    window = g.op("window_sum", x, window_dimensions=[3], strides=[1], padding=[[0, 0]],
                  window_dilations=[1],
                  out=("f32", (1,)))
    product = g.op("product", x, axes=None, keep_axes=False, out=("f32", ()))
    big = np.array([1e8, 1.0, -1e8], np.float32)
    got = run_graph(g, [total, mean, window], big)
    assert [float(v) for v in got[:2]] == [1.0, float(np.float32(1 / 3))]
    assert got[2].tolist() == [1.0]
    tiny, = run_graph(g, [product], np.array([1e20, 1e20, 1e-30], np.float32))
    assert tiny == np.float32(1e10)  # the f32 running product overflows to inf


def test_the_mode_is_checked_and_native_keeps_xla_math() -> None:
    env = {**os.environ, "NX_JAX_NUMERICS": "fast"}
    out = subprocess.run(
        [sys.executable, "-c", "import py_backend"], env=env, capture_output=True, text=True
    )
    assert out.returncode != 0 and "NX_JAX_NUMERICS must be one of nx, native" in out.stderr

    script = (
        "import numpy as np, jax; from py_backend.ops import elementwise; "
        "x = np.linspace(-3, 3, 4096, dtype=np.float32); "
        "print(bool((np.asarray(jax.jit(elementwise.function('tanh'))(x)) "
        "== np.tanh(x.astype(np.float64)).astype(np.float32)).all()))"
    )
    env = {**os.environ, "NX_JAX_NUMERICS": "native"}
    env.pop("XLA_FLAGS", None)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    # XLA's own f32 tanh is not the correctly rounded one everywhere
    assert out.stdout.strip() == "False"


def test_bf16_is_written_truncated_from_the_f32_and_f16_rounded() -> None:
    """Nx's binary backend writes a bf16 as the top two bytes of the f32 (truncated), an f16
    rounded; bf16/f16 functions are computed on doubles (real Nx 0.7.2: sigmoid of bf16 -1.0
    and -2.0 is 0.267578125 and 0.119140625, XLA's f32 path rounds to 0.26953125 and
    0.11962890625)."""
    x = np.array([0.1, 1.7, 3.14159, -2.71828, 1e8 + 1], np.float64)
    f32_bits = x.astype(np.float32).view(np.uint32)
    expected = (f32_bits & np.uint32(0xFFFF0000)).view(np.float32)
    written = np.asarray(nx_rules.written(jax.numpy.asarray(x), jax.numpy.bfloat16))
    assert written.dtype == jax.numpy.bfloat16
    assert written.astype(np.float32).tolist() == expected.tolist()

    sigmoid = nx_rules.on_doubles(jax.nn.sigmoid)
    got = sigmoid(jax.numpy.asarray([-1.0, -2.0], jax.numpy.bfloat16))
    assert np.asarray(got).astype(np.float64).tolist() == [0.267578125, 0.119140625]
    half = sigmoid(jax.numpy.asarray([-1.0], jax.numpy.float16))
    assert np.asarray(half).astype(np.float64).tolist() == [0.26904296875]

    # the truncation passes tangents through (as_type's derivative is the identity)
    grad = jax.grad(lambda v: nx_rules.written(v, jax.numpy.bfloat16).astype(np.float32))(2.5)
    assert float(grad) == 1.0


def test_two_graphs_lowered_in_two_modes_in_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    # the mode is the lowering's, read while it is traced: not fixed when py_backend is
    # imported, nor taken from the environment when the function is called later
    from py_backend import program

    g = GraphBuilder()
    x = g.param(0, "f32", (4096,))
    graph = program.decode_graph(g.binary([g.op("tanh", x, out=("f32", (4096,)))]))
    arg = np.linspace(-3, 3, 4096, dtype=np.float32)
    want = np.tanh(arg.astype(np.float64)).astype(np.float32)
    exact_fn = jax.jit(program.lower(graph, mode="nx"))
    native_fn = jax.jit(program.lower(graph, mode="native"))
    monkeypatch.setenv("NX_JAX_NUMERICS", "native")  # the process's mode no longer nx
    (exact,) = exact_fn(arg)
    monkeypatch.setenv("NX_JAX_NUMERICS", "nx")
    (native,) = native_fn(arg)
    assert np.array_equal(np.asarray(exact), want)
    # XLA's own f32 tanh is close, and not the correctly rounded one everywhere
    assert not np.array_equal(np.asarray(native), want)
    np.testing.assert_allclose(np.asarray(native), want, rtol=0, atol=2e-6)
    # outside a lowering the process's mode holds again
    assert numerics.mode() == "nx"
    with pytest.raises(ValueError, match="must be one of nx, native"):
        program.lower(graph, mode="fast")
