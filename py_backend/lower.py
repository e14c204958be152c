"""Graph -> JAX function (PROTOCOL.md sections 4.1 and 4.2). Knows nothing about ports.

The lowering functions of the ops; which function lowers which op is declared in the op
registry (:mod:`py_backend.ops`), with the op's arity, options and checks. Nodes are evaluated
iteratively in id order and on demand (:meth:`Lowering.evaluate`) inside an :class:`Env`;
``grad`` and ``custom_grad`` evaluate parts of the graph again in child environments, which is
how ``jax.grad`` and ``jax.custom_vjp`` see them as functions of the differentiated nodes.

Worked example, the softplus of Nx's ``custom_grad`` docs at t = 100.0 (f32): the autodiff
gradient of ``log1p(exp(t))`` is NaN (inf / inf), the custom one ``g * (1 - 1/(1+exp(t)))`` is
exactly 1.0.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from jax.ad_checkpoint import checkpoint_name  # noqa: E402

from py_backend import complex_math, numerics, nx_rules  # noqa: E402
from py_backend.graph import (  # noqa: E402
    CheckpointPolicy,
    Graph,
    GraphError,
    Node,
    TensorOut,
    TupleOut,
    inner_node,
)
from py_backend.nxtypes import to_dtype, wire_dtype  # noqa: E402

Value = Any  # a jax.Array, or a tuple of values for tuple-valued nodes


class ShapeError(ValueError):
    """JAX produced a shape other than the one the graph declares."""


class ArgumentError(ValueError):
    """The arguments of ``run`` do not match the graph's parameters."""


class NodeReport(Exception):
    """An error whose message names its node itself (``{node N}``): no note is added."""


def _lowering(op: str) -> Callable[[Call], Value]:
    # (imported here: the registry refers to this module's lowering functions)
    from py_backend.ops import REGISTRY

    return REGISTRY[op].lower


# --- environments ----------------------------------------------------------------------------


@dataclass
class Env:
    """Node values. Lookup: ``local``, else the parent's (unless the id is in ``shadow``:
    those nodes depend on a value this environment replaces and must be recomputed here)."""

    local: dict[int, Value] = field(default_factory=dict)
    parent: Env | None = None
    shadow: frozenset[int] = frozenset()
    replay: bool = False  # re-evaluates nodes for grad/custom_grad (hooks there stay quiet)
    # how the values computed here are differentiated: "forward" (jvp, jacfwd, hessian),
    # "reverse" (grad, jacrev), None: as the parent's
    mode: str | None = None

    def find(self, node_id: int) -> tuple[bool, Value]:
        env: Env | None = self
        while env is not None:
            if node_id in env.local:
                return True, env.local[node_id]
            if node_id in env.shadow:
                return False, None
            env = env.parent
        return False, None

    def __contains__(self, node_id: int) -> bool:
        return self.find(node_id)[0]

    def forward(self) -> bool:
        """Whether this environment or one it lies in is differentiated in forward mode."""
        env: Env | None = self
        while env is not None:
            if env.mode == "forward":
                return True
            env = env.parent
        return False

    def __getitem__(self, node_id: int) -> Value:
        found, value = self.find(node_id)
        if not found:
            raise KeyError(node_id)
        return value


@dataclass(frozen=True)
class Call:
    """What a lowering function receives."""

    node: Node
    args: list[Value]
    env: Env
    lowering: Lowering

    @property
    def out(self) -> TensorOut:
        return self.node.tensor

    @property
    def dtype(self) -> np.dtype:
        return to_dtype(self.node.tensor.type)


# --- the evaluator ---------------------------------------------------------------------------


class Lowering:
    """Evaluates a validated :class:`Graph` with JAX operations (traceable by ``jax.jit``)."""

    def __init__(self, graph: Graph, sink: HookSink | None = None, muted: bool = False,
                 linear: Callable[[jax.Array], jax.Array] | None = None,
                 forward: bool = False) -> None:
        self.graph = graph
        self.nodes = graph.nodes
        self.sink = sink
        self.muted = muted  # every hook here (and in sub-graphs) is quiet
        # called on every node's value as it is computed (py_backend.debug_nans); may raise
        self.check: Callable[[Lowering, Node, list[Value], Value, Env], Value] | None = None
        # the linear map a solver's sub-graph was given (its linear_map nodes apply it)
        self.linear = linear
        # the node carrying this (sub-)graph is differentiated in forward mode
        self.forward = forward
        self._top: frozenset[int] | None = None
        self._needs: dict[int, tuple[int, ...]] = {}
        self._closed: dict[int, tuple[frozenset[int], tuple[int, ...]]] = {}
        self.args: Sequence[jax.Array] = ()

    # Structure ---------------------------------------------------------------------------

    def dependents(self, sources: Iterable[int]) -> frozenset[int]:
        """Every node depending on a source through any kind of ref (sources included)."""
        dep = set(sources)
        if not dep:
            return frozenset()
        for node in self.nodes[min(dep) + 1 :]:
            if node.id not in dep and any(r in dep for r in node.refs()):
                dep.add(node.id)
        return frozenset(dep)

    def needs(self, node_id: int) -> tuple[int, ...]:
        """Nodes whose values evaluating ``node_id`` reads from its environment: the inputs,
        and for ``custom_grad`` also the wrt nodes and the values its subgraphs close over."""
        cached = self._needs.get(node_id)
        if cached is None:
            node = self.nodes[node_id]
            cached = node.inputs
            if node.op == "custom_grad":
                _, closed = self.custom_grad_structure(node)
                cached = tuple(dict.fromkeys((*node.inputs, *node.opts["wrt"], *closed)))
            self._needs[node_id] = cached
        return cached

    def _frontier(
        self, roots: Iterable[int], inside: frozenset[int], seeded: frozenset[int]
    ) -> tuple[set[int], list[int]]:
        """Walk ``needs`` from ``roots``, not past ``seeded``; return the nodes reached that are
        ``inside`` and, in id order, those outside (where the walk stops)."""
        reached: set[int] = set()
        outside: set[int] = set()
        stack = list(roots)
        while stack:
            n = stack.pop()
            if n in seeded or n in reached or n in outside:
                continue
            if n in inside:
                reached.add(n)
                stack.extend(self.needs(n))
            else:
                outside.add(n)
        return reached, sorted(outside)

    def custom_grad_structure(self, node: Node) -> tuple[frozenset[int], tuple[int, ...]]:
        """(S, closed) of a ``custom_grad`` node: S are the nodes its forward and backward
        subgraphs recompute (they depend on wrt or cotangent nodes); closed are the other
        values they read, passed to the ``custom_vjp`` function as explicit arguments."""
        cached = self._closed.get(node.id)
        if cached is None:
            wrt, cots, grads = (node.opts[k] for k in ("wrt", "cotangents", "grads"))
            seeded = frozenset((*wrt, *cots))
            dep = self.dependents(seeded)
            inside, closed = self._frontier((*node.inputs, *grads), dep, seeded)
            cached = (frozenset(inside), tuple(closed))
            self._closed[node.id] = cached
        return cached

    def top(self) -> frozenset[int]:
        """Nodes the top-level environment evaluates: reachable from the outputs through
        ``inputs`` (a ``grad``'s y and a ``custom_grad``'s expressions included)."""
        if self._top is None:
            reached: set[int] = set()
            stack = list(self.graph.outputs)
            while stack:
                n = stack.pop()
                if n not in reached:
                    reached.add(n)
                    stack.extend(self.nodes[n].inputs)
            self._top = frozenset(reached)
        return self._top

    def forward_only(self, env: Env) -> bool:
        """Whether values computed in ``env`` are differentiated in forward mode (inside a
        ``jvp``, ``jacfwd`` or ``hessian``, maybe under other transformations), where an
        unbounded ``while`` is a plain ``lax.while_loop``: JAX differentiates that forward,
        and refuses at once, with a message we can name the fix in, to reverse it (a
        ``custom_vjp``, which forward mode cannot go through, would fail only later, when
        the whole function is traced)."""
        return self.forward or env.forward()

    def quiet(self, node_id: int, env: Env) -> bool:
        """Whether hooks evaluated for ``node_id`` in ``env`` must not fire: the node is being
        re-evaluated (inside ``grad``/``custom_grad``) and fires in the top-level environment."""
        return self.muted or (env.replay and node_id in self.top())

    # Evaluation --------------------------------------------------------------------------

    def evaluate(self, targets: Iterable[int], env: Env) -> None:
        """Compute into ``env.local`` every target missing from ``env`` and every missing
        ancestor (following ``inputs``), in id order, without recursion."""
        missing: set[int] = set()
        stack = [t for t in targets]
        while stack:
            n = stack.pop()
            if n in missing or n in env:
                continue
            missing.add(n)
            stack.extend(self.nodes[n].inputs)
        for n in sorted(missing):
            node = self.nodes[n]
            args = [env[i] for i in node.inputs]
            try:
                if "vectorized" in node.opts:
                    value = lower_vectorized(Call(node, args, env, self))
                else:
                    value = _lowering(node.op)(Call(node, args, env, self))
            except Exception as exc:
                if not isinstance(exc, GraphError | ShapeError | ArgumentError | NodeReport):
                    exc.add_note(f"while lowering node {n} ({node.op})")
                raise
            env.local[n] = conform(node, value)
            if self.check is not None:
                env.local[n] = self.check(self, node, args, env.local[n], env)

    def value(self, node_id: int, env: Env) -> Value:
        self.evaluate([node_id], env)
        return env[node_id]

    def function(self) -> Callable[..., list[jax.Array]]:
        """The whole graph as a function of the ``run`` arguments, returning the outputs."""

        def run(*args: jax.Array) -> list[jax.Array]:
            env = Env()
            self.args = args
            self.evaluate(self.graph.outputs, env)
            return [env[o] for o in self.graph.outputs]

        return run


def conform(node: Node, value: Value) -> Value:
    """Check the declared shape (ShapeError) and cast to the declared type."""
    return _conform(node, node.out, value)


def _conform(node: Node, out: TensorOut | TupleOut, value: Value) -> Value:
    if isinstance(out, TupleOut):
        if not isinstance(value, tuple) or len(value) != len(out.elements):
            raise ShapeError(f"node {node.id} ({node.op}): expected a {len(out.elements)}-tuple")
        return tuple(_conform(node, o, v) for o, v in zip(out.elements, value, strict=True))
    value = jnp.asarray(value)
    if tuple(value.shape) != out.shape:
        raise ShapeError(
            f"node {node.id} ({node.op}): JAX produced shape {tuple(value.shape)}, "
            f"the graph declares {out.shape}"
        )
    dtype = to_dtype(out.type)
    return value if value.dtype == dtype else value.astype(dtype)


# --- leaves ----------------------------------------------------------------------------------


def lower_parameter(c: Call) -> Value:
    index = c.node.opts["index"]
    args = c.lowering.args
    if index >= len(args):
        raise ArgumentError(f"node {c.node.id} (parameter): argument {index} was not given "
                            f"({len(args)} arguments)")
    return args[index]


def lower_constant(c: Call) -> Value:
    return jnp.full(c.out.shape, c.node.opts["value"], dtype=c.dtype)


def lower_tensor(c: Call) -> Value:
    data = np.frombuffer(c.node.opts["data"], dtype=wire_dtype(c.out.type))
    return jnp.asarray(data.reshape(c.out.shape).astype(c.dtype))


def lower_iota(c: Call) -> Value:
    axis = c.node.opts["axis"]
    shape = c.out.shape
    if axis is None:
        counts = lax.iota(np.int64, math.prod(shape)).reshape(shape)
    else:
        counts = lax.broadcasted_iota(np.int64, shape, axis)
    return counts.astype(c.dtype)


def lower_cotangent(c: Call) -> Value:
    raise GraphError(
        f"node {c.node.id} (cotangent): a cotangent only has a value inside the backward "
        f"pass of the custom_grad that lists it"
    )


# --- element-wise ----------------------------------------------------------------------------


def _cast_all(c: Call) -> list[jax.Array]:
    """Inputs cast to the output type (JAX then broadcasts them with NumPy rules)."""
    return [jnp.asarray(a).astype(c.dtype) for a in c.args]


def elementwise_lowering(fn: Callable[..., jax.Array]) -> Callable[[Call], Value]:
    # in numerics mode nx, bf16 and f16 results are computed on doubles and written as Nx's
    # binary backend writes them (a bf16 truncated from the f32: nx_rules.written)
    half = nx_rules.on_doubles(fn)

    def lower(c: Call) -> Value:
        if numerics.exact() and nx_rules.is_half(c.dtype):
            return half(*_cast_all(c))
        return fn(*_cast_all(c))

    return lower


def _written(x: jax.Array, dtype: Any) -> jax.Array:
    """``x`` in ``dtype``: as Nx's binary backend writes it in numerics mode nx (a bf16
    truncated from the f32, :func:`nx_rules.written`), rounded in mode native."""
    return nx_rules.written(x, dtype) if numerics.exact() else jnp.asarray(x).astype(dtype)


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
    return _written(x, dtype)  # (in mode nx, Nx truncates the f32 to a bf16)


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


# numerics mode nx (py_backend/numerics.py): transcendental functions on doubles, rounded once,
# and differentiated by Nx's formulas, as Nx's binary backend computes them
if numerics.exact():
    for _table in (UNARY_FNS, BINARY_FNS):
        _table.update({op: fn for op, fn in nx_rules.functions().items() if op in _table})


def _complex_by(
    complex_fn: Callable[[jax.Array], jax.Array], real_fn: Callable[[jax.Array], jax.Array]
) -> Callable[[jax.Array], jax.Array]:
    def apply(x: jax.Array) -> jax.Array:
        return complex_fn(x) if jnp.iscomplexobj(x) else real_fn(x)

    return apply


# complex cbrt and atan2 have no XLA kernel: computed as Nx's Complex computes them (on top
# of the real functions of either numerics mode)
UNARY_FNS["cbrt"] = _complex_by(complex_math.cbrt, UNARY_FNS["cbrt"])
BINARY_FNS["atan2"] = complex_math.real_atan2(BINARY_FNS["atan2"])


def predicate_lowering(fn: Callable[..., jax.Array]) -> Callable[[Call], Value]:
    def lower(c: Call) -> Value:
        return fn(*(jnp.asarray(a) for a in c.args)).astype(np.uint8)

    return lower


def real_part_lowering(fn: Callable[[jax.Array], jax.Array]) -> Callable[[Call], Value]:
    def lower(c: Call) -> Value:
        return fn(jnp.asarray(c.args[0])).astype(c.dtype)

    return lower


def lower_bitcast(c: Call) -> Value:
    """A bitcast to the type it already has is the value itself (so gradients pass through
    it, as in Nx; lax.bitcast_convert_type has none)."""
    x = jnp.asarray(c.args[0])
    return x if x.dtype == c.dtype else lax.bitcast_convert_type(x, c.dtype)


def lower_clip(c: Call) -> Value:
    x, low, high = _cast_all(c)
    # lax.clamp accepts scalar bounds, but its gradient with respect to a scalar bound fails
    # ("select cases must have the same shapes"): give the bounds x's shape
    shape = jnp.broadcast_shapes(jnp.shape(x), jnp.shape(low), jnp.shape(high))
    x, low, high = (jnp.broadcast_to(v, shape) for v in (x, low, high))
    return lax.clamp(low, x, high)


def predicate_reduction_lowering(fn: Callable[..., jax.Array]) -> Callable[[Call], Value]:
    def lower(c: Call) -> Value:
        axes = c.node.opts["axes"]
        x = jnp.asarray(c.args[0]) != 0
        axis = None if axes is None else tuple(axes)
        return fn(x, axis=axis, keepdims=c.node.opts["keep_axes"]).astype(np.uint8)

    return lower


def arg_reduction_lowering(fn: Callable[..., jax.Array]) -> Callable[[Call], Value]:
    """argmax/argmin as Nx 0.7.2 scans an axis: ``tie_break: :high`` picks the last of equal
    values; a NaN never beats the value held, so a float axis that starts with NaN answers 0
    (``:low``) or its last NaN (``:high``, where NaN ties with NaN), and any other axis answers
    the extreme of its numbers, the NaNs skipped (NumPy's argmax picks the first NaN instead)."""

    def lower(c: Call) -> Value:
        opts = c.node.opts
        x = jnp.asarray(c.args[0])
        axis = opts["axis"]
        if axis is None:
            x, axis = jnp.reshape(x, (-1,)), 0
        high = opts["tie_break"] == "high"
        if jnp.issubdtype(x.dtype, jnp.floating):
            index = _nx_arg_extreme(x, axis, fn is jnp.argmax, high)
        else:
            index = _first_or_last(None, x, axis, fn, high)
        return jnp.reshape(index, c.out.shape).astype(c.dtype)

    return lower


def _first_or_last(
    mask: jax.Array | None, x: jax.Array, axis: int, fn: Callable, high: bool
) -> jax.Array:
    """The first (or, with ``high``, the last) index where ``fn`` finds its answer along
    ``axis``: of ``x`` itself, or of the true entries of ``mask``."""
    target, pick = (x, fn) if mask is None else (mask, jnp.argmax)
    if high:
        return target.shape[axis] - 1 - pick(lax.rev(target, (axis,)), axis=axis)
    return pick(target, axis=axis)


def _nx_arg_extreme(x: jax.Array, axis: int, is_max: bool, high: bool) -> jax.Array:
    nan = jnp.isnan(x)
    numbers = jnp.where(nan, -jnp.inf if is_max else jnp.inf, x)
    extreme = (jnp.max if is_max else jnp.min)(numbers, axis=axis, keepdims=True)
    among_numbers = _first_or_last(~nan & (x == extreme), x, axis, jnp.argmax, high)
    leading_nan = jnp.take(nan, 0, axis=axis)
    when_leading_nan = _first_or_last(nan, x, axis, jnp.argmax, True) if high else 0
    return jnp.where(leading_nan, when_leading_nan, among_numbers)


def scan_lowering(fn: Callable[..., jax.Array]) -> Callable[[Call], Value]:
    def lower(c: Call) -> Value:
        (x,) = _cast_all(c)
        return fn(x, axis=c.node.opts["axis"], reverse=c.node.opts["reverse"])

    return lower


def lower_cumulative_product(c: Call) -> Value:
    """Complex running products never multiply by 1+0i (:mod:`py_backend.complex_math`)."""
    (x,) = _cast_all(c)
    if not jnp.iscomplexobj(x):
        return lax.cumprod(x, axis=c.node.opts["axis"], reverse=c.node.opts["reverse"])
    return complex_math.cumulative_product(x, c.node.opts["axis"], c.node.opts["reverse"])


def _window_config(c: Call) -> tuple[tuple[int, ...], tuple[int, ...], Any, tuple[int, ...]]:
    o = c.node.opts
    dilations = o.get("window_dilations", (1,) * len(o["window_dimensions"]))
    padding = tuple(tuple(p) for p in o["padding"])
    return tuple(o["window_dimensions"]), tuple(o["strides"]), padding, tuple(dilations)


def lowest(dtype: np.dtype) -> Any:
    if jnp.issubdtype(dtype, jnp.integer):
        return np.array(jnp.iinfo(dtype).min, dtype)
    return np.array(-np.inf, dtype)


def highest(dtype: np.dtype) -> Any:
    if jnp.issubdtype(dtype, jnp.integer):
        return np.array(jnp.iinfo(dtype).max, dtype)
    return np.array(np.inf, dtype)


def _window_by_slices(
    c: Call, x: jax.Array, monoid: Callable[[jax.Array, jax.Array], jax.Array], identity: Any
) -> jax.Array:
    """A window reduction as the monoid over one strided slice per window position: every
    transformation JAX has applies (it has no reverse-mode rule for a generic
    ``reduce_window``, nor for a max/min window with dilations)."""
    dims, strides, padding, dilations = _window_config(c)
    shape = c.out.shape
    if math.prod(shape) == 0:
        return jnp.full(shape, identity, c.dtype)
    padded = lax.pad(x, identity, tuple((lo, hi, 0) for lo, hi in padding))
    result = None
    for offsets in itertools.product(*(range(d) for d in dims)):
        start = tuple(o * d for o, d in zip(offsets, dilations, strict=True))
        limit = tuple(s + (n - 1) * k + 1 for s, n, k in zip(start, shape, strides, strict=True))
        part = lax.slice(padded, start, limit, strides)
        result = part if result is None else monoid(result, part)
    assert result is not None
    return result


def window_lowering(
    monoid: Callable[[jax.Array, jax.Array], jax.Array], init: Callable[[np.dtype], Any]
) -> Callable[[Call], Value]:
    """window_sum/max/min: ``lax.reduce_window`` with the monoid's identity, which JAX
    recognizes (and differentiates); padding holds the identity. Dilated max/min windows go
    through slices (JAX cannot differentiate those)."""

    def lower(c: Call) -> Value:
        (x,) = _cast_all(c)
        dims, strides, padding, dilations = _window_config(c)
        if monoid is not lax.add and any(d != 1 for d in dilations):
            return _window_by_slices(c, x, monoid, init(c.dtype))
        # window sums add up in the accumulator's type, as sum does
        wide = _accumulator(c.dtype) if monoid is lax.add else c.dtype

        def reduce(x: jax.Array) -> jax.Array:
            return lax.reduce_window(
                x.astype(wide), init(wide), monoid, dims, strides, padding,
                window_dilation=dilations,
            ).astype(c.dtype)

        exact_ties = numerics.exact() and jnp.issubdtype(x.dtype, jnp.inexact)
        if monoid is lax.add or not exact_ties or math.prod(c.out.shape) == 0:
            return reduce(x)
        # Nx's gradient of window_max/min is window_scatter_max/min of the incoming one: the
        # tangent of each window is that of the element its selection picks (the last of
        # tied elements), where JAX's rule picks the first
        take = lax.ge if monoid is lax.max else lax.le
        picked = partial(_window_selection, dims=dims, strides=strides, padding=padding,
                         out_shape=c.out.shape, take=take)

        @jax.custom_jvp
        def window(x: jax.Array) -> jax.Array:
            return reduce(x)

        @window.defjvp
        def window_jvp(
            primals: tuple[jax.Array], tangents: tuple[jax.Array]
        ) -> tuple[jax.Array, jax.Array]:
            (x,), (t,) = primals, tangents
            offsets, chosen, window_at = picked(lax.stop_gradient(x))
            pads = tuple((lo, hi, 0) for lo, hi in padding)
            t_padded = lax.pad(t, np.array(0, t.dtype), pads)
            out = jnp.zeros(c.out.shape, t.dtype)
            for k, offset in enumerate(offsets):
                out = jnp.where(chosen == k, window_at(t_padded, offset), out)
            return window(x), out

        return window(x)

    return lower


def _window_selection(
    x: jax.Array, dims: tuple[int, ...], strides: tuple[int, ...], padding: Any,
    out_shape: tuple[int, ...], take: Callable[[jax.Array, jax.Array], jax.Array],
) -> tuple[list[tuple[int, ...]], jax.Array, Callable[[jax.Array, tuple[int, ...]], jax.Array]]:
    """Nx's selection of one element per window (window_scatter_max/min): the window's
    offsets in row-major order, the index into them of each window's selected element (-1
    for a window of padding only), and the function that slices a padded array at an offset
    for every window. The first element is selected, a later one replaces the selection when
    ``take(element, selected)`` holds (``>=`` for max, ``<=`` for min): the last of tied
    elements wins, a NaN is selected only as its window's first element, padding never."""
    if numerics.exact() and x.dtype == np.float64:
        # Nx's binary backend compares the elements it reads as f32 tensors
        x = x.astype(np.float32)
    pads = tuple((lo, hi, 0) for lo, hi in padding)
    values = lax.pad(x, np.array(0, x.dtype), pads)
    valid = lax.pad(jnp.ones(x.shape, bool), np.array(False), pads)
    offsets = list(itertools.product(*(range(d) for d in dims)))

    def window_at(a: jax.Array, offset: tuple[int, ...]) -> jax.Array:
        limit = tuple(
            o + (n - 1) * s + 1 for o, n, s in zip(offset, out_shape, strides, strict=True)
        )
        return lax.slice(a, offset, limit, strides)

    chosen_value = window_at(values, offsets[0])
    found = window_at(valid, offsets[0])
    chosen = jnp.where(found, 0, -1)
    for k, offset in enumerate(offsets[1:], start=1):
        value, ok = window_at(values, offset), window_at(valid, offset)
        replace = ok & (~found | take(value, chosen_value))
        chosen_value = jnp.where(replace, value, chosen_value)
        chosen = jnp.where(replace, k, chosen)
        found = found | ok
    return offsets, chosen, window_at


def lower_window_product(c: Call) -> Value:
    """The product of one strided slice per window position; padding holds 1 (which complex
    products skip: see :mod:`py_backend.complex_math`)."""
    (x,) = _cast_all(c)
    wide = _accumulator(c.dtype)
    times = complex_math.times_skipping_one if jnp.iscomplexobj(x) else lax.mul
    return _window_by_slices(c, x.astype(wide), times, np.array(1, wide)).astype(c.dtype)


def window_scatter_lowering(
    take: Callable[[jax.Array, jax.Array], jax.Array],
) -> Callable[[Call], Value]:
    """window_scatter_max/min with Nx's selection: a window's elements are visited in
    row-major order, the first is selected and a later one replaces the selection when
    ``take(element, selected)`` holds (``>=`` for max, ``<=`` for min). So the last of tied
    elements wins, and a NaN is selected only as its window's first element. Padding is never
    selected. The source values are then added onto ``init_value``, window after window in
    row-major order, at the selected positions.

    XLA's SelectAndScatter cannot say this (its select sees the candidate second, and JAX
    differentiates it only with the first-wins ``ge``/``le``), so it is built from one strided
    slice per window offset, which JAX differentiates (zero for ``x``, a gather of the
    incoming gradient for ``source``, its sum for ``init_value``)."""

    def lower(c: Call) -> Value:
        x, source, init = (jnp.asarray(a) for a in c.args)
        dims, strides, padding, _ = _window_config(c)
        # the wide round trip makes JAX's transpose of the broadcast add init_value's
        # gradient up in the accumulator type, as Nx's Nx.sum(g) does
        init_wide = init.astype(_accumulator(c.dtype))
        if math.prod(source.shape) == 0:
            return jnp.broadcast_to(init_wide, x.shape).astype(c.dtype)
        full = tuple(d + lo + hi for d, (lo, hi) in zip(x.shape, padding, strict=True))
        offsets, chosen, _ = _window_selection(
            lax.stop_gradient(x), dims, strides, padding, source.shape, take
        )

        # the scatter: the windows reaching a position in row-major order are those that
        # reach it from the last offset to the first
        out = jnp.broadcast_to(init_wide, full).astype(c.dtype)
        src = source.astype(c.dtype)
        for k in reversed(range(len(offsets))):
            offset = offsets[k]
            place = tuple((o, f - (o + (n - 1) * s + 1), s - 1)
                          for o, f, n, s in zip(offset, full, source.shape, strides, strict=True))
            hit = lax.pad(chosen == k, np.array(False), place)
            added = lax.pad(src, np.array(0, c.dtype), place)
            out = jnp.where(hit, out + added, out)
        return lax.slice(out, tuple(lo for lo, _ in padding),
                         tuple(lo + d for d, (lo, _) in zip(x.shape, padding, strict=True)))

    return lower


# --- reductions and shapes -------------------------------------------------------------------


def _accumulator(dtype: Any) -> np.dtype:
    """The type sums of ``dtype`` values add in: Nx's double in numerics mode nx, ``dtype``
    itself in mode native (:func:`nx_rules.accumulator`)."""
    return nx_rules.accumulator(dtype) if numerics.exact() else np.dtype(dtype)


def reduction_lowering(
    fn: Callable[..., jax.Array], accumulates: bool = False
) -> Callable[[Call], Value]:
    """sum/product (``accumulates``: added or multiplied up in :func:`_accumulator`'s type,
    rounded once) and reduce_max/min."""

    def lower(c: Call) -> Value:
        axes = c.node.opts["axes"]
        wide = _accumulator(c.dtype) if accumulates else c.dtype
        x = jnp.asarray(c.args[0]).astype(wide)
        axis = None if axes is None else tuple(axes)
        return _written(fn(x, axis=axis, keepdims=c.node.opts["keep_axes"]), c.dtype)

    return lower


def lower_mean(c: Call) -> Value:
    """Nx's ``mean``, its ``sum`` divided by the count: the sum added in :func:`_accumulator`'s
    type (and, for a float tensor, rounded to its type, as Nx writes the sum), divided there,
    rounded once. An empty reduction is JAX's (NaN)."""
    axes, keep = c.node.opts["axes"], c.node.opts["keep_axes"]
    x = jnp.asarray(c.args[0])
    axis = None if axes is None else tuple(axes)
    count = math.prod(x.shape if axis is None else (x.shape[a] for a in axis))
    if count == 0:
        return jnp.mean(x.astype(c.dtype), axis=axis, keepdims=keep)
    wide = _accumulator(c.dtype)
    total = jnp.sum(x.astype(wide), axis=axis, keepdims=keep)
    if not jnp.issubdtype(x.dtype, jnp.integer):
        total = _written(total, c.dtype).astype(wide)  # a float sum is written in its type first
    return _written(total / np.array(count, wide), c.dtype)


def lower_product(c: Call) -> Value:
    """Multiplied up in :func:`_accumulator`'s type; complex products (on c128 in mode nx)
    never multiply by the identity 1+0i (:mod:`py_backend.complex_math`)."""
    x = jnp.asarray(c.args[0]).astype(c.dtype)
    if not jnp.iscomplexobj(x):
        return reduction_lowering(jnp.prod, accumulates=True)(c)
    return complex_math.product(x, c.node.opts["axes"], c.node.opts["keep_axes"])


def lower_reshape(c: Call) -> Value:
    return jnp.reshape(c.args[0], c.out.shape)


def lower_transpose(c: Call) -> Value:
    return jnp.transpose(c.args[0], c.node.opts["axes"])


def lower_broadcast(c: Call) -> Value:
    return lax.broadcast_in_dim(c.args[0], c.out.shape, tuple(c.node.opts["axes"]))


def lower_slice(c: Call) -> Value:
    start, lengths, strides = (c.node.opts[k] for k in ("start_indices", "lengths", "strides"))
    limit = tuple(s + n for s, n in zip(start, lengths, strict=True))
    return lax.slice(c.args[0], tuple(start), limit, tuple(strides))


def lower_concatenate(c: Call) -> Value:
    return jnp.concatenate([jnp.asarray(a).astype(c.dtype) for a in c.args], c.node.opts["axis"])


def lower_dot(c: Call) -> Value:
    """Products summed in the result's type, in XLA's order, in both numerics modes: summing
    them in doubles, as Nx's binary backend does, makes an f32 matrix product 2.4x slower and
    the gradient of a dense layer 8x (bench/numerics.py, 2026-12-02). ``Nx.covariance`` and
    ``Nx.Random.multivariate_normal`` ask for doubles in their graphs."""
    left, right = (jnp.asarray(a).astype(c.dtype) for a in c.args)
    (lc, rc), (lb, rb) = c.node.opts["contract_axes"], c.node.opts["batch_axes"]
    return lax.dot_general(
        left,
        right,
        ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb))),
        precision=lax.Precision.HIGHEST,
        preferred_element_type=c.dtype,
    )


def lower_elem(c: Call) -> Value:
    return c.args[0][c.node.opts["index"]]


# --- shape, indexing and sorting -------------------------------------------------------------
# Out-of-range indices are clamped into range (take, gather, take_along_axis, indexed_*), as
# start indices of dynamic_slice/put_slice are; see docs/COMPATIBILITY.md.


def _as_out(c: Call, value: Any) -> jax.Array:
    return jnp.asarray(value).astype(c.dtype)


def lower_pad(c: Call) -> Value:
    x, value = (_as_out(c, a) for a in c.args)
    return lax.pad(x, value, tuple(tuple(t) for t in c.node.opts["padding_config"]))


def lower_reverse(c: Call) -> Value:
    return lax.rev(c.args[0], tuple(c.node.opts["axes"]))


def _starts(starts: Sequence[Value]) -> list[jax.Array]:
    """Start indices in one integer type (lax requires it). lax clamps them into range as Nx
    does, except that it counts negative indices from the end: Nx clamps those to 0."""
    return [jnp.maximum(jnp.asarray(s).astype(np.int64), 0) for s in starts]


def lower_dynamic_slice(c: Call) -> Value:
    x, *starts = c.args
    return lax.dynamic_slice(x, _starts(starts), tuple(c.node.opts["lengths"]))


def lower_put_slice(c: Call) -> Value:
    x, update, *starts = c.args
    return lax.dynamic_update_slice(
        _as_out(c, x), _as_out(c, update), _starts(starts)
    )


def _index_tuple(front: jax.Array, indices: jax.Array, axes: Sequence[int]) -> tuple[Any, ...]:
    """The indexing tuple that reads at ``indices[..., j]`` along ``axes[j]`` of ``front`` (a
    tensor whose ``axes`` were moved to the front), each index clamped into range (NumPy
    indexing would count negative indices from the end)."""
    idx = jnp.asarray(indices)
    return tuple(
        jnp.clip(idx[..., j], 0, max(front.shape[j] - 1, 0)) for j in range(len(axes))
    )


def lower_gather(c: Call) -> Value:
    x, indices = c.args
    axes = c.node.opts["axes"]
    front = jnp.moveaxis(x, tuple(axes), tuple(range(len(axes))))
    return front.at[_index_tuple(front, indices, axes)].get(mode="clip")


def indexed_lowering(method: str) -> Callable[[Call], Value]:
    def lower(c: Call) -> Value:
        x, indices, updates = c.args
        axes = c.node.opts["axes"]
        front_axes = tuple(range(len(axes)))
        front = jnp.moveaxis(_as_out(c, x), tuple(axes), front_axes)
        ref = front.at[_index_tuple(front, indices, axes)]
        result = getattr(ref, method)(_as_out(c, updates), mode="clip")
        return jnp.moveaxis(result, front_axes, tuple(axes))

    return lower


def lower_take(c: Call) -> Value:
    x, indices = c.args
    return jnp.take(x, jnp.asarray(indices), axis=c.node.opts["axis"], mode="clip")


def lower_take_along_axis(c: Call) -> Value:
    x, indices = c.args
    return jnp.take_along_axis(x, jnp.asarray(indices), axis=c.node.opts["axis"], mode="clip")


def lower_sort(c: Call) -> Value:
    axis, desc = c.node.opts["axis"], c.node.opts["direction"] == "desc"
    return jnp.sort(c.args[0], axis=axis, stable=True, descending=desc)


def lower_argsort(c: Call) -> Value:
    axis, desc = c.node.opts["axis"], c.node.opts["direction"] == "desc"
    return jnp.argsort(c.args[0], axis=axis, stable=True, descending=desc).astype(c.dtype)


# --- linear algebra -------------------------------------------------------------------------


def lower_conv(c: Call) -> Value:
    """``lax.conv_general_dilated`` on inputs permuted to (batch, feature, spatial...) and
    kernels to (out feature, in feature, spatial...). ``output_permutation`` describes the
    result's layout as ``input_permutation`` describes the input's (Nx's meaning): the
    canonical result is transposed by its inverse."""
    o = c.node.opts
    x, k = (_as_out(c, a) for a in c.args)
    x = jnp.transpose(x, o["input_permutation"])
    k = jnp.transpose(k, o["kernel_permutation"])
    out = lax.conv_general_dilated(
        x,
        k,
        window_strides=tuple(o["strides"]),
        padding=tuple(tuple(p) for p in o["padding"]),
        lhs_dilation=tuple(o["input_dilation"]),
        rhs_dilation=tuple(o["kernel_dilation"]),
        feature_group_count=o["feature_group_size"],
        batch_group_count=o["batch_group_size"],
        precision=lax.Precision.HIGHEST,
    )
    return jnp.transpose(out, [int(i) for i in np.argsort(o["output_permutation"])])


def _vector_rhs(a: jax.Array, b: jax.Array) -> bool:
    return b.ndim == a.ndim - 1


# JAX's CPU solvers (LAPACK) take f32, f64 and complex: a half-precision input is solved in
# f32 and the result rounded back to its type.
_HALF = (np.dtype(jnp.float16), np.dtype(jnp.bfloat16))


def _single(x: jax.Array) -> jax.Array:
    return x.astype(jnp.float32) if x.dtype in _HALF else x


def _outs_of(c: Call, values: Sequence[jax.Array]) -> tuple[jax.Array, ...]:
    out = c.node.out
    assert isinstance(out, TupleOut)
    types = [e.type for e in out.elements if isinstance(e, TensorOut)]
    return tuple(v.astype(to_dtype(t)) for v, t in zip(values, types, strict=True))


def lower_triangular_solve(c: Call) -> Value:
    a, b = (_single(_as_out(c, x)) for x in c.args)
    o = c.node.opts
    left = o["left_side"]
    vector = _vector_rhs(a, b)
    if vector:
        b = b[..., :, None] if left else b[..., None, :]
    x = lax.linalg.triangular_solve(
        a, b, left_side=left, lower=o["lower"], transpose_a=o["transform_a"] == "transpose"
    )
    return ((x[..., :, 0] if left else x[..., 0, :]) if vector else x).astype(c.dtype)


def lower_solve(c: Call) -> Value:
    a, b = (_single(_as_out(c, x)) for x in c.args)
    if _vector_rhs(a, b):
        return jnp.linalg.solve(a, b[..., None])[..., 0].astype(c.dtype)
    return jnp.linalg.solve(a, b).astype(c.dtype)


@jax.custom_vjp
def _cholesky(a: jax.Array) -> jax.Array:
    """The lower factor, read from the lower triangle of ``a`` (as Nx does; jnp.linalg's
    symmetrizes the input first)."""
    return lax.linalg.cholesky(a, symmetrize_input=False)


def _cholesky_fwd(a: jax.Array) -> tuple[jax.Array, jax.Array]:
    factor = _cholesky(a)
    return factor, factor


def _cholesky_bwd(factor: jax.Array, g: jax.Array) -> tuple[jax.Array]:
    """Nx 0.7.2's gradient (Murray 2016, without symmetrizing): with phi the lower triangle
    of L^T tril(g), diagonal halved, the gradient is L^-T phi conj(L)^-1. JAX's own rule
    gives the symmetric part instead."""
    n = factor.shape[-1]
    num = jnp.swapaxes(factor, -1, -2) @ jnp.tril(g)
    phi = jnp.tril(num / (jnp.eye(n, dtype=factor.dtype) + 1))
    left = lax.linalg.triangular_solve(factor, phi, left_side=True, lower=True, transpose_a=True)
    return (lax.linalg.triangular_solve(jnp.conj(factor), left, left_side=False, lower=True),)


_cholesky.defvjp(_cholesky_fwd, _cholesky_bwd)


def lower_cholesky(c: Call) -> Value:
    return _cholesky(_single(_as_out(c, c.args[0]))).astype(c.dtype)


def lower_determinant(c: Call) -> Value:
    return jnp.linalg.det(_single(_as_out(c, c.args[0]))).astype(c.dtype)


def _float_input(c: Call) -> jax.Array:
    out = c.node.out
    assert isinstance(out, TupleOut)
    element = out.elements[-1]
    assert isinstance(element, TensorOut)
    return _single(jnp.asarray(c.args[0]).astype(to_dtype(element.type)))


_NX_QR_EPS = 1.0e-10  # Nx 0.7.2's default :eps for qr


def _nx_dot(x: jax.Array, y: jax.Array) -> jax.Array:
    """A product as Nx's binary backend computes it: summed in double, rounded once."""
    wide = jnp.promote_types(x.dtype, jnp.float64)
    return jnp.matmul(x.astype(wide), y.astype(wide)).astype(x.dtype)


def _nx_reflector(x: jax.Array, i: jax.Array, eps: float) -> jax.Array:
    """Nx 0.7.2's Householder reflector for step ``i`` of a real column ``x`` (zero above
    ``i``): it sends ``x[i:]`` to ``+|x[i:]|`` on row ``i``, and is the identity when the entries
    below ``i`` are already zero (their squared norm under ``eps``), so such a column keeps its
    sign."""
    size = x.shape[0]
    norm_sq = _nx_dot(x, x)
    norm = jnp.sqrt(norm_sq)
    x_i = x[i]
    below_sq = norm_sq - jnp.abs(x_i) ** 2
    v_0 = jnp.where(x_i <= 0, x_i - norm, -below_sq / (x_i + norm))
    skip = below_sq < eps
    v = x.at[i].set(jnp.where(skip, jnp.ones_like(v_0), v_0))
    v = v / jnp.where(skip, jnp.ones_like(v_0), v_0)
    scale = jnp.where(skip, 0, 2 / jnp.where(skip, 1, _nx_dot(v, v))).astype(x.dtype)
    inside = jnp.arange(size) >= i
    eye = jnp.eye(size, dtype=x.dtype)
    return jnp.where(inside[:, None] & inside[None, :], eye - scale * jnp.outer(v, v), eye)


def _nx_qr_matrix(a: jax.Array, complete: bool, eps: float) -> tuple[jax.Array, jax.Array]:
    """Q and R of one real matrix by Nx 0.7.2's algorithm: a reflection per column (none for
    the last column of a square matrix; a wide matrix is padded with zero rows to square),
    then entries within ``eps`` of zero set to 0."""
    m_in, n_in = a.shape
    wide = m_in < n_in
    if wide:
        a = jnp.pad(a, ((0, n_in - m_in), (0, 0)))
    m = a.shape[0]
    last = n_in - 1 if wide or m != n_in else n_in - 2
    rows = jnp.arange(m)

    def step(i: jax.Array, qr: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        q, r = qr
        x = jnp.where(rows < i, 0, lax.dynamic_index_in_dim(r, i, axis=1, keepdims=False))
        h = _nx_reflector(x, i, eps)
        return _nx_dot(q, h), _nx_dot(h, r)

    q, r = lax.fori_loop(0, last + 1, step, (jnp.eye(m, dtype=a.dtype), a))
    q = jnp.where(jnp.abs(q) <= eps, jnp.zeros_like(q), q)
    r = jnp.where(jnp.abs(r) <= eps, jnp.zeros_like(r), r)
    if wide:
        return q[:m_in, :m_in], r[:m_in, :n_in]
    if not complete and m > n_in:
        return q[:, :n_in], r[:n_in, :n_in]
    return q, r


def lower_qr(c: Call) -> Value:
    """Q and R, for a real matrix with Nx 0.7.2's signs. Nx reflects each column onto a
    positive diagonal entry of R, except the last row's single entry when the matrix has no
    more rows than columns (nothing to reflect there), so its Q is a product of one
    reflection fewer. LAPACK reflects onto entries of the other sign: each column of Q (row
    of R) is multiplied by the sign of its diagonal entry, and that last one by the product
    of the others, which keeps Q's determinant that of Nx's (the signs are constants, so
    gradients go through)."""
    a = _float_input(c)
    q, r = jnp.linalg.qr(a, mode=c.node.opts["mode"])
    if jnp.iscomplexobj(a):
        # Nx's complex reflections follow the phase of each column's head, LAPACK's give a
        # real diagonal: they agree where the heads are real, and are left as LAPACK's
        return _outs_of(c, (q, r))
    m, n = a.shape[-2:]
    k = min(m, n)
    diag = jnp.diagonal(r[..., :k, :k], axis1=-2, axis2=-1)
    sign = jnp.where(diag < 0, -1, 1).astype(r.dtype)
    if m <= n:
        sign = sign.at[..., m - 1].set(jnp.prod(sign[..., : m - 1], axis=-1))
    # (mode: :complete) Q has more columns, and R more rows, than R has diagonal entries:
    # those stay
    sign = jnp.concatenate([sign, jnp.ones(sign.shape[:-1] + (q.shape[-1] - k,), r.dtype)], -1)
    q, r = q * sign[..., None, :], r * sign[..., :, None]
    # The values are those of Nx's own algorithm (its rounding, and its signs where a column
    # needs no reflection, which LAPACK's factors cannot tell); the gradient is LAPACK's
    # factorization's, with each column of Q (row of R) given the sign of Nx's.
    fun = partial(_nx_qr_matrix, complete=c.node.opts["mode"] == "complete", eps=_NX_QR_EPS)
    for _ in range(a.ndim - 2):
        fun = jax.vmap(fun)
    nq, nr = lax.stop_gradient(fun(a))
    flip = jnp.where(jnp.sum(nq * lax.stop_gradient(q), axis=-2) < 0, -1, 1).astype(r.dtype)
    if q.shape[-1] != r.shape[-2]:
        raise AssertionError("qr: Q's columns and R's rows must pair up")
    q, r = q * flip[..., None, :], r * flip[..., :, None]
    return _outs_of(c, (nq + (q - lax.stop_gradient(q)), nr + (r - lax.stop_gradient(r))))


_NX_LU_EPS = 1.0e-10  # Nx 0.7.2's default :eps for lu


def _nx_lu_matrix(a: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """P, L and U of one square matrix as Nx 0.7.2's binary backend computes them, in double:
    the rows are first ordered so that, column after column, the entry of largest magnitude
    of the rows left (the first of equals) comes to the diagonal, of the matrix as given (no
    elimination in between, unlike LAPACK's partial pivoting); then Doolittle's recurrences
    without pivoting, each entry under ``eps`` in magnitude set to 0 (a zero pivot gives
    infinities below it). Loops run over every row with masks, so reverse-mode gradients go
    through."""
    n = a.shape[0]
    idx = jnp.arange(n)
    eps = _NX_LU_EPS

    def pivot(j: jax.Array, state: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        perm, m = state
        top = jnp.argmax(jnp.where(idx >= j, jnp.abs(m[:, j]), -1.0))
        swap = jnp.where(idx == j, top, jnp.where(idx == top, j, idx))
        return perm[swap], m[swap]

    perm, m = lax.fori_loop(0, max(n - 1, 0), pivot, (idx, a))

    def column(j: jax.Array, lu: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        lower, upper = lu
        lower = lower.at[j, j].set(1.0)

        def upper_row(i: jax.Array, upper: jax.Array) -> jax.Array:
            total = jnp.sum(jnp.where(idx < i, upper[:, j] * lower[i, :], 0.0))
            value = m[i, j] - total
            value = jnp.where(jnp.abs(value) < eps, 0.0, value)
            return upper.at[i, j].set(jnp.where(i <= j, value, upper[i, j]))

        upper = lax.fori_loop(0, n, upper_row, upper)

        def lower_row(i: jax.Array, lower: jax.Array) -> jax.Array:
            total = jnp.sum(jnp.where(idx < i, upper[:, j] * lower[i, :], 0.0))
            pivot = upper[j, j]
            safe = jnp.where(pivot != 0, pivot, 1.0)
            infinite = jnp.where(m[i, j] >= total, jnp.inf, -jnp.inf)
            value = jnp.where(pivot != 0, (m[i, j] - total) / safe, infinite)
            value = jnp.where(jnp.abs(value) < eps, 0.0, value)
            return lower.at[i, j].set(jnp.where(i > j, value, lower[i, j]))

        return lax.fori_loop(0, n, lower_row, lower), upper

    zeros = jnp.zeros_like(a)
    lower, upper = lax.fori_loop(0, n, column, (zeros, zeros))
    # (Nx multiplies the entries under eps by 0, which keeps a negative one's sign)
    lower = jnp.where(jnp.abs(lower) < eps, lower * 0, lower)
    upper = jnp.where(jnp.abs(upper) < eps, upper * 0, upper)
    p = (perm[:, None] == idx[None, :]).astype(a.dtype)
    return jnp.swapaxes(p, -1, -2), lower, upper


def lower_lu(c: Call) -> Value:
    """``[p, l, u]`` of each matrix by Nx 0.7.2's algorithm (:func:`_nx_lu_matrix`), computed
    in double (complex: in complex128) and rounded once to the output types, as Nx's binary
    backend does; a batch is mapped over."""
    a = _float_input(c)
    wide = jnp.promote_types(a.dtype, jnp.float64)
    lu: Callable[[jax.Array], Any] = _nx_lu_matrix
    for _ in range(a.ndim - 2):
        lu = jax.vmap(lu)
    return _outs_of(c, lu(a.astype(wide)))


def lower_svd(c: Call) -> Value:
    """``[u, s, vt]`` of each real matrix. In numerics mode ``nx`` the values of Nx 0.7.2's
    own algorithm (:func:`_nx_svd_matrix`, batches mapped over), with the gradient of
    LAPACK's decomposition, each singular pair turned to the signs of the one returned; in
    mode ``native`` LAPACK's."""
    a = _float_input(c)
    full = bool(c.node.opts["full_matrices"])
    u, s, vt = jnp.linalg.svd(a, full_matrices=full)
    if not numerics.exact():
        return _outs_of(c, (u, s, vt))
    fun: Callable[[jax.Array], tuple[jax.Array, jax.Array, jax.Array]] = partial(
        _nx_svd_matrix, full=full, max_iter=int(c.node.opts["max_iter"])
    )
    for _ in range(a.ndim - 2):
        fun = jax.vmap(fun)
    nu, ns, nvt = lax.stop_gradient(fun(a))
    k = s.shape[-1]
    overlap = jnp.sum(nu[..., :k] * lax.stop_gradient(u[..., :k]), axis=-2) + jnp.sum(
        nvt[..., :k, :] * lax.stop_gradient(vt[..., :k, :]), axis=-1
    )
    flip = jnp.where(overlap < 0, -1, 1).astype(a.dtype)
    u = u.at[..., :k].multiply(flip[..., None, :])
    vt = vt.at[..., :k, :].multiply(flip[..., :, None])
    return _outs_of(
        c,
        tuple(n + (x - lax.stop_gradient(x)) for n, x in ((nu, u), (ns, s), (nvt, vt))),
    )


_NX_SVD_EPS = 1.1920929e-07  # the eps of Nx 0.7.2's SVD module (f32's machine epsilon)


def _f32_scalar(x: jax.Array) -> jax.Array:
    """A scalar rounded to f32 and held in double, as Nx's binary backend writes each step
    of an f32 computation."""
    return x.astype(jnp.float32).astype(jnp.float64)


def _nx_qdwh(x: jax.Array, max_iter: int) -> tuple[jax.Array, jax.Array]:
    """The polar decomposition ``x = u h`` of a matrix with at least as many rows as columns
    by Nx 0.7.2's QR-based dynamically weighted Halley iteration (after JAX's): ``x`` scaled
    by ``sqrt(|x|_1 |x|_inf)``, then steps whose weights follow the lower bound ``l`` of the
    singular values (f32 scalars, the same for every matrix), by QR while ``c > 100`` and by
    Cholesky after, until ``l`` is within ``5 eps`` of 1 and ``u`` moves by no more than
    ``cbrt(5 eps)`` (Frobenius), or ``max_iter`` steps have run (at least one); a last
    Newton-Schulz step, and ``h = u^T x`` made symmetric."""
    m, n = x.shape
    hi = lax.Precision.HIGHEST
    alpha = jnp.sqrt(jnp.max(jnp.sum(jnp.abs(x), axis=0))) * jnp.sqrt(
        jnp.max(jnp.sum(jnp.abs(x), axis=1))
    )
    eps = _NX_SVD_EPS
    tol_l = _f32_scalar(jnp.float64(5 * eps))
    tol_norm = _f32_scalar(jnp.cbrt(tol_l))
    eye = jnp.eye(n, dtype=x.dtype)

    def step(
        state: tuple[jax.Array, jax.Array, jax.Array, jax.Array]
    ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
        u, bound, iteration, _running = state
        r = _f32_scalar
        l2 = r(bound * bound)
        l2 = jnp.where(l2 < eps, r(jnp.float64(eps)), l2)
        dd = r(jnp.cbrt(r(r(4.0 * r(r(1.0 / l2) - 1.0)) / l2)))
        sqd = r(jnp.sqrt(r(1.0 + dd)))
        inner = r(r(8.0 - r(4.0 * dd)) + r(r(8.0 * r(2.0 - l2)) / r(l2 * sqd)))
        a = r(sqd + r(r(jnp.sqrt(inner)) / 2))
        b = r(r(r(a - 1.0) ** 2) / 4.0)
        c = r(r(a + b) - 1.0)
        bound = r(r(bound * r(a + r(b * l2))) / r(1.0 + r(c * l2)))
        e = (b / c).astype(x.dtype)

        def by_qr() -> jax.Array:
            y = jnp.concatenate([jnp.sqrt(c).astype(x.dtype) * u, eye], axis=0)
            q, _ = jnp.linalg.qr(y)
            product = jnp.matmul(q[:m], q[m:].T, precision=hi)
            return e * u + ((a - b / c) / jnp.sqrt(c)).astype(x.dtype) * product

        def by_cholesky() -> jax.Array:
            gram = c.astype(x.dtype) * jnp.matmul(u.T, u, precision=hi) + eye
            factor = jnp.linalg.cholesky(gram)
            z = jax.scipy.linalg.cho_solve((factor, True), u.T).T
            return e * u + (a - b / c).astype(x.dtype) * z

        u_next = lax.cond(c > 100, by_qr, by_cholesky)
        moved = jnp.sqrt(jnp.sum((u_next - u) ** 2))
        running = ((jnp.abs(1.0 - bound) > tol_l) | (moved > tol_norm)) & (iteration < max_iter)
        return u_next, bound, iteration + 1, running

    start = (x / alpha, jnp.float64(eps), jnp.array(1), jnp.array(True))
    u, _, _, _ = lax.while_loop(lambda state: state[3], step, start)
    u = 1.5 * u - 0.5 * jnp.matmul(u, jnp.matmul(u.T, u, precision=hi), precision=hi)
    h = jnp.matmul(u.T, x, precision=hi)
    return u, (h + h.T) / 2


def _nx_svd_square(a: jax.Array, max_iter: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``u``, ``s``, ``v`` of a matrix with at least as many rows as columns as Nx 0.7.2
    computes them: the polar decomposition (:func:`_nx_qdwh`), Nx's eigh of its Hermitian
    factor (:func:`_nx_eigh_matrix`, with its default ``eps`` and this ``max_iter``),
    negative eigenvalues turned positive with their vectors, a stable sort in decreasing
    order, ``u`` the polar factor times ``v``. Nx re-orthogonalizes ``u`` by QR when the
    first eigenvalue (before sorting) is under ``n eps`` times the largest."""
    n = a.shape[1]
    polar, h = _nx_qdwh(a, max_iter)
    h = (h + h.T) / 2
    w, v = _nx_eigh_matrix(h.astype(jnp.float64), eps=1.0e-4, max_iter=max_iter)
    w, v = w.astype(a.dtype), v.astype(a.dtype)
    sign = jnp.where(w < 0, -1, 1).astype(a.dtype)
    w, v = sign * w, sign * v
    order = jnp.argsort(-w, stable=True)
    s, v = w[order], v[:, order]
    u = jnp.matmul(polar, v, precision=lax.Precision.HIGHEST)

    def reorthogonalized() -> jax.Array:
        wide = jnp.promote_types(u.dtype, jnp.float64)
        q, r = _nx_qr_matrix(u.astype(wide), complete=False, eps=_NX_QR_EPS)
        diagonal = jnp.diagonal(r)
        sign_r = jnp.where(diagonal == 0, 0, jnp.where(diagonal < 0, -1, 1))
        return q.astype(u.dtype) * sign_r.astype(u.dtype)

    deficient = w[0] < (n * _NX_SVD_EPS) * s[0]
    return jnp.where(deficient, reorthogonalized(), u), s, v


def _nx_svd_matrix(
    a: jax.Array, full: bool, max_iter: int
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``u``, ``s``, ``vt`` of one real matrix by Nx 0.7.2's algorithm (``Nx.LinAlg.SVD``):
    a wide matrix is transposed; a tall one first reduced to square by Nx's QR (complete,
    its last columns the rest of ``u``, with ``full``; reduced, when it has more than 1.15
    times as many rows as columns, without); then :func:`_nx_svd_square`. The zero matrix
    gives zeros and identities."""
    m, n = a.shape
    k = min(m, n)
    flipped = m < n
    x = a.T if flipped else a
    rows, cols = x.shape
    wide = jnp.promote_types(a.dtype, jnp.float64)
    if full and rows > cols:
        q_full, r_full = _nx_qr_matrix(x.astype(wide), complete=True, eps=_NX_QR_EPS)
        q_full = q_full.astype(a.dtype)
        u, s, v = _nx_svd_square(r_full[:cols].astype(a.dtype), max_iter)
        u = jnp.concatenate(
            [jnp.matmul(q_full[:, :cols], u, precision=lax.Precision.HIGHEST), q_full[:, cols:]],
            axis=1,
        )
    elif not full and rows > 1.15 * cols:
        q, r = _nx_qr_matrix(x.astype(wide), complete=False, eps=_NX_QR_EPS)
        u, s, v = _nx_svd_square(r.astype(a.dtype), max_iter)
        u = jnp.matmul(q.astype(a.dtype), u, precision=lax.Precision.HIGHEST)
    else:
        u, s, v = _nx_svd_square(x, max_iter)
    u, vt = (v, u.T) if flipped else (u, v.T)
    u_cols, vt_rows = (m, n) if full else (k, k)
    zero = jnp.all(a == 0)
    return (
        jnp.where(zero, jnp.eye(m, u_cols, dtype=a.dtype), u),
        jnp.where(zero, 0, s),
        jnp.where(zero, jnp.eye(vt_rows, n, dtype=a.dtype), vt),
    )


def _nx_bb_reflector(x: jax.Array, start: int | jax.Array, eps: float) -> jax.Array:
    """The Householder reflection of Nx 0.7.2's binary backend for the part of ``x`` from
    ``start`` on (the entries before it are ignored), in the type of ``x`` (double or complex
    double): real, ``I - s v v^T`` with ``v = [1, x[start+1:] / v_0]``, the identity when
    the entries below the head have squared norm under ``eps``; complex, ``I - 2 v v^H`` with
    ``v`` the unit vector along ``x + e^{i phase(head)} |x| e_start`` (no ``eps`` test)."""
    size = x.shape[0]
    idx = jnp.arange(size)
    inside = idx >= start
    head_mask = idx == start
    x = jnp.where(inside, x, 0)
    head = jnp.sum(jnp.where(head_mask, x, 0))
    tail = jnp.where(head_mask, 0, x)
    tail_sq = jnp.sum(jnp.real(tail * jnp.conj(tail)))
    if jnp.iscomplexobj(x):
        norm = jnp.sqrt(tail_sq + jnp.abs(head) ** 2)
        u_head = head + jnp.exp(1j * jnp.angle(head)) * norm
        v = jnp.where(head_mask, u_head, tail) / jnp.sqrt(tail_sq + jnp.abs(u_head) ** 2)
        outer = 2 * v[:, None] * jnp.conj(v)[None, :]
    else:
        norm_sq = tail_sq + head * head
        skip = norm_sq - head * head < eps
        root = jnp.sqrt(norm_sq)
        v_0 = jnp.where(head <= 0, head - root, -(norm_sq - head * head) / (head + root))
        v_0 = jnp.where(skip, 1, v_0)
        scale = jnp.where(skip, 0, 2 * v_0 * v_0 / (norm_sq - head * head + v_0 * v_0))
        v = jnp.where(head_mask, 1, tail / v_0)
        outer = scale * v[:, None] * v[None, :]
    block = inside[:, None] & inside[None, :]
    eye = jnp.eye(size, dtype=x.dtype)
    return jnp.where(block, eye - outer, eye)


def _nx_bb_zeros(m: jax.Array, eps: float) -> jax.Array:
    """Entries under ``eps`` in magnitude times 0 (a negative one stays -0.0), as Nx's binary
    backend rounds its factors."""
    return jnp.where(jnp.abs(m) < eps, m * 0, m)


def _nx_eigh_matrix(a: jax.Array, eps: float, max_iter: int) -> tuple[jax.Array, jax.Array]:
    """Eigenvalues and eigenvectors of one Hermitian matrix as Nx 0.7.2's binary backend
    computes them, in double (or complex double): a Householder reduction to Hessenberg form,
    then QR iterations ``A <- R Q`` with its Householder QR, the eigenvectors accumulated as
    ``Q <- Q Q_k``, until no entry of ``Q`` moves by more than ``eps`` or ``max_iter``
    iterations have run (at least one; ``max_iter: 0`` runs two, as Elixir's ``1..0`` does);
    entries under ``eps`` set to 0. The eigenvalues are the real parts of the diagonal, in
    the order the iteration leaves them."""
    n = a.shape[0]

    def hessenberg_step(
        i: jax.Array, state: tuple[jax.Array, jax.Array]
    ) -> tuple[jax.Array, jax.Array]:
        hess, q = state
        h = _nx_bb_reflector(lax.dynamic_index_in_dim(hess, i, axis=1, keepdims=False), i + 1, eps)
        return h @ hess @ jnp.conj(h).T, q @ h

    eye = jnp.eye(n, dtype=a.dtype)
    hess, q = lax.fori_loop(0, n - 1, hessenberg_step, (a, eye))
    hess, q = _nx_bb_zeros(hess, eps), _nx_bb_zeros(q, eps)

    def qr(m: jax.Array) -> tuple[jax.Array, jax.Array]:
        def step(i: jax.Array, qr: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
            q, r = qr
            h = _nx_bb_reflector(lax.dynamic_index_in_dim(r, i, axis=1, keepdims=False), i, eps)
            return q @ h, h @ r

        q, r = lax.fori_loop(0, n - 1, step, (eye, m))
        return _nx_bb_zeros(q, eps), _nx_bb_zeros(r, eps)

    def running(state: tuple[jax.Array, jax.Array, jax.Array, jax.Array]) -> jax.Array:
        _m, _q, converged, iteration = state
        return (iteration < max(max_iter, 2 if max_iter == 0 else 1)) & jnp.logical_not(converged)

    def iterate(
        state: tuple[jax.Array, jax.Array, jax.Array, jax.Array]
    ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
        m, q, _converged, iteration = state
        q_k, r = qr(m)
        q_next = q @ q_k
        moved = jnp.abs(q - q_next)
        converged = jnp.all(jnp.isnan(moved) | (moved <= eps))
        return r @ q_k, q_next, converged, iteration + 1

    m, q, _, _ = lax.while_loop(running, iterate, (hess, q, jnp.array(False), jnp.array(0)))
    return _nx_bb_zeros(jnp.real(jnp.diagonal(m)), eps), _nx_bb_zeros(q, eps)


def _nx_ordered_eigh(a: jax.Array, eps: float, max_iter: int) -> tuple[jax.Array, jax.Array]:
    """The values of Nx 0.7.2's algorithm (:func:`_nx_eigh_matrix`, batches mapped over) where
    they are a decomposition: ``A V = V diag(w)`` holds within ``10 sqrt(eps)`` of the largest
    entry of ``A`` (the iteration need not have converged). Elsewhere Nx returns a wrong one
    (for ``[[0, 1], [1, 0]]``, whose eigenvalues -1 and 1 have one magnitude, its iteration
    never converges and gives 0 and 0): there LAPACK's values in Nx's conventions
    (:func:`_lapack_eigh`). The gradient is that of LAPACK's decomposition, each LAPACK pair
    taken for the eigenvalue nearest to it and its eigenvector turned to the phase (sign) of
    the one returned."""
    fun: Callable[[jax.Array], tuple[jax.Array, jax.Array]] = partial(
        _nx_eigh_matrix, eps=eps, max_iter=max_iter
    )
    for _ in range(a.ndim - 2):
        fun = jax.vmap(fun)
    wide = jnp.complex128 if jnp.iscomplexobj(a) else jnp.float64
    # the Hermitian part, which is the matrix itself when it is Hermitian ((x + x) / 2 is x);
    # Nx raises for any other matrix, LAPACK reads one triangle
    hermitian = lax.stop_gradient(
        (a.astype(wide) + jnp.conj(jnp.swapaxes(a.astype(wide), -1, -2))) / 2
    )
    nx_w, nx_v = fun(hermitian)
    residual = jnp.max(jnp.abs(hermitian @ nx_v - nx_v * nx_w[..., None, :]), axis=(-2, -1))
    scale = jnp.max(jnp.abs(hermitian), axis=(-2, -1))
    ok = residual <= 10 * math.sqrt(eps) * jnp.maximum(scale, 1)
    w, v = _lapack_eigh(a)  # Nx's conventions, differentiable
    chosen_w = jnp.where(ok[..., None], nx_w.astype(w.dtype), lax.stop_gradient(w))
    chosen_v = jnp.where(ok[..., None, None], nx_v.astype(v.dtype), lax.stop_gradient(v))
    pick = jnp.argmin(jnp.abs(chosen_w[..., :, None] - lax.stop_gradient(w)[..., None, :]), -1)
    w = jnp.take_along_axis(w, pick, axis=-1)
    v = jnp.take_along_axis(v, pick[..., None, :], axis=-1)
    overlap = jnp.sum(jnp.conj(lax.stop_gradient(v)) * chosen_v, axis=-2)
    turn = jnp.where(overlap == 0, 1, overlap / jnp.where(overlap == 0, 1, jnp.abs(overlap)))
    v = v * lax.stop_gradient(turn)[..., None, :]
    return chosen_w + (w - lax.stop_gradient(w)), chosen_v + (v - lax.stop_gradient(v))


def lower_eigh(c: Call) -> Value:
    """``[eigenvals, eigenvecs]`` of each (Hermitian) matrix. In numerics mode ``nx`` (and for
    matrices larger than 1x1) the values of Nx 0.7.2's binary backend, with its ``:eps`` and
    ``:max_iter`` (:func:`_nx_ordered_eigh`); in mode ``native`` LAPACK's, in Nx's order and
    signs (:func:`_lapack_eigh`). Complex eigenvalues are real numbers of the complex type."""
    out = c.node.out
    assert isinstance(out, TupleOut)
    vals_out, vecs_out = (e for e in out.elements if isinstance(e, TensorOut))
    a = _single(jnp.asarray(c.args[0]).astype(to_dtype(vecs_out.type)))
    if numerics.exact() and a.shape[-1] > 1:
        w, v = _nx_ordered_eigh(a, float(c.node.opts["eps"]), int(c.node.opts["max_iter"]))
    else:
        w, v = _lapack_eigh(a)
    return (w.astype(to_dtype(vals_out.type)), v.astype(to_dtype(vecs_out.type)))


def _lapack_eigh(a: jax.Array) -> tuple[jax.Array, jax.Array]:
    """LAPACK's decomposition of the Hermitian part of each matrix, in the order Nx 0.7.2's
    iteration leaves a converged one: decreasing ``|eigenvalue|`` (a stable sort of LAPACK's
    increasing order, so equal magnitudes stay increasing), except that a diagonal matrix
    keeps its diagonal's order. Each eigenvector is scaled to make its entry of largest
    magnitude real and positive (the first entry within ``sqrt(eps)`` of the largest, so an
    exact tie does not depend on rounding). Half-precision types are computed in f32, which
    LAPACK has."""
    work = a.astype(jnp.float32) if a.dtype in (jnp.float16, jnp.bfloat16) else a
    w, v = jnp.linalg.eigh(work)  # increasing, computed from (a + adjoint(a)) / 2
    n = a.shape[-1]
    diagonal = jnp.all(jnp.where(jnp.eye(n, dtype=bool), 0, a) == 0, axis=(-2, -1))
    magnitude = jnp.abs(v)
    # a diagonal matrix's eigenvector i is a unit vector: its row is i's place on the diagonal
    row = jnp.argmax(magnitude, axis=-2).astype(w.dtype)
    order = jnp.argsort(jnp.where(diagonal[..., None], row, -jnp.abs(w)), axis=-1, stable=True)
    w = jnp.take_along_axis(w, order, axis=-1)
    v = jnp.take_along_axis(v, order[..., None, :], axis=-1)
    magnitude = jnp.take_along_axis(magnitude, order[..., None, :], axis=-1)
    tol = math.sqrt(float(jnp.finfo(w.dtype).eps))
    top = jnp.max(magnitude, axis=-2, keepdims=True)
    pivot_row = jnp.argmax(magnitude >= top - tol, axis=-2)[..., None, :]
    pivot = jnp.take_along_axis(v, pivot_row, axis=-2)
    if jnp.iscomplexobj(v):
        v = v * (jnp.conj(pivot) / jnp.abs(pivot))  # the gradient follows the phase too
        v = lax.complex(_positive_zero(jnp.real(v)), _positive_zero(jnp.imag(v)))
    else:
        v = _positive_zero(jnp.where(pivot < 0, -v, v))
    w = _positive_zero(w)
    return w.astype(jnp.real(a).dtype), v.astype(a.dtype)


def _positive_zero(x: jax.Array) -> jax.Array:
    """-0.0 as 0.0 (a flipped sign leaves -0.0 where an eigenvector has a zero entry; Nx
    prints 0.0 there), with the identity's gradient everywhere, zeros included (an entry that
    is zero still moves with the matrix). XLA folds ``x + 0.0`` away, hence the difference."""
    return x + lax.stop_gradient(jnp.where(x == 0, jnp.zeros_like(x), x) - x)


# --- differentiation and metadata ------------------------------------------------------------


def lower_stop_grad(c: Call) -> Value:
    return lax.stop_gradient(c.args[0])


def lower_metadata(c: Call) -> Value:
    return c.args[0]


def lower_checkpoint_name(c: Call) -> Value:
    """``checkpoint_name`` [x]: x, named for the policies of the ``checkpoint`` around it."""
    return checkpoint_name(c.args[0], c.node.opts["name"])


def lower_grad(c: Call) -> Value:
    """``grad`` [y, x1..xk]: the gradient of y (a real or complex scalar) as a function of the x
    nodes' values.

    y is re-evaluated in a child environment seeded with the x values, shadowing every node
    that depends on an x; the nodes y needs that do not depend on an x are computed in the
    current environment first and held fixed.
    """
    low, env = c.lowering, c.env
    y, *xs = c.node.inputs
    unique = list(dict.fromkeys(xs))
    seeded = frozenset(unique)
    shadow = low.dependents(unique)
    _, fixed = low._frontier([y], shadow, seeded)
    low.evaluate(fixed, env)
    # integer xs (a PRNG key, a counter: Elixir gives one a floating copy wherever Nx's
    # gradient reaches it) are held fixed: JAX differentiates the floating ones only
    held = {x: env[x] for x in unique if not jnp.issubdtype(env[x].dtype, jnp.inexact)}
    wrt = [x for x in unique if x not in held]
    x_vals = [env[x] for x in wrt]

    def f(*vals: jax.Array) -> jax.Array:
        child = Env({**held, **dict(zip(wrt, vals, strict=True))}, parent=env, shadow=shadow,
                    replay=True, mode="reverse")
        return jnp.reshape(low.value(y, child), ())

    try:
        # the pullback of a seed of one: jax.grad for a real y; for a complex y (as Nx 0.7.2)
        # the derivative itself, not its conjugate (JAX's vjp is the transpose, and Nx seeds
        # its backward pass with 1 of y's type)
        y_val, pullback = jax.vjp(f, *x_vals)
        grads = pullback(jnp.ones((), y_val.dtype))
    except ValueError as exc:
        if "Reverse-mode differentiation does not work for lax.while_loop" in str(exc):
            raise GraphError(f"node {c.node.id} (grad): {UNBOUNDED_WHILE}") from exc
        raise
    by_id = dict(zip(wrt, grads, strict=True))
    results = []
    # the declared types are Nx's (the type its backward pass computes in, decided in Elixir):
    # JAX's gradient, in x's type, is cast to it; one declared real for a complex x is the
    # real part
    outs = c.node.out
    assert isinstance(outs, TupleOut)  # (graph.py checks a grad node's out is one per x)
    for x, out in zip(xs, outs.elements, strict=True):
        assert isinstance(out, TensorOut)
        if x in held:
            results.append(jnp.zeros(out.shape, to_dtype(out.type)))
            continue
        g = by_id[x]
        if jnp.iscomplexobj(g) and not out.type.is_complex:
            g = jnp.real(g)
        results.append(g.astype(to_dtype(out.type)))
    return tuple(results)


def lower_custom_grad(c: Call) -> Value:
    """``custom_grad`` [e1..em]: a ``jax.custom_vjp`` function of the wrt nodes' values.

    The values the subgraphs need that depend on neither wrt nor cotangent nodes ("closed") are
    computed here and passed as explicit arguments with zero cotangent; forward and backward
    evaluate in fresh environments seeded only with those arguments (no closed-over tracers).
    """
    low, env, node = c.lowering, c.env, c.node
    wrt, cots, grads = (node.opts[k] for k in ("wrt", "cotangents", "grads"))
    is_tuple: bool = node.opts["tuple"]
    es = node.inputs
    _, closed = low.custom_grad_structure(node)
    low.evaluate([*wrt, *closed], env)
    wrt_vals = tuple(env[w] for w in wrt)
    closed_vals = tuple(env[k] for k in closed)

    def seeded(wv: Sequence[Value], cv: Sequence[Value]) -> Env:
        local = dict(zip(closed, cv, strict=True))
        local.update(zip(wrt, wv, strict=True))
        return Env(local, replay=True)

    def primal(wv: tuple[Value, ...], cv: tuple[Value, ...]) -> Value:
        fenv = seeded(wv, cv)
        low.evaluate(es, fenv)
        return tuple(fenv[e] for e in es) if is_tuple else fenv[es[0]]

    def fwd(wv: tuple[Value, ...], cv: tuple[Value, ...]) -> tuple[Value, Any]:
        return primal(wv, cv), (wv, cv)

    def bwd(res: Any, g: Value) -> tuple[Any, Any]:
        wv, cv = res
        benv = seeded(wv, cv)
        for cot, value in zip(cots, g if is_tuple else (g,), strict=True):
            benv.local[cot] = conform(low.nodes[cot], value)
        low.evaluate(grads, benv)
        wrt_grads: list[jax.Array | None] = []
        for w, gr in zip(wrt, grads, strict=True):
            w_out = low.nodes[w].tensor
            if not w_out.type.is_float:
                wrt_grads.append(None)
                continue
            wrt_grads.append(
                jnp.broadcast_to(benv[gr], w_out.shape).astype(to_dtype(w_out.type))
            )
        return tuple(wrt_grads), tuple(None for _ in cv)  # None: zero cotangent (any dtype)

    fn = jax.custom_vjp(primal)
    fn.defvjp(fwd, bwd)
    return fn(wrt_vals, closed_vals)


# --- JAX's differentiation beyond Nx (NxJax.Defn): jvp, jacobians, custom_jvp ----------------

FORWARD_THROUGH_VJP = (
    "forward-mode differentiation (jvp, jacfwd, hessian) reaches a rule that is reverse-mode "
    "only: a custom_grad/3, or the gradient of a while loop without max_iterations (both are "
    "jax.custom_vjp functions, which JAX cannot differentiate forward). Use jacrev or grad, "
    "give the function a forward rule with NxJax.Defn.custom_jvp/3, or give the loop "
    "max_iterations: n"
)


def _as_function(
    c: Call, ys: Sequence[int], xs: Sequence[int], mode: str
) -> tuple[Callable[..., tuple[Value, ...]], list[int], list[Value]]:
    """The values of the nodes ``ys`` as a function of the values of the x nodes (each
    distinct one once): re-evaluated in a child environment seeded with them, shadowing every
    node that depends on an x (as ``lower_grad`` does); what the ys need that depends on no x
    is computed here first and held fixed. Returns the function, the distinct x ids and their
    values."""
    low, env = c.lowering, c.env
    unique = list(dict.fromkeys(xs))
    shadow = low.dependents(unique)
    inside, fixed = low._frontier(ys, shadow, frozenset(unique))
    if mode == "forward":
        # (JAX reports this only once the whole function is traced, without the node)
        for n in sorted(inside):
            if _reaches_custom_grad(low.nodes[n]):
                raise GraphError(f"node {c.node.id} ({c.node.op}) differentiates node {n} "
                                 f"({low.nodes[n].op}): {FORWARD_THROUGH_VJP}")
    low.evaluate(fixed, env)

    def f(*vals: Value) -> tuple[Value, ...]:
        child = Env(dict(zip(unique, vals, strict=True)), parent=env, shadow=shadow,
                    replay=True, mode=mode)
        low.evaluate(ys, child)
        return tuple(child[y] for y in ys)

    return f, unique, [env[x] for x in unique]


def _reaches_custom_grad(node: Node) -> bool:
    """Whether ``node`` is a ``custom_grad`` or carries one in a sub-graph (a loop body, a
    branch), at any depth."""
    if node.op == "custom_grad":
        return True
    for value in node.opts.values():
        for graph in value if isinstance(value, tuple) else (value,):
            if isinstance(graph, Graph) and any(_reaches_custom_grad(n) for n in graph.nodes):
                return True
    return False


def _differentiate(c: Call, run: Callable[[], Any]) -> Any:
    """``run()``, with JAX's refusal to reverse-differentiate a loop turned into a GraphError
    that names the fix."""
    where = f"node {c.node.id} ({c.node.op})"
    try:
        return run()
    except ValueError as exc:
        if "Reverse-mode differentiation does not work for lax.while_loop" in str(exc):
            raise GraphError(f"{where}: {UNBOUNDED_WHILE}") from exc
        raise


def _declared(value: jax.Array, out: TensorOut) -> jax.Array:
    """A derivative in the type the graph declares for it (decided in Elixir): zeros for JAX's
    float0 (the derivative of an integer), the real part for a real type."""
    if value.dtype == jax.dtypes.float0:
        return jnp.zeros(value.shape, to_dtype(out.type))
    if jnp.iscomplexobj(value) and not out.type.is_complex:
        value = jnp.real(value)
    return value.astype(to_dtype(out.type))


def _outs(c: Call) -> list[TensorOut]:
    """The element outs of a tuple-valued node (graph.py checks they are tensors)."""
    out = c.node.out
    assert isinstance(out, TupleOut)
    return [o for o in out.elements if isinstance(o, TensorOut)]


def lower_jvp(c: Call) -> Value:
    """``jvp`` [y, x1..xk, t1..tk]: the tangent of y when each xi moves along ti
    (``jax.jvp``); an x given twice moves along the sum of its tangents."""
    y, *rest = c.node.inputs
    k = len(rest) // 2
    xs = rest[:k]
    f, unique, x_vals = _as_function(c, [y], xs, "forward")
    tangents: dict[int, Value] = {}
    for x, t in zip(xs, c.args[1 + k:], strict=True):
        tangents[x] = t if x not in tangents else tangents[x] + t
    t_vals = [jnp.asarray(tangents[x], v.dtype) for x, v in zip(unique, x_vals, strict=True)]
    _, (y_dot,) = _differentiate(c, lambda: jax.jvp(f, tuple(x_vals), tuple(t_vals)))
    return _declared(y_dot, c.out)


def _basis(entry: tuple[int, ...], batched: tuple[int, ...], dtype: Any) -> jax.Array:
    """One unit vector per element of an entry of shape ``entry``, each repeated over the
    entries of an array of shape ``batched`` (entry last): shape (size of entry, *batched)."""
    n = math.prod(entry)
    lead = len(batched) - len(entry)
    unit = jnp.eye(n, dtype=dtype).reshape((n, *([1] * lead), *entry))
    return jnp.broadcast_to(unit, (n, *batched))


def batched_jacfwd(f: Callable[..., tuple[Value, ...]], x_vals: Sequence[Value],
                   b: int) -> list[list[Value]]:
    """The Jacobians, entry by entry, of ``f`` (a function of arrays whose first ``b`` axes are
    independent entries, returning a tuple of such arrays) by forward mode: ``[output][x]``,
    each of shape (*output's shape, *x's entry shape). One ``jax.jvp`` per element of an entry,
    vmapped over the elements: the unit tangent of each element moves that element of every
    entry at once, and entries do not mix (what ``jax.vmap(jax.jacfwd(f))`` gives)."""
    per_x = []
    for j, x in enumerate(x_vals):
        entry = tuple(x.shape[b:])

        def push(t: Value, j: int = j) -> tuple[Value, ...]:
            tangents = tuple(t if i == j else jnp.zeros_like(v) for i, v in enumerate(x_vals))
            return jax.jvp(f, tuple(x_vals), tangents)[1]

        cols = jax.vmap(push)(_basis(entry, tuple(x.shape), x.dtype))
        per_x.append([jnp.moveaxis(col, 0, -1).reshape((*col.shape[1:], *entry))
                      for col in cols])
    return [[per_x[j][o] for j in range(len(x_vals))] for o in range(len(per_x[0]))]


def batched_jacrev(f: Callable[..., tuple[Value, ...]], x_vals: Sequence[Value],
                   b: int) -> list[list[Value]]:
    """:func:`batched_jacfwd` by reverse mode: one pullback per element of an output's entry,
    vmapped over the elements (``jax.vmap(jax.jacrev(f))``)."""
    ys, pull = jax.vjp(f, *x_vals)
    result = []
    for o, y in enumerate(ys):
        entry = tuple(y.shape[b:])

        def pull_one(u: Value, o: int = o) -> tuple[Value, ...]:
            return pull(tuple(u if i == o else jnp.zeros_like(v) for i, v in enumerate(ys)))

        rows = jax.vmap(pull_one)(_basis(entry, tuple(y.shape), y.dtype))
        result.append([jnp.moveaxis(row, 0, b).reshape((*y.shape, *x.shape[b:]))
                       for row, x in zip(rows, x_vals, strict=True)])
    return result


def jacobian_lowering(forward: bool) -> Callable[[Call], Value]:
    """``jacfwd`` / ``jacrev`` [y, x1..xk]: the Jacobian of y with respect to each x
    (``jax.jacfwd`` / ``jax.jacrev``), shape y ++ x; with ``batch: b``, entry by entry over
    the first b axes (:func:`batched_jacfwd`, :func:`batched_jacrev`)."""
    transform = jax.jacfwd if forward else jax.jacrev
    batched = batched_jacfwd if forward else batched_jacrev

    def lower(c: Call) -> Value:
        y, *xs = c.node.inputs
        f, unique, x_vals = _as_function(c, [y], xs, "forward" if forward else "reverse")
        argnums = tuple(range(len(unique)))
        b = c.node.opts.get("batch", 0)
        if b:
            jac = _differentiate(c, lambda: batched(f, x_vals, b)[0])
        else:
            jac = _differentiate(
                c, lambda: transform(lambda *v: f(*v)[0], argnums=argnums)(*x_vals)
            )
        at = {x: i for i, x in enumerate(unique)}
        return tuple(_declared(jac[at[x]], o) for x, o in zip(xs, _outs(c), strict=True))

    return lower


def lower_hessian(c: Call) -> Value:
    """``hessian`` [y, x1..xk]: ``jax.hessian`` (``jacfwd`` of ``jacrev``); element j * k + l
    is the block of xj and xl, shape y ++ xj ++ xl; with ``batch: b``, entry by entry."""
    y, *xs = c.node.inputs
    f, unique, x_vals = _as_function(c, [y], xs, "forward")
    argnums = tuple(range(len(unique)))
    b = c.node.opts.get("batch", 0)
    if b:
        def gradients(*v: Value) -> tuple[Value, ...]:
            return tuple(batched_jacrev(f, v, b)[0])

        hess = _differentiate(c, lambda: batched_jacfwd(gradients, x_vals, b))
    else:
        hess = _differentiate(
            c, lambda: jax.hessian(lambda *v: f(*v)[0], argnums=argnums)(*x_vals))
    at = {x: i for i, x in enumerate(unique)}
    pairs = [(a, b) for a in xs for b in xs]
    return tuple(
        _declared(hess[at[a]][at[b]], o) for (a, b), o in zip(pairs, _outs(c), strict=True)
    )


def _tangent_like(value: Value, primal: Value) -> Value:
    """A tangent JAX accepts for ``primal``: float0 zeros for an integer one, else ``value``
    broadcast to its shape, in its dtype."""
    primal = jnp.asarray(primal)
    if not jnp.issubdtype(primal.dtype, jnp.inexact):
        return np.zeros(primal.shape, dtype=jax.dtypes.float0)
    return jnp.broadcast_to(jnp.asarray(value), primal.shape).astype(primal.dtype)


def lower_custom_jvp(c: Call) -> Value:
    """``custom_jvp`` [e1..em, w1..wk, c1..cn], ``%{primals: k, jvp: graph}``: the values of
    the e, as a ``jax.custom_jvp`` function of the w values: its tangent is the ``jvp``
    sub-graph's outputs given one tangent per w (and the captures c). JAX derives reverse mode
    from that rule. Values the e need that depend on no w ("closed"), and the captures, are
    explicit arguments whose tangents are ignored: nothing else gets a derivative through this
    node."""
    low, env, node = c.lowering, c.env, c.node
    m, k = len(_outs(c)), node.opts["primals"]
    es, ws = node.inputs[:m], node.inputs[m:m + k]
    captures = tuple(c.args[m + k:])
    _, closed = low._frontier(es, low.dependents(ws), frozenset(ws))
    low.evaluate(closed, env)
    rule = subgraph_function(node.opts["jvp"], c)
    w_outs = [low.nodes[w].tensor for w in ws]

    def primal(wv: tuple[Value, ...], cv: tuple[Value, ...], kv: tuple[Value, ...]) -> Value:
        local = dict(zip(closed, cv, strict=True))
        local.update(zip(ws, wv, strict=True))
        fenv = Env(local, replay=True)
        low.evaluate(es, fenv)
        return tuple(fenv[e] for e in es)

    fn = jax.custom_jvp(primal)

    def jvp_rule(primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> tuple[Value, Value]:
        wv, cv, kv = primals
        values = primal(wv, cv, kv)
        w_dots = [
            jnp.zeros(o.shape, to_dtype(o.type)) if t.dtype == jax.dtypes.float0 else t
            for t, o in zip(tangents[0], w_outs, strict=True)
        ]
        e_dots = rule(*w_dots, *kv)
        return values, tuple(_tangent_like(t, v) for t, v in zip(e_dots, values, strict=True))

    fn.defjvp(jvp_rule)
    wrt = tuple(env[w] for w in ws)
    return fn(wrt, tuple(env[i] for i in closed), captures)


# --- hooks ----------------------------------------------------------------------------------
# A hook is the identity on its inputs (values and gradients) that also hands their values to
# the sink while the computation runs: jax.debug.callback(ordered=True) fires under jit, in
# every iteration of scan/while loops, in the taken cond branch and once per entry under vmap,
# in program order; under AD it sees primal values only. The sink is chosen when the graph is
# lowered (the worker's default one tags the values with the request being served).

HookSink = Callable[[int, list[tuple[TensorOut, np.ndarray]]], None]
_default_sink: list[HookSink | None] = [None]


def set_hook_sink(sink: HookSink | None) -> None:
    """The sink of graphs lowered without one (``lower(graph)``): the worker's."""
    _default_sink[0] = sink


def _dispatch(index: int, values: list[tuple[TensorOut, np.ndarray]]) -> None:
    sink = _default_sink[0]
    if sink is not None:
        sink(index, values)


def lower_hook(c: Call) -> Value:
    """``hook`` [x1..xn], ``%{index: i}``: the tuple of the inputs; ``sink(i, values)`` runs
    with their values unless the node is quiet here (``Lowering.quiet``)."""
    low, values = c.lowering, tuple(c.args)
    if low.sink is not None and not low.quiet(c.node.id, c.env):
        sink, index = low.sink, c.node.opts["index"]
        outs = [low.nodes[i].tensor for i in c.node.inputs]

        def deliver(*arrays: Any) -> None:
            sink(index, [(o, np.asarray(a)) for o, a in zip(outs, arrays, strict=True)])

        jax.debug.callback(deliver, *values, ordered=True)
    return values


def lower_attach_token(c: Call) -> Value:
    """``attach_token`` [h1..hn, x]: the value of x. The h (hooked values, ``Nx.Defn.Kernel``'s
    tokens) are inputs only so that evaluating x evaluates them, and fires their hooks, first."""
    return c.args[-1]


# --- Fourier transforms -------------------------------------------------------------------


def fourier_lowering(fn: Callable[..., jax.Array]) -> Callable[[Call], Value]:
    """``fn`` (``jnp.fft.fft``/``ifft``) along the last axis of the input cast to the complex
    ``out`` type; ``n = length`` pads the axis with zeros or truncates it."""

    def lower(c: Call) -> Value:
        return fn(_as_out(c, c.args[0]), n=c.node.opts["length"], axis=-1)

    return lower


def fourier2_lowering(fn: Callable[..., jax.Array]) -> Callable[[Call], Value]:
    """``fn`` (``jnp.fft.fft2``/``ifft2``) over ``axes`` of the input cast to the complex
    ``out`` type; ``s = lengths`` pads each axis with zeros or truncates it."""

    def lower(c: Call) -> Value:
        o = c.node.opts
        return fn(_as_out(c, c.args[0]), s=tuple(o["lengths"]), axes=tuple(o["axes"]))

    return lower


def lower_top_k(c: Call) -> Value:
    """The ``k`` largest entries along the last axis and their indices, in Nx's order:
    decreasing, equal entries by increasing index, every NaN above every number and -0.0
    equal to 0.0 (a stable descending sort). XLA's TopK orders by the bits' total order
    (0.0 above -0.0, a negative NaN below every number), so it ranks keys in which each NaN
    is the positive quiet NaN and -0.0 is 0.0 (not ``x + 0``, which XLA simplifies to ``x``),
    and the values are read back from the input. The gradient flows to the values through
    the gather."""
    x, k = c.args[0], c.node.opts["k"]
    keys = x
    if jnp.issubdtype(x.dtype, jnp.floating):
        zero, nan = jnp.zeros((), x.dtype), jnp.array(jnp.nan, x.dtype)
        keys = jnp.where(jnp.isnan(x), nan, jnp.where(x == 0, zero, x))
    _, indices = lax.top_k(lax.stop_gradient(keys), k)
    values = jnp.take_along_axis(x, indices, axis=-1)
    return _outs_of(c, (values, indices))


# --- ops carrying sub-graphs (PROTOCOL.md 4.3) ------------------------------------------------
# Every sub-graph is closed (its parameters are the values passed to it), so it lowers as a
# function of its own with a fresh Lowering. Loops whose trip count is known before they run
# become lax.scan, which JAX can reverse-differentiate; see docs/COMPATIBILITY.md (Control flow).

UNBOUNDED_WHILE = (
    "a second derivative flows through a while loop whose number of iterations is not known "
    "before it runs (its reverse pass is itself such a loop, which JAX cannot reverse-"
    "differentiate). Give the loop max_iterations: n (a bounded lax.scan) or loop over a range "
    "(while state, i <- 0..n-1)"
)


def subgraph_function(graph: Graph, c: Call,
                      linear: Callable[[jax.Array], jax.Array] | None = None,
                      ) -> Callable[..., list[jax.Array]]:
    """A closed sub-graph of the node of ``c`` as a function of its parameters, returning its
    outputs; its hooks report to the same sink, and are quiet where the node is. Its
    ``linear_map`` nodes apply ``linear``, else the map the enclosing sub-graph was given."""
    low = c.lowering
    return Lowering(graph, low.sink, low.quiet(c.node.id, c.env), linear or low.linear,
                    low.forward_only(c.env)).function()


def lower_cond(c: Call) -> Value:
    """``cond`` [p1..pk, captures]: the first branch whose predicate is nonzero, else the last
    (``lax.switch``: only that branch runs, for values and gradients)."""
    branches = c.node.opts["branches"]
    preds, captures = c.args[: len(branches) - 1], c.args[len(branches) - 1 :]
    index = jnp.asarray(len(preds), np.int32)
    for i in reversed(range(len(preds))):
        index = jnp.where(jnp.reshape(preds[i], ()) != 0, np.int32(i), index)

    def branch(graph: Graph) -> Callable[..., tuple[jax.Array, ...]]:
        fn = subgraph_function(graph, c)
        return lambda *caps: tuple(fn(*caps))

    return lax.switch(index, [branch(g) for g in branches], *captures)


def _loop_parts(c: Call) -> tuple[tuple[jax.Array, ...], tuple[jax.Array, ...]]:
    out = c.node.out
    assert isinstance(out, TupleOut)
    n = len(out.elements)
    return tuple(jnp.asarray(a) for a in c.args[:n]), tuple(c.args[n:])


def lower_while(c: Call) -> Value:
    """``while`` [state, captures]: ``lax.while_loop``; with ``max_iterations`` a
    ``lax.scan`` of that length whose steps leave the state alone once the condition is false
    (``lax.cond``), reverse-differentiable."""
    state, captures = _loop_parts(c)
    condition = subgraph_function(c.node.opts["condition"], c)
    body = subgraph_function(c.node.opts["body"], c)

    def pred(s: tuple[jax.Array, ...]) -> jax.Array:
        return jnp.reshape(condition(*s, *captures)[0], ()) != 0

    def step(s: tuple[jax.Array, ...]) -> tuple[jax.Array, ...]:
        return tuple(body(*s, *captures))

    bound = c.node.opts["max_iterations"]
    if bound is None and c.lowering.forward_only(c.env):
        # (JAX differentiates lax.while_loop in forward mode; reversible_while's custom_vjp
        # would refuse that)
        return lax.while_loop(pred, step, state)
    if bound is None:
        return reversible_while(
            lambda s, caps: jnp.reshape(condition(*s, *caps)[0], ()) != 0,
            lambda s, caps: tuple(body(*s, *caps)),
            state,
            captures,
        )

    def scan_step(carry: Any, _: Any) -> tuple[Any, None]:
        s, active = carry
        active = jnp.logical_and(active, pred(s))
        return (lax.cond(active, step, lambda s: s, s), active), None

    (final, _), _ = lax.scan(scan_step, (state, jnp.asarray(True)), None, length=bound)
    return final


def _is_float(x: Any) -> bool:
    return bool(jnp.issubdtype(jnp.asarray(x).dtype, jnp.inexact))


def _float0_zeros(x: Any) -> Any:
    return np.zeros(np.shape(x), dtype=jax.dtypes.float0)


def _substituted(
    values: Sequence[Any], indices: Sequence[int], new: Sequence[Any]
) -> tuple[Any, ...]:
    """``values`` with ``values[indices[k]]`` replaced by ``new[k]``."""
    out = list(values)
    for i, x in zip(indices, new, strict=True):
        out[i] = x
    return tuple(out)


# the memory the checkpoints of a reverse-differentiated unbounded while may take (two buffers
# of this size), and the most states each buffer holds
_CHECKPOINT_BYTES = 128 << 20
_MAX_SLOTS = 256


def checkpoint_slots(state: Sequence[Any]) -> int:
    """How many states a buffer of :func:`reversible_while` holds: as many as fit in
    ``_CHECKPOINT_BYTES``, at most ``_MAX_SLOTS``, at least 2, an even number."""
    size = sum(jnp.asarray(x).dtype.itemsize * max(math.prod(jnp.shape(x)), 1) for x in state)
    return max(2, min(_MAX_SLOTS, _CHECKPOINT_BYTES // max(size, 1)) // 2 * 2)


def reversible_while(
    pred: Callable[[tuple[jax.Array, ...], tuple[Any, ...]], jax.Array],
    step: Callable[[tuple[jax.Array, ...], tuple[Any, ...]], tuple[jax.Array, ...]],
    state: tuple[jax.Array, ...],
    captures: tuple[Any, ...],
) -> tuple[jax.Array, ...]:
    """``lax.while_loop(pred, step, state)`` that JAX can also reverse-differentiate, with no
    bound known in advance (``lax.while_loop`` alone has no reverse rule).

    The forward pass runs the loop, counts its ``n`` steps and keeps checkpoints: the state
    before every ``stride``-th step, in a buffer of ``K`` states (:func:`checkpoint_slots`);
    when the buffer is full, every other checkpoint is dropped and the stride doubles, so the
    checkpoints always cover the steps taken. The backward pass takes the segments between
    checkpoints from the last to the first: it recomputes the states of a segment from its
    checkpoint into a second buffer, then pulls the cotangent back through each step of it
    (``jax.vjp``), last to first, adding what reaches the captured values. That is the exact
    gradient of the ``n`` steps taken, in their order: each step runs three times (forward,
    recomputed, pulled back) while ``n <= K * K / 2``; a longer loop has segments longer than
    the buffer, each recomputed step by step from its checkpoint (O(n^2 / K) steps). Memory:
    the two buffers. A second derivative through it is not available (its backward pass is
    itself an unbounded loop).
    """
    slots = checkpoint_slots(state)

    def run(s0: tuple[jax.Array, ...], caps: tuple[Any, ...]) -> tuple[jax.Array, ...]:
        return lax.while_loop(lambda s: pred(s, caps), lambda s: step(s, caps), s0)

    loop = jax.custom_vjp(run)

    def buffers(s0: tuple[Any, ...]) -> tuple[jax.Array, ...]:
        return tuple(jnp.zeros((slots, *jnp.shape(x)), jnp.asarray(x).dtype) for x in s0)

    def put(bufs: tuple[jax.Array, ...], slot: jax.Array, s: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(lax.dynamic_update_index_in_dim(b, jnp.asarray(x, b.dtype), slot, 0)
                     for b, x in zip(bufs, s, strict=True))

    def get(bufs: tuple[jax.Array, ...], slot: jax.Array) -> tuple[jax.Array, ...]:
        return tuple(lax.dynamic_index_in_dim(b, slot, 0, keepdims=False) for b in bufs)

    def forward(s0: tuple[jax.Array, ...], caps: tuple[Any, ...]) -> tuple[Any, Any]:
        def keep(c: tuple[Any, ...]) -> tuple[Any, ...]:
            s, i, bufs, stride = c

            def halve(bs: tuple[Any, ...]) -> tuple[Any, ...]:
                bufs, stride = bs
                return tuple(b.at[: slots // 2].set(b[0::2]) for b in bufs), stride * 2

            bufs, stride = lax.cond(i // stride >= slots, halve, lambda bs: bs, (bufs, stride))
            return s, i, put(bufs, i // stride, s), stride

        def counted(c: tuple[Any, ...]) -> tuple[Any, ...]:
            s, i, bufs, stride = lax.cond(c[1] % c[3] == 0, keep, lambda c: c, c)
            return step(s, caps), i + 1, bufs, stride

        one = jnp.asarray(1, np.int64)
        start = (s0, jnp.asarray(0, np.int64), buffers(s0), one)
        final, n, bufs, stride = lax.while_loop(lambda c: pred(c[0], caps), counted, start)
        return final, (s0, caps, n, bufs, stride)

    def backward(residuals: tuple[Any, ...], g: tuple[Any, ...]) -> tuple[Any, Any]:
        s0, caps, n, bufs, stride = residuals
        fs = [i for i, x in enumerate(s0) if _is_float(x)]
        fc = [i for i, x in enumerate(caps) if _is_float(x)]
        zero = jnp.asarray(0, np.int64)

        def pull(s_i: tuple[Any, ...], carry: tuple[list[Any], list[Any]]) -> tuple[Any, Any]:
            """The cotangent before the step taken from state ``s_i``."""
            g_float, acc = carry

            def float_step(xs: list[Any], cs: list[Any]) -> list[Any]:
                out = step(_substituted(s_i, fs, xs), _substituted(caps, fc, cs))
                return [out[i] for i in fs]

            _, pullback = jax.vjp(float_step, [s_i[i] for i in fs], [caps[i] for i in fc])
            g_state, g_caps = pullback(g_float)
            return list(g_state), [a + b for a, b in zip(acc, g_caps, strict=True)]

        def advance(s: tuple[Any, ...], steps: jax.Array) -> tuple[Any, ...]:
            return lax.fori_loop(zero, steps, lambda _, s: step(s, caps), s)

        segments = (n + stride - 1) // stride

        def bounds(k: jax.Array) -> tuple[jax.Array, jax.Array]:
            """The checkpoint index and the length of the k-th segment from the last one."""
            j = segments - 1 - k
            return j, jnp.minimum(stride, n - j * stride)

        # Segments no longer than a buffer (stride <= K: the loop took at most K * K / 2
        # steps): each recomputed into one buffer, carried from segment to segment.
        def buffered(carry: tuple[list[Any], list[Any]]) -> tuple[Any, Any]:
            def segment(k: jax.Array, c: tuple[Any, ...]) -> tuple[Any, ...]:
                g_float, acc, seg = c
                j, length = bounds(k)

                def fill(t: jax.Array, c: tuple[Any, Any]) -> tuple[Any, Any]:
                    s, seg = c
                    return step(s, caps), put(seg, t, s)

                _, seg = lax.fori_loop(zero, length, fill, (get(bufs, j), seg))
                g_float, acc = lax.fori_loop(
                    zero, length, lambda t, c: pull(get(seg, length - 1 - t), c),
                    (g_float, acc))
                return g_float, acc, seg

            g_float, acc, _ = lax.fori_loop(zero, segments, segment, (*carry, buffers(s0)))
            return g_float, acc

        # Longer segments: each step's state recomputed from the segment's checkpoint.
        def recomputed(carry: tuple[list[Any], list[Any]]) -> tuple[Any, Any]:
            def segment(k: jax.Array, c: tuple[Any, Any]) -> tuple[Any, Any]:
                j, length = bounds(k)
                first = get(bufs, j)
                return lax.fori_loop(
                    zero, length, lambda t, c: pull(advance(first, length - 1 - t), c), c)

            return lax.fori_loop(zero, segments, segment, carry)

        start = ([g[i] for i in fs], [jnp.zeros_like(caps[i]) for i in fc])
        g_state, g_caps = lax.cond(stride <= slots, buffered, recomputed, start)
        # (the integer entries get float0 cotangents, as JAX wants for them)
        zeros_state = [_float0_zeros(x) for x in s0]
        zeros_caps = [_float0_zeros(x) for x in caps]
        return _substituted(zeros_state, fs, g_state), _substituted(zeros_caps, fc, g_caps)

    loop.defvjp(forward, backward)
    return loop(tuple(state), tuple(captures))


def lower_linear_map(c: Call) -> Value:
    """``linear_map`` [v]: the linear map JAX passed to the solver this sub-graph belongs to."""
    linear = c.lowering.linear
    if linear is None:
        raise GraphError(f"node {c.node.id} (linear_map): only the solvers of custom_root and "
                         "custom_linear_solve are given a linear map")
    return linear(c.args[0])


def _solver(graph: Graph, c: Call, captures: tuple[jax.Array, ...],
            ) -> Callable[[Any, jax.Array], jax.Array]:
    """A solver's sub-graph as JAX calls it: ``solver(linear_map, rhs)``."""
    def solver(linear: Any, rhs: jax.Array) -> jax.Array:
        return subgraph_function(graph, c, linear)(rhs, *captures)[0]

    return solver


def lower_custom_root(c: Call) -> Value:
    """``custom_root`` [x0, captures]: ``lax.custom_root`` of ``f``; ``solve`` finds the root
    (f is inlined in it at trace time, so JAX's f is not used), ``tangent_solve`` solves the
    linearised system with the map JAX gives it. Gradients flow to the captures ``f`` reads,
    by the implicit function theorem."""
    x0, captures = c.args[0], tuple(c.args[1:])
    f = subgraph_function(c.node.opts["f"], c)
    solve = _solver(c.node.opts["solve"], c, captures)
    return lax.custom_root(lambda x: f(x, *captures)[0], x0,
                           lambda _f, guess: solve(None, guess),
                           _solver(c.node.opts["tangent_solve"], c, captures))


def lower_custom_linear_solve(c: Call) -> Value:
    """``custom_linear_solve`` [b, captures]: ``lax.custom_linear_solve`` of ``matvec``, with
    the solvers applying the maps JAX gives them (matvec, and its transpose for
    ``transpose_solve``)."""
    b, captures = c.args[0], tuple(c.args[1:])
    opts = c.node.opts
    matvec = subgraph_function(opts["matvec"], c)
    transpose = opts["transpose_solve"]
    return lax.custom_linear_solve(
        lambda x: matvec(x, *captures)[0], b, _solver(opts["solve"], c, captures),
        None if transpose is None else _solver(transpose, c, captures),
        symmetric=opts["symmetric"])


def checkpoint_policy(policy: CheckpointPolicy) -> Callable[..., bool] | None:
    """The ``jax.checkpoint_policies`` policy a ``checkpoint`` node's option names."""
    policies = jax.checkpoint_policies
    if policy is None or isinstance(policy, str):
        return None if policy is None else getattr(policies, policy)
    kind, names = policy
    if kind == "save_only":
        return policies.save_only_these_names(*names)
    return policies.save_any_names_but_these(*names)


def lower_checkpoint(c: Call) -> Value:
    """``checkpoint`` [args, captures]: ``jax.checkpoint`` of ``fun`` with the node's policy
    and ``prevent_cse``; the tuple of ``fun``'s outputs."""
    fun = subgraph_function(c.node.opts["fun"], c)
    checkpointed = jax.checkpoint(lambda *xs: tuple(fun(*xs)),
                                  policy=checkpoint_policy(c.node.opts["policy"]),
                                  prevent_cse=c.node.opts["prevent_cse"])
    return checkpointed(*c.args)


def lower_range_loop(c: Call) -> Value:
    """``range_loop`` [state, captures]: ``lax.scan`` over first, first + step, ... (count)."""
    state, captures = _loop_parts(c)
    body = subgraph_function(c.node.opts["body"], c)
    o = c.node.opts
    indices = o["first"] + o["step"] * jnp.arange(o["count"], dtype=np.int64)

    def scan_step(s: tuple[jax.Array, ...], i: jax.Array) -> tuple[Any, None]:
        return tuple(body(*s, i, *captures)), None

    final, _ = lax.scan(scan_step, state, indices)
    return final


def _fold(c: Call, parts: jax.Array, acc: jax.Array, captures: Sequence[Value]) -> jax.Array:
    """Fold ``parts`` (shape (steps, *out)) into ``acc`` along the first axis with the reducer
    sub-graph, element-wise over the rest (``lax.scan`` over ``jax.vmap``: differentiable)."""
    reducer = subgraph_function(c.node.opts["reducer"], c)
    shape = c.out.shape
    flat = jnp.reshape(parts, (parts.shape[0], math.prod(shape)))

    def scalar(x: jax.Array, a: jax.Array) -> jax.Array:
        return jnp.reshape(reducer(x, a, *captures)[0], ())

    combine = jax.vmap(scalar)

    def step(carry: jax.Array, x: jax.Array) -> tuple[jax.Array, None]:
        return combine(x, carry), None

    init = jnp.broadcast_to(jnp.asarray(acc, c.dtype), (math.prod(shape),))
    folded, _ = lax.scan(step, init, flat)
    return jnp.reshape(folded, shape)


def lower_reduce(c: Call) -> Value:
    """``reduce`` [x, acc, captures]: the reduced elements of each output position, in
    row-major order, folded into ``acc`` with the reducer."""
    x, acc, *captures = (jnp.asarray(a) for a in c.args)
    axes = c.node.opts["axes"]
    axes = tuple(range(x.ndim)) if axes is None else tuple(sorted(axes))
    rest = tuple(a for a in range(x.ndim) if a not in axes)
    moved = jnp.transpose(x, (*axes, *rest))
    parts = jnp.reshape(moved, (math.prod(x.shape[a] for a in axes), *(x.shape[a] for a in rest)))
    return _fold(c, parts, acc, captures)


def lower_window_reduce(c: Call) -> Value:
    """``window_reduce`` [x, acc, captures]: pad with ``acc``, take one strided slice per
    window position (row-major) and fold them into ``acc`` with the reducer."""
    x, acc, *captures = (jnp.asarray(a) for a in c.args)
    dims, strides, padding, dilations = _window_config(c)
    shape = c.out.shape
    padded = lax.pad(x, jnp.reshape(acc, ()), tuple((lo, hi, 0) for lo, hi in padding))
    parts = []
    for offsets in itertools.product(*(range(d) for d in dims)):
        start = tuple(o * d for o, d in zip(offsets, dilations, strict=True))
        limit = tuple(s + (n - 1) * k + 1 for s, n, k in zip(start, shape, strides, strict=True))
        parts.append(lax.slice(padded, start, limit, strides))
    return _fold(c, jnp.stack(parts), acc, captures)


# --- vectorized nodes (PROTOCOL.md 4.4) -------------------------------------------------------


def lower_vectorized(c: Call) -> Value:
    """A node with ``vectorized: k``: its op's lowering, as one entry sees it (out and inputs
    without the k leading axes), under k nested ``jax.vmap`` over axis 0; inputs not flagged
    in ``vectorized_inputs`` are shared by every entry (``in_axes`` None)."""
    node = c.node
    k: int = node.opts["vectorized"]
    in_axes = tuple(0 if flag else None for flag in node.opts["vectorized_inputs"])
    inner = inner_node(node)
    lowering = _lowering(node.op)

    def entry(*args: Value) -> Value:
        return lowering(Call(inner, list(args), c.env, c.lowering))

    fn: Callable[..., Value] = entry
    for _ in range(k):
        fn = jax.vmap(fn, in_axes=in_axes)
    return fn(*c.args)


def lower(graph: Graph, sink: HookSink | None = None) -> Callable[..., list[jax.Array]]:
    """The graph as a Python function of its ``run`` arguments (ready for ``jax.jit``); its
    hooks call ``sink`` (default: the one given to :func:`set_hook_sink`, when the hook fires).
    In numerics mode ``nx``, computed NaNs come out as Nx writes them (:func:`canonical_nan`)."""
    run = Lowering(graph, sink or _dispatch).function()
    if not numerics.exact():
        return run
    computed = [_computed(graph, o) for o in graph.outputs]

    def run_canonical(*args: jax.Array) -> list[jax.Array]:
        return [canonical_nan(v) if c else v for v, c in zip(run(*args), computed, strict=True)]

    return run_canonical


# Ops that move their first input's elements without computing them (Nx keeps their bits), and
# nodes whose bits come from the caller (a from_binary payload, a bitcast)
_MOVING = frozenset(
    {"reshape", "transpose", "broadcast", "slice", "dynamic_slice", "reverse", "gather", "take",
     "take_along_axis", "metadata", "stop_grad"}
)
_GIVEN = frozenset({"parameter", "constant", "tensor", "bitcast"})


def _computed(graph: Graph, node_id: int) -> bool:
    """Whether the output ``node_id`` holds computed values, not elements moved from an input
    or a constant."""
    node = graph.nodes[node_id]
    while node.op in _MOVING and node.inputs:
        node = graph.nodes[node.inputs[0]]
    return node.op not in _GIVEN


def canonical_nan(value: Value) -> Value:
    """Every NaN as the quiet NaN with a clear sign bit, the one Nx's binary backend writes for
    any NaN it computes (``0x7FC00000`` in f32); XLA on x86-64 computes the one with the sign
    bit set (``0/0``, ``Inf - Inf``), and the tensors would not be ``==`` to Nx's. Complex
    parts each."""
    if isinstance(value, tuple):
        return tuple(canonical_nan(v) for v in value)
    x = jnp.asarray(value)
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        return x
    return _canonical_nan(x)


# (the identity for differentiation: a function of the graph's outputs, as a test's jax.grad,
# sees through it; bits have no derivative)
@jax.custom_jvp
def _canonical_nan(x: jax.Array) -> jax.Array:
    if jnp.iscomplexobj(x):
        return lax.complex(_canonical_nan_bits(jnp.real(x)), _canonical_nan_bits(jnp.imag(x)))
    return _canonical_nan_bits(x)


@_canonical_nan.defjvp
def _canonical_nan_jvp(
    primals: tuple[jax.Array], tangents: tuple[jax.Array]
) -> tuple[jax.Array, jax.Array]:
    return _canonical_nan(primals[0]), tangents[0]


def _canonical_nan_bits(x: jax.Array) -> jax.Array:
    # On the bits: LLVM folds a float select(isnan(x), NaN, x) back into x, and takes the
    # result of some float ops, as sqrt, for never NaN. Of the flattened tensor: XLA's CPU
    # compiler permutes the elements of a bitcast-convert of a result it lays out in another
    # order than row-major (the gradient of a dilated convolution); a flat array has one order.
    bits = np.dtype(f"uint{x.dtype.itemsize * 8}")
    nan, inf = (np.array(v, x.dtype).view(bits) for v in (np.nan, np.inf))
    magnitude = np.array(np.iinfo(bits).max >> 1, bits)
    b = lax.bitcast_convert_type(x.reshape(-1), bits)
    canonical = lax.bitcast_convert_type(jnp.where((b & magnitude) > inf, nan, b), x.dtype)
    return canonical.reshape(x.shape)
