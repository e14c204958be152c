"""Element-wise ops: arithmetic, transcendental and bitwise functions, comparisons,
predicates, select, clip, type conversions.

Each op's check, lowering and registration (``OPS``, :mod:`py_backend.ops.rules`); the
functions of numerics mode ``nx`` (on doubles, rounded once, differentiated by Nx's formulas:
:data:`NX_UNARY`, :data:`NX_BINARY`, with :mod:`py_backend.nx_rules`' rounding) are chosen
where a graph is lowered, not when this module is imported (:func:`function`). Unary and
binary ops are computed in the out type (the inputs cast to it); predicates and
``abs``/``real``/``imag`` on the inputs as they are.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.custom_derivatives import SymbolicZero

from py_backend import complex_math, numerics, nx_rules
from py_backend import wire_graph as wire
from py_backend.lower import Call, Value
from py_backend.nx_rules import rounded_once
from py_backend.nxtypes import NxType, to_dtype
from py_backend.ops.rules import OPERAND_TYPE, entry, family
from py_backend.wire_graph import GraphError, Node, check_tensor_out

Fn = Callable[..., jax.Array]


def cast_all(c: Call) -> list[jax.Array]:
    """Inputs cast to the output type (JAX then broadcasts them with NumPy rules)."""
    return [jnp.asarray(a).astype(c.dtype) for a in c.args]


def check_integer_op(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    if not node.tensor.type.is_integer:
        raise GraphError(f"{where}: works on integer types only, out is {node.tensor.type}")


def elementwise_lowering(name: str, arity: int) -> Callable[[Call], Value]:
    """Op ``name``'s function (:func:`function`, in the numerics mode of the lowering that
    runs) of the inputs cast to the out type. In mode nx, bf16 and f16 results are computed on
    doubles and written as Nx's binary backend writes them (a bf16 truncated from the f32:
    nx_rules.written)."""
    tables = (_UNARY, _BINARY)[arity - 1]

    def lower(c: Call) -> Value:
        exact = numerics.exact()
        fn = tables[exact][name]
        if exact and nx_rules.is_half(c.dtype):
            return nx_rules.on_doubles(fn)(*cast_all(c))
        return fn(*cast_all(c))

    return lower


def written_as(x: jax.Array, dtype: Any) -> jax.Array:
    """``x`` in ``dtype``: as Nx's binary backend writes it in numerics mode nx (a bf16
    truncated from the f32, :func:`nx_rules.written`), rounded in mode native."""
    return nx_rules.written(x, dtype) if numerics.exact() else jnp.asarray(x).astype(dtype)


def check_comparison(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    if node.tensor.type != NxType("u", 8):
        raise GraphError(f"{where}: a comparison's out type must be {{:u, 8}}")


def comparison_lowering(fn: Callable[[jax.Array, jax.Array], jax.Array]) -> Callable[[Call], Value]:
    def lower(c: Call) -> Value:
        common = to_dtype(c.node.opts["operand_type"])
        a, b = (jnp.asarray(x).astype(common) for x in c.args)
        return fn(a, b).astype(np.uint8)

    return lower


def lower_select(c: Call) -> Value:
    pred, on_true, on_false = c.args
    on_true, on_false = (jnp.asarray(x).astype(c.dtype) for x in (on_true, on_false))
    return jnp.where(jnp.asarray(pred) != 0, on_true, on_false)


def lower_as_type(c: Call) -> Value:
    """Complex to real keeps the real part; float to integer truncates toward zero and
    saturates as Nx documents: NaN gives 0, values past the type's range (infinities
    included) its largest or smallest value. Integer to narrower integer wraps around."""
    x = jnp.asarray(c.args[0])
    dtype = c.dtype
    if jnp.issubdtype(x.dtype, jnp.complexfloating) and not jnp.issubdtype(
        dtype, jnp.complexfloating
    ):
        x = jnp.real(x)
    if jnp.issubdtype(x.dtype, jnp.floating) and jnp.issubdtype(dtype, jnp.integer):
        info = jnp.iinfo(dtype)
        high = x >= float(info.max)
        low = x <= float(info.min)
        safe = jnp.where(high | low | jnp.isnan(x), jnp.zeros((), x.dtype), x)
        converted = lax.convert_element_type(safe, dtype)
        converted = jnp.where(high, np.array(info.max, dtype), converted)
        return jnp.where(low, np.array(info.min, dtype), converted)
    return written_as(x, dtype)  # (in mode nx, Nx truncates the f32 to a bf16)


UNARY_FNS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "exp": jnp.exp,
    "expm1": jnp.expm1,
    "log": jnp.log,
    "log1p": jnp.log1p,
    "sqrt": jnp.sqrt,
    "rsqrt": lax.rsqrt,
    "sin": jnp.sin,
    "cos": jnp.cos,
    "tan": jnp.tan,
    "tanh": jnp.tanh,
    "sigmoid": jax.nn.sigmoid,
    "negate": jnp.negative,
    "abs": jnp.abs,
}

BINARY_FNS: dict[str, Callable[[jax.Array, jax.Array], jax.Array]] = {
    "add": jnp.add,
    "subtract": jnp.subtract,
    "multiply": jnp.multiply,
    "divide": jnp.true_divide,
    "pow": jnp.power,
    "max": jnp.maximum,
    "min": jnp.minimum,
}

COMPARISON_FNS: dict[str, Callable[[jax.Array, jax.Array], jax.Array]] = {
    "equal": jnp.equal,
    "not_equal": jnp.not_equal,
    "less": jnp.less,
    "less_equal": jnp.less_equal,
    "greater": jnp.greater,
    "greater_equal": jnp.greater_equal,
}


def _inexact_only(fn: Callable[[jax.Array], jax.Array]) -> Callable[[jax.Array], jax.Array]:
    """floor, ceil, round: the identity on integers."""

    def apply(x: jax.Array) -> jax.Array:
        return fn(x) if jnp.issubdtype(x.dtype, jnp.inexact) else x

    return apply


def _round_half_away(x: jax.Array) -> jax.Array:
    return lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO)


def _broadcasting(fn: Callable[[jax.Array, jax.Array], jax.Array]) -> Callable[..., jax.Array]:
    """A ``lax`` binary op (same shapes required) with NumPy broadcasting."""

    def apply(a: jax.Array, b: jax.Array) -> jax.Array:
        return fn(*jnp.broadcast_arrays(a, b))

    return apply


def _right_shift(a: jax.Array, b: jax.Array) -> jax.Array:
    """Arithmetic for signed types (as Erlang's ``bsr``), logical for unsigned ones."""
    a, b = jnp.broadcast_arrays(a, b)
    if jnp.issubdtype(a.dtype, jnp.signedinteger):
        return lax.shift_right_arithmetic(a, b)
    return lax.shift_right_logical(a, b)


UNARY_FNS.update({
    "cosh": jnp.cosh,
    "sinh": jnp.sinh,
    "acos": jnp.arccos,
    "asin": jnp.arcsin,
    "atan": jnp.arctan,
    "acosh": jnp.arccosh,
    "asinh": jnp.arcsinh,
    "atanh": jnp.arctanh,
    "cbrt": lax.cbrt,
    "erf": lax.erf,
    "erfc": lax.erfc,
    "erf_inv": lax.erf_inv,
    "sign": jnp.sign,
    "floor": _inexact_only(jnp.floor),
    "ceil": _inexact_only(jnp.ceil),
    "round": _inexact_only(_round_half_away),
    "bitwise_not": lax.bitwise_not,
    "population_count": lax.population_count,
    "count_leading_zeros": lax.clz,
    "conjugate": jnp.conj,
})

BINARY_FNS.update({
    "remainder": _broadcasting(lax.rem),  # sign of the dividend (C fmod, Erlang rem)
    "quotient": _broadcasting(lax.div),  # integer division truncating toward zero
    "atan2": _broadcasting(lax.atan2),
    "bitwise_and": _broadcasting(lax.bitwise_and),
    "bitwise_or": _broadcasting(lax.bitwise_or),
    "bitwise_xor": _broadcasting(lax.bitwise_xor),
    "left_shift": _broadcasting(lax.shift_left),
    "right_shift": _right_shift,
})

# Predicates: the inputs are not cast; the result is {:u, 8} holding 0 or 1.
PREDICATE_FNS: dict[str, Callable[..., jax.Array]] = {
    "is_nan": jnp.isnan,
    "is_infinity": jnp.isinf,
    "logical_not": lambda x: x == 0,
    "logical_and": lambda a, b: jnp.logical_and(a != 0, b != 0),
    "logical_or": lambda a, b: jnp.logical_or(a != 0, b != 0),
    "logical_xor": lambda a, b: jnp.logical_xor(a != 0, b != 0),
}

# Computed on the input as it is (complex stays complex); the result is cast to the real out.
REAL_PART_FNS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "abs": jnp.abs,
    "real": jnp.real,
    "imag": jnp.imag,
}


def _complex_by(
    complex_fn: Callable[[jax.Array], jax.Array], real_fn: Callable[[jax.Array], jax.Array]
) -> Callable[[jax.Array], jax.Array]:
    def apply(x: jax.Array) -> jax.Array:
        return complex_fn(x) if jnp.iscomplexobj(x) else real_fn(x)

    return apply


# Numerics mode nx (py_backend/numerics.py): functions of f32 (c64) tensors computed in f64
# (c128) and rounded once, as Nx computes on doubles, each differentiated by Nx's formula
# (Nx.Defn.Grad), every operation of it rounded to the tensor's type as Nx rounds it, given to
# JAX as the function's JVP (jax.custom_jvp): JAX transposes t * c into g * c, so reverse mode
# performs Nx's operations on Nx's values. JAX's own rules compute the same derivatives in
# other orders (g * (1 + y) * (1 - y) for tanh), which differ from Nx's in the last bits.
# Functions whose JAX rule already is Nx's (add, subtract, multiply, negate, abs, ...) are left
# to JAX; so is remainder, whose Nx rule (-floor(x / y)) is not the derivative of a remainder
# with the dividend's sign.


def _own(name: str) -> Fn:
    """Mode nx's function ``name``, looked up when it is called: inside a rule, the functions
    it calls are mode nx's own (so a second derivative also follows Nx's formulas), and the
    table below does not exist yet when the rules are written."""
    return lambda *args: _NX_EXACT[name](*args)


_nx_exp, _nx_sin, _nx_cos, _nx_sinh, _nx_cosh, _nx_log, _nx_rsqrt = map(
    _own, ("exp", "sin", "cos", "sinh", "cosh", "log", "rsqrt")
)
_nx_power = _own("pow")

_TWO_RSQRT_PI = 2 / math.sqrt(math.pi)

# name -> (the function, its JVP as Nx writes its gradient: d(x, ans, t) with t for g)
NX_UNARY: dict[str, tuple[Fn, Callable[[jax.Array, jax.Array, jax.Array], jax.Array]]] = {
    "exp": (rounded_once(jnp.exp), lambda x, y, t: t * y),
    "expm1": (rounded_once(jnp.expm1), lambda x, y, t: t * (y + 1)),
    "log": (rounded_once(jnp.log), lambda x, y, t: t / x),
    "log1p": (rounded_once(jnp.log1p), lambda x, y, t: t / (x + 1)),
    "sigmoid": (rounded_once(jax.nn.sigmoid), lambda x, y, t: t * (_nx_exp(-x) * y * y)),
    "rsqrt": (rounded_once(lax.rsqrt), lambda x, y, t: t * -0.5 * _nx_power(x, -1.5)),
    "sqrt": (jnp.sqrt, lambda x, y, t: t * 0.5 / y),
    "cbrt": (rounded_once(lax.cbrt), lambda x, y, t: t / (3 * y * y)),
    "sin": (rounded_once(jnp.sin), lambda x, y, t: t * _nx_cos(x)),
    "cos": (rounded_once(jnp.cos), lambda x, y, t: t * -_nx_sin(x)),
    "tan": (
        rounded_once(jnp.tan),
        lambda x, y, t: lax.optimization_barrier(t / _nx_cos(x)) / _nx_cos(x),
    ),
    "tanh": (rounded_once(jnp.tanh), lambda x, y, t: t * (1 - y * y)),
    "sinh": (rounded_once(jnp.sinh), lambda x, y, t: t * _nx_cosh(x)),
    "cosh": (rounded_once(jnp.cosh), lambda x, y, t: t * _nx_sinh(x)),
    "asin": (rounded_once(jnp.arcsin), lambda x, y, t: t * _nx_rsqrt(1 - x * x)),
    "acos": (rounded_once(jnp.arccos), lambda x, y, t: t * -_nx_rsqrt(1 - x * x)),
    "atan": (rounded_once(jnp.arctan), lambda x, y, t: t / (1 + x * x)),
    "asinh": (rounded_once(jnp.arcsinh), lambda x, y, t: t * _nx_rsqrt(x * x + 1)),
    "acosh": (rounded_once(jnp.arccosh), lambda x, y, t: t * _nx_rsqrt(x * x - 1)),
    "atanh": (rounded_once(jnp.arctanh), lambda x, y, t: t / (1 - x * x)),
    "erf": (rounded_once(lax.erf), lambda x, y, t: t * (_nx_exp(-(x * x)) * _TWO_RSQRT_PI)),
    "erfc": (rounded_once(lax.erfc), lambda x, y, t: t * (_nx_exp(-(x * x)) * -_TWO_RSQRT_PI)),
}


# A binary rule is one term per argument, d(x, y, ans, t) with t that argument's tangent. A term
# is left out when JAX knows the tangent is zero (a constant exponent): in forward mode the
# zero would otherwise multiply log(x), NaN for a negative x (Nx's backward pass computes a
# term only for an argument that gets a gradient).


def _pow_dx(x: jax.Array, y: jax.Array, ans: jax.Array, tx: jax.Array) -> jax.Array:
    exponent = jnp.where(y == 0, jnp.ones_like(y), y - 1)
    return tx * (y * _nx_power(x, exponent))


def _pow_dy(x: jax.Array, y: jax.Array, ans: jax.Array, ty: jax.Array) -> jax.Array:
    base = jnp.where(x == 0, jnp.ones_like(x), x)
    return ty * (_nx_log(base) * ans)


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

NX_BINARY: dict[str, tuple[Fn, Term, Term]] = {
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


_NX_EXACT: dict[str, Fn] = {name: _unary(fn, d) for name, (fn, d) in NX_UNARY.items()}
_NX_EXACT.update({name: _binary(fn, dx, dy) for name, (fn, dx, dy) in NX_BINARY.items()})


def _in_mode(table: Mapping[str, Fn], exact: bool) -> dict[str, Fn]:
    """``table`` as numerics mode nx (``exact``) computes it: transcendental functions on
    doubles, rounded once, and differentiated by Nx's formulas (:data:`NX_UNARY`,
    :data:`NX_BINARY`), as Nx's binary backend computes them; or as XLA does (mode native).
    Complex cbrt and atan2 have no XLA kernel: computed as Nx's Complex computes them, on top
    of either mode's real functions."""
    rules = _NX_EXACT if exact else {}
    fns = {op: rules.get(op, fn) for op, fn in table.items()}
    if "cbrt" in fns:
        fns["cbrt"] = _complex_by(complex_math.cbrt, fns["cbrt"])
    if "atan2" in fns:
        fns["atan2"] = complex_math.real_atan2(fns["atan2"])
    return fns


# both modes' tables, by exactness: the mode is read where a graph is lowered
_UNARY = {exact: _in_mode(UNARY_FNS, exact) for exact in (False, True)}
_BINARY = {exact: _in_mode(BINARY_FNS, exact) for exact in (False, True)}


def function(name: str) -> Fn:
    """The function of the unary or binary element-wise op ``name`` in the current numerics
    mode (:func:`py_backend.numerics.exact`)."""
    exact = numerics.exact()
    return _UNARY[exact].get(name) or _BINARY[exact][name]


def check_predicate(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    if node.tensor.type != NxType("u", 8):
        raise GraphError(f"{where}: out type must be {{:u, 8}} (a predicate)")


def predicate_lowering(fn: Callable[..., jax.Array]) -> Callable[[Call], Value]:
    def lower(c: Call) -> Value:
        return fn(*(jnp.asarray(a) for a in c.args)).astype(np.uint8)

    return lower


def check_real_part(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    if not node.tensor.type.is_float:
        raise GraphError(f"{where}: out type must be a float type, got {node.tensor.type}")


def real_part_lowering(fn: Callable[[jax.Array], jax.Array]) -> Callable[[Call], Value]:
    def lower(c: Call) -> Value:
        return fn(jnp.asarray(c.args[0])).astype(c.dtype)

    return lower


def check_bitcast(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    source = nodes[node.inputs[0]].tensor
    if source.type.bits != node.tensor.type.bits or source.shape != node.tensor.shape:
        raise GraphError(f"{where}: bitcast needs the same shape and bit width, "
                         f"got {source} -> {node.tensor}")


def lower_bitcast(c: Call) -> Value:
    """A bitcast to the type it already has is the value itself (so gradients pass through
    it, as in Nx; lax.bitcast_convert_type has none)."""
    x = jnp.asarray(c.args[0])
    return x if x.dtype == c.dtype else lax.bitcast_convert_type(x, c.dtype)


def lower_clip(c: Call) -> Value:
    x, low, high = cast_all(c)
    # lax.clamp accepts scalar bounds, but its gradient with respect to a scalar bound fails
    # ("select cases must have the same shapes"): give the bounds x's shape
    shape = jnp.broadcast_shapes(jnp.shape(x), jnp.shape(low), jnp.shape(high))
    x, low, high = (jnp.broadcast_to(v, shape) for v in (x, low, high))
    return lax.clamp(low, x, high)


OPS = family("elementwise", {
    # computed in the out type (inputs cast to it)
    **{op: entry(1, elementwise_lowering(op, 1)) for op in (
        "exp expm1 log log1p sqrt rsqrt sin cos tan tanh sigmoid negate cosh sinh acos asin atan "
        "acosh asinh atanh cbrt erf erfc erf_inv conjugate sign floor ceil round"
    ).split()},
    **{op: entry(1, elementwise_lowering(op, 1), check=check_integer_op)
       for op in "bitwise_not population_count count_leading_zeros".split()},
    **{op: entry(2, elementwise_lowering(op, 2))
       for op in "add subtract multiply divide pow max min remainder atan2".split()},
    **{op: entry(2, elementwise_lowering(op, 2), check=check_integer_op) for op in (
        "quotient bitwise_and bitwise_or bitwise_xor left_shift right_shift"
    ).split()},
    # computed on the inputs as they are
    **{op: entry(1, real_part_lowering(REAL_PART_FNS[op]),
               check=check_real_part if op != "abs" else wire.check_tensor_out)
       for op in "abs real imag".split()},
    **{op: entry(1, predicate_lowering(PREDICATE_FNS[op]), check=check_predicate)
       for op in "is_nan is_infinity logical_not".split()},
    **{op: entry(2, predicate_lowering(PREDICATE_FNS[op]), check=check_predicate)
       for op in "logical_and logical_or logical_xor".split()},
    **{op: entry(2, comparison_lowering(fn), OPERAND_TYPE, check_comparison)
       for op, fn in COMPARISON_FNS.items()},
    "select": entry(3, lower_select),
    "clip": entry(3, lower_clip),
    "as_type": entry(1, lower_as_type),
    "bitcast": entry(1, lower_bitcast, check=check_bitcast),
})
