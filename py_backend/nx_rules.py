"""Element-wise functions computed and differentiated as Nx 0.7.2's binary backend does, for
numerics mode ``nx`` (:mod:`py_backend.numerics`).

Each function of an f32 (c64) tensor is computed in f64 (c128) and rounded once, as Nx computes
on doubles. Its derivative is Nx's formula (``Nx.Defn.Grad``), each operation of it rounded to
the tensor's type as Nx rounds it, given to JAX as the function's JVP (``jax.custom_jvp``): JAX
transposes ``t * c`` into ``g * c``, so reverse mode performs Nx's operations on Nx's values.
JAX's own rules compute the same derivatives in other orders (``g * (1 + y) * (1 - y)`` for
tanh), which differ from Nx's in the last bits. Functions whose JAX rule already is Nx's
(add, subtract, multiply, negate, abs, ...) are left to JAX; so is remainder, whose Nx rule
(``-floor(x / y)``) is not the derivative of a remainder with the dividend's sign.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.custom_derivatives import SymbolicZero

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


def _own(name: str) -> Fn:
    """This module's function ``name``, looked up when it is called: inside a rule, the
    functions it calls are this module's own (so a second derivative also follows Nx's
    formulas), and the table below does not exist yet when the rules are written."""
    return lambda *args: _WRAPPED[name](*args)


exp, sin, cos, sinh, cosh, log, rsqrt = map(
    _own, ("exp", "sin", "cos", "sinh", "cosh", "log", "rsqrt")
)
power = _own("pow")

_TWO_RSQRT_PI = 2 / math.sqrt(math.pi)

# name -> (the function, its JVP as Nx writes its gradient: d(x, ans, t) with t for g)
UNARY: dict[str, tuple[Fn, Callable[[jax.Array, jax.Array, jax.Array], jax.Array]]] = {
    "exp": (rounded_once(jnp.exp), lambda x, y, t: t * y),
    "expm1": (rounded_once(jnp.expm1), lambda x, y, t: t * (y + 1)),
    "log": (rounded_once(jnp.log), lambda x, y, t: t / x),
    "log1p": (rounded_once(jnp.log1p), lambda x, y, t: t / (x + 1)),
    "sigmoid": (rounded_once(jax.nn.sigmoid), lambda x, y, t: t * (exp(-x) * y * y)),
    "rsqrt": (rounded_once(lax.rsqrt), lambda x, y, t: t * -0.5 * power(x, -1.5)),
    "sqrt": (jnp.sqrt, lambda x, y, t: t * 0.5 / y),
    "cbrt": (rounded_once(lax.cbrt), lambda x, y, t: t / (3 * y * y)),
    "sin": (rounded_once(jnp.sin), lambda x, y, t: t * cos(x)),
    "cos": (rounded_once(jnp.cos), lambda x, y, t: t * -sin(x)),
    "tan": (
        rounded_once(jnp.tan),
        lambda x, y, t: lax.optimization_barrier(t / cos(x)) / cos(x),
    ),
    "tanh": (rounded_once(jnp.tanh), lambda x, y, t: t * (1 - y * y)),
    "sinh": (rounded_once(jnp.sinh), lambda x, y, t: t * cosh(x)),
    "cosh": (rounded_once(jnp.cosh), lambda x, y, t: t * sinh(x)),
    "asin": (rounded_once(jnp.arcsin), lambda x, y, t: t * rsqrt(1 - x * x)),
    "acos": (rounded_once(jnp.arccos), lambda x, y, t: t * -rsqrt(1 - x * x)),
    "atan": (rounded_once(jnp.arctan), lambda x, y, t: t / (1 + x * x)),
    "asinh": (rounded_once(jnp.arcsinh), lambda x, y, t: t * rsqrt(x * x + 1)),
    "acosh": (rounded_once(jnp.arccosh), lambda x, y, t: t * rsqrt(x * x - 1)),
    "atanh": (rounded_once(jnp.arctanh), lambda x, y, t: t / (1 - x * x)),
    "erf": (rounded_once(lax.erf), lambda x, y, t: t * (exp(-(x * x)) * _TWO_RSQRT_PI)),
    "erfc": (rounded_once(lax.erfc), lambda x, y, t: t * (exp(-(x * x)) * -_TWO_RSQRT_PI)),
}


# A binary rule is one term per argument, d(x, y, ans, t) with t that argument's tangent. A term
# is left out when JAX knows the tangent is zero (a constant exponent): in forward mode the
# zero would otherwise multiply log(x), NaN for a negative x (Nx's backward pass computes a
# term only for an argument that gets a gradient).


def _pow_dx(x: jax.Array, y: jax.Array, ans: jax.Array, tx: jax.Array) -> jax.Array:
    exponent = jnp.where(y == 0, jnp.ones_like(y), y - 1)
    return tx * (y * power(x, exponent))


def _pow_dy(x: jax.Array, y: jax.Array, ans: jax.Array, ty: jax.Array) -> jax.Array:
    base = jnp.where(x == 0, jnp.ones_like(x), x)
    return ty * (log(base) * ans)


def _atan2_dx(x: jax.Array, y: jax.Array, ans: jax.Array, tx: jax.Array) -> jax.Array:
    return tx * (y / (x * x + y * y))


def _atan2_dy(x: jax.Array, y: jax.Array, ans: jax.Array, ty: jax.Array) -> jax.Array:
    return ty * -(x / (x * x + y * y))


def _divide(x: jax.Array, y: jax.Array) -> jax.Array:
    """IEEE division, rounded once. XLA's simplifier rewrites a division by a broadcast value
    (``x / 3``, ``t / Nx.sum(t)``) into a product with its reciprocal, which is rounded twice
    (a third of all f32 ``x / 3`` differ in the last bit); the barrier hides the broadcast."""
    return jnp.true_divide(x, lax.optimization_barrier(y))


def _divide_dx(x: jax.Array, y: jax.Array, ans: jax.Array, tx: jax.Array) -> jax.Array:
    return _divide(tx, y)


def _divide_dy(x: jax.Array, y: jax.Array, ans: jax.Array, ty: jax.Array) -> jax.Array:
    # (the barrier on ans keeps XLA from rewriting (x / y) / y into x / (y * y))
    return ty * -_divide(lax.optimization_barrier(ans), y)


Term = Callable[[jax.Array, jax.Array, jax.Array, jax.Array], jax.Array]

BINARY: dict[str, tuple[Fn, Term, Term]] = {
    "divide": (_divide, _divide_dx, _divide_dy),
    "pow": (rounded_once(jnp.power), _pow_dx, _pow_dy),
    "atan2": (rounded_once(lax.atan2), _atan2_dx, _atan2_dy),
}


def _unary(fn: Fn, d: Callable[[jax.Array, jax.Array, jax.Array], jax.Array]) -> Fn:
    wrapped = jax.custom_jvp(fn)

    @wrapped.defjvp
    def jvp(primals: tuple[jax.Array], tangents: tuple[jax.Array]) -> tuple[jax.Array, jax.Array]:
        (x,), (t,) = primals, tangents
        # (the value through `wrapped`, so that differentiating this rule again, for a
        # second derivative, uses Nx's formula for it too)
        ans = wrapped(x)
        return ans, d(x, ans, t)

    return wrapped


def _binary(fn: Fn, dx: Term, dy: Term) -> Fn:
    wrapped = jax.custom_jvp(fn)

    def jvp(
        primals: tuple[jax.Array, jax.Array], tangents: tuple[Any, Any]
    ) -> tuple[jax.Array, jax.Array]:
        (x, y), (tx, ty) = primals, tangents
        ans = wrapped(x, y)
        terms = [d(x, y, ans, t) for d, t in ((dx, tx), (dy, ty))
                 if not isinstance(t, SymbolicZero)]
        if not terms:
            return ans, jnp.zeros_like(ans)
        return ans, terms[0] if len(terms) == 1 else terms[0] + terms[1]

    wrapped.defjvp(jvp, symbolic_zeros=True)

    def apply(a: jax.Array, b: jax.Array) -> jax.Array:
        # broadcast first: the rule's operations are then element by element, and JAX sums
        # the gradient of a broadcast input over the broadcast axes (Nx's unbroadcast)
        return wrapped(*jnp.broadcast_arrays(a, b))

    return apply


_WRAPPED: dict[str, Fn] = {name: _unary(fn, d) for name, (fn, d) in UNARY.items()}
_WRAPPED.update({name: _binary(fn, dx, dy) for name, (fn, dx, dy) in BINARY.items()})


def functions() -> dict[str, Fn]:
    """The element-wise functions this module replaces, by op name."""
    return dict(_WRAPPED)

