"""Graph -> JAX function (PROTOCOL.md sections 4.1 and 4.2): the lowering driver. Knows nothing
about ports, and no op: each node is lowered by its op's rule in the registry it is given
(:mod:`py_backend.registry`).

Nodes are evaluated iteratively in id order and on demand (:meth:`Lowering.evaluate`) inside an
:class:`Env`; ``grad`` and ``custom_grad`` (py_backend/ops/grad.py) evaluate parts of the graph
again in child environments, which is how ``jax.grad`` and ``jax.custom_vjp`` see them as
functions of the differentiated nodes; ops carrying sub-graphs lower them with
:func:`subgraph_function`. The numerics mode is the lowering's own (:class:`Lowering`), in force
while it is traced (:func:`py_backend.numerics.tracing_in`).

Worked example, the softplus of Nx's ``custom_grad`` docs at t = 100.0 (f32): the autodiff
gradient of ``log1p(exp(t))`` is NaN (inf / inf), the custom one ``g * (1 - 1/(1+exp(t)))`` is
exactly 1.0.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

from py_backend import numerics  # noqa: E402
from py_backend.nxtypes import to_dtype  # noqa: E402
from py_backend.wire_graph import Graph, GraphError, Node, TensorOut, TupleOut, inner_node  # noqa: E402

Value = Any  # a jax.Array, or a tuple of values for tuple-valued nodes


class OpRules(Protocol):
    """What the driver reads of an op's registration (py_backend.ops.rules.Op)."""

    @property
    def lower(self) -> Callable[[Call], Value]: ...


Registry = Mapping[str, OpRules]


class ShapeError(ValueError):
    """JAX produced a shape other than the one the graph declares."""


class ArgumentError(ValueError):
    """The arguments of ``run`` do not match the graph's parameters."""


class NodeReport(Exception):
    """An error whose message names its node itself (``{node N}``): no note is added."""


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


class Lowering:
    """Evaluates a validated :class:`Graph` with JAX operations (traceable by ``jax.jit``)."""

    def __init__(self, graph: Graph, registry: Registry, sink: HookSink | None = None,
                 muted: bool = False, linear: Callable[[jax.Array], jax.Array] | None = None,
                 forward: bool = False, mode: str | None = None) -> None:
        self.graph = graph
        self.nodes = graph.nodes
        # op name -> its rules (py_backend.registry.REGISTRY): where each node's lowering is
        self.registry = registry
        # the numerics mode the graph is traced in (py_backend/numerics.py)
        self.mode = numerics.checked(mode) if mode is not None else numerics.mode()
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
                    value = self.registry[node.op].lower(Call(node, args, env, self))
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
            with numerics.tracing_in(self.mode):
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


def as_out(c: Call, value: Any) -> jax.Array:
    return jnp.asarray(value).astype(c.dtype)


def outs_of(c: Call, values: Sequence[jax.Array]) -> tuple[jax.Array, ...]:
    out = c.node.out
    assert isinstance(out, TupleOut)
    types = [e.type for e in out.elements if isinstance(e, TensorOut)]
    return tuple(v.astype(to_dtype(t)) for v, t in zip(values, types, strict=True))


HookSink = Callable[[int, list[tuple[TensorOut, np.ndarray]]], None]
_default_sink: list[HookSink | None] = [None]


def set_hook_sink(sink: HookSink | None) -> None:
    """The sink of graphs lowered without one (``lower(graph)``): the worker's."""
    _default_sink[0] = sink


def dispatch(index: int, values: list[tuple[TensorOut, np.ndarray]]) -> None:
    sink = _default_sink[0]
    if sink is not None:
        sink(index, values)


def subgraph_function(graph: Graph, c: Call,
                      linear: Callable[[jax.Array], jax.Array] | None = None,
                      ) -> Callable[..., list[jax.Array]]:
    """A closed sub-graph of the node of ``c`` as a function of its parameters, returning its
    outputs; its hooks report to the same sink, and are quiet where the node is. Its
    ``linear_map`` nodes apply ``linear``, else the map the enclosing sub-graph was given."""
    low = c.lowering
    return Lowering(graph, low.registry, low.sink, low.quiet(c.node.id, c.env),
                    linear or low.linear, low.forward_only(c.env), low.mode).function()


def lower_vectorized(c: Call) -> Value:
    """A node with ``vectorized: k``: its op's lowering, as one entry sees it (out and inputs
    without the k leading axes), under k nested ``jax.vmap`` over axis 0; inputs not flagged
    in ``vectorized_inputs`` are shared by every entry (``in_axes`` None)."""
    node = c.node
    k: int = node.opts["vectorized"]
    in_axes = tuple(0 if flag else None for flag in node.opts["vectorized_inputs"])
    inner = inner_node(node)
    lowering = c.lowering.registry[node.op].lower

    def entry(*args: Value) -> Value:
        return lowering(Call(inner, list(args), c.env, c.lowering))

    fn: Callable[..., Value] = entry
    for _ in range(k):
        fn = jax.vmap(fn, in_axes=in_axes)
    return fn(*c.args)


def lower(graph: Graph, registry: Registry, sink: HookSink | None = None,
          mode: str | None = None) -> Callable[..., list[jax.Array]]:
    """The graph as a Python function of its ``run`` arguments (ready for ``jax.jit``), each
    node lowered by ``registry``'s rule for its op, traced in numerics mode ``mode`` (default:
    the process's, :func:`py_backend.numerics.mode`); its hooks call ``sink`` (default: the
    one given to :func:`set_hook_sink`, when the hook fires). In numerics mode ``nx``,
    computed NaNs come out as Nx writes them (:func:`canonical_nan`)."""
    lowering = Lowering(graph, registry, sink or dispatch, mode=mode)
    run = lowering.function()
    if lowering.mode != "nx":
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
