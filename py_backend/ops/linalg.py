"""Linear algebra and Fourier transforms: dot, conv, the solvers and decompositions
(triangular_solve, solve, cholesky, determinant, qr, lu, svd, eigh), fft/ifft and fft2/ifft2.

Each op's check, lowering and registration (``OPS``, :mod:`py_backend.ops.rules`). qr and lu
compute Nx 0.7.2's own algorithms (its values, not LAPACK's), and so do svd and eigh in
numerics mode ``nx``; cholesky is differentiated by Nx's rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from py_backend import numerics
from py_backend import wire_graph as wire
from py_backend.lower import Call, Value, as_out, outs_of
from py_backend.nxtypes import to_dtype
from py_backend.ops.rules import entry, family
from py_backend.wire_graph import (
    GraphError,
    Node,
    TensorOut,
    TupleOut,
    check_axes,
    check_tensor_out,
    rank_of,
)


def _check_matrix(node: Node, nodes: list[Node], where: str, square: bool = True) -> None:
    shape = nodes[node.inputs[0]].tensor.shape
    if len(shape) < 2 or (square and shape[-1] != shape[-2]):
        kind = "square matrix" if square else "matrix"
        raise GraphError(f"{where}: input (node {node.inputs[0]}) must be a {kind} (or a batch "
                         f"of them), got shape {shape}")


def check_dot(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    left, right = (rank_of(nodes, i) for i in node.inputs)
    for key in ("contract_axes", "batch_axes"):
        lhs, rhs = node.opts[key]
        if len(lhs) != len(rhs):
            raise GraphError(f"{where}: {key} lists must have the same length")
        check_axes(where, lhs, left, key)
        check_axes(where, rhs, right, key)


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


def check_conv(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    rank = rank_of(nodes, node.inputs[0])
    if rank < 3 or rank_of(nodes, node.inputs[1]) != rank:
        raise GraphError(f"{where}: input and kernel must have the same rank, at least 3")
    spatial = rank - 2
    for key in ("strides", "padding", "input_dilation", "kernel_dilation"):
        if len(node.opts[key]) != spatial:
            raise GraphError(f"{where}: {key} must have one entry per spatial axis ({spatial})")
    for key in ("strides", "input_dilation", "kernel_dilation"):
        if any(v < 1 for v in node.opts[key]):
            raise GraphError(f"{where}: {key} must be positive")
    for key in ("input_permutation", "kernel_permutation", "output_permutation"):
        if sorted(node.opts[key]) != list(range(rank)):
            raise GraphError(f"{where}: {key} must be a permutation of 0..{rank - 1}")
    if node.opts["feature_group_size"] < 1 or node.opts["batch_group_size"] < 1:
        raise GraphError(f"{where}: group sizes must be positive")


def lower_conv(c: Call) -> Value:
    """``lax.conv_general_dilated`` on inputs permuted to (batch, feature, spatial...) and
    kernels to (out feature, in feature, spatial...). ``output_permutation`` describes the
    result's layout as ``input_permutation`` describes the input's (Nx's meaning): the
    canonical result is transposed by its inverse."""
    o = c.node.opts
    x, k = (as_out(c, a) for a in c.args)
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


def check_linalg(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    _check_matrix(node, nodes, where)


def lower_triangular_solve(c: Call) -> Value:
    a, b = (_single(as_out(c, x)) for x in c.args)
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
    a, b = (_single(as_out(c, x)) for x in c.args)
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
    return _cholesky(_single(as_out(c, c.args[0]))).astype(c.dtype)


def lower_determinant(c: Call) -> Value:
    return jnp.linalg.det(_single(as_out(c, c.args[0]))).astype(c.dtype)


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


def check_linalg_tuple(node: Node, nodes: list[Node], where: str) -> None:
    want = {"qr": 2, "lu": 3, "svd": 3, "eigh": 2}[node.op]
    out = node.out
    if not (isinstance(out, TupleOut) and len(out.elements) == want
            and all(isinstance(e, TensorOut) for e in out.elements)):
        raise GraphError(f"{where}: out must be a list of {want} tensor outs")
    _check_matrix(node, nodes, where, square=node.op in ("lu", "eigh"))


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
        return outs_of(c, (q, r))
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
    return outs_of(c, (nq + (q - lax.stop_gradient(q)), nr + (r - lax.stop_gradient(r))))


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
    return outs_of(c, lu(a.astype(wide)))


def lower_svd(c: Call) -> Value:
    """``[u, s, vt]`` of each real matrix. In numerics mode ``nx`` the values of Nx 0.7.2's
    own algorithm (:func:`_nx_svd_matrix`, batches mapped over), with the gradient of
    LAPACK's decomposition, each singular pair turned to the signs of the one returned; in
    mode ``native`` LAPACK's."""
    a = _float_input(c)
    full = bool(c.node.opts["full_matrices"])
    u, s, vt = jnp.linalg.svd(a, full_matrices=full)
    if not numerics.exact():
        return outs_of(c, (u, s, vt))
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
    return outs_of(
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


def check_fourier(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    source, out, n = nodes[node.inputs[0]].tensor, node.tensor, node.opts["length"]
    if not out.type.is_complex:
        raise GraphError(f"{where}: out type must be complex ({{:c, 64}} or {{:c, 128}}), "
                         f"got {out.type}")
    if not source.shape:
        raise GraphError(f"{where}: the input must have at least one axis (the transform runs "
                         f"along the last one)")
    if n < 1:
        raise GraphError(f"{where}: length must be a positive integer, got {n}")
    if out.shape != (*source.shape[:-1], n):
        raise GraphError(f"{where}: out shape must be the input shape {source.shape} with the "
                         f"last axis replaced by length {n}, got {out.shape}")


def fourier_lowering(fn: Callable[..., jax.Array]) -> Callable[[Call], Value]:
    """``fn`` (``jnp.fft.fft``/``ifft``) along the last axis of the input cast to the complex
    ``out`` type; ``n = length`` pads the axis with zeros or truncates it."""

    def lower(c: Call) -> Value:
        return fn(as_out(c, c.args[0]), n=c.node.opts["length"], axis=-1)

    return lower


def check_fourier2(node: Node, nodes: list[Node], where: str) -> None:
    check_tensor_out(node, nodes, where)
    source, out = nodes[node.inputs[0]].tensor, node.tensor
    axes, lengths = node.opts["axes"], node.opts["lengths"]
    if not out.type.is_complex:
        raise GraphError(f"{where}: out type must be complex ({{:c, 64}} or {{:c, 128}}), "
                         f"got {out.type}")
    if len(axes) != 2 or len(lengths) != 2:
        raise GraphError(f"{where}: axes and lengths must each have two entries, got axes "
                         f"{list(axes)} and lengths {list(lengths)}")
    check_axes(where, axes, len(source.shape), "axes")
    if any(n < 1 for n in lengths):
        raise GraphError(f"{where}: lengths must be positive integers, got {list(lengths)}")
    want = list(source.shape)
    for axis, n in zip(axes, lengths, strict=True):
        want[axis] = n
    if out.shape != tuple(want):
        raise GraphError(f"{where}: out shape must be the input shape {source.shape} with axes "
                         f"{list(axes)} replaced by lengths {list(lengths)}, got {out.shape}")


def fourier2_lowering(fn: Callable[..., jax.Array]) -> Callable[[Call], Value]:
    """``fn`` (``jnp.fft.fft2``/``ifft2``) over ``axes`` of the input cast to the complex
    ``out`` type; ``s = lengths`` pads each axis with zeros or truncates it."""

    def lower(c: Call) -> Value:
        o = c.node.opts
        return fn(as_out(c, c.args[0]), s=tuple(o["lengths"]), axes=tuple(o["axes"]))

    return lower


_FOURIER2 = {"axes": wire.int_list, "lengths": wire.int_list}

OPS = family("linalg", {
    "dot": entry(2, lower_dot,
               {"contract_axes": wire.int_list_pair, "batch_axes": wire.int_list_pair}, check_dot),
    "conv": entry(2, lower_conv, wire.CONV_OPTS, check_conv),
    "triangular_solve": entry(
        2, lower_triangular_solve,
        {"lower": wire.boolean, "left_side": wire.boolean,
         "transform_a": wire.choice("none", "transpose")},
        check_linalg,
    ),
    "solve": entry(2, lower_solve, check=check_linalg),
    "cholesky": entry(1, lower_cholesky, check=check_linalg),
    "determinant": entry(1, lower_determinant, check=check_linalg),
    "qr": entry(1, lower_qr, {"mode": wire.choice("reduced", "complete")}, check_linalg_tuple),
    "lu": entry(1, lower_lu, check=check_linalg_tuple),
    # (max_iter was added to version 1: absent, Nx.LinAlg.svd's default)
    "svd": entry(1, lower_svd, {"full_matrices": wire.boolean, "max_iter": wire.non_neg_int},
               check_linalg_tuple, defaults={"max_iter": 100}),
    # (eps and max_iter were added to version 1: absent, Nx.LinAlg.eigh's defaults)
    "eigh": entry(1, lower_eigh, {"eps": wire.real, "max_iter": wire.non_neg_int},
                check_linalg_tuple, defaults={"eps": 1.0e-4, "max_iter": 1000}),
    # along the last axis
    "fft": entry(1, fourier_lowering(jnp.fft.fft), {"length": wire.integer}, check_fourier),
    "ifft": entry(1, fourier_lowering(jnp.fft.ifft), {"length": wire.integer}, check_fourier),
    # over two axes (Nx.fft2/ifft2)
    "fft2": entry(1, fourier2_lowering(jnp.fft.fft2), _FOURIER2, check_fourier2),
    "ifft2": entry(1, fourier2_lowering(jnp.fft.ifft2), _FOURIER2, check_fourier2),
})
