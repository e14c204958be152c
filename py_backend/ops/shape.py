"""Shape ops: reshape, transpose, broadcast, slice, concatenate, pad, reverse.

Each op's check, lowering and registration (``OPS``, :mod:`py_backend.ops.rules`).
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from py_backend import wire_graph as wire
from py_backend.lower import Call, Value, as_out
from py_backend.ops.rules import ANY, entry, family
from py_backend.wire_graph import GraphError, Node, check_axes, check_tensor_out, rank_of


def lower_reshape(c: Call) -> Value:
    return jnp.reshape(c.args[0], c.out.shape)


def check_transpose(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    rank = rank_of(nodes, node.inputs[0])
    if sorted(node.opts["axes"]) != list(range(rank)):
        raise GraphError(f"{where}: axes {list(node.opts['axes'])} is not a permutation of "
                         f"0..{rank - 1}")


def lower_transpose(c: Call) -> Value:
    return jnp.transpose(c.args[0], c.node.opts["axes"])


def check_broadcast(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    axes = node.opts["axes"]
    if len(axes) != rank_of(nodes, node.inputs[0]):
        raise GraphError(f"{where}: axes must have one entry per input axis")
    check_axes(where, axes, len(node.tensor.shape))


def lower_broadcast(c: Call) -> Value:
    return lax.broadcast_in_dim(c.args[0], c.out.shape, tuple(c.node.opts["axes"]))


def check_slice(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    rank = rank_of(nodes, node.inputs[0])
    for key in ("start_indices", "lengths", "strides"):
        if len(node.opts[key]) != rank:
            raise GraphError(f"{where}: {key} must have {rank} entries")
    if any(s <= 0 for s in node.opts["strides"]):
        raise GraphError(f"{where}: strides must be positive")


def lower_slice(c: Call) -> Value:
    start, lengths, strides = (c.node.opts[k] for k in ("start_indices", "lengths", "strides"))
    limit = tuple(s + n for s, n in zip(start, lengths, strict=True))
    return lax.slice(c.args[0], tuple(start), limit, tuple(strides))


def check_concatenate(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    check_axes(where, (node.opts["axis"],), len(node.tensor.shape), "axis")


def lower_concatenate(c: Call) -> Value:
    return jnp.concatenate([jnp.asarray(a).astype(c.dtype) for a in c.args], c.node.opts["axis"])


def check_pad(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    shape = nodes[node.inputs[0]].tensor.shape
    config = node.opts["padding_config"]
    if len(config) != len(shape):
        raise GraphError(f"{where}: padding_config must have one entry per axis ({len(shape)})")
    if nodes[node.inputs[1]].tensor.shape != ():
        raise GraphError(f"{where}: the pad value (node {node.inputs[1]}) must be a scalar")
    if any(interior < 0 for _, _, interior in config):
        raise GraphError(f"{where}: interior padding must be non-negative")


def lower_pad(c: Call) -> Value:
    x, value = (as_out(c, a) for a in c.args)
    return lax.pad(x, value, tuple(tuple(t) for t in c.node.opts["padding_config"]))


def check_reverse(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    check_axes(where, node.opts["axes"], rank_of(nodes, node.inputs[0]))


def lower_reverse(c: Call) -> Value:
    return lax.rev(c.args[0], tuple(c.node.opts["axes"]))


OPS = family("shape", {
    "reshape": entry(1, lower_reshape),
    "transpose": entry(1, lower_transpose, {"axes": wire.int_list}, check_transpose),
    "broadcast": entry(1, lower_broadcast, {"axes": wire.int_list}, check_broadcast),
    "slice": entry(1, lower_slice,
                   {"start_indices": wire.int_list, "lengths": wire.int_list,
                    "strides": wire.int_list},
                   check_slice),
    "concatenate": entry(ANY, lower_concatenate, {"axis": wire.integer}, check_concatenate),
    "pad": entry(2, lower_pad, {"padding_config": wire.int_tuples(3)}, check_pad),
    "reverse": entry(1, lower_reverse, {"axes": wire.int_list}, check_reverse),
})
