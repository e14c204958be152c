"""The shared conformance table (conformance/cases.etf) against the real lowering.

Every case with a wire node becomes a one-node graph (one parameter per input, then the node)
that is decoded, validated, lowered and jitted exactly as the worker does it
(py_backend.cache.Cache); the result must have the declared type and shape and match the
independent reference values within the case's tolerance. The Elixir side of the same table
is test_elixir/conformance_test.exs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conformance import generate
from py_backend.cache import Cache
from py_backend.channel import atom, atom_name, binary_bytes, decode, encode, int_list
from py_backend.nxtypes import NxType, to_dtype, wire_dtype

ETF = Path(generate.ETF_PATH)
CASES: list[dict[str, Any]] = [
    {str(atom_name(k)): v for k, v in c.items()} for c in decode(ETF.read_bytes())
]
NODE_CASES = [c for c in CASES if c["node"] is not None]
CACHE = Cache(max_entries=4096)


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


def expected_array(case: dict[str, Any]) -> np.ndarray:
    special = {"nan": np.nan, "infinity": np.inf, "neg_infinity": -np.inf}
    values = [special[atom_name(v) or ""] if atom_name(v) else v for v in case["values"]]
    out = nx_type(case["out"])
    dtype: Any = np.float64 if out.is_float else np.int64
    if out == NxType("u", 64):
        dtype = np.uint64
    return np.array(values, dtype=dtype).reshape(shape_of(case["shape"]))


def graph_of(case: dict[str, Any]) -> bytes:
    """parameters for the node's inputs, then the node itself (PROTOCOL.md section 4)."""
    node = {atom_name(k): v for k, v in case["node"].items()}
    nodes: list[Any] = []
    for index, (type_term, shape, _data) in enumerate(node["inputs"]):
        nodes.append((index, atom("parameter"), [], {atom("index"): index}, (type_term, shape)))
    n = len(nodes)
    out = (case["out"], case["shape"])
    nodes.append((n, node["op"], list(range(n)), node["opts"], out))
    return encode((atom("nx_jax_graph"), 1, nodes, [n]))


def arguments(case: dict[str, Any]) -> list[np.ndarray]:
    node = {atom_name(k): v for k, v in case["node"].items()}
    args = []
    for type_term, shape, data in node["inputs"]:
        raw = binary_bytes(data)
        assert raw is not None
        dtype = wire_dtype(nx_type(type_term))
        args.append(np.frombuffer(raw, dtype=dtype).reshape(shape_of(shape)))
    return args


def run_case(case: dict[str, Any]) -> np.ndarray:
    args = arguments(case)
    key, program = CACHE.program(graph_of(case))
    (result,) = CACHE.executable(key, program, args)(*args)
    return np.asarray(result)


def assert_close(got: np.ndarray, case: dict[str, Any]) -> None:
    expected = expected_array(case)
    out = nx_type(case["out"])
    assert got.dtype == to_dtype(out), f"type {got.dtype}, expected {out}"
    assert got.shape == expected.shape, f"shape {got.shape}, expected {expected.shape}"
    if not out.is_float:
        np.testing.assert_array_equal(got.astype(expected.dtype), expected)
        return
    np.testing.assert_allclose(got.astype(np.float64), expected, rtol=case["rtol"],
                               atol=case["atol"], equal_nan=True)


@pytest.mark.parametrize("case", NODE_CASES, ids=[text(c["name"]) for c in NODE_CASES])
def test_case_through_the_lowering(case: dict[str, Any]) -> None:
    assert_close(run_case(case), case)


def test_cases_etf_is_up_to_date() -> None:
    assert generate.etf_bytes() == ETF.read_bytes(), (
        "conformance/cases.etf is stale: run .venv/bin/python -m conformance.generate"
    )


def test_every_case_names_a_reference_and_a_tolerance() -> None:
    names = [text(c["name"]) for c in CASES]
    assert len(names) == len(set(names))
    for c in CASES:
        assert text(c["source"]), c["name"]
        out = nx_type(c["out"])
        if out.is_float:
            assert 0 < c["rtol"] < 0.05, text(c["name"])
        else:
            assert c["rtol"] == 0 and c["atol"] == 0, text(c["name"])


def test_the_table_covers_every_op_in_two_types_and_a_broadcast() -> None:
    """Each wire op appears with at least two input types; broadcasting ops also with inputs
    of different shapes."""
    types: dict[str, set[Any]] = {}
    broadcast: set[str] = set()
    for c in NODE_CASES:
        node = {atom_name(k): v for k, v in c["node"].items()}
        op = atom_name(node["op"]) or ""
        shapes = {tuple(int_list(list(s)) or []) for _, s, _ in node["inputs"]}
        types.setdefault(op, set()).update(nx_type(t) for t, _, _ in node["inputs"])
        types[op].add(nx_type(c["out"]))
        if len(shapes) > 1:
            broadcast.add(op)
    thin = sorted(op for op, ts in types.items() if len(ts) < 2)
    assert thin == []
    elementwise = ["add", "subtract", "multiply", "divide", "pow", "max", "min", "equal",
                   "not_equal", "less", "less_equal", "greater", "greater_equal", "select"]
    assert [op for op in elementwise if op not in broadcast] == []
