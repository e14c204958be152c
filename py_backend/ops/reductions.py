"""Reductions: over axes (sum, product, max, min, mean, all, any, argmax, argmin), running
along an axis (cumulative_*), over sliding windows (window_*), and window scatters.

Each op's check, lowering and registration (``OPS``, :mod:`py_backend.ops.rules`). In numerics
mode ``nx`` sums accumulate in Nx's types (:func:`_accumulator`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from py_backend import complex_math, numerics, nx_rules
from py_backend import wire_graph as wire
from py_backend.lower import Call, Value
from py_backend.ops.elementwise import cast_all, check_integer_op, check_predicate, written_as
from py_backend.ops.rules import entry, family
from py_backend.wire_graph import (
    WINDOW_OPTS,
    GraphError,
    Node,
    check_axes,
    check_tensor_out,
    rank_of,
)


def check_scan(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    check_axes(where, (node.opts["axis"],), rank_of(nodes, node.inputs[0]), "axis")


def check_window(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    rank = rank_of(nodes, node.inputs[0])
    for key in WINDOW_OPTS:
        if key in node.opts and len(node.opts[key]) != rank:
            raise GraphError(f"{where}: {key} must have one entry per axis ({rank})")
    for key in ("window_dimensions", "strides", "window_dilations"):
        if any(x < 1 for x in node.opts.get(key, ())):
            raise GraphError(f"{where}: {key} must be positive integers")


def check_predicate_reduction(node: Node, nodes: list[Node], where: str) -> None:
    check_predicate(node, nodes, where)
    check_reduction(node, nodes, where)


def predicate_reduction_lowering(fn: Callable[..., jax.Array]) -> Callable[[Call], Value]:
    def lower(c: Call) -> Value:
        axes = c.node.opts["axes"]
        x = jnp.asarray(c.args[0]) != 0
        axis = None if axes is None else tuple(axes)
        return fn(x, axis=axis, keepdims=c.node.opts["keep_axes"]).astype(np.uint8)

    return lower


def check_arg_reduction(node: Node, nodes: list[Node], where: str) -> None:
    check_integer_op(node, nodes, where)
    axis = node.opts["axis"]
    if axis is not None:
        check_axes(where, (axis,), rank_of(nodes, node.inputs[0]), "axis")


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
        (x,) = cast_all(c)
        return fn(x, axis=c.node.opts["axis"], reverse=c.node.opts["reverse"])

    return lower


def lower_cumulative_product(c: Call) -> Value:
    """Complex running products never multiply by 1+0i (:mod:`py_backend.complex_math`)."""
    (x,) = cast_all(c)
    if not jnp.iscomplexobj(x):
        return lax.cumprod(x, axis=c.node.opts["axis"], reverse=c.node.opts["reverse"])
    return complex_math.cumulative_product(x, c.node.opts["axis"], c.node.opts["reverse"])


def window_config(c: Call) -> tuple[tuple[int, ...], tuple[int, ...], Any, tuple[int, ...]]:
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
    dims, strides, padding, dilations = window_config(c)
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
        (x,) = cast_all(c)
        dims, strides, padding, dilations = window_config(c)
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
    (x,) = cast_all(c)
    wide = _accumulator(c.dtype)
    times = complex_math.times_skipping_one if jnp.iscomplexobj(x) else lax.mul
    return _window_by_slices(c, x.astype(wide), times, np.array(1, wide)).astype(c.dtype)


def check_window_scatter(node: Node, nodes: list[Node], where: str) -> None:
    check_window(node, nodes, where)
    rank = rank_of(nodes, node.inputs[0])
    if node.tensor.shape != nodes[node.inputs[0]].tensor.shape:
        raise GraphError(f"{where}: out must have the shape of the input tensor")
    if rank_of(nodes, node.inputs[1]) != rank or nodes[node.inputs[2]].tensor.shape != ():
        raise GraphError(f"{where}: source must have the input's rank and init_value must "
                         f"be a scalar")


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
        dims, strides, padding, _ = window_config(c)
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


def _accumulator(dtype: Any) -> np.dtype:
    """The type sums of ``dtype`` values add in: Nx's double in numerics mode nx, ``dtype``
    itself in mode native (:func:`nx_rules.accumulator`)."""
    return nx_rules.accumulator(dtype) if numerics.exact() else np.dtype(dtype)


def check_reduction(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    axes = node.opts["axes"]
    if axes is not None:
        check_axes(where, axes, rank_of(nodes, node.inputs[0]))


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
        return written_as(fn(x, axis=axis, keepdims=c.node.opts["keep_axes"]), c.dtype)

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
        total = written_as(total, c.dtype).astype(wide)  # a float sum is written in its type first
    return written_as(total / np.array(count, wide), c.dtype)


def lower_product(c: Call) -> Value:
    """Multiplied up in :func:`_accumulator`'s type; complex products (on c128 in mode nx)
    never multiply by the identity 1+0i (:mod:`py_backend.complex_math`)."""
    x = jnp.asarray(c.args[0]).astype(c.dtype)
    if not jnp.iscomplexobj(x):
        return reduction_lowering(jnp.prod, accumulates=True)(c)
    return complex_math.product(x, c.node.opts["axes"], c.node.opts["keep_axes"])


OPS = family("reductions", {
    "sum": entry(1, reduction_lowering(jnp.sum, accumulates=True), wire.REDUCE_OPTS,
               check_reduction),
    "product": entry(1, lower_product, wire.REDUCE_OPTS, check_reduction),
    "reduce_max": entry(1, reduction_lowering(jnp.max), wire.REDUCE_OPTS, check_reduction),
    "reduce_min": entry(1, reduction_lowering(jnp.min), wire.REDUCE_OPTS, check_reduction),
    "mean": entry(1, lower_mean, wire.REDUCE_OPTS, check_reduction),
    "all": entry(1, predicate_reduction_lowering(jnp.all), wire.REDUCE_OPTS,
               check_predicate_reduction),
    "any": entry(1, predicate_reduction_lowering(jnp.any), wire.REDUCE_OPTS,
               check_predicate_reduction),
    **{op: entry(1, arg_reduction_lowering(fn),
               {"axis": wire.int_or_nil, "keep_axis": wire.boolean, "tie_break": wire.tie_break},
               check_arg_reduction)
       for op, fn in (("argmax", jnp.argmax), ("argmin", jnp.argmin))},
    # running reductions along an axis
    **{op: entry(1, lower, {"axis": wire.integer, "reverse": wire.boolean}, check_scan)
       for op, lower in (
           ("cumulative_sum", scan_lowering(lax.cumsum)),
           ("cumulative_product", lower_cumulative_product),
           ("cumulative_max", scan_lowering(lax.cummax)),
           ("cumulative_min", scan_lowering(lax.cummin)),
    )},
    # reductions over sliding windows
    **{op: entry(1, lower, wire.WINDOW_OPTS, check_window) for op, lower in (
        ("window_sum", window_lowering(lax.add, lambda d: np.array(0, d))),
        ("window_product", lower_window_product),
        ("window_max", window_lowering(lax.max, lowest)),
        ("window_min", window_lowering(lax.min, highest)),
    )},
    **{op: entry(3, window_scatter_lowering(take),
               {k: wire.WINDOW_OPTS[k] for k in ("window_dimensions", "strides", "padding")},
               check_window_scatter)
       for op, take in (("window_scatter_max", lax.ge), ("window_scatter_min", lax.le))},
})
