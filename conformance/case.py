"""Building blocks of the conformance table (see conformance/README.md).

A case is one call of an ``Nx`` function: its positional arguments (tensors, numbers, shapes,
axis lists), its keyword options, the expected result (type, shape, values) computed by an
independent reference (NumPy in float64, mpmath, or a number printed in Nx's documentation),
a tolerance for the result type, and the wire node the call must produce (PROTOCOL.md 4.1),
or ``None`` for functions that Nx composes from several nodes.

    >>> c = case("add", [tensor("s64", [1, 2]), number(1, "s64")], out="s64",
    ...          ref=lambda a, b: a + b, node=wire("add"))
    >>> c.expected_values, c.expected_shape
    ([2, 3], (2,))

Nothing here imports JAX or py_backend: the expected values never come from the worker.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np

# Nx type name -> NumPy dtype (little-endian, the wire order).
DTYPES: dict[str, np.dtype] = {
    "u8": np.dtype("<u1"), "u16": np.dtype("<u2"), "u32": np.dtype("<u4"),
    "u64": np.dtype("<u8"), "s8": np.dtype("<i1"), "s16": np.dtype("<i2"),
    "s32": np.dtype("<i4"), "s64": np.dtype("<i8"), "f16": np.dtype("<f2"),
    "f32": np.dtype("<f4"), "f64": np.dtype("<f8"), "bf16": np.dtype(ml_dtypes.bfloat16),
}

FLOAT_TYPES = ("f16", "bf16", "f32", "f64")

# Default tolerance per result type: |got - expected| <= atol + rtol * |expected|.
# Integer results must match exactly. Half-precision results are computed in that precision
# by JAX (PROTOCOL.md 4.1 casts inputs to the output type), so they get its rounding error.
TOL: dict[str, tuple[float, float]] = {
    "f64": (1e-12, 1e-300),
    "f32": (3e-6, 1e-7),
    "f16": (2e-3, 1e-4),
    "bf16": (1.6e-2, 1e-3),
}


def type_kind(name: str) -> tuple[str, int]:
    """``"bf16"`` -> ``("bf", 16)``: the parts of Nx's type tuple."""
    kind = name.rstrip("0123456789")
    return kind, int(name[len(kind):])


def is_float(name: str) -> bool:
    return name in FLOAT_TYPES


@dataclass(frozen=True)
class Tensor:
    """A tensor argument: ``Nx`` receives it as a concrete tensor of ``type`` and ``shape``."""

    type: str
    shape: tuple[int, ...]
    array: np.ndarray  # already stored in ``type`` (inputs are rounded to it)

    def signature(self) -> str:
        return self.type + "".join(f"[{d}]" for d in self.shape)


@dataclass(frozen=True)
class Number:
    """A plain Elixir number argument. ``as_type`` is the type ``Nx`` converts it to before it
    becomes the node's input (weak typing: ``Nx.add(u8_tensor, 1)`` gives a ``u8`` scalar)."""

    value: int | float
    as_type: str

    def signature(self) -> str:
        return repr(self.value)


@dataclass(frozen=True)
class Wire:
    """The one node an eager call must trace to: op atom and opts map (PROTOCOL.md 4.1)."""

    op: str
    opts: dict[str, Any]


def tensor(type: str, values: Any, shape: Sequence[int] | None = None) -> Tensor:
    """A tensor argument from (nested) values, or flat values reshaped to ``shape``.
    Values may be ``math.nan`` / ``math.inf``; they are stored in ``type``, exactly as
    ``Nx.tensor(values, type: type)`` would store them for representable values."""
    if type not in DTYPES:
        raise ValueError(f"unknown Nx type {type!r}, expected one of {sorted(DTYPES)}")
    array = np.asarray(values, dtype=np.float64 if is_float(type) else np.int64)
    if shape is not None:
        array = array.reshape(tuple(shape))
    stored = array.astype(DTYPES[type])
    if not is_float(type) and not np.array_equal(stored.astype(np.int64), array):
        raise ValueError(f"values {values!r} do not fit {type}")
    return Tensor(type, tuple(array.shape), stored)


def number(value: int | float, as_type: str) -> Number:
    """A number argument, converted by ``Nx`` to a scalar of ``as_type``."""
    return Number(value, as_type)


def wire(op: str, **opts: Any) -> Wire:
    """The expected wire node. Opts values: lists, tuples, ints, bools, ``None`` (``nil``);
    a ``str`` is an atom."""
    return Wire(op, opts)


def iota(type: str, shape: Sequence[int], start: int = 0) -> Tensor:
    """A tensor argument holding ``start, start+1, ...`` in row-major order."""
    size = math.prod(shape)
    return tensor(type, np.arange(start, start + size), shape)


@dataclass
class Case:
    fun: str
    args: list[Any]
    opts: dict[str, Any] | None
    out: str
    expected_shape: tuple[int, ...]
    expected_values: list[Any]  # flat, row-major; floats may be nan/inf
    rtol: float
    atol: float
    node: Wire | None
    grad: bool
    source: str
    name: str = field(default="")

    def tensor_inputs(self) -> list[Tensor | Number]:
        """Tensor and number arguments in order (lists flattened): the node's inputs."""
        found: list[Tensor | Number] = []

        def walk(arg: Any) -> None:
            if isinstance(arg, Tensor | Number):
                found.append(arg)
            elif isinstance(arg, list):
                for item in arg:
                    walk(item)

        for arg in self.args:
            walk(arg)
        return found


def _ref_arg(arg: Any) -> Any:
    """What a reference function receives for an argument: tensors as float64 (floating
    types) or int64 arrays, numbers as NumPy scalars, lists element-wise, others as is."""
    if isinstance(arg, Tensor):
        return arg.array.astype(np.float64 if is_float(arg.type) else np.int64)
    if isinstance(arg, Number):
        return np.float64(arg.value) if isinstance(arg.value, float) else np.int64(arg.value)
    if isinstance(arg, list):
        return [_ref_arg(a) for a in arg]
    return arg


def _describe(arg: Any) -> str:
    """An argument as it reads in Elixir (tensors by type and shape)."""
    if isinstance(arg, Tensor | Number):
        return arg.signature()
    if isinstance(arg, list):
        return "[" + ", ".join(_describe(a) for a in arg) + "]"
    if isinstance(arg, tuple):
        return "{" + ", ".join(_describe(a) for a in arg) + "}"
    if arg is None:
        return "nil"
    if isinstance(arg, bool):
        return str(arg).lower()
    if isinstance(arg, str):
        return ":" + arg
    return repr(arg)


def case(
    fun: str,
    args: Sequence[Any],
    opts: dict[str, Any] | None = None,
    *,
    out: str,
    ref: Callable[..., Any] | None = None,
    expected: Any = None,
    node: Wire | None,
    grad: bool = False,
    tol: tuple[float, float] | None = None,
    name: str | None = None,
    source: str | None = None,
) -> Case:
    """One call ``Nx.<fun>(*args, opts)`` (``opts=None``: no keyword list is passed).

    Give exactly one of ``ref`` (called with the arguments as float64/int64 NumPy values, it
    returns the exact result; it is rounded to ``out`` like the worker's result) or
    ``expected`` (values, e.g. from Nx's documentation; nested lists give the shape).
    ``node`` is the expected wire node or ``None`` when Nx composes the call from several
    nodes. ``grad=True`` asks the Elixir side for a finite-difference check in f64 of the
    first tensor argument (the output must be floating and differentiable there).
    """
    if (ref is None) == (expected is None):
        raise ValueError(f"{fun}: give exactly one of ref= or expected=")
    if out not in DTYPES:
        raise ValueError(f"{fun}: unknown out type {out!r}")
    if ref is not None:
        with np.errstate(all="ignore"):
            result = np.asarray(ref(*[_ref_arg(a) for a in args]))
        source = source or "numpy float64"
    else:
        result = np.asarray(expected, dtype=np.float64 if is_float(out) else np.int64)
        source = source or "nx docs"
    with np.errstate(all="ignore"):
        if is_float(out):
            rounded = result.astype(np.float64).astype(DTYPES[out]).astype(np.float64)
        else:
            if result.dtype.kind == "f":
                raise ValueError(f"{fun}: reference gave floats for integer type {out}")
            rounded = result.astype(np.int64).astype(DTYPES[out])
    values = [v.item() for v in rounded.reshape(-1)]
    rtol, atol = tol if tol is not None else TOL.get(out, (0.0, 0.0))
    c = Case(fun, list(args), opts, out, tuple(result.shape), values, rtol, atol, node, grad,
             source)
    c.name = name or _default_name(c)
    return c


def _default_name(c: Case) -> str:
    args = ", ".join(_describe(a) for a in c.args)
    opts = ""
    if c.opts:
        opts = ", " + ", ".join(f"{k}: {_describe(v)}" for k, v in c.opts.items())
    return f"{c.fun}({args}{opts}) -> {c.out}"
