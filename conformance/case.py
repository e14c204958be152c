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

import inspect
import math
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

# Nx type name -> NumPy dtype (little-endian, the wire order).
DTYPES: dict[str, np.dtype] = {
    "u8": np.dtype("<u1"), "u16": np.dtype("<u2"), "u32": np.dtype("<u4"),
    "u64": np.dtype("<u8"), "s8": np.dtype("<i1"), "s16": np.dtype("<i2"),
    "s32": np.dtype("<i4"), "s64": np.dtype("<i8"), "f16": np.dtype("<f2"),
    "f32": np.dtype("<f4"), "f64": np.dtype("<f8"), "bf16": np.dtype(ml_dtypes.bfloat16),
    "c64": np.dtype("<c8"), "c128": np.dtype("<c16"),
}

FLOAT_TYPES = ("f16", "bf16", "f32", "f64")
COMPLEX_TYPES = ("c64", "c128")

# Default tolerance per result type: |got - expected| <= atol + rtol * |expected|.
# Integer results must match exactly. Half-precision results are computed in that precision
# by JAX (PROTOCOL.md 4.1 casts inputs to the output type), so they get its rounding error.
TOL: dict[str, tuple[float, float]] = {
    "f64": (1e-12, 1e-300),
    "f32": (3e-6, 1e-7),
    "f16": (2e-3, 1e-4),
    "bf16": (1.6e-2, 1e-3),
    # complex results: |got - expected| per part, against atol + rtol * |expected| (modulus)
    "c64": (3e-6, 1e-6),
    "c128": (1e-12, 1e-14),
}


# Machine epsilon of the result types that get an accumulation floor (complex: of its parts).
# Half-precision results are left to TOL: XLA accumulates them in f32 and rounds once, so a
# floor of n ulp of the result would only loosen their check.
EPS: dict[str, float] = {"f32": 2.0 ** -23, "f64": 2.0 ** -52, "c64": 2.0 ** -23,
                         "c128": 2.0 ** -52}

# Calls whose every result element is a sum over many terms (decompositions, solves,
# contractions, reductions, transforms). Their rounding error scales with the terms, not with
# the element: an entry that is mathematically zero comes out as a few ulp of the matrix's
# magnitude, with a sign and last bits that depend on the LAPACK and CPU at hand. Their absolute
# tolerance has a floor of FLOOR_ULPS * eps * n * max|result| (n: the longest axis of the
# inputs), so a computed zero compares as zero (see accumulation_floor).
ACCUMULATING = frozenset({
    "conv", "dot", "outer", "fft", "ifft", "sum", "mean", "variance", "standard_deviation",
    "logsumexp", "reduce", "window_reduce",
})
FLOOR_ULPS = 4


def type_kind(name: str) -> tuple[str, int]:
    """``"bf16"`` -> ``("bf", 16)``: the parts of Nx's type tuple."""
    kind = name.rstrip("0123456789")
    return kind, int(name[len(kind):])


def is_float(name: str) -> bool:
    return name in FLOAT_TYPES


def is_complex(name: str) -> bool:
    return name in COMPLEX_TYPES


def _exact_dtype(name: str) -> np.dtype:
    """The NumPy type references compute in: float64, complex128 or int64."""
    if is_complex(name):
        return np.dtype(np.complex128)
    return np.dtype(np.float64 if is_float(name) else np.int64)


@dataclass(frozen=True)
class Tensor:
    """A tensor argument: ``Nx`` receives it as a concrete tensor of ``type`` and ``shape``."""

    type: str
    shape: tuple[int, ...]
    array: np.ndarray  # already stored in ``type`` (inputs are rounded to it)
    # vectorized axes (name, size): the leading axes of ``array``; ``shape`` is the rest
    vectorized: tuple[tuple[str, int], ...] = ()

    def signature(self) -> str:
        inner = self.type + "".join(f"[{d}]" for d in self.shape)
        if not self.vectorized:
            return inner
        return "vectorized[" + ", ".join(f"{n}: {k}" for n, k in self.vectorized) + "] " + inner


def vectorized(t: Tensor, *names: str) -> Tensor:
    """``t`` with its leading axes vectorized under ``names`` (as ``Nx.vectorize/2`` gives)."""
    sizes = t.array.shape[:len(names)]
    return Tensor(t.type, t.array.shape[len(names):], t.array,
                  tuple(zip(names, sizes, strict=True)))


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
    # the node's inputs as positions in the flattened tensor/number arguments, when Nx
    # passes them in another order (put_slice: tensor, slice, then the start indices)
    order: tuple[int, ...] | None = None

    def inputs(self, *order: int) -> Wire:
        """The same node with its inputs taken in ``order``."""
        return Wire(self.op, self.opts, tuple(order))


def tensor(type: str, values: Any, shape: Sequence[int] | None = None) -> Tensor:
    """A tensor argument from (nested) values, or flat values reshaped to ``shape``.
    Values may be ``math.nan`` / ``math.inf``, and Python ``complex`` numbers for ``c64`` /
    ``c128``; they are stored in ``type``, exactly as ``Nx.tensor(values, type: type)``
    would store them for representable values."""
    if type not in DTYPES:
        raise ValueError(f"unknown Nx type {type!r}, expected one of {sorted(DTYPES)}")
    array = np.asarray(values, dtype=_exact_dtype(type))
    if shape is not None:
        array = array.reshape(tuple(shape))
    stored = array.astype(DTYPES[type])
    if array.dtype == np.int64 and not np.array_equal(stored.astype(np.int64), array):
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


@dataclass(frozen=True)
class Reducer:
    """A function argument (``Nx.reduce/4``, ``Nx.window_reduce/5``) given by the name of a
    two-argument ``Nx`` function: ``reducer("add")`` is ``&Nx.add/2`` in Elixir and, on the
    wire, a sub-graph of two scalar parameters and one ``:add`` node (PROTOCOL.md 4.3)."""

    name: str

    def signature(self) -> str:
        return f"&Nx.{self.name}/2"


def reducer(name: str) -> Reducer:
    return Reducer(name)


# Canonical forms of decompositions that are unique only up to signs. Both runners apply the
# same transformation to what the worker returns before comparing; the reference values are
# given in the same form.
CANONICAL = {
    # {q, r}: for i < min(m, n), column i of q and row i of r multiplied by sign(r[i][i])
    # (so r has a non-negative diagonal; unique for a full-rank a, with q {m, min(m, n)} or
    # square)
    "qr": "diag(r) >= 0",
    # {u, s, vt}: for i < min(m, n), column i of u and row i of vt multiplied by the sign of
    # the entry of largest magnitude of u's column i (the first such entry); unique for
    # distinct non-zero singular values, with u and vt square or reduced
    "svd": "largest |u[:, i]| positive",
}


def accumulates(fun: str, module: str) -> bool:
    """Whether the call's results are sums over many terms (``ACCUMULATING``, ``Nx.LinAlg``)."""
    return module == "Nx.LinAlg" or fun in ACCUMULATING


def accumulation_floor(out: str, values: np.ndarray, n: int) -> float:
    """``FLOOR_ULPS * eps(out) * n * max|values|`` over the finite values (0 for integer and
    half-precision types)."""
    if out not in EPS:
        return 0.0
    finite = np.abs(values[np.isfinite(values)]) if values.size else values
    largest = float(finite.max()) if finite.size else 0.0
    return FLOOR_ULPS * EPS[out] * max(n, 1) * largest


def formula(fn: Any, _seen: frozenset[int] = frozenset()) -> str:
    """What defines a reference function, as text: the source of a function written in this
    project with the values its defaults and closure hold (recursively), or the qualified name
    of a library function (``numpy.exp``): never the numbers it computes, which may differ in
    the last bit from one NumPy, LAPACK or CPU to another."""
    module = getattr(fn, "__module__", None) or ""
    if inspect.isfunction(fn) and _ours(fn):
        if id(fn) in _seen:  # a function that calls itself (held in its own closure)
            return fn.__qualname__
        seen = _seen | {id(fn)}
        parts = [textwrap.dedent(inspect.getsource(fn))]
        parts += [_held(v, seen) for v in fn.__defaults__ or ()]
        parts += [_held(cell.cell_contents, seen) for cell in fn.__closure__ or ()]
        return "\n".join(parts)
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if name is None:
        raise TypeError(f"cannot name the reference function {fn!r}: use a def or a lambda")
    return f"{module or type(fn).__module__}.{name}"


# Where the project's own reference functions live (not the .venv beside them).
_OURS = tuple(Path(__file__).resolve().parent.parent / d for d in ("conformance", "tests"))


def _ours(fn: Any) -> bool:
    """Whether ``fn`` is written in this project (not in NumPy, mpmath, ...)."""
    source = inspect.getsourcefile(fn)
    return source is not None and any(Path(source).resolve().is_relative_to(d) for d in _OURS)


def _held(value: Any, seen: frozenset[int]) -> str:
    """A value a reference function holds, as text that names it without memory addresses."""
    if callable(value):
        return formula(value, seen)
    if isinstance(value, np.ndarray):
        return f"array({value.dtype}, {value.shape}, {value.tobytes().hex()})"
    if isinstance(value, tuple | list):
        return type(value).__name__ + "(" + ", ".join(_held(v, seen) for v in value) + ")"
    text = repr(value)
    if " at 0x" in text:
        raise TypeError(f"a reference function holds {text}, which has no stable text")
    return text


@dataclass
class Result:
    """One expected output: type, shape and flat row-major values."""

    out: str
    shape: tuple[int, ...]
    values: list[Any]  # floats may be nan/inf; complex values are Python complex
    rtol: float
    atol: float
    vectorized: tuple[tuple[str, int], ...] = ()  # the leading axes of the values


@dataclass
class Case:
    fun: str
    args: list[Any]
    opts: dict[str, Any] | None
    results: list[Result]
    node: Wire | None
    grad: bool
    source: str
    module: str = "Nx"
    is_tuple: bool = False  # the call returns a tuple of ``results``
    canonical: str | None = None  # a key of CANONICAL
    name: str = field(default="")
    # what defines the expected values besides the arguments: formula(ref), or the literal
    # values given with expected= (conformance/generate.py puts it in the case's definition)
    reference: str = ""

    @property
    def out(self) -> str:
        """The (first) result type."""
        return self.results[0].out

    @property
    def expected_shape(self) -> tuple[int, ...]:
        return self.results[0].shape

    @property
    def expected_values(self) -> list[Any]:
        return self.results[0].values

    @property
    def op(self) -> str:
        """The name used in the coverage table: ``fun``, or ``LinAlg.fun``."""
        return self.fun if self.module == "Nx" else f"{self.module.removeprefix('Nx.')}.{self.fun}"

    def tensor_inputs(self) -> list[Tensor | Number]:
        """Tensor and number arguments in order (lists flattened; reordered by ``node.order``):
        the node's inputs."""
        found: list[Tensor | Number] = []

        def walk(arg: Any) -> None:
            if isinstance(arg, Tensor | Number):
                found.append(arg)
            elif isinstance(arg, list):
                for item in arg:
                    walk(item)

        for arg in self.args:
            walk(arg)
        if self.node is not None and self.node.order is not None:
            return [found[i] for i in self.node.order]
        return found


def _ref_arg(arg: Any) -> Any:
    """What a reference function receives for an argument: tensors as float64 (floating
    types), complex128 (complex types) or int64 arrays, numbers as NumPy scalars, lists
    element-wise, others as is."""
    if isinstance(arg, Tensor):
        return arg.array.astype(_exact_dtype(arg.type))
    if isinstance(arg, Number):
        return np.float64(arg.value) if isinstance(arg.value, float) else np.int64(arg.value)
    if isinstance(arg, list):
        return [_ref_arg(a) for a in arg]
    return arg


def _describe(arg: Any) -> str:
    """An argument as it reads in Elixir (tensors by type and shape)."""
    if isinstance(arg, Tensor | Number | Reducer):
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


def _round(fun: str, result: Any, out: str) -> list[Any]:
    """The exact result rounded to ``out`` as the worker's result would be, flat."""
    with np.errstate(all="ignore"):
        if is_complex(out):
            rounded = np.asarray(result, dtype=np.complex128).astype(DTYPES[out]) \
                .astype(np.complex128)
        elif is_float(out):
            if np.iscomplexobj(result):
                raise ValueError(f"{fun}: reference gave complex values for {out}")
            rounded = result.astype(np.float64).astype(DTYPES[out]).astype(np.float64)
        else:
            if result.dtype.kind in "fc":
                raise ValueError(f"{fun}: reference gave floats for integer type {out}")
            rounded = result.astype(np.int64).astype(DTYPES[out])
    return [v.item() for v in rounded.reshape(-1)]


def case(
    fun: str,
    args: Sequence[Any],
    opts: dict[str, Any] | None = None,
    *,
    out: str | tuple[str, ...],
    ref: Callable[..., Any] | None = None,
    expected: Any = None,
    node: Wire | None,
    grad: bool = False,
    tol: tuple[float, float] | None = None,
    name: str | None = None,
    source: str | None = None,
    module: str = "Nx",
    canonical: str | None = None,
    vectorized_out: Sequence[tuple[str, int]] = (),
) -> Case:
    """One call ``<module>.<fun>(*args, opts)`` (``opts=None``: no keyword list is passed).

    Give exactly one of ``ref`` (called with the arguments as float64/complex128/int64 NumPy
    values, it returns the exact result; it is rounded to ``out`` like the worker's result) or
    ``expected`` (values, e.g. from Nx's documentation; nested lists give the shape).
    A tuple ``out`` declares a tuple-valued call (``Nx.LinAlg.qr``): ``ref`` returns, and
    ``expected`` holds, one value per element. ``canonical`` names the form of
    ``CANONICAL`` both runners bring the results to before comparing.
    ``node`` is the expected wire node or ``None`` when Nx composes the call from several
    nodes. ``vectorized_out`` names the result's vectorized axes (the leading axes of what
    ``ref``/``expected`` give). ``grad=True`` asks the Elixir side for a finite-difference
    check in f64 of the first floating tensor argument (the sum of every floating output;
    real and imaginary parts of complex outputs).
    """
    if (ref is None) == (expected is None):
        raise ValueError(f"{fun}: give exactly one of ref= or expected=")
    outs = list(out) if isinstance(out, tuple) else [out]
    for o in outs:
        if o not in DTYPES:
            raise ValueError(f"{fun}: unknown out type {o!r}")
    if canonical is not None and canonical not in CANONICAL:
        raise ValueError(f"{fun}: unknown canonical form {canonical!r}")
    if ref is not None:
        with np.errstate(all="ignore"):
            raw = ref(*[_ref_arg(a) for a in args])
        source = source or "numpy float64"
        reference = formula(ref)
    else:
        raw = expected
        source = source or "nx docs"
        reference = "expected=" + repr(expected)
    if vectorized_out and isinstance(out, tuple):
        raise ValueError(f"{fun}: vectorized_out is for a single result")
    parts = list(raw) if isinstance(out, tuple) else [raw]
    if len(parts) != len(outs):
        raise ValueError(f"{fun}: {len(outs)} outputs declared, the reference gave {len(parts)}")
    results = []
    n = _longest_axis(args)
    for o, part in zip(outs, parts, strict=True):
        if ref is None:
            part = np.asarray(part, dtype=_exact_dtype(o))
        part = np.asarray(part)
        rtol, atol = (tol if tol is not None else TOL[o]) if o in TOL else (0.0, 0.0)
        lead = len(vectorized_out)
        if tuple(part.shape[:lead]) != tuple(k for _, k in vectorized_out):
            raise ValueError(f"{fun}: vectorized axes {vectorized_out} do not lead {part.shape}")
        values = _round(fun, part, o)
        if accumulates(fun, module):
            atol = max(atol, accumulation_floor(o, np.asarray(values), n))
        results.append(Result(o, tuple(part.shape[lead:]), values, rtol, atol,
                              tuple(vectorized_out)))
    c = Case(fun, list(args), opts, results, node, grad, source, module=module,
             is_tuple=isinstance(out, tuple), canonical=canonical, reference=reference)
    c.name = name or _default_name(c)
    return c


def _longest_axis(args: Sequence[Any]) -> int:
    """The longest axis of the tensor arguments (lists searched too; vectorized axes count)."""
    longest = 1
    for arg in args:
        if isinstance(arg, Tensor):
            longest = max([longest, *arg.array.shape])
        elif isinstance(arg, list):
            longest = max(longest, _longest_axis(arg))
    return longest


def _default_name(c: Case) -> str:
    args = ", ".join(_describe(a) for a in c.args)
    opts = ""
    if c.opts:
        opts = ", " + ", ".join(f"{k}: {_describe(v)}" for k, v in c.opts.items())
    outs = "{" + ", ".join(r.out for r in c.results) + "}" if c.is_tuple else c.out
    prefix = "" if c.module == "Nx" else c.module.removeprefix("Nx.") + "."
    return f"{prefix}{c.fun}({args}{opts}) -> {outs}"
