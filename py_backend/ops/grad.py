"""Differentiation: grad (jax.vjp), stop_grad, custom_grad (jax.custom_vjp), metadata,
checkpoint_name, and JAX's differentiation beyond Nx (NxJax.Autodiff): jvp, jacfwd, jacrev,
hessian, custom_jvp.

Each op's check, lowering and registration (``OPS``, :mod:`py_backend.ops.rules`), with the
machinery that turns part of a graph into a function of the differentiated nodes
(:func:`_as_function`) for JAX's transformations.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.ad_checkpoint import checkpoint_name

from py_backend import wire_graph as wire
from py_backend.lower import Call, Env, Value, conform, subgraph_function
from py_backend.nxtypes import to_dtype
from py_backend.ops.rules import ANY, entry, family
from py_backend.wire_graph import (
    Graph,
    GraphError,
    Node,
    TensorOut,
    TupleOut,
    check_signature,
    check_tensor_out,
    input_outs,
    tuple_outs,
)


def _check_differentiable_x(nodes: list[Node], where: str, x: int, complex_ok: bool) -> None:
    x_out = nodes[x].tensor
    if not (x_out.type.is_float or (complex_ok and x_out.type.is_complex)):
        kinds = "floating or complex" if complex_ok else "floating"
        raise GraphError(f"{where}: x (node {x}) must be {kinds}, got {x_out}")


def lower_stop_grad(c: Call) -> Value:
    return lax.stop_gradient(c.args[0])


def lower_metadata(c: Call) -> Value:
    return c.args[0]


def lower_checkpoint_name(c: Call) -> Value:
    """``checkpoint_name`` [x]: x, named for the policies of the ``checkpoint`` around it."""
    return checkpoint_name(c.args[0], c.node.opts["name"])


def check_grad(node: Node, nodes: list[Node], where: str) -> None:
    y, *xs = node.inputs
    y_out = nodes[y].tensor
    if y_out.shape != () or not (y_out.type.is_float or y_out.type.is_complex):
        raise GraphError(f"{where}: y (node {y}) must be a floating or complex scalar, "
                         f"got {y_out}")
    out = node.out
    if not (isinstance(out, TupleOut) and len(out.elements) == len(xs)):
        raise GraphError(f"{where}: out must be a list with one entry per x ({len(xs)})")
    for x, element in zip(xs, out.elements, strict=True):
        if not (isinstance(element, TensorOut) and element.shape == nodes[x].tensor.shape):
            raise GraphError(f"{where}: the gradient for node {x} must have its shape")


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
    assert isinstance(outs, TupleOut)  # (check_grad checks a grad node's out is one per x)
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


def check_custom_grad(node: Node, nodes: list[Node], where: str) -> None:
    wrt, cotangents, grads = (node.opts[k] for k in ("wrt", "cotangents", "grads"))
    m = len(node.inputs)
    if len(cotangents) != m:
        raise GraphError(f"{where}: needs one cotangent per expression ({m}), got "
                         f"{len(cotangents)}")
    if len(grads) != len(wrt):
        raise GraphError(f"{where}: needs one grad per wrt node ({len(wrt)}), got {len(grads)}")
    for c in cotangents:
        if nodes[c].op != "cotangent":
            raise GraphError(f"{where}: cotangent {c} is a {nodes[c].op} node, not :cotangent")
    for e, c in zip(node.inputs, cotangents, strict=True):
        if nodes[c].tensor.shape != nodes[e].tensor.shape:
            raise GraphError(f"{where}: cotangent {c} must have the shape of expression {e}")
    for ref in (*wrt, *grads):
        if not isinstance(nodes[ref].out, TensorOut):
            raise GraphError(f"{where}: wrt/grads node {ref} is tuple-valued")
    for w, gr in zip(wrt, grads, strict=True):
        if nodes[gr].tensor.shape != nodes[w].tensor.shape:
            raise GraphError(f"{where}: grad {gr} must have the shape of wrt node {w}")
    if node.opts["tuple"]:
        out = node.out
        if not (isinstance(out, TupleOut) and len(out.elements) == m):
            raise GraphError(f"{where}: with tuple: true, out must be a list of {m} outs")
    else:
        if m != 1:
            raise GraphError(f"{where}: with tuple: false, takes exactly 1 input, got {m}")
        check_tensor_out(node, nodes, where)


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


FORWARD_THROUGH_VJP = (
    "forward-mode differentiation (jvp, jacfwd, hessian) reaches a rule that is reverse-mode "
    "only: a custom_grad/3, or the gradient of a while loop without max_iterations (both are "
    "jax.custom_vjp functions, which JAX cannot differentiate forward). Use jacrev or grad, "
    "give the function a forward rule with NxJax.Autodiff.custom_jvp/3, or give the loop "
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
    """The element outs of a tuple-valued node (the decoder checks they are tensors)."""
    out = c.node.out
    assert isinstance(out, TupleOut)
    return [o for o in out.elements if isinstance(o, TensorOut)]


def check_jvp(node: Node, nodes: list[Node], where: str) -> None:
    """``jvp`` [y, x1..xk, t1..tk]: each ti has the out of xi; out has y's shape."""
    check_tensor_out(node, nodes, where)
    if len(node.inputs) % 2 == 0:
        raise GraphError(f"{where}: takes y, then k x nodes and k tangents (an odd number of "
                         f"inputs), got {len(node.inputs)}")
    y, *rest = node.inputs
    k = len(rest) // 2
    for x, t in zip(rest[:k], rest[k:], strict=True):
        _check_differentiable_x(nodes, where, x, complex_ok=True)
        if nodes[t].tensor != nodes[x].tensor:
            raise GraphError(f"{where}: tangent (node {t}) must have the out of x (node {x}), "
                             f"{nodes[x].tensor}, got {nodes[t].tensor}")
    if node.tensor.shape != nodes[y].tensor.shape:
        raise GraphError(f"{where}: out must have the shape of y (node {y}), "
                         f"{list(nodes[y].tensor.shape)}")


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


def check_jacobian(node: Node, nodes: list[Node], where: str) -> None:
    """``jacfwd``/``jacrev`` [y, x1..xk]: out element j has shape y ++ xj; ``hessian``: element
    j * k + l has shape y ++ xj ++ xl. Real floating y and x only. With ``batch: b``, y and
    every x share their first b axes (independent entries), and x's shapes above are without
    them."""
    y, *xs = node.inputs
    y_out = nodes[y].tensor
    if not y_out.type.is_float:
        raise GraphError(f"{where}: y (node {y}) must be floating, got {y_out}")
    for x in xs:
        _check_differentiable_x(nodes, where, x, complex_ok=False)
    b = node.opts.get("batch", 0)
    lead = y_out.shape[:b]
    if len(lead) < b or any(nodes[x].tensor.shape[:b] != lead for x in xs):
        raise GraphError(f"{where}: with batch {b}, y and every x must share their first {b} "
                         f"axes, got y {list(y_out.shape)} and x "
                         f"{[list(nodes[x].tensor.shape) for x in xs]}")
    x_shapes = [nodes[x].tensor.shape[b:] for x in xs]
    if node.op == "hessian":
        want = [(*y_out.shape, *a, *b) for a in x_shapes for b in x_shapes]
    else:
        want = [(*y_out.shape, *a) for a in x_shapes]
    got = [o.shape for o in tuple_outs(node, where)]
    if got != want:
        raise GraphError(f"{where}: out shapes must be {[list(s) for s in want]}, "
                         f"got {[list(s) for s in got]}")


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


def check_custom_jvp(node: Node, nodes: list[Node], where: str) -> None:
    """``custom_jvp`` [e1..em, w1..wk, c1..cn]: out the outs of the e; the jvp rule's
    parameters are one tangent per w (its out), then the captures; it returns one tangent
    per e (its out)."""
    outs = tuple_outs(node, where)
    m, k = len(outs), node.opts["primals"]
    if len(node.inputs) < m + k or k < 1:
        raise GraphError(f"{where}: takes the {m} expressions, then {k} primal inputs (at "
                         f"least 1), then the captures; got {len(node.inputs)} inputs")
    if input_outs(node, nodes)[:m] != outs:
        raise GraphError(f"{where}: out must be the outs of its first {m} inputs")
    tangents = input_outs(node, nodes, m)[:k]
    captures = input_outs(node, nodes, m + k)
    check_signature(where, "jvp", node.opts["jvp"], tangents + captures, outs)


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


UNBOUNDED_WHILE = (
    "a second derivative flows through a while loop whose number of iterations is not known "
    "before it runs (its reverse pass is itself such a loop, which JAX cannot reverse-"
    "differentiate). Give the loop max_iterations: n (a bounded lax.scan) or loop over a range "
    "(while state, i <- 0..n-1)"
)


_BATCH = {"batch": wire.non_neg_int}

OPS = family("grad", {
    "grad": entry((2, None), lower_grad, check=check_grad),
    "stop_grad": entry(1, lower_stop_grad),
    "custom_grad": entry(
        ANY, lower_custom_grad,
        {"wrt": wire.int_list, "cotangents": wire.int_list, "grads": wire.int_list,
         "tuple": wire.boolean},
        check_custom_grad,
    ),
    "metadata": entry(1, lower_metadata, {"keys": wire.atom_list}),
    # a name for the policies of checkpoint (jax.ad_checkpoint.checkpoint_name)
    "checkpoint_name": entry(1, lower_checkpoint_name, {"name": wire.text}),
    # JAX's differentiation beyond Nx (NxJax.Autodiff)
    "jvp": entry((3, None), lower_jvp, check=check_jvp),
    # batch: leading axes of y and every x that are independent entries (vectorized values)
    "jacfwd": entry((2, None), jacobian_lowering(forward=True), _BATCH, check_jacobian,
                  {"batch": 0}),
    "jacrev": entry((2, None), jacobian_lowering(forward=False), _BATCH, check_jacobian,
                  {"batch": 0}),
    "hessian": entry((2, None), lower_hessian, _BATCH, check_jacobian, {"batch": 0}),
    "custom_jvp": entry((2, None), lower_custom_jvp,
                      {"primals": wire.non_neg_int, "jvp": wire.SUBGRAPH}, check_custom_jvp),
})
