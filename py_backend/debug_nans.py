"""``debug_run``: a graph evaluated op by op, outside ``jit``, stopping at the first NaN or
infinity (PROTOCOL.md section 2, ``debug_run``).

Forward: every node is computed on concrete arrays in order, and the first whose value holds
a NaN or an infinity while its inputs hold none is reported (a node inside a loop or branch is
reported as that loop or branch). Backward: a ``grad`` node whose gradients are not finite
while its forward values are is differentiated again op by op, from the output back, and the
first op whose gradient rule turns a finite incoming gradient into a non-finite one is the one
reported. Reports name nodes as ``{node N}``; the Elixir side replaces those with the place in
the defn source that built the node.

Nothing here runs unless asked for: ``run`` and ``call`` never come here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from py_backend.lower import Call, Env, Lowering, NodeReport, conform, dispatch
from py_backend.registry import REGISTRY
from py_backend.wire_graph import Graph, Node

Value = Any


class NonFinite(NodeReport):
    """A NaN or an infinity appeared where the inputs had none (error class ``NonFinite``)."""


def run(graph: Graph, args: Sequence[jax.Array]) -> list[jax.Array]:
    """The graph's outputs, computed op by op (hooks fire as under ``jit``); raises
    :class:`NonFinite` at the first node whose value is not finite while its inputs are."""
    low = Lowering(graph, REGISTRY, dispatch)
    low.check = _check_forward
    return low.function()(*args)


# --- values ----------------------------------------------------------------------------------


def _leaves(value: Value) -> list[Any]:
    return jax.tree_util.tree_leaves(value)


def _bad(value: Value) -> str | None:
    """``"nan"``, ``"inf"`` or ``None`` for a concrete value (``None`` for a traced one, which
    cannot be looked at: it is checked as part of the node that holds it)."""
    for leaf in _leaves(value):
        if isinstance(leaf, jax.core.Tracer):
            return None
        array = np.asarray(leaf)
        if not np.issubdtype(array.dtype, np.inexact):
            continue
        if np.isnan(array).any():
            return "nan"
        if np.isinf(array).any():
            return "inf"
    return None


def summary(value: Value) -> str:
    """A value in a few words: type, shape, and its entries when few, else min and max."""
    parts = []
    for leaf in _leaves(value):
        array = np.asarray(leaf)
        head = f"{array.dtype}{list(array.shape) if array.shape else ''}"
        if array.size <= 6:
            parts.append(f"{head} {np.array2string(array.reshape(-1), separator=', ')}"
                         if array.shape else f"{head} {array.item()!r}")
        elif np.issubdtype(array.dtype, np.inexact):
            finite = array[np.isfinite(array)]
            span = f"min {finite.min()!r}, max {finite.max()!r}" if finite.size else "no finite"
            parts.append(f"{head} ({span}, {int(np.isnan(array).sum())} nan, "
                         f"{int(np.isinf(array).sum())} inf)")
        else:
            parts.append(f"{head} (min {array.min()!r}, max {array.max()!r})")
    return "; ".join(parts)


def _inputs_summary(values: Sequence[Value]) -> str:
    return ", ".join(f"input {i}: {summary(v)}" for i, v in enumerate(values)) or "no inputs"


# --- the forward pass ------------------------------------------------------------------------

_GIVEN = frozenset({"parameter", "constant", "tensor", "iota", "cotangent"})


def _check_forward(low: Lowering, node: Node, args: list[Value], value: Value,
                   env: Env) -> Value:
    if node.op == "grad":
        return _check_grad(low, node, args, value, env)
    if node.op in _GIVEN:
        return value
    bad = _bad(value)
    if bad is not None and all(_bad(a) is None for a in args):
        raise NonFinite(
            f"debug_nans: {bad} first appeared in the forward pass, in the value of "
            f"{node.op} {{node {node.id}}}, computed from finite inputs ({_inputs_summary(args)})"
        )
    return value


# --- the backward pass -----------------------------------------------------------------------


def _check_grad(low: Lowering, node: Node, args: list[Value], value: Value,
                env: Env) -> Value:
    bad = _bad(value)
    if bad is None:
        return value
    y, *xs = node.inputs
    unique = list(dict.fromkeys(xs))
    region = low.dependents(unique)
    # the forward part again, op by op on concrete values (this check runs on it too)
    child = Env({x: env[x] for x in unique}, parent=env, shadow=region, replay=True)
    low.evaluate([y], child)
    if _bad(child[y]) is not None:  # (a forward error of its own would have been raised)
        return value
    culprit = _backward_culprit(low, y, frozenset(unique), region, child)
    if culprit is None:
        return value
    rule, incoming, produced, forward_inputs = culprit
    raise NonFinite(
        f"debug_nans: {produced} first appeared in the backward pass of grad {{node {node.id}}}: "
        f"the gradient rule of {rule.op} {{node {rule.id}}} turned a finite incoming gradient "
        f"({summary(incoming)}) into {produced}; its forward inputs: "
        f"{_inputs_summary(forward_inputs)}. The forward values are finite: consider "
        "custom_grad/3 (or NxJax.Autodiff.custom_jvp/3) to give that expression a gradient that "
        "stays finite there"
    )


def _backward_culprit(low: Lowering, y: int, xs: frozenset[int], region: frozenset[int],
                      env: Env) -> tuple[Node, Value, str, list[Value]] | None:
    """Reverse mode over the nodes between ``xs`` and ``y``, one op's VJP at a time, in
    decreasing id order (every node comes after its inputs); the first op whose rule makes a
    non-finite input gradient from a finite incoming one and finite inputs."""
    cotangents: dict[int, Value] = {y: jnp.ones_like(env[y])}
    for n in sorted((i for i in region if i <= y), reverse=True):
        incoming = cotangents.pop(n, None)
        if incoming is None or n in xs:
            continue
        node = low.nodes[n]
        inputs = [env[i] for i in node.inputs]

        def single(*values: Value, node: Node = node) -> Value:
            return conform(node, low.registry[node.op].lower(Call(node, list(values), env, low)))

        _, pullback = jax.vjp(single, *inputs)
        grads = pullback(incoming)
        for i, g in zip(node.inputs, grads, strict=True):
            if i not in region or not _differentiable(g):
                continue
            produced = _bad(g)
            if produced is not None and _bad(incoming) is None:
                if all(_bad(v) is None for v in inputs):
                    return node, incoming, produced, inputs
            cotangents[i] = g if i not in cotangents else jax.tree_util.tree_map(
                jnp.add, cotangents[i], g)
    return None


def _differentiable(gradient: Value) -> bool:
    return all(np.issubdtype(np.asarray(leaf).dtype, np.inexact)
               for leaf in _leaves(gradient))

