"""Ops carrying sub-graphs (PROTOCOL.md 4.3) and hooks (4.5): cond, while, range_loop,
reduce and window_reduce with a reducer, hook and attach_token, custom_root,
custom_linear_solve and linear_map, checkpoint.

Every sub-graph is closed (its parameters are the values passed to it), so it lowers as a
function of its own with a fresh Lowering (:func:`py_backend.lower.subgraph_function`). Loops
whose trip count is known before they run become lax.scan, which JAX can reverse-differentiate;
an unbounded while reverse-differentiated is replayed from checkpoints
(:func:`reversible_while`); see docs/COMPATIBILITY.md (Control flow).

A hook is the identity on its inputs (values and gradients) that also hands their values to
the sink while the computation runs: jax.debug.callback(ordered=True) fires under jit, in every
iteration of scan/while loops, in the taken cond branch and once per entry under vmap, in
program order; under AD it sees primal values only. The sink is chosen when the graph is lowered
(the worker's default one tags the values with the request being served).

Each op's check, lowering and registration (``OPS``, :mod:`py_backend.ops.rules`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from py_backend import wire_graph as wire
from py_backend.lower import Call, Value, subgraph_function
from py_backend.nxtypes import NxType
from py_backend.ops.reductions import check_reduction, check_window, window_config
from py_backend.ops.rules import ANY, entry, family
from py_backend.wire_graph import (
    CheckpointPolicy,
    Graph,
    GraphError,
    Node,
    TensorOut,
    TupleOut,
    check_signature,
    check_tensor_out,
    input_outs,
    subgraphs_of,
    tuple_outs,
)


def _linear_maps(graph: Graph) -> list[Node]:
    """The ``linear_map`` nodes of ``graph``, of the sub-graphs nested in it too (a solver's
    loop body applies the map it was given)."""
    found = []
    for node in graph.nodes:
        if node.op == "linear_map":
            found.append(node)
        for sub in subgraphs_of(node):
            if isinstance(sub, Graph) and node.op not in ("custom_root", "custom_linear_solve"):
                found.extend(_linear_maps(sub))
    return found


def _check_solver(where: str, what: str, graph: Graph, unknown: TensorOut,
                  captures: list[TensorOut], maps: bool) -> None:
    """A solver's sub-graph: parameter 0 is shaped like the unknown, then the captures; one
    output shaped like it; its ``linear_map`` nodes (allowed where ``maps``) map such values."""
    check_signature(where, what, graph, [unknown, *captures], [unknown])
    for node in _linear_maps(graph):
        if not maps:
            raise GraphError(f"{where}: {what} applies a linear_map (node {node.id}), but no "
                             f"linear map is passed to it")
        if node.tensor != unknown:
            raise GraphError(f"{where}: {what}'s linear_map node {node.id} must map {unknown} "
                             f"to {unknown}, its out is {node.tensor}")


def check_hook(node: Node, nodes: list[Node], where: str) -> None:
    want = [nodes[i].tensor for i in node.inputs]
    if tuple_outs(node, where) != want:
        raise GraphError(f"{where}: out must be the list of its inputs' outs "
                         f"{[str(o) for o in want]}")


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


def check_attach_token(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    if any(not isinstance(nodes[i].out, TensorOut) for i in node.inputs):
        raise GraphError(f"{where}: every input must be tensor-valued")
    last = nodes[node.inputs[-1]].tensor
    if node.tensor != last:
        raise GraphError(f"{where}: out must be the last input's out {last}, got {node.tensor}")


def lower_attach_token(c: Call) -> Value:
    """``attach_token`` [h1..hn, x]: the value of x. The h (hooked values, ``Nx.Defn.Kernel``'s
    tokens) are inputs only so that evaluating x evaluates them, and fires their hooks, first."""
    return c.args[-1]


def check_cond(node: Node, nodes: list[Node], where: str) -> None:
    outs = tuple_outs(node, where)
    branches = node.opts["branches"]
    preds = len(branches) - 1
    if preds < 1 or len(node.inputs) < preds:
        raise GraphError(f"{where}: needs at least 2 branches and one predicate input per "
                         f"branch but the last ({len(branches)} branches, "
                         f"{len(node.inputs)} inputs)")
    for ref in node.inputs[:preds]:
        if nodes[ref].tensor.shape != ():
            raise GraphError(f"{where}: predicate (node {ref}) must be a scalar")
    captures = input_outs(node, nodes, preds)
    for i, branch in enumerate(branches):
        check_signature(where, f"branch {i}", branch, captures, outs)


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


def check_loop(node: Node, nodes: list[Node], where: str) -> None:
    state = tuple_outs(node, where)
    n = len(state)
    if len(node.inputs) < n or input_outs(node, nodes)[:n] != state:
        raise GraphError(f"{where}: the first {n} inputs (the initial state) must have the "
                         f"outs of the result, {[str(s) for s in state]}")
    captures = input_outs(node, nodes, n)
    if node.op == "while":
        condition = node.opts["condition"]
        scalar = [condition.nodes[o].tensor for o in condition.outputs]
        if len(scalar) != 1 or scalar[0].shape != ():
            raise GraphError(f"{where}: condition must have one scalar output")
        check_signature(where, "condition", node.opts["condition"], state + captures, scalar)
        check_signature(where, "body", node.opts["body"], state + captures, state)
    else:
        if node.opts["step"] == 0:
            raise GraphError(f"{where}: step must not be 0")
        index = [TensorOut(NxType("s", 64), ())]
        check_signature(where, "body", node.opts["body"], state + index + captures, state)


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


def check_linear_map(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    if nodes[node.inputs[0]].tensor != node.tensor:
        raise GraphError(f"{where}: the argument of a linear_map must have its out {node.tensor}")


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


def check_custom_root(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    unknown = node.tensor
    if nodes[node.inputs[0]].tensor != unknown or not unknown.type.is_float:
        raise GraphError(f"{where}: the initial guess must have the out {unknown}, a float type")
    captures = input_outs(node, nodes, 1)
    _check_solver(where, "f", node.opts["f"], unknown, captures, False)
    _check_solver(where, "solve", node.opts["solve"], unknown, captures, False)
    _check_solver(where, "tangent_solve", node.opts["tangent_solve"], unknown, captures, True)


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


def check_custom_linear_solve(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    unknown = node.tensor
    if nodes[node.inputs[0]].tensor != unknown or not unknown.type.is_float:
        raise GraphError(f"{where}: b must have the out {unknown}, a float type")
    captures = input_outs(node, nodes, 1)
    _check_solver(where, "matvec", node.opts["matvec"], unknown, captures, False)
    _check_solver(where, "solve", node.opts["solve"], unknown, captures, True)
    if node.opts["transpose_solve"] is not None:
        _check_solver(where, "transpose_solve", node.opts["transpose_solve"], unknown, captures,
                      True)


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


def jax_checkpoint_policy(policy: CheckpointPolicy) -> Callable[..., bool] | None:
    """The ``jax.checkpoint_policies`` policy a ``checkpoint`` node's option names."""
    policies = jax.checkpoint_policies
    if policy is None or isinstance(policy, str):
        return None if policy is None else getattr(policies, policy)
    kind, names = policy
    if kind == "save_only":
        return policies.save_only_these_names(*names)
    return policies.save_any_names_but_these(*names)


def check_checkpoint(node: Node, nodes: list[Node], where: str) -> None:
    """``fun``'s parameters are the inputs (the arguments' leaves, then the captures), its
    outputs the node's outs."""
    check_signature(where, "fun", node.opts["fun"], input_outs(node, nodes),
                    tuple_outs(node, where))


def lower_checkpoint(c: Call) -> Value:
    """``checkpoint`` [args, captures]: ``jax.checkpoint`` of ``fun`` with the node's policy
    and ``prevent_cse``; the tuple of ``fun``'s outputs."""
    fun = subgraph_function(c.node.opts["fun"], c)
    checkpointed = jax.checkpoint(lambda *xs: tuple(fun(*xs)),
                                  policy=jax_checkpoint_policy(c.node.opts["policy"]),
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


def check_reduce_with(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    out = node.tensor
    scalar = TensorOut(out.type, ())
    x, acc = (nodes[i].tensor for i in node.inputs[:2])
    if x.type != out.type or acc != scalar:
        raise GraphError(f"{where}: the tensor and the accumulator (a scalar) must have the out "
                         f"type {out.type}, got {x} and {acc}")
    if node.op == "reduce":
        check_reduction(node, nodes, where)
    else:
        check_window(node, nodes, where)
    expected = [scalar, scalar, *input_outs(node, nodes, 2)]
    check_signature(where, "reducer", node.opts["reducer"], expected, [scalar])


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
    dims, strides, padding, dilations = window_config(c)
    shape = c.out.shape
    padded = lax.pad(x, jnp.reshape(acc, ()), tuple((lo, hi, 0) for lo, hi in padding))
    parts = []
    for offsets in itertools.product(*(range(d) for d in dims)):
        start = tuple(o * d for o, d in zip(offsets, dilations, strict=True))
        limit = tuple(s + (n - 1) * k + 1 for s, n, k in zip(start, shape, strides, strict=True))
        parts.append(lax.slice(padded, start, limit, strides))
    return _fold(c, jnp.stack(parts), acc, captures)


# ops carrying sub-graphs (PROTOCOL.md 4.3), and hooks (4.5)
OPS = family("control_flow", {
    "cond": entry(ANY, lower_cond, {"branches": wire.SUBGRAPHS}, check_cond),
    "while": entry(ANY, lower_while,
                 {"condition": wire.SUBGRAPH, "body": wire.SUBGRAPH,
                  "max_iterations": wire.pos_int_or_nil},
                 check_loop),
    "range_loop": entry(ANY, lower_range_loop,
                      {"body": wire.SUBGRAPH, "first": wire.integer, "step": wire.integer,
                       "count": wire.non_neg_int},
                      check_loop),
    "reduce": entry((2, None), lower_reduce, {"reducer": wire.SUBGRAPH, **wire.REDUCE_OPTS},
                  check_reduce_with),
    "window_reduce": entry((2, None), lower_window_reduce,
                         {"reducer": wire.SUBGRAPH, **wire.WINDOW_OPTS}, check_reduce_with),
    "hook": entry(ANY, lower_hook, {"index": wire.non_neg_int}, check_hook),
    "attach_token": entry((2, None), lower_attach_token, check=check_attach_token),
    # implicit differentiation (4.3): solvers whose gradient comes from what they solve
    "custom_root": entry((1, None), lower_custom_root,
                       {"f": wire.SUBGRAPH, "solve": wire.SUBGRAPH, "tangent_solve": wire.SUBGRAPH},
                       check_custom_root),
    "custom_linear_solve": entry((1, None), lower_custom_linear_solve,
                               {"matvec": wire.SUBGRAPH, "solve": wire.SUBGRAPH,
                                "transpose_solve": wire.SUBGRAPH_OR_NIL, "symmetric": wire.boolean},
                               check_custom_linear_solve),
    "linear_map": entry(1, lower_linear_map, check=check_linear_map),
    # gradient checkpointing (jax.checkpoint): what the backward pass saves, what it recomputes
    "checkpoint": entry((0, None), lower_checkpoint,
                      {"fun": wire.SUBGRAPH, "policy": wire.checkpoint_policy,
                       "prevent_cse": wire.boolean},
                      check_checkpoint),
})
