"""Leaves: the ops with no inputs (parameters, constants, literal tensors, iota, cotangents).

Each op's check, lowering and registration (``OPS``, :mod:`py_backend.ops.rules`).
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
from jax import lax

from py_backend import wire_graph as wire
from py_backend.lower import ArgumentError, Call, Value
from py_backend.nxtypes import to_dtype, wire_dtype
from py_backend.ops.rules import entry, family
from py_backend.wire_graph import GraphError, Node, check_axes, check_tensor_out


def check_parameter(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)


def lower_parameter(c: Call) -> Value:
    index = c.node.opts["index"]
    args = c.lowering.args
    if index >= len(args):
        raise ArgumentError(f"node {c.node.id} (parameter): argument {index} was not given "
                            f"({len(args)} arguments)")
    return args[index]


def lower_constant(c: Call) -> Value:
    return jnp.full(c.out.shape, c.node.opts["value"], dtype=c.dtype)


def check_tensor(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    out = node.tensor
    want = out.size * to_dtype(out.type).itemsize
    if len(node.opts["data"]) != want:
        raise GraphError(
            f"{where}: data has {len(node.opts['data'])} bytes, {out} needs {want}"
        )


def lower_tensor(c: Call) -> Value:
    data = np.frombuffer(c.node.opts["data"], dtype=wire_dtype(c.out.type))
    return jnp.asarray(data.reshape(c.out.shape).astype(c.dtype))


def check_iota(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    axis = node.opts["axis"]
    if axis is not None:
        check_axes(where, (axis,), len(node.tensor.shape), "axis")


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


OPS = family("leaves", {
    "parameter": entry(0, lower_parameter, {"index": wire.non_neg_int}, check_parameter),
    "constant": entry(0, lower_constant, {"value": wire.number}),
    "tensor": entry(0, lower_tensor, {"data": wire.binary}, check_tensor),
    "iota": entry(0, lower_iota, {"axis": wire.int_or_nil}, check_iota),
    "cotangent": entry(0, lower_cotangent),
})
