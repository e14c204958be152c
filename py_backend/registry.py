"""The op registry: every op the worker accepts (PROTOCOL.md section 4), by family, collected
from the family modules of :mod:`py_backend.ops`.

Adding an op is one entry in its family's module, plus its row in PROTOCOL.md and in the Elixir
side's registry (``NxJax.Ops``): tests/test_op_registry.py and test_elixir/op_registry_test.exs
hold the three equal.

    >>> REGISTRY["sum"].family, REGISTRY["sum"].min_arity, sorted(REGISTRY["sum"].opts)
    ('reductions', 1, ['axes', 'keep_axes'])
    >>> REGISTRY["concatenate"].max_arity is None
    True
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from py_backend.ops import (
    control_flow,
    elementwise,
    grad,
    indexing,
    leaves,
    linalg,
    reductions,
    shape,
)
from py_backend.ops.rules import Op

FAMILIES: Mapping[str, Mapping[str, Op]] = {
    f[next(iter(f))].family: f
    for f in (leaves.OPS, elementwise.OPS, reductions.OPS, shape.OPS, indexing.OPS, linalg.OPS,
              grad.OPS, control_flow.OPS)
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
