"""Nx.LinAlg: triangular_solve, solve, invert, cholesky, determinant (one tensor each) and the
tuple-valued decompositions qr, lu, svd, eigh (one tuple-valued node, read with :elem).

Integer inputs give f32; leading axes are a batch. References are NumPy float64: solves via
np.linalg.solve, the LU factorization by Nx 0.7.2's scheme written out here: the rows are
ordered first, column after column, by the largest magnitude among the rows left of the matrix
as given (no elimination in between), then eliminated without pivoting; so p, l and u are
compared directly (the matrices here have no ties among pivot candidates). QR is
unique only up to signs: both runners bring q and r to diag(r) >= 0, the canonical form of
conformance/case.py CANONICAL, the references are given in that form; complete matrices only
where the extra columns are determined (square or wide inputs). svd and eigh give the values
of Nx 0.7.2's own algorithms, with their order and signs: they are compared as they come,
with the values real Nx printed.
"""

from typing import Any, Literal

import numpy as np

from conformance.case import Case, case, tensor, wire

TOL32 = (2e-5, 2e-6)  # f32 linear algebra: a few ulps times the condition number
TOL64_NX = (1e-4, 1e-4)  # f64 svd against real Nx's (test_elixir/nx_svd_test.exs)


def _batched(fn: Any) -> Any:
    """Apply a function of matrices over leading batch axes (tuples of results too)."""

    def ref(a: Any, *rest: Any) -> Any:
        if a.ndim == 2:
            return fn(a, *rest)
        outs = [ref(a[i], *[r[i] for r in rest]) for i in range(a.shape[0])]
        if isinstance(outs[0], tuple):
            return tuple(np.stack(parts) for parts in zip(*outs, strict=True))
        return np.stack(outs)

    return ref


def _triangular(lower: bool, left_side: bool, transpose: bool) -> Any:
    def ref(a: Any, b: Any) -> Any:
        t = np.tril(a) if lower else np.triu(a)
        t = t.T if transpose else t
        if left_side:
            return np.linalg.solve(t, b)
        return np.linalg.solve(t.T, b.T).T  # x t = b

    return _batched(ref)


def _lu(a: Any) -> tuple[Any, Any, Any]:
    """p, l, u with p . l . u = a, as Nx 0.7.2 pivots: rows ordered up front, then Gaussian
    elimination without row exchanges."""
    n = a.shape[0]
    u = a.astype(np.float64).copy()
    perm = list(range(n))
    for k in range(n - 1):
        pivot = k + int(np.argmax(np.abs(u[k:, k])))
        u[[k, pivot], :] = u[[pivot, k], :]
        perm[k], perm[pivot] = perm[pivot], perm[k]
    l_ = np.eye(n)
    for k in range(n - 1):
        for i in range(k + 1, n):
            l_[i, k] = u[i, k] / u[k, k]
            u[i, :] -= l_[i, k] * u[k, :]
            u[i, k] = 0.0
    rows = np.eye(n, dtype=np.int64)[perm]  # rows . a = l . u
    return rows.T, l_, u


def _signs(d: Any) -> Any:
    return np.where(d < 0, -1.0, 1.0)


def _qr(mode: Literal["reduced", "complete"]) -> Any:
    def ref(a: Any) -> Any:
        q, r = np.linalg.qr(a, mode=mode)
        k = min(a.shape)
        d = _signs(np.diagonal(r)[:k])
        q[:, :k] *= d
        r[:k, :] *= d[:, None]
        return q, r

    return _batched(ref)


L3 = [[2.0, 0.0, 0.0], [1.0, -3.0, 0.0], [0.5, 2.0, 4.0]]
U3 = [[2.0, 1.0, -1.0], [0.0, 3.0, 0.5], [0.0, 0.0, 1.5]]
A3 = [[4.0, 1.0, -2.0], [1.0, 3.0, 0.5], [2.0, -1.0, 5.0]]  # well conditioned, not symmetric
SPD = [[4.0, 2.0, 0.4], [2.0, 5.0, 1.0], [0.4, 1.0, 3.0]]
SYM = [[-4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, -2.0]]  # indefinite, distinct |eigenvalues|
B3 = [1.0, -2.0, 0.5]
B32 = [[1.0, 0.0], [-2.0, 1.5], [0.5, 3.0]]

TRI = {"lower": True, "left_side": True, "transform_a": "none"}


def _tri(**opts: Any) -> Any:
    return wire("triangular_solve", **{**TRI, **opts})


CASES: list[Case] = [
    # triangular_solve
    case("triangular_solve", [tensor("f32", L3), tensor("f32", B3)], out="f32",
         ref=_triangular(True, True, False), node=_tri(), module="Nx.LinAlg", tol=TOL32,
         grad=True),
    case("triangular_solve", [tensor("f64", U3), tensor("f64", B32)],
         {"lower": False, "transform_a": "transpose"}, out="f64",
         ref=_triangular(False, True, True), node=_tri(lower=False, transform_a="transpose"),
         module="Nx.LinAlg", grad=True),
    case("triangular_solve", [tensor("f64", L3), tensor("f64", [[1.0, 2.0, 3.0]])],
         {"left_side": False}, out="f64", ref=_triangular(True, False, False),
         node=_tri(left_side=False), module="Nx.LinAlg"),
    case("triangular_solve", [tensor("s64", [[3, 0], [2, 1]]), tensor("s64", [6, 5])],
         out="f32", expected=[2.0, 1.0], node=_tri(), module="Nx.LinAlg",
         source="Nx.LinAlg.triangular_solve docs (as integers)"),
    case("triangular_solve", [tensor("f32", [L3, np.tril(A3).tolist()], (2, 3, 3)),
                              tensor("f32", [B3, B32[0] + [1.0]])], {"lower": True},
         out="f32", ref=_triangular(True, True, False), node=_tri(), module="Nx.LinAlg",
         tol=TOL32),
    # solve
    case("solve", [tensor("f32", A3), tensor("f32", B3)], out="f32",
         ref=_batched(np.linalg.solve), node=wire("solve"), module="Nx.LinAlg", tol=TOL32,
         grad=True),
    case("solve", [tensor("f64", A3), tensor("f64", B32)], out="f64",
         ref=_batched(np.linalg.solve), node=wire("solve"), module="Nx.LinAlg", grad=True),
    case("solve", [tensor("s64", [[1, 3], [2, 1]]), tensor("s64", [5, 5])], out="f32",
         expected=[2.0, 1.0], node=wire("solve"), module="Nx.LinAlg",
         source="Nx.LinAlg.solve docs (as integers)"),
    case("solve", [tensor("f64", [A3, SPD], (2, 3, 3)), tensor("f32", [B3, B3])], out="f64",
         ref=_batched(np.linalg.solve), node=wire("solve"), module="Nx.LinAlg"),
    # invert (Nx composes it: solve against the identity)
    case("invert", [tensor("f32", A3)], out="f32", ref=np.linalg.inv, node=None,
         module="Nx.LinAlg", tol=TOL32, grad=True),
    case("invert", [tensor("f64", [SPD, A3], (2, 3, 3))], out="f64",
         ref=_batched(np.linalg.inv), node=None, module="Nx.LinAlg", grad=True),
    case("invert", [tensor("s64", [[2, 0], [0, 4]])], out="f32",
         expected=[[0.5, 0.0], [0.0, 0.25]], node=None, module="Nx.LinAlg",
         source="Nx.LinAlg.invert docs (as integers)"),
    # cholesky (symmetric positive-definite inputs)
    case("cholesky", [tensor("f32", SPD)], out="f32", ref=np.linalg.cholesky,
         node=wire("cholesky"), module="Nx.LinAlg", tol=TOL32),
    # (no entry-by-entry gradient check: Nx's cholesky reads the lower triangle, but its
    # gradient, which nx_jax gives, is the derivative along symmetric directions only; the
    # symmetric check is in test_elixir/nx_linalg_test.exs)
    case("cholesky", [tensor("f64", SPD)], out="f64", ref=np.linalg.cholesky,
         node=wire("cholesky"), module="Nx.LinAlg"),
    case("cholesky", [tensor("s64", [[[4, 2], [2, 5]], [[9, 3], [3, 2]]])], out="f32",
         ref=_batched(np.linalg.cholesky), node=wire("cholesky"), module="Nx.LinAlg",
         tol=TOL32),
    # determinant
    case("determinant", [tensor("f32", A3)], out="f32", ref=np.linalg.det,
         node=wire("determinant"), module="Nx.LinAlg", tol=TOL32),
    case("determinant", [tensor("f64", [A3, SPD, L3], (3, 3, 3))], out="f64",
         ref=np.linalg.det, node=wire("determinant"), module="Nx.LinAlg", tol=(1e-12, 1e-12),
         grad=True),
    case("determinant", [tensor("s64", [[[2, 0], [0, 3]], [[1, 2], [2, 4]]])], out="f32",
         expected=[6.0, 0.0], node=wire("determinant"), module="Nx.LinAlg", tol=TOL32,
         source="Nx.LinAlg.determinant docs"),
    # qr: canonical form diag(r) >= 0
    case("qr", [tensor("f32", [[3.0, 0.0], [4.0, 5.0], [0.0, 1.0]])], out=("f32", "f32"),
         ref=_qr("reduced"), node=wire("qr", mode="reduced"), module="Nx.LinAlg",
         canonical="qr", tol=TOL32),
    case("qr", [tensor("f64", [[2.0, -1.0, 0.5], [1.0, 3.0, 2.0]])], {"mode": "complete"},
         out=("f64", "f64"), ref=_qr("complete"), node=wire("qr", mode="complete"),
         module="Nx.LinAlg", canonical="qr", grad=True),
    case("qr", [tensor("f64", [A3, SPD], (2, 3, 3))], out=("f64", "f64"), ref=_qr("reduced"),
         node=wire("qr", mode="reduced"), module="Nx.LinAlg", canonical="qr", grad=True),
    case("qr", [tensor("s64", [[1, 2], [3, 4]])], out=("f32", "f32"), ref=_qr("reduced"),
         node=wire("qr", mode="reduced"), module="Nx.LinAlg", canonical="qr", tol=TOL32),
    # lu: p . l . u = a, compared directly
    case("lu", [tensor("f32", A3)], out=("s64", "f32", "f32"), ref=_lu, node=wire("lu"),
         module="Nx.LinAlg", tol=TOL32),
    case("lu", [tensor("f64", [[1.0, 2.0, 0.5], [3.0, 4.0, -1.0], [-2.0, 1.0, 6.0]])],
         out=("s64", "f64", "f64"), ref=_lu, node=wire("lu"), module="Nx.LinAlg", grad=True),
    case("lu", [tensor("s64", [[1, 2], [3, 4]])], out=("s64", "f32", "f32"),
         expected=([[0, 1], [1, 0]], [[1.0, 0.0], [1 / 3, 1.0]], [[3.0, 4.0], [0.0, 2 / 3]]),
         node=wire("lu"), module="Nx.LinAlg", tol=TOL32, source="Nx.LinAlg.lu docs (p)"),
    # svd: the values of Nx 0.7.2's own algorithm (real Nx printed these), its signs
    case("svd", [tensor("f32", [[3.0, 1.0], [-1.0, 2.0]])], out=("f32", "f32", "f32"),
         expected=([[0.9801095128059387, 0.1984572857618332],
                    [-0.1984572857618332, 0.9801095128059387]],
                   [3.1924915313720703, 2.1926732063293457],
                   [[0.9837140440940857, 0.1797405481338501],
                    [-0.1797405481338501, 0.9837140440940857]]),
         node=wire("svd", full_matrices=True, max_iter=100), module="Nx.LinAlg", tol=TOL32,
         source="real Nx 0.7.2 (its eigh stops within about 1e-4 of the exact values)"),
    case("svd", [tensor("f64", [[2.0, 0.5], [1.0, -3.0], [0.25, 1.0]])],
         {"full_matrices?": False}, out=("f64", "f64", "f64"),
         expected=([[0.039764063590372545, 0.967315263635173],
                    [0.962863756927799, 0.02988955661924375],
                    [-0.2670434512240726, 0.25180904503084167]],
                   [3.2840105674300557, 2.127821364525894],
                   [[0.29960816386879147, -0.9540623397572979],
                    [0.9540623397648365, 0.2996081638711961]]),
         node=wire("svd", full_matrices=False, max_iter=100), module="Nx.LinAlg",
         tol=TOL64_NX,
         source="real Nx 0.7.2 (its f64 values can be some 1e-5 from ours: COMPATIBILITY.md; "
                "gradients: nx_linalg_test.exs)"),
    case("svd", [tensor("s64", [[[3, 0], [0, -4]], [[1, 2], [0, 1]]])],
         out=("f32", "f32", "f32"),
         expected=([[[0.0, 1.0], [-1.0, 0.0]],
                    [[0.9246780872344971, -0.3807496726512909],
                     [0.3807496428489685, 0.9246780872344971]]],
                   [[4.0, 3.0], [2.4142045974731445, 0.41422227025032043]],
                   [[[0.0, 1.0], [1.0, 0.0]],
                    [[0.38461533188819885, 0.9230769276618958],
                     [-0.9230769276618958, 0.38461533188819885]]]),
         node=wire("svd", full_matrices=True, max_iter=100), module="Nx.LinAlg", tol=TOL32,
         source="real Nx 0.7.2"),
    # eigh: the values of Nx 0.7.2's own iteration (real Nx printed these), its order and signs
    case("eigh", [tensor("f32", SPD)], out=("f32", "f32"),
         expected=([6.841533184051514, 2.901879072189331, 2.2565877437591553],
                   [[0.5814878344535828, -0.5653584599494934, 0.585014283657074],
                    [0.7710480690002441, 0.15358184278011322, -0.6179785132408142],
                    [0.25953182578086853, 0.8104211688041687, 0.525224506855011]]),
         node=wire("eigh", eps=1.0e-4, max_iter=1000), module="Nx.LinAlg", tol=TOL32,
         source="real Nx 0.7.2 (its iteration stops within about 1e-4 of the exact values)"),
    case("eigh", [tensor("f64", SYM)], out=("f64", "f64"),
         expected=([-4.238089149326858, 3.1539821736368077, -1.9158930189658114],
                   [[0.9704330196947469, 0.1402092604025472, 0.19640998853181835],
                    [-0.12709713807197612, 0.9888272009665571, -0.07788381520267275],
                    [-0.20519763851771508, 0.05061748636601488, 0.9774237682718884]]),
         node=wire("eigh", eps=1.0e-4, max_iter=1000), module="Nx.LinAlg", tol=(1e-12, 1e-12),
         source="real Nx 0.7.2 (gradients: tests/test_lower_eigh.py, nx_linalg_test.exs)"),
    case("eigh", [tensor("s64", [[[2, 5], [5, 6]], [[1, 0], [0, 4]]])], out=("f32", "f32"),
         expected=([[9.385159492492676, -1.3851594924926758], [1.0, 4.0]],
                   [[[0.5612090229988098, -0.8276740908622742],
                     [0.8276740908622742, 0.5612090229988098]], [[1.0, 0.0], [0.0, 1.0]]]),
         node=wire("eigh", eps=1.0e-4, max_iter=1000), module="Nx.LinAlg", tol=TOL32,
         source="real Nx 0.7.2, on the matrices of Nx.LinAlg.eigh's docs"),
    case("eigh", [tensor("c64", [[1, 2j, 2], [-2j, -3, 2j], [2, -2j, 1]])], out=("c64", "c64"),
         expected=([-5.0, 3.0, 1.0],
                   [[-0.40822193026542664, 0.7071762084960938j, 0.5772558450698853],
                    [-0.8164960741996765j, 0.0, -0.5773979425430298j],
                    [0.40827566385269165, 0.7070373892784119j, -0.5773970484733582]]),
         node=wire("eigh", eps=1.0e-4, max_iter=1000), module="Nx.LinAlg", tol=(2e-5, 2e-6),
         source="real Nx 0.7.2, on the Hermitian matrix of its lin_alg_test.exs"),
    case("eigh", [tensor("f16", [[4.0, 1.0], [1.0, 3.0]])], {"max_iter": 10, "eps": 1e-3},
         out=("f16", "f16"), expected=([4.6171875, 2.3828125],
                                       [[0.85693359375, -0.515625], [0.515625, 0.85693359375]]),
         node=wire("eigh", eps=1e-3, max_iter=10), module="Nx.LinAlg", tol=(2e-3, 2e-3),
         source="real Nx 0.7.2"),
]
