"""Writes conformance/cases.etf from the families in conformance/cases/ (see README.md).

    .venv/bin/python -m conformance.generate          # cases.etf + docs/COMPATIBILITY.md
    .venv/bin/python -m conformance.generate --no-docs

The file is one Erlang term, a list of maps (one per case)::

    %{name: binary, family: binary, module: atom, fun: atom, args: [arg],
      opts: nil | keyword, tuple: boolean, canonical: nil | atom,
      results: [%{out: type, shape: tuple, values: [value], rtol: float, atol: float,
                  vectorized: [{atom, size}]}],
      grad: boolean, source: binary, definition: binary,
      node: nil | %{op: atom, opts: map, inputs: [{type, shape, data}]}}

where ``arg`` is ``{:tensor, type, shape, data}`` (data: little-endian bytes, as on the wire;
complex types as real then imaginary part) or ``{:tensor, type, shape, data, vectorized_axes}``
(a vectorized tensor: ``[{name, size}]``, the leading axes of ``data``; ``shape`` the
others), ``{:reducer, name}`` (the function ``&Nx.name/2``),
a number, or any other term (tuples, lists, atoms, nil, booleans) passed to Nx as it is.
``value`` is a number, ``:nan``, ``:infinity``, ``:neg_infinity`` or a ``%Complex{re, im}``
struct (a map with ``:__struct__``) whose parts are such numbers or atoms. ``results`` has one
entry, or one per element when ``tuple`` is true (``Nx.LinAlg.qr/2``...). Encoding is
deterministic: the same cases give the same bytes.

``definition`` is the SHA-256 (hex) of everything that defines the case except the numbers its
reference computes: the term above without ``values`` and ``atol`` (whose floor scales with the
values, conformance/case.py ``accumulation_floor``), and the reference itself (the source of
its ``ref`` function, conformance/case.py ``formula``, or the literal ``expected`` values).
``tests/test_conformance.py`` holds the committed file up to date by comparing definitions,
and the values within each case's tolerance: another NumPy or CPU may round a reference's
last bit differently without making the file stale.
"""

from __future__ import annotations

import hashlib
import importlib
import math
import pkgutil
import sys
from pathlib import Path
from typing import Any

import numpy as np

from conformance import cases as cases_pkg
from conformance.case import DTYPES, Case, Number, Reducer, Result, Tensor, Wire, type_kind
from py_backend.channel import atom, binary, encode, text

ROOT = Path(__file__).resolve().parent
ETF_PATH = ROOT / "cases.etf"


def families() -> list[tuple[str, list[Case]]]:
    """Every ``conformance/cases/<family>.py`` module's ``CASES``, sorted by family name."""
    found = []
    for info in sorted(pkgutil.iter_modules(cases_pkg.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{cases_pkg.__name__}.{info.name}")
        found.append((info.name, list(module.CASES)))
    return found


def all_cases() -> list[tuple[str, Case]]:
    out = [(family, c) for family, cs in families() for c in cs]
    seen: dict[str, str] = {}
    for family, c in out:
        if c.name in seen:
            raise ValueError(f"duplicate case name {c.name!r} (families {seen[c.name]} and "
                             f"{family}); give one of them name=")
        seen[c.name] = family
    return out


def type_term(name: str) -> Any:
    kind, bits = type_kind(name)
    return (atom(kind), bits)


def value_term(value: Any) -> Any:
    """A result value: numbers as they are, non-finite floats as Nx's atoms, complex numbers
    as ``%Complex{re, im}`` structs."""
    if isinstance(value, complex):
        return {atom("__struct__"): atom("Elixir.Complex"), atom("re"): value_term(value.real),
                atom("im"): value_term(value.imag)}
    if isinstance(value, float):
        if math.isnan(value):
            return atom("nan")
        if math.isinf(value):
            return atom("infinity" if value > 0 else "neg_infinity")
    return value


def elixir(value: Any) -> Any:
    """A Python value as the Elixir term: str -> atom, dict -> map with atom keys."""
    if isinstance(value, Tensor) and value.vectorized:
        axes = [(atom(name), size) for name, size in value.vectorized]
        return (atom("tensor"), type_term(value.type), value.shape, data(value.array), axes)
    if isinstance(value, Tensor):
        return (atom("tensor"), type_term(value.type), value.shape, data(value.array))
    if isinstance(value, Number):
        return value.value
    if isinstance(value, Reducer):
        return (atom("reducer"), atom(value.name))
    if isinstance(value, str):
        return atom(value)
    if isinstance(value, tuple):
        return tuple(elixir(v) for v in value)
    if isinstance(value, list):
        return [elixir(v) for v in value]
    if isinstance(value, dict):
        return {atom(k): elixir(v) for k, v in value.items()}
    if value is None or isinstance(value, bool | int | float):
        return value
    raise TypeError(f"cannot send {value!r} ({type(value).__name__}) to Elixir")


def data(array: np.ndarray) -> Any:
    return binary(np.ascontiguousarray(array).tobytes())


def input_term(arg: Tensor | Number) -> Any:
    if isinstance(arg, Tensor):
        return (type_term(arg.type), arg.shape, data(arg.array))
    scalar = np.asarray(arg.value).astype(DTYPES[arg.as_type])
    return (type_term(arg.as_type), (), data(scalar))


def node_term(node: Wire | None, c: Case) -> Any:
    if node is None:
        return None
    return {
        atom("op"): atom(node.op),
        atom("opts"): elixir(node.opts),
        atom("inputs"): [input_term(a) for a in c.tensor_inputs()],
    }


def result_term(r: Result, computed: bool = True) -> Any:
    """One result; ``computed=False`` leaves out what the reference's numbers decide."""
    term = {
        atom("out"): type_term(r.out),
        atom("shape"): r.shape,
        atom("rtol"): float(r.rtol),
        atom("vectorized"): [(atom(name), size) for name, size in r.vectorized],
    }
    if computed:
        term[atom("values")] = [value_term(v) for v in r.values]
        term[atom("atol")] = float(r.atol)
    return term


def definition(family: str, c: Case) -> str:
    """The case's definition digest (see the module doc)."""
    defining = encode(_case_fields(family, c, computed=False))
    return hashlib.sha256(defining + b"\0" + c.reference.encode()).hexdigest()


def case_term(family: str, c: Case) -> Any:
    term = _case_fields(family, c, computed=True)
    term[atom("definition")] = text(definition(family, c))
    return term


def _case_fields(family: str, c: Case, computed: bool) -> dict[Any, Any]:
    opts = None if c.opts is None else [(atom(k), elixir(v)) for k, v in c.opts.items()]
    return {
        atom("name"): text(c.name),
        atom("family"): text(family),
        atom("module"): atom("Elixir." + c.module),
        atom("fun"): atom(c.fun),
        atom("args"): [elixir(a) for a in c.args],
        atom("opts"): opts,
        atom("tuple"): c.is_tuple,
        atom("canonical"): None if c.canonical is None else atom(c.canonical),
        atom("results"): [result_term(r, computed) for r in c.results],
        atom("grad"): c.grad,
        atom("source"): text(c.source),
        atom("node"): node_term(c.node, c),
    }


def etf_bytes() -> bytes:
    return encode([case_term(family, c) for family, c in all_cases()])


def main(argv: list[str]) -> int:
    payload = etf_bytes()
    ETF_PATH.write_bytes(payload)
    print(f"wrote {ETF_PATH.relative_to(ROOT.parent)}: {len(all_cases())} cases, "
          f"{len(payload)} bytes")
    if "--no-docs" not in argv:
        from conformance.coverage import main as write_coverage

        return write_coverage([])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
