"""The shared conformance table (conformance/cases.etf) against the real lowering.

Every case with a wire node becomes a one-node graph (one parameter per input, then the node;
for a tuple-valued node one ``:elem`` node per element) that is decoded, validated, lowered
and jitted exactly as the worker does it (py_backend.cache.Cache); each result must have the
declared type and shape and match the independent reference values within the case's
tolerance, after bringing decompositions to the case's canonical form (conformance/case.py
CANONICAL). A reducer argument (``Nx.reduce/4``) becomes the sub-graph PROTOCOL.md 4.3
describes: two scalar parameters and one node. The Elixir side of the same table is
test_elixir/conformance_test.exs.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conformance import coverage, generate
from py_backend.cache import Cache
from py_backend.channel import atom, atom_name, binary_bytes, decode, encode, int_list
from py_backend.nxtypes import NxType, to_dtype, wire_dtype

ETF = Path(generate.ETF_PATH)


def _keys(term: dict[Any, Any]) -> dict[str, Any]:
    return {str(atom_name(k)): v for k, v in term.items()}


CASES: list[dict[str, Any]] = [_keys(c) for c in decode(ETF.read_bytes())]
NODE_CASES = [c for c in CASES if c["node"] is not None]
CACHE = Cache(max_entries=4096)
SPECIAL = {"nan": np.nan, "infinity": np.inf, "neg_infinity": -np.inf}


def nx_type(term: Any) -> NxType:
    kind, bits = term
    name = atom_name(kind)
    assert name is not None
    return NxType(name, bits)


def shape_of(term: Any) -> tuple[int, ...]:
    return tuple(term)


def text(term: Any) -> str:
    data = binary_bytes(term)
    assert data is not None
    return data.decode("utf-8")


def results(case: dict[str, Any]) -> list[dict[str, Any]]:
    return [_keys(r) for r in case["results"]]


def _number(v: Any) -> Any:
    """A value of the table: a number, a non-finite atom or a %Complex{re, im} map."""
    if isinstance(v, dict):
        parts = _keys(v)
        return complex(_number(parts["re"]), _number(parts["im"]))
    name = atom_name(v)
    return SPECIAL[name] if name else v


def flat_values(result: dict[str, Any]) -> np.ndarray:
    """A result's values, flat (vectorized axes included), in the type references use."""
    values = [_number(v) for v in result["values"]]
    out = nx_type(result["out"])
    dtype: Any = np.complex128 if out.is_complex else np.float64 if out.is_float else np.int64
    if out == NxType("u", 64):
        dtype = np.uint64
    return np.array(values, dtype=dtype)


def expected_array(result: dict[str, Any]) -> np.ndarray:
    return flat_values(result).reshape(shape_of(result["shape"]))


def reducer_graph(name: str, type_term: Any) -> Any:
    """``&Nx.<name>/2`` as a sub-graph: parameters 0 (element) and 1 (accumulator), both
    scalars of the output type, and one node (PROTOCOL.md 4.3)."""
    scalar = (type_term, ())
    nodes = [(i, atom("parameter"), [], {atom("index"): i}, scalar) for i in (0, 1)]
    nodes.append((2, atom(name), [0, 1], {}, scalar))
    return (atom("nx_jax_graph"), 1, nodes, [2])


def graph_of(case: dict[str, Any]) -> bytes:
    """Parameters for the node's inputs, then the node itself (PROTOCOL.md section 4), then
    one ``:elem`` node per element of a tuple-valued node."""
    node = _keys(case["node"])
    nodes: list[Any] = []
    for index, (type_term, shape, _data) in enumerate(node["inputs"]):
        nodes.append((index, atom("parameter"), [], {atom("index"): index}, (type_term, shape)))
    n = len(nodes)
    outs = [(r["out"], r["shape"]) for r in results(case)]
    opts = dict(node["opts"])
    for arg in case["args"]:
        if isinstance(arg, tuple) and len(arg) == 2 and atom_name(arg[0]) == "reducer":
            opts[atom("reducer")] = reducer_graph(str(atom_name(arg[1])), outs[0][0])
    if not case["tuple"]:
        nodes.append((n, node["op"], list(range(n)), opts, outs[0]))
        return encode((atom("nx_jax_graph"), 1, nodes, [n]))
    nodes.append((n, node["op"], list(range(n)), opts, outs))
    elems = [(n + 1 + i, atom("elem"), [n], {atom("index"): i}, o) for i, o in enumerate(outs)]
    return encode((atom("nx_jax_graph"), 1, nodes + elems, [e[0] for e in elems]))


def arguments(case: dict[str, Any]) -> list[np.ndarray]:
    node = _keys(case["node"])
    args = []
    for type_term, shape, data in node["inputs"]:
        raw = binary_bytes(data)
        assert raw is not None
        dtype = wire_dtype(nx_type(type_term))
        args.append(np.frombuffer(raw, dtype=dtype).reshape(shape_of(shape)))
    return args


def run_case(case: dict[str, Any]) -> list[np.ndarray]:
    args = arguments(case)
    key, program = CACHE.program(graph_of(case))
    return [np.asarray(r) for r in CACHE.executable(key, program, args)(*args)]


def _signs(d: np.ndarray) -> np.ndarray:
    return np.where(d < 0, -1.0, 1.0).astype(d.dtype)


def canonical(form: str | None, got: list[np.ndarray]) -> list[np.ndarray]:
    """conformance/case.py CANONICAL, over the leading batch axes too."""
    if form == "qr":
        q, r = got
        k = min(r.shape[-2], r.shape[-1])
        d = _signs(np.diagonal(r, axis1=-2, axis2=-1)[..., :k])
        q, r = q.copy(), r.copy()
        q[..., :, :k] *= d[..., None, :]
        r[..., :k, :] *= d[..., :, None]
        return [q, r]
    if form == "svd":
        u, s, vt = got
        k = s.shape[-1]
        cols = u[..., :, :k]
        first = np.argmax(np.abs(cols), axis=-2)[..., None, :]
        d = _signs(np.take_along_axis(cols, first, axis=-2)[..., 0, :])
        u, vt = u.copy(), vt.copy()
        u[..., :, :k] *= d[..., None, :]
        vt[..., :k, :] *= d[..., :, None]
        return [u, s, vt]
    assert form is None, form
    return got


def assert_close(got: np.ndarray, result: dict[str, Any]) -> None:
    expected = expected_array(result)
    out = nx_type(result["out"])
    assert got.dtype == to_dtype(out), f"type {got.dtype}, expected {out}"
    assert got.shape == expected.shape, f"shape {got.shape}, expected {expected.shape}"
    if not (out.is_float or out.is_complex):
        np.testing.assert_array_equal(got.astype(expected.dtype), expected)
        return
    if out.is_complex:
        # each part within atol + rtol * |expected| (the modulus), as the Elixir side
        bound = result["atol"] + result["rtol"] * np.abs(expected)
        for part in (np.real, np.imag):
            g, e = part(got).astype(np.float64), part(expected)
            same = (g == e) | (np.isnan(g) & np.isnan(e))
            assert np.all(same | (np.abs(g - e) <= bound)), f"{part.__name__}: {g} vs {e}"
        return
    np.testing.assert_allclose(got.astype(np.float64), expected, rtol=result["rtol"],
                               atol=result["atol"], equal_nan=True)


@pytest.mark.parametrize("case", NODE_CASES, ids=[text(c["name"]) for c in NODE_CASES])
def test_case_through_the_lowering(case: dict[str, Any]) -> None:
    got = canonical(atom_name(case["canonical"]), run_case(case))
    expected = results(case)
    assert len(got) == len(expected)
    for g, r in zip(got, expected, strict=True):
        assert_close(g, r)


def test_canonical_forms_fix_the_signs() -> None:
    a = np.array([[2.0, -1.0], [1.0, 3.0], [0.5, 0.0]])
    q, r = np.linalg.qr(a)
    flip = np.diag([-1.0, 1.0])
    for got in ([q, r], [q @ flip, flip @ r]):
        cq, cr = canonical("qr", got)
        np.testing.assert_allclose(cq @ cr, a, atol=1e-12)
        assert np.all(np.diagonal(cr) >= 0)
    u, s, vt = np.linalg.svd(a, full_matrices=False)
    one, other = canonical("svd", [u, s, vt]), canonical("svd", [-u, s, -vt])
    for x, y in zip(one, other, strict=True):
        np.testing.assert_allclose(x, y)


STALE = "conformance/cases.etf is stale: run .venv/bin/python -m conformance.generate"


def test_cases_etf_is_up_to_date() -> None:
    """The committed table defines the same cases as the families (conformance/generate.py
    ``definition``: everything but the computed numbers, and each reference's formula), and its
    expected values agree with this machine's NumPy within each case's own tolerance: another
    NumPy, LAPACK or CPU may round a last bit differently without making the table stale."""
    fresh = [_keys(c) for c in decode(generate.etf_bytes())]
    assert [text(c["name"]) for c in fresh] == [text(c["name"]) for c in CASES], STALE
    changed = [text(c["name"]) for c, f in zip(CASES, fresh, strict=True)
               if text(c["definition"]) != text(f["definition"])]
    assert changed == [], f"{STALE} (cases defined differently: {changed})"
    for stored, now in zip(CASES, fresh, strict=True):
        for r, f in zip(results(stored), results(now), strict=True):
            assert_same_reference(flat_values(f), r, text(stored["name"]))


def assert_same_reference(fresh: np.ndarray, stored: dict[str, Any], name: str) -> None:
    """A reference recomputed here against the committed one: integers exactly, floats and
    complex numbers within the stored tolerance (NaN equal to NaN)."""
    expected = flat_values(stored)
    assert fresh.shape == expected.shape, f"{name}: {STALE}"
    if fresh.dtype.kind in "iu":
        np.testing.assert_array_equal(fresh, expected, err_msg=f"{name}: {STALE}")
        return
    np.testing.assert_allclose(fresh, expected, rtol=stored["rtol"], atol=stored["atol"],
                               equal_nan=True, err_msg=f"{name}: {STALE}")


def test_the_table_is_stale_when_a_definition_changes_but_not_when_a_last_bit_does() -> None:
    family, c = generate.all_cases()[0]
    base = generate.definition(family, c)
    moved = copy.deepcopy(c)
    moved.results[0].values = [v * (1 + 2.0 ** -52) if isinstance(v, float) else v
                               for v in moved.results[0].values]
    assert generate.definition(family, moved) == base
    for change in ("fun", "opts", "reference", "grad"):
        other = copy.deepcopy(c)
        setattr(other, change, {"fun": "subtract", "opts": {"axes": [0]},
                                "reference": c.reference + " + 1", "grad": not c.grad}[change])
        assert generate.definition(family, other) != base, change
    wider = copy.deepcopy(c)
    wider.results[0].rtol *= 2
    assert generate.definition(family, wider) != base


def test_a_reference_formula_names_code_not_numbers() -> None:
    from conformance.case import formula

    def scaled(k: float) -> Any:
        return lambda x: x * k

    assert formula(np.exp) == "numpy.exp"
    assert formula(np.linalg.solve) == "numpy.linalg.solve"
    assert "lambda x: x * k" in formula(scaled(2.0)) and formula(scaled(2.0)) != formula(
        scaled(3.0))


def test_every_case_names_a_reference_and_a_tolerance() -> None:
    names = [text(c["name"]) for c in CASES]
    assert len(names) == len(set(names))
    for c in CASES:
        assert text(c["source"]), c["name"]
        for r in results(c):
            out = nx_type(r["out"])
            if out.is_float or out.is_complex:
                assert 0 < r["rtol"] < 0.05, text(c["name"])
            else:
                assert r["rtol"] == 0 and r["atol"] == 0, text(c["name"])


def test_every_op_the_coverage_table_marks_implemented_keeps_its_cases() -> None:
    """Two argument types per op and a broadcast case for broadcasting ops (the generator
    refuses to write the table otherwise; this catches a family edited without
    regenerating)."""
    ops = coverage.implemented_in_doc()
    assert "add" in ops and "LinAlg.qr" in ops
    assert coverage.problems(ops) == []


def test_the_table_covers_every_wire_op_in_two_types_and_a_broadcast() -> None:
    """Each wire op appears with at least two input types; broadcasting ops also with inputs
    of different shapes."""
    types: dict[str, set[Any]] = {}
    broadcast: set[str] = set()
    for c in NODE_CASES:
        node = _keys(c["node"])
        op = atom_name(node["op"]) or ""
        shapes = {tuple(int_list(list(s)) or []) for _, s, _ in node["inputs"]}
        types.setdefault(op, set()).update(nx_type(t) for t, _, _ in node["inputs"])
        types[op].update(nx_type(r["out"]) for r in results(c))
        if len(shapes) > 1:
            broadcast.add(op)
    thin = sorted(op for op, ts in types.items() if len(ts) < 2)
    assert thin == []
    elementwise = ["add", "subtract", "multiply", "divide", "pow", "max", "min", "equal",
                   "not_equal", "less", "less_equal", "greater", "greater_equal", "select"]
    assert [op for op in elementwise if op not in broadcast] == []


def test_a_computed_zero_of_a_decomposition_compares_as_zero() -> None:
    """Seen on a fresh machine: an entry of LinAlg.qr(f64[2][3][3]) that is mathematically zero
    came out -3.3e-17 against a stored 2.7e-18, and rtol 1e-12 with atol 1e-300 refused it.
    The accumulation floor (a few ulp times n times the largest magnitude) accepts it; an
    error of 1e-10 in the same place is still refused."""
    by_name = {text(c["name"]): c for c in CASES}
    case = by_name["LinAlg.qr(f64[2][3][3]) -> {f64, f64}"]
    q, r = (expected_array(res) for res in results(case))
    assert 1e-15 < results(case)[0]["atol"] < 1e-13
    zero = np.unravel_index(np.argmin(np.abs(q)), q.shape)
    assert abs(q[zero]) < 1e-15, "the reference has a mathematically zero entry of q"
    for error, passes in ((-3.3e-17, True), (1e-10, False)):
        got = q.copy()
        got[zero] = error
        if passes:
            assert_close(got, results(case)[0])
        else:
            with pytest.raises(AssertionError):
                assert_close(got, results(case)[0])
