"""What one op's registration holds (:class:`Op`), and the helpers the family modules declare
their ops with.

An op's entry carries all there is to it: its arity, its options (each with the kind of value
it takes, :mod:`py_backend.wire_graph`, and the value of an option a version-1 client may
leave out), its structural check (run when a graph is decoded) and its lowering (run when the
graph is traced for ``jax.jit``). Each family module (``py_backend/ops/<family>.py``) defines
its checks and lowerings and ends with ``OPS = family(name, {op: entry(...), ...})``.

    >>> ops = family("demo", {"twice": entry(1, lambda c: c.args[0] * 2)})
    >>> ops["twice"].family, ops["twice"].min_arity, ops["twice"].max_arity
    ('demo', 1, 1)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from py_backend import wire_graph as wire
from py_backend.lower import Call, Value
from py_backend.wire_graph import Kind, Node

Check = Callable[[Node, list[Node], str], None]
Lowering = Callable[[Call], Value]
Arity = int | tuple[int, None]  # exactly n inputs, or (n, None): n or more

ANY: Arity = (1, None)  # one input or more
# the type the inputs are combined in, decided by the Elixir side (Nx.Type.merge/2)
OPERAND_TYPE: Mapping[str, Kind] = {"operand_type": wire.nx_type}


@dataclass(frozen=True)
class Op:
    name: str
    family: str
    min_arity: int
    max_arity: int | None  # None: no upper bound
    lower: Lowering
    opts: Mapping[str, Kind] = field(default_factory=dict)
    check: Check = wire.check_tensor_out
    # options a version-1 client may leave out (added to version 1 later), with their values
    defaults: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Entry:
    arity: Arity
    lower: Lowering
    opts: Mapping[str, Kind]
    check: Check
    defaults: Mapping[str, Any]


def entry(arity: Arity, lower: Lowering, opts: Mapping[str, Kind] | None = None,
          check: Check = wire.check_tensor_out,
          defaults: Mapping[str, Any] | None = None) -> Entry:
    """One op's rules: ``check`` defaults to the out being a tensor of a supported type."""
    return Entry(arity, lower, opts or {}, check, defaults or {})


def family(name: str, entries: Mapping[str, Entry]) -> dict[str, Op]:
    """The ops of family ``name``, by op name."""
    ops = {}
    for op, e in entries.items():
        lo, hi = (e.arity, e.arity) if isinstance(e.arity, int) else e.arity
        ops[op] = Op(op, name, lo, hi, e.lower, e.opts, e.check, e.defaults)
    return ops
