"""How floating-point results are rounded: as Nx's binary backend rounds them, or as XLA does.

Nx 0.7.2 computes each float operation of its binary backend on doubles and rounds the result
once to the tensor's type. XLA's CPU compiler computes f32 transcendental functions with its
own f32 approximations (exp, log, tanh, ... differ from the correctly rounded value in the last
bit for a few percent of inputs) and fuses a product that feeds an addition into one fused
multiply-add (one rounding where Nx rounds twice). Both make results differ from Nx's in the
last bit, which a test comparing with ``==`` sees.

``NX_JAX_NUMERICS`` (the Elixir side always sets it: ``config :nx_jax, numerics:``, whose
default there is ``native``; a worker started by hand, as the Python tests start it, without the
variable computes in ``nx``):

- ``nx``: f32 and c64 transcendental functions are computed in f64/c128 and
  rounded once (the lowerings ask :func:`exact`), and XLA's CPU code generator is
  limited to AVX (no FMA instructions, so no contraction) on x86-64. Matrix products and
  reductions keep XLA's f32 accumulation (Nx accumulates in doubles).
- ``native``: XLA's own f32 math and fusion; faster (docs/BENCHMARKS.md), not bit-exact.

The XLA flag must be in the environment before JAX creates its CPU client, so this module is
imported (by ``py_backend/__init__.py``) before anything imports JAX.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

MODES = ("nx", "native")


# the mode of the graph being traced now (py_backend.lower.Lowering), None outside a trace
_TRACING: ContextVar[str | None] = ContextVar("nx_jax_numerics", default=None)


def checked(value: str) -> str:
    """``value`` if it names a mode, else a ValueError naming the choices."""
    if value not in MODES:
        raise ValueError(
            f"NX_JAX_NUMERICS must be one of {', '.join(MODES)}, got: {value!r} "
            "(config :nx_jax, numerics: :nx | :native)"
        )
    return value


def process_mode() -> str:
    """The numerics mode of this process (``NX_JAX_NUMERICS``, default ``nx``)."""
    return checked(os.environ.get("NX_JAX_NUMERICS") or "nx")


def mode() -> str:
    """The mode of the graph being traced (:func:`tracing_in`), else the process's."""
    return _TRACING.get() or process_mode()


def exact() -> bool:
    """Whether f32 transcendental functions are computed in f64 (mode ``nx``)."""
    return mode() == "nx"


@contextmanager
def tracing_in(value: str) -> Iterator[None]:
    """Within: :func:`mode` is ``value`` (a lowering's mode while JAX traces it; the lowering
    functions read it as they run, so two graphs lowered in two modes can share a process)."""
    token = _TRACING.set(checked(value))
    try:
        yield
    finally:
        _TRACING.reset(token)


# (XLA's CPU compiler reads the ISA limit when it creates its client; AVX has no FMA)
NO_FMA_FLAG = "--xla_cpu_max_isa=AVX"


def apply_xla_flags() -> None:
    """In mode ``nx`` on x86-64, add the flag that keeps XLA's CPU code from contracting
    multiply-adds, unless ``XLA_FLAGS`` already sets an ISA limit."""
    if process_mode() != "nx" or platform.machine().lower() not in ("x86_64", "amd64"):
        return
    flags = os.environ.get("XLA_FLAGS", "")
    if "--xla_cpu_max_isa" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {NO_FMA_FLAG}".strip()
