"""Indexing and sorting: dynamic slices, gather and the indexed updates, take, sort, argsort,
top_k, and elem (an element of a tuple-valued node).

Out-of-range indices are clamped into range (take, gather, take_along_axis, indexed_*), as
start indices of dynamic_slice/put_slice are; see docs/COMPATIBILITY.md. Each op's check,
lowering and registration (``OPS``, :mod:`py_backend.ops.rules`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from py_backend import wire_graph as wire
from py_backend.lower import Call, Value, as_out, outs_of
from py_backend.ops.rules import ANY, entry, family
from py_backend.wire_graph import (
    GraphError,
    Node,
    TensorOut,
    TupleOut,
    check_axes,
    check_tensor_out,
    rank_of,
)


def _check_integer_input(node: Node, nodes: list[Node], where: str, ref: int, what: str) -> None:
    kind = nodes[ref].tensor.type.kind
    if kind not in ("s", "u"):
        raise GraphError(f"{where}: {what} (node {ref}) must have an integer type")


def _check_start_indices(node: Node, nodes: list[Node], where: str, first: int, rank: int) -> None:
    starts = node.inputs[first:]
    if len(starts) != rank:
        raise GraphError(f"{where}: needs one start index input per axis ({rank}), "
                         f"got {len(starts)}")
    for ref in starts:
        if nodes[ref].tensor.shape != ():
            raise GraphError(f"{where}: start index (node {ref}) must be a scalar")
        _check_integer_input(node, nodes, where, ref, "start index")


def check_elem(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    source = nodes[node.inputs[0]]
    if not isinstance(source.out, TupleOut):
        raise GraphError(f"{where}: input {source.id} ({source.op}) is not tuple-valued")
    index = node.opts["index"]
    if index >= len(source.out.elements):
        raise GraphError(f"{where}: index {index} out of range for a "
                         f"{len(source.out.elements)}-tuple")
    if not isinstance(source.out.elements[index], TensorOut):
        raise GraphError(f"{where}: element {index} is itself a tuple")


def lower_elem(c: Call) -> Value:
    return c.args[0][c.node.opts["index"]]


def _starts(starts: Sequence[Value]) -> list[jax.Array]:
    """Start indices in one integer type (lax requires it). lax clamps them into range as Nx
    does, except that it counts negative indices from the end: Nx clamps those to 0."""
    return [jnp.maximum(jnp.asarray(s).astype(np.int64), 0) for s in starts]


def check_dynamic_slice(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    shape = nodes[node.inputs[0]].tensor.shape
    _check_start_indices(node, nodes, where, 1, len(shape))
    lengths = node.opts["lengths"]
    if len(lengths) != len(shape) or any(
        not 0 <= n <= d for n, d in zip(lengths, shape, strict=True)
    ):
        raise GraphError(f"{where}: lengths {list(lengths)} invalid for shape {shape}")


def lower_dynamic_slice(c: Call) -> Value:
    x, *starts = c.args
    return lax.dynamic_slice(x, _starts(starts), tuple(c.node.opts["lengths"]))


def check_put_slice(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    shape = nodes[node.inputs[0]].tensor.shape
    update = nodes[node.inputs[1]].tensor.shape
    _check_start_indices(node, nodes, where, 2, len(shape))
    if len(update) != len(shape) or any(u > d for u, d in zip(update, shape, strict=True)):
        raise GraphError(f"{where}: slice shape {update} does not fit in {shape}")


def lower_put_slice(c: Call) -> Value:
    x, update, *starts = c.args
    return lax.dynamic_update_slice(
        as_out(c, x), as_out(c, update), _starts(starts)
    )


def _index_tuple(front: jax.Array, indices: jax.Array, axes: Sequence[int]) -> tuple[Any, ...]:
    """The indexing tuple that reads at ``indices[..., j]`` along ``axes[j]`` of ``front`` (a
    tensor whose ``axes`` were moved to the front), each index clamped into range (NumPy
    indexing would count negative indices from the end)."""
    idx = jnp.asarray(indices)
    return tuple(
        jnp.clip(idx[..., j], 0, max(front.shape[j] - 1, 0)) for j in range(len(axes))
    )


def check_indexing(node: Node, nodes: list[Node], where: str) -> None:
    """gather, indexed_add, indexed_put: indices [..., len(axes)] into ``axes``."""
    check_tensor_out(node, nodes, where)
    _check_integer_input(node, nodes, where, node.inputs[1], "indices")
    axes = node.opts["axes"]
    check_axes(where, axes, rank_of(nodes, node.inputs[0]))
    indices = nodes[node.inputs[1]].tensor.shape
    if not indices or indices[-1] != len(axes):
        raise GraphError(f"{where}: the last dimension of indices {indices} must equal the "
                         f"number of axes ({len(axes)})")


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
        front = jnp.moveaxis(as_out(c, x), tuple(axes), front_axes)
        ref = front.at[_index_tuple(front, indices, axes)]
        result = getattr(ref, method)(as_out(c, updates), mode="clip")
        return jnp.moveaxis(result, front_axes, tuple(axes))

    return lower


def check_take(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    _check_integer_input(node, nodes, where, node.inputs[1], "indices")
    rank = rank_of(nodes, node.inputs[0])
    check_axes(where, (node.opts["axis"],), rank, "axis")
    if node.op == "take_along_axis" and rank_of(nodes, node.inputs[1]) != rank:
        raise GraphError(f"{where}: indices must have the rank of the tensor ({rank})")


def lower_take(c: Call) -> Value:
    x, indices = c.args
    return jnp.take(x, jnp.asarray(indices), axis=c.node.opts["axis"], mode="clip")


def lower_take_along_axis(c: Call) -> Value:
    x, indices = c.args
    return jnp.take_along_axis(x, jnp.asarray(indices), axis=c.node.opts["axis"], mode="clip")


def check_sort(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    check_axes(where, (node.opts["axis"],), rank_of(nodes, node.inputs[0]), "axis")


def lower_sort(c: Call) -> Value:
    axis, desc = c.node.opts["axis"], c.node.opts["direction"] == "desc"
    return jnp.sort(c.args[0], axis=axis, stable=True, descending=desc)


def lower_argsort(c: Call) -> Value:
    axis, desc = c.node.opts["axis"], c.node.opts["direction"] == "desc"
    return jnp.argsort(c.args[0], axis=axis, stable=True, descending=desc).astype(c.dtype)


def check_top_k(node: Node, nodes: list[Node], where: str) -> None:
    source, k, out = nodes[node.inputs[0]].tensor, node.opts["k"], node.out
    if not (isinstance(out, TupleOut) and len(out.elements) == 2
            and all(isinstance(e, TensorOut) for e in out.elements)):
        raise GraphError(f"{where}: out must be a list of 2 tensor outs (values, indices)")
    values, indices = out.elements
    assert isinstance(values, TensorOut) and isinstance(indices, TensorOut)
    if not source.shape:
        raise GraphError(f"{where}: the input must have at least one axis (top_k runs along "
                         f"the last one)")
    if source.type.is_complex:
        raise GraphError(f"{where}: the input must be real, got {source.type}")
    if not 1 <= k <= source.shape[-1]:
        raise GraphError(f"{where}: k must be between 1 and the last dimension "
                         f"{source.shape[-1]}, got {k}")
    want = (*source.shape[:-1], k)
    if values.shape != want or indices.shape != want:
        raise GraphError(f"{where}: values and indices must have shape {want}, got "
                         f"{values.shape} and {indices.shape}")
    if values.type != source.type or not indices.type.is_integer:
        raise GraphError(f"{where}: values must have the input's type {source.type} and "
                         f"indices an integer type, got {values.type} and {indices.type}")


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
    return outs_of(c, (values, indices))


OPS = family("indexing", {
    "dynamic_slice": entry(ANY, lower_dynamic_slice, {"lengths": wire.int_list},
                         check_dynamic_slice),
    "put_slice": entry((2, None), lower_put_slice, check=check_put_slice),
    "gather": entry(2, lower_gather, {"axes": wire.int_list}, check_indexing),
    "indexed_add": entry(3, indexed_lowering("add"), {"axes": wire.int_list}, check_indexing),
    "indexed_put": entry(3, indexed_lowering("set"), {"axes": wire.int_list}, check_indexing),
    "take": entry(2, lower_take, {"axis": wire.integer}, check_take),
    "take_along_axis": entry(2, lower_take_along_axis, {"axis": wire.integer}, check_take),
    "sort": entry(1, lower_sort, {"axis": wire.integer, "direction": wire.choice("asc", "desc")},
                check_sort),
    "argsort": entry(1, lower_argsort,
                   {"axis": wire.integer, "direction": wire.choice("asc", "desc")}, check_sort),
    # the k largest along the last axis, tuple-valued: [values, indices]
    "top_k": entry(1, lower_top_k, {"k": wire.integer}, check_top_k),
    "elem": entry(1, lower_elem, {"index": wire.non_neg_int}, check_elem),
})
