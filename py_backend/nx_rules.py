"""How Nx 0.7.2's binary backend rounds what it computes, for numerics mode ``nx``
(:mod:`py_backend.numerics`).

Nx computes each float operation on doubles and rounds the result once to the tensor's type:
:func:`rounded_once` computes an f32 (c64) function in f64 (c128), :func:`on_doubles` a bf16
or f16 one, and :func:`written` writes a double into a type as Nx writes it (a bf16 truncated,
not rounded); sums accumulate in :func:`accumulator`'s type. The element-wise functions and
derivative formulas of mode ``nx`` that use them are each op's own, beside its lowering
(py_backend/ops/elementwise.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

Fn = Callable[..., jax.Array]

_WIDER = {
    np.dtype(np.float32): np.dtype(np.float64),
    np.dtype(np.complex64): np.dtype(np.complex128),
}


# sums (sum, product, dot, window sums) accumulate in doubles, as Nx's binary backend adds the
# numbers it reads, and are rounded to the result's type once at the end
_ACCUMULATOR = {
    **_WIDER,
    np.dtype(jnp.float16): np.dtype(np.float64),
    np.dtype(jnp.bfloat16): np.dtype(np.float64),
}


def accumulator(dtype: np.dtype) -> np.dtype:
    """The type Nx's binary backend adds ``dtype`` values in: a double (or a c128) for floats
    and complex numbers of fewer bits, ``dtype`` itself otherwise."""
    return _ACCUMULATOR.get(np.dtype(dtype), np.dtype(dtype))


_HALF = (np.dtype(jnp.bfloat16), np.dtype(jnp.float16))


def is_half(dtype: Any) -> bool:
    """Whether ``dtype`` is bf16 or f16 (which Nx's binary backend computes on doubles)."""
    return np.dtype(dtype) in _HALF


@jax.custom_jvp
def _truncated_bf16(x: jax.Array) -> jax.Array:
    # the f32's top two bytes: exactly a bf16, so the conversion rounds nothing
    bits = lax.bitcast_convert_type(x, np.uint32) & np.uint32(0xFFFF0000)
    return lax.bitcast_convert_type(bits, np.float32).astype(jnp.bfloat16)


@_truncated_bf16.defjvp
def _truncated_bf16_jvp(
    primals: tuple[jax.Array], tangents: tuple[jax.Array]
) -> tuple[jax.Array, jax.Array]:
    (x,), (t,) = primals, tangents
    return _truncated_bf16(x), t.astype(jnp.bfloat16)


def written(x: jax.Array, dtype: Any) -> jax.Array:
    """``x`` (a double, or any float) written into ``dtype`` as Nx's binary backend writes it:
    a bf16 is the f32 nearest to ``x`` with its low two bytes dropped (truncated, not
    rounded), an f16 and the other types are rounded once."""
    x = jnp.asarray(x)
    real = jnp.issubdtype(x.dtype, jnp.floating) or jnp.issubdtype(x.dtype, jnp.integer)
    if np.dtype(dtype) == np.dtype(jnp.bfloat16) and real:
        return _truncated_bf16(x.astype(np.float32))
    return x.astype(dtype)


def on_doubles(fn: Fn) -> Fn:
    """``fn`` of bf16/f16 arguments computed on doubles and written back as Nx writes it
    (:func:`written`); other arguments as they are."""

    def apply(*args: jax.Array) -> jax.Array:
        dtype = np.dtype(jnp.result_type(*args))
        if dtype not in _HALF:
            return fn(*args)
        return written(fn(*(jnp.asarray(a).astype(np.float64) for a in args)), dtype)

    return apply


def rounded_once(fn: Fn) -> Fn:
    """``fn`` computed on f64 (c128) copies of f32 (c64) arguments, rounded back once."""

    def apply(*args: jax.Array) -> jax.Array:
        dtype = np.dtype(jnp.result_type(*args))
        wide = _WIDER.get(dtype)
        if wide is None:
            return fn(*args)
        return fn(*(jnp.asarray(a).astype(wide) for a in args)).astype(dtype)

    return apply
