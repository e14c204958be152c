"""Complex functions that XLA has no kernel for, and complex products, computed as Nx 0.7.2's
binary backend computes them with the ``complex`` package.

- :func:`cbrt`: the principal cube root, ``from_polar(cbrt(|z|), phase(z) / 3)``; a zero
  angle gives a zero imaginary part (so ``cbrt(Inf+3i)`` is ``Inf+0i``, not ``Inf+NaNi``).
- :func:`real_atan2`: ``atan2`` of the real parts with a zero imaginary part. Nx raises
  ``ArithmeticError`` when an imaginary part is not zero; the front end checks concrete
  arguments, and inside ``defn`` such elements give ``NaN+NaNi`` here.
- :func:`product`, :func:`cumulative_product` and :func:`times_skipping_one`: Nx multiplies
  the elements in turn, starting from the real number 1, which changes nothing. XLA's
  reductions multiply by the complex identity ``1+0i``, and ``(1+0i) * (Inf+3i)`` is
  ``Inf+NaNi`` (``0 * Inf``), so the product of ``[Inf+3i, -2+4i]`` became ``NaN+NaNi`` where
  Nx (and ``Nx.multiply``) give ``-Inf+Infi``. These multiply pairwise, never by the identity,
  with :func:`times_skipping_one`: a factor exactly ``1+0i`` leaves the other unchanged, as
  Nx's multiplication by a complex number with a zero imaginary part does (it is also the
  monoid of windowed products, whose padding holds ``1+0i``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from py_backend import numerics

_WIDER = {np.dtype(np.complex64): np.dtype(np.complex128)}


def _widened(fn: Callable[[jax.Array], jax.Array]) -> Callable[[jax.Array], jax.Array]:
    """In numerics mode ``nx``, ``fn`` of a c64 tensor computed in c128 and rounded once (Nx
    computes on doubles)."""

    def apply(z: jax.Array) -> jax.Array:
        wide = _WIDER.get(np.dtype(z.dtype)) if numerics.exact() else None
        return fn(z) if wide is None else fn(z.astype(wide)).astype(z.dtype)

    return apply


@jax.custom_jvp
def _principal_cbrt(z: jax.Array) -> jax.Array:
    r = jnp.power(jnp.abs(z), 1.0 / 3.0)
    phi = jnp.angle(z) / 3
    polar = lax.complex(r * jnp.cos(phi), r * jnp.sin(phi))
    return jnp.where(phi == 0, lax.complex(r, jnp.zeros_like(r)), polar)


@_principal_cbrt.defjvp
def _principal_cbrt_jvp(
    primals: tuple[jax.Array], tangents: tuple[jax.Array]
) -> tuple[jax.Array, jax.Array]:
    (z,), (t,) = primals, tangents
    y = _principal_cbrt(z)
    # (Nx's gradient of cbrt: g / (3 * y * y))
    return y, t / (3 * y * y)


cbrt = _widened(_principal_cbrt)


def real_atan2(
    atan2: Callable[[jax.Array, jax.Array], jax.Array],
) -> Callable[[jax.Array, jax.Array], jax.Array]:
    """``atan2`` (the real function given) extended to complex tensors holding real values."""

    def apply(a: jax.Array, b: jax.Array) -> jax.Array:
        if not jnp.iscomplexobj(a):
            return atan2(a, b)
        a, b = jnp.broadcast_arrays(a, b)
        angle = atan2(jnp.real(a), jnp.real(b))
        real_valued = (jnp.imag(a) == 0) & (jnp.imag(b) == 0)
        nan = jnp.full_like(angle, jnp.nan)
        return jnp.where(
            real_valued, lax.complex(angle, jnp.zeros_like(angle)), lax.complex(nan, nan)
        )

    return apply


def _pairwise_product(x: jax.Array) -> jax.Array:
    """The product over the last axis, halves multiplied element by element until one is
    left: log2(n) multiplications, the identity used only for an empty axis."""
    if x.shape[-1] == 0:
        return jnp.ones(x.shape[:-1], x.dtype)
    while x.shape[-1] > 1:
        half = x.shape[-1] // 2
        paired = times_skipping_one(x[..., :half], x[..., half : 2 * half])
        x = jnp.concatenate([paired, x[..., 2 * half :]], axis=-1)
    return x[..., 0]


def product(x: jax.Array, axes: Sequence[int] | None, keep_axes: bool) -> jax.Array:
    """The product of a complex tensor over ``axes`` (all when ``None``)."""
    rank = x.ndim
    reduced = tuple(range(rank)) if axes is None else tuple(a % rank for a in axes)
    kept = tuple(a for a in range(rank) if a not in reduced)

    def over_last(z: jax.Array) -> jax.Array:
        moved = jnp.transpose(z, kept + reduced)
        size = math.prod(z.shape[a] for a in reduced)
        return _pairwise_product(moved.reshape(tuple(z.shape[a] for a in kept) + (size,)))

    result = _widened(over_last)(x)
    if keep_axes:
        result = jnp.expand_dims(result, reduced)
    return result


def times_skipping_one(a: jax.Array, b: jax.Array) -> jax.Array:
    """``a * b``, except that a factor exactly ``1+0i`` leaves the other unchanged (as Nx's
    multiplication by a complex number with a zero imaginary part does)."""
    return jnp.where(b == 1, a, jnp.where(a == 1, b, a * b))


def cumulative_product(x: jax.Array, axis: int, reverse: bool) -> jax.Array:
    """The running product of a complex tensor along ``axis``: a parallel prefix scan of
    :func:`times_skipping_one`, which needs no identity (XLA's cumulative product starts from
    ``1+0i``)."""
    scan = lambda z: lax.associative_scan(times_skipping_one, z, reverse=reverse, axis=axis)  # noqa: E731
    return _widened(scan)(x)
