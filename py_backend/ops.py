"""The op registry: every op the worker accepts (PROTOCOL.md section 4), declared by family.

An entry carries all there is to one op: its arity, its options (each with the kind of value it
takes, and the value of an option a version-1 client may leave out), its structural check
(:mod:`py_backend.graph`, run when a graph is decoded) and its lowering (:mod:`py_backend.lower`,
run when it is traced for ``jax.jit``). Adding an op is one entry here, plus its row in
PROTOCOL.md and in the Elixir side's registry (``NxJax.Ops``): tests/test_op_registry.py and
test_elixir/op_registry_test.exs hold the three equal.

    >>> REGISTRY["sum"].family, REGISTRY["sum"].min_arity, sorted(REGISTRY["sum"].opts)
    ('reductions', 1, ['axes', 'keep_axes'])
    >>> REGISTRY["concatenate"].max_arity is None
    True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import jax.numpy as jnp
import numpy as np
from jax import lax

from py_backend import graph as g
from py_backend import lower as lw
from py_backend.graph import Node

Check = Callable[[Node, list[Node], str], None]
Lowering = Callable[[lw.Call], lw.Value]


@dataclass(frozen=True)
class Op:
    name: str
    family: str
    min_arity: int
    max_arity: int | None  # None: no upper bound
    lower: Lowering
    opts: Mapping[str, g.Kind] = field(default_factory=dict)
    check: Check = g.check_tensor_out
    # options a version-1 client may leave out (added to version 1 later), with their values
    defaults: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _Entry:
    arity: int | tuple[int, None]
    lower: Lowering
    opts: Mapping[str, g.Kind] = field(default_factory=dict)
    check: Check = g.check_tensor_out
    defaults: Mapping[str, Any] = field(default_factory=dict)


def _op(arity: int | tuple[int, None], lower: Lowering, opts: Mapping[str, g.Kind] | None = None,
        check: Check = g.check_tensor_out, defaults: Mapping[str, Any] | None = None) -> _Entry:
    return _Entry(arity, lower, opts or {}, check, defaults or {})


def _family(name: str, entries: Mapping[str, _Entry]) -> dict[str, Op]:
    ops = {}
    for op, e in entries.items():
        lo, hi = (e.arity, e.arity) if isinstance(e.arity, int) else e.arity
        ops[op] = Op(op, name, lo, hi, e.lower, e.opts, e.check, e.defaults)
    return ops


_ANY = (1, None)  # one input or more
# the type the inputs are combined in, decided by the Elixir side (Nx.Type.merge/2)
_OPERAND_TYPE = {"operand_type": g.nx_type}
_BATCH = {"batch": g.non_neg_int}
_FOURIER2 = {"axes": g.int_list, "lengths": g.int_list}
_U = lw.UNARY_FNS
_B = lw.BINARY_FNS

LEAVES = _family("leaves", {
    "parameter": _op(0, lw.lower_parameter, {"index": g.non_neg_int}, g.check_parameter),
    "constant": _op(0, lw.lower_constant, {"value": g.number}),
    "tensor": _op(0, lw.lower_tensor, {"data": g.binary}, g.check_tensor),
    "iota": _op(0, lw.lower_iota, {"axis": g.int_or_nil}, g.check_iota),
    "cotangent": _op(0, lw.lower_cotangent),
})

ELEMENTWISE = _family("elementwise", {
    # computed in the out type (inputs cast to it)
    **{op: _op(1, lw.elementwise_lowering(_U[op])) for op in (
        "exp expm1 log log1p sqrt rsqrt sin cos tan tanh sigmoid negate cosh sinh acos asin atan "
        "acosh asinh atanh cbrt erf erfc erf_inv conjugate sign floor ceil round"
    ).split()},
    **{op: _op(1, lw.elementwise_lowering(_U[op]), check=g.check_integer_op)
       for op in "bitwise_not population_count count_leading_zeros".split()},
    **{op: _op(2, lw.elementwise_lowering(_B[op]))
       for op in "add subtract multiply divide pow max min remainder atan2".split()},
    **{op: _op(2, lw.elementwise_lowering(_B[op]), check=g.check_integer_op) for op in (
        "quotient bitwise_and bitwise_or bitwise_xor left_shift right_shift"
    ).split()},
    # computed on the inputs as they are
    **{op: _op(1, lw.real_part_lowering(lw.REAL_PART_FNS[op]),
               check=g.check_real_part if op != "abs" else g.check_tensor_out)
       for op in "abs real imag".split()},
    **{op: _op(1, lw.predicate_lowering(lw.PREDICATE_FNS[op]), check=g.check_predicate)
       for op in "is_nan is_infinity logical_not".split()},
    **{op: _op(2, lw.predicate_lowering(lw.PREDICATE_FNS[op]), check=g.check_predicate)
       for op in "logical_and logical_or logical_xor".split()},
    **{op: _op(2, lw.comparison_lowering(fn), _OPERAND_TYPE, g.check_comparison)
       for op, fn in lw.COMPARISON_FNS.items()},
    "select": _op(3, lw.lower_select),
    "clip": _op(3, lw.lower_clip),
    "as_type": _op(1, lw.lower_as_type),
    "bitcast": _op(1, lw.lower_bitcast, check=g.check_bitcast),
})

REDUCTIONS = _family("reductions", {
    "sum": _op(1, lw.reduction_lowering(jnp.sum, accumulates=True), g.REDUCE_OPTS,
               g.check_reduction),
    "product": _op(1, lw.lower_product, g.REDUCE_OPTS, g.check_reduction),
    "reduce_max": _op(1, lw.reduction_lowering(jnp.max), g.REDUCE_OPTS, g.check_reduction),
    "reduce_min": _op(1, lw.reduction_lowering(jnp.min), g.REDUCE_OPTS, g.check_reduction),
    "mean": _op(1, lw.lower_mean, g.REDUCE_OPTS, g.check_reduction),
    "all": _op(1, lw.predicate_reduction_lowering(jnp.all), g.REDUCE_OPTS,
               g.check_predicate_reduction),
    "any": _op(1, lw.predicate_reduction_lowering(jnp.any), g.REDUCE_OPTS,
               g.check_predicate_reduction),
    **{op: _op(1, lw.arg_reduction_lowering(fn),
               {"axis": g.int_or_nil, "keep_axis": g.boolean, "tie_break": g.tie_break},
               g.check_arg_reduction)
       for op, fn in (("argmax", jnp.argmax), ("argmin", jnp.argmin))},
    # running reductions along an axis
    **{op: _op(1, lower, {"axis": g.integer, "reverse": g.boolean}, g.check_scan)
       for op, lower in (
           ("cumulative_sum", lw.scan_lowering(lax.cumsum)),
           ("cumulative_product", lw.lower_cumulative_product),
           ("cumulative_max", lw.scan_lowering(lax.cummax)),
           ("cumulative_min", lw.scan_lowering(lax.cummin)),
    )},
    # reductions over sliding windows
    **{op: _op(1, lower, g.WINDOW_OPTS, g.check_window) for op, lower in (
        ("window_sum", lw.window_lowering(lax.add, lambda d: np.array(0, d))),
        ("window_product", lw.lower_window_product),
        ("window_max", lw.window_lowering(lax.max, lw.lowest)),
        ("window_min", lw.window_lowering(lax.min, lw.highest)),
    )},
    **{op: _op(3, lw.window_scatter_lowering(take),
               {k: g.WINDOW_OPTS[k] for k in ("window_dimensions", "strides", "padding")},
               g.check_window_scatter)
       for op, take in (("window_scatter_max", lax.ge), ("window_scatter_min", lax.le))},
})

SHAPE = _family("shape", {
    "reshape": _op(1, lw.lower_reshape),
    "transpose": _op(1, lw.lower_transpose, {"axes": g.int_list}, g.check_transpose),
    "broadcast": _op(1, lw.lower_broadcast, {"axes": g.int_list}, g.check_broadcast),
    "slice": _op(1, lw.lower_slice,
                 {"start_indices": g.int_list, "lengths": g.int_list, "strides": g.int_list},
                 g.check_slice),
    "concatenate": _op(_ANY, lw.lower_concatenate, {"axis": g.integer}, g.check_concatenate),
    "pad": _op(2, lw.lower_pad, {"padding_config": g.int_tuples(3)}, g.check_pad),
    "reverse": _op(1, lw.lower_reverse, {"axes": g.int_list}, g.check_reverse),
})

INDEXING = _family("indexing", {
    "dynamic_slice": _op(_ANY, lw.lower_dynamic_slice, {"lengths": g.int_list},
                         g.check_dynamic_slice),
    "put_slice": _op((2, None), lw.lower_put_slice, check=g.check_put_slice),
    "gather": _op(2, lw.lower_gather, {"axes": g.int_list}, g.check_indexing),
    "indexed_add": _op(3, lw.indexed_lowering("add"), {"axes": g.int_list}, g.check_indexing),
    "indexed_put": _op(3, lw.indexed_lowering("set"), {"axes": g.int_list}, g.check_indexing),
    "take": _op(2, lw.lower_take, {"axis": g.integer}, g.check_take),
    "take_along_axis": _op(2, lw.lower_take_along_axis, {"axis": g.integer}, g.check_take),
    "sort": _op(1, lw.lower_sort, {"axis": g.integer, "direction": g.choice("asc", "desc")},
                g.check_sort),
    "argsort": _op(1, lw.lower_argsort,
                   {"axis": g.integer, "direction": g.choice("asc", "desc")}, g.check_sort),
    # the k largest along the last axis, tuple-valued: [values, indices]
    "top_k": _op(1, lw.lower_top_k, {"k": g.integer}, g.check_top_k),
    "elem": _op(1, lw.lower_elem, {"index": g.non_neg_int}, g.check_elem),
})

LINALG = _family("linalg", {
    "dot": _op(2, lw.lower_dot,
               {"contract_axes": g.int_list_pair, "batch_axes": g.int_list_pair}, g.check_dot),
    "conv": _op(2, lw.lower_conv, g.CONV_OPTS, g.check_conv),
    "triangular_solve": _op(
        2, lw.lower_triangular_solve,
        {"lower": g.boolean, "left_side": g.boolean,
         "transform_a": g.choice("none", "transpose")},
        g.check_linalg,
    ),
    "solve": _op(2, lw.lower_solve, check=g.check_linalg),
    "cholesky": _op(1, lw.lower_cholesky, check=g.check_linalg),
    "determinant": _op(1, lw.lower_determinant, check=g.check_linalg),
    "qr": _op(1, lw.lower_qr, {"mode": g.choice("reduced", "complete")}, g.check_linalg_tuple),
    "lu": _op(1, lw.lower_lu, check=g.check_linalg_tuple),
    # (max_iter was added to version 1: absent, Nx.LinAlg.svd's default)
    "svd": _op(1, lw.lower_svd, {"full_matrices": g.boolean, "max_iter": g.non_neg_int},
               g.check_linalg_tuple, defaults={"max_iter": 100}),
    # (eps and max_iter were added to version 1: absent, Nx.LinAlg.eigh's defaults)
    "eigh": _op(1, lw.lower_eigh, {"eps": g.real, "max_iter": g.non_neg_int},
                g.check_linalg_tuple, defaults={"eps": 1.0e-4, "max_iter": 1000}),
    # along the last axis
    "fft": _op(1, lw.fourier_lowering(jnp.fft.fft), {"length": g.integer}, g.check_fourier),
    "ifft": _op(1, lw.fourier_lowering(jnp.fft.ifft), {"length": g.integer}, g.check_fourier),
    # over two axes (Nx.fft2/ifft2)
    "fft2": _op(1, lw.fourier2_lowering(jnp.fft.fft2), _FOURIER2, g.check_fourier2),
    "ifft2": _op(1, lw.fourier2_lowering(jnp.fft.ifft2), _FOURIER2, g.check_fourier2),
})

GRAD = _family("grad", {
    "grad": _op((2, None), lw.lower_grad, check=g.check_grad),
    "stop_grad": _op(1, lw.lower_stop_grad),
    "custom_grad": _op(
        _ANY, lw.lower_custom_grad,
        {"wrt": g.int_list, "cotangents": g.int_list, "grads": g.int_list, "tuple": g.boolean},
        g.check_custom_grad,
    ),
    "metadata": _op(1, lw.lower_metadata, {"keys": g.atom_list}),
    # a name for the policies of checkpoint (jax.ad_checkpoint.checkpoint_name)
    "checkpoint_name": _op(1, lw.lower_checkpoint_name, {"name": g.text}),
    # JAX's differentiation beyond Nx (NxJax.Defn)
    "jvp": _op((3, None), lw.lower_jvp, check=g.check_jvp),
    # batch: leading axes of y and every x that are independent entries (vectorized values)
    "jacfwd": _op((2, None), lw.jacobian_lowering(forward=True), _BATCH, g.check_jacobian,
                  {"batch": 0}),
    "jacrev": _op((2, None), lw.jacobian_lowering(forward=False), _BATCH, g.check_jacobian,
                  {"batch": 0}),
    "hessian": _op((2, None), lw.lower_hessian, _BATCH, g.check_jacobian, {"batch": 0}),
    "custom_jvp": _op((2, None), lw.lower_custom_jvp,
                      {"primals": g.non_neg_int, "jvp": g.SUBGRAPH}, g.check_custom_jvp),
})

# ops carrying sub-graphs (PROTOCOL.md 4.3), and hooks (4.5)
CONTROL_FLOW = _family("control_flow", {
    "cond": _op(_ANY, lw.lower_cond, {"branches": g.SUBGRAPHS}, g.check_cond),
    "while": _op(_ANY, lw.lower_while,
                 {"condition": g.SUBGRAPH, "body": g.SUBGRAPH,
                  "max_iterations": g.pos_int_or_nil},
                 g.check_loop),
    "range_loop": _op(_ANY, lw.lower_range_loop,
                      {"body": g.SUBGRAPH, "first": g.integer, "step": g.integer,
                       "count": g.non_neg_int},
                      g.check_loop),
    "reduce": _op((2, None), lw.lower_reduce, {"reducer": g.SUBGRAPH, **g.REDUCE_OPTS},
                  g.check_reduce_with),
    "window_reduce": _op((2, None), lw.lower_window_reduce,
                         {"reducer": g.SUBGRAPH, **g.WINDOW_OPTS}, g.check_reduce_with),
    "hook": _op(_ANY, lw.lower_hook, {"index": g.non_neg_int}, g.check_hook),
    "attach_token": _op((2, None), lw.lower_attach_token, check=g.check_attach_token),
    # implicit differentiation (4.3): solvers whose gradient comes from what they solve
    "custom_root": _op((1, None), lw.lower_custom_root,
                       {"f": g.SUBGRAPH, "solve": g.SUBGRAPH, "tangent_solve": g.SUBGRAPH},
                       g.check_custom_root),
    "custom_linear_solve": _op((1, None), lw.lower_custom_linear_solve,
                               {"matvec": g.SUBGRAPH, "solve": g.SUBGRAPH,
                                "transpose_solve": g.SUBGRAPH_OR_NIL, "symmetric": g.boolean},
                               g.check_custom_linear_solve),
    "linear_map": _op(1, lw.lower_linear_map, check=g.check_linear_map),
    # gradient checkpointing (jax.checkpoint): what the backward pass saves, what it recomputes
    "checkpoint": _op((0, None), lw.lower_checkpoint,
                      {"fun": g.SUBGRAPH, "policy": g.checkpoint_policy,
                       "prevent_cse": g.boolean},
                      g.check_checkpoint),
})

FAMILIES: Mapping[str, Mapping[str, Op]] = {
    f[next(iter(f))].family: f
    for f in (LEAVES, ELEMENTWISE, REDUCTIONS, SHAPE, INDEXING, LINALG, GRAD, CONTROL_FLOW)
}

REGISTRY: Mapping[str, Op] = {name: op for f in FAMILIES.values() for name, op in f.items()}
assert len(REGISTRY) == sum(map(len, FAMILIES.values())), "an op declared in two families"


def listing() -> dict[str, dict[str, list[Any]]]:
    """Family -> op -> ``[min_arity, max_arity or None, sorted option names]``: the registry
    as plain data, for comparing with the Elixir side's (``NxJax.Ops``) and PROTOCOL.md."""
    return {
        family: {
            name: [op.min_arity, op.max_arity, sorted(op.opts)] for name, op in ops.items()
        }
        for family, ops in FAMILIES.items()
    }
