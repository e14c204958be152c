"""The NaN bits of graph outputs in numerics mode ``nx`` (py_backend/lower.py,
``canonical_nan``): every computed NaN is the quiet NaN with a clear sign bit, as Nx 0.7.2's
binary backend writes it; moved elements keep their bits. The bytes are real Nx 0.7.2's."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from py_backend import lower, numerics, program
from py_backend.program import decode_graph

from .helpers import GraphBuilder

INF = np.inf


def _run(g: GraphBuilder, node: int, *args: np.ndarray) -> np.ndarray:
    return np.asarray(jax.jit(program.lower(decode_graph(g.binary([node]))))(*args)[0])


@pytest.mark.skipif(not numerics.exact(), reason="mode nx rewrites NaNs")
def test_computed_nans_are_nx_bits_moved_ones_keep_theirs() -> None:
    g = GraphBuilder()
    p = g.param(0, "f32", (2,))
    total = g.op("sum", p, out=("f32", ()), axes=None, keep_axes=False)
    moved = g.op("reshape", p, out=("f32", (2, 1)))
    x = np.array([INF, -INF], np.float32)
    assert _run(g, total, x).tobytes() == bytes.fromhex("0000c07f")
    payloads = np.frombuffer(bytes.fromhex("0000c0ff0100c07f"), np.float32)
    assert _run(g, moved, payloads).tobytes() == payloads.tobytes()


@pytest.mark.parametrize(
    "dtype,nan",
    [(np.float16, "007e"), (jnp.bfloat16, "c07f"), (np.float32, "0000c07f"),
     (np.float64, "000000000000f87f"), (np.complex64, "0000c07f0000c07f")],
)
def test_canonical_nan_bits_per_type(dtype: object, nan: str) -> None:
    x = jnp.asarray(np.zeros(1), dtype)
    got = jax.jit(lambda v: lower.canonical_nan(v / v))(x)
    assert np.asarray(got).tobytes().hex() == nan
    # a square root of a negative number too (XLA's CPU code takes it for never NaN)
    if not jnp.iscomplexobj(x):
        got = jax.jit(lambda v: lower.canonical_nan(jnp.sqrt(v - 1)))(x)
        assert np.asarray(got).tobytes().hex() == nan


def test_canonical_nan_is_the_identity_to_gradients() -> None:
    assert jax.grad(lambda v: lower.canonical_nan(v * v))(3.0) == 6.0
    assert lower.canonical_nan(jnp.arange(3)).dtype == jnp.arange(3).dtype


def test_canonical_nan_keeps_the_order_of_a_result_xla_lays_out_otherwise() -> None:
    # the gradient of a dilated convolution: XLA's CPU compiler permuted its elements under a
    # bitcast-convert of the unflattened result
    x = np.linspace(-1, 1.5, 40).reshape(2, 2, 2, 5)
    k = np.linspace(-0.5, 1, 36).reshape(3, 2, 2, 3)

    def total(v: jax.Array) -> jax.Array:
        y = jax.lax.conv_general_dilated(v, k, (1, 2), [(1, 0), (0, 2)], rhs_dilation=(1, 2))
        return jnp.sum(y)

    plain = np.asarray(jax.jit(jax.grad(total))(x))
    rewritten = np.asarray(jax.jit(lambda v: lower.canonical_nan(jax.grad(total)(v)))(x))
    assert np.array_equal(plain, rewritten)
