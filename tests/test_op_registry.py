"""The op registry (py_backend/registry.py, collected from py_backend/ops/): one entry per op,
grouped by family, equal to
PROTOCOL.md's op tables (test_elixir/op_registry_test.exs compares it with the Elixir side's)."""

from __future__ import annotations

import dataclasses
import doctest
import re
from pathlib import Path

import numpy as np

from py_backend import lower, program, registry, wire_graph
from py_backend.ops import rules

ROOT = Path(__file__).resolve().parent.parent


def protocol_ops() -> set[str]:
    """Every op named in the first column of a table of PROTOCOL.md section 4."""
    text = (ROOT / "docs" / "PROTOCOL.md").read_text()
    section = text.split("\n## 4.", 1)[1].split("\n## 5.", 1)[0]
    names: set[str] = set()
    for line in section.splitlines():
        if line.startswith("| `:"):
            names.update(re.findall(r"(?:`| ):(\w+)", line.split(" | ")[0]))
    return names


def test_the_registry_is_protocol_md_op_tables() -> None:
    documented = protocol_ops()
    assert {"exp", "window_scatter_max", "attach_token"} <= documented
    assert documented == set(registry.REGISTRY)


def test_every_entry_is_complete() -> None:
    assert list(registry.FAMILIES) == [
        "leaves", "elementwise", "reductions", "shape", "indexing", "linalg", "grad",
        "control_flow",
    ]
    for name, op in registry.REGISTRY.items():
        assert op.name == name and registry.FAMILIES[op.family][name] is op
        assert callable(op.lower) and callable(op.check)
        assert op.max_arity is None or op.max_arity >= op.min_arity >= 0
        assert set(op.defaults) <= set(op.opts), name


def test_doctests() -> None:
    for module in (registry, rules, wire_graph):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__


def test_the_decoder_and_the_lowering_use_the_registry() -> None:
    from py_backend.channel import atom, encode

    f32 = (atom("f"), 32)
    # an op of the registry lowers with its entry's function; one outside it is refused
    # with the registry's list
    calls = []
    exp = registry.REGISTRY["exp"]
    spy = {"parameter": registry.REGISTRY["parameter"],
           "exp": dataclasses.replace(exp, lower=lambda c: calls.append(c.node.id) or exp.lower(c))}
    graph = program.parse_graph(
        (atom("nx_jax_graph"), 1, [(0, atom("parameter"), [], {atom("index"): 0}, (f32, ())),
                                   (1, atom("exp"), [0], {}, (f32, ()))], [1]))
    (y,) = lower.lower(graph, spy, mode="native")(np.float32(1.0))
    assert calls == [1] and np.isclose(y, np.e)
    term = (atom("nx_jax_graph"), 1,
            [(0, atom("parameter"), [], {atom("index"): 0}, (f32, ())),
             (1, atom("no_such_op"), [0], {}, (f32, ()))], [1])
    try:
        program.decode_graph(encode(term))
    except wire_graph.GraphError as exc:
        assert "node 1 (no_such_op): unknown op" in str(exc) and "'window_sum'" in str(exc)
    else:
        raise AssertionError("an unknown op was accepted")


HISTORY = re.compile(r"part [AB]\b|issue #\d|\b[A-Z]+_A\b|_ops_a\b|_A_FNS\b")


def test_no_history_labels_in_code() -> None:
    """Code is grouped by what it is, not by the order it was built in."""
    found = []
    for path in [
        *(ROOT / "py_backend").rglob("*.py"),
        *(ROOT / "lib").rglob("*.ex"),
        *(ROOT / "nx" / "lib").rglob("*.ex"),
    ]:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if HISTORY.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == []
