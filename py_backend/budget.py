"""The worker's byte budget: what it may hold at once, checked before anything runs.

Per-tensor limits (``NX_JAX_MAX_ELEMENTS``, the frame limit) do not bound a call: one graph may
declare a dozen outputs of the largest allowed size, or an intermediate far larger than its
arguments and results. So every call is checked, before it runs, against one figure per
worker, ``NX_JAX_MAX_BYTES`` (the client sets it from ``config :nx_jax, max_bytes:``):

    resident tensors + arguments shipped with the call + results + XLA's temporary memory

Resident arguments are already among the resident tensors; results that reuse donated
arguments' memory (XLA's aliases) are not counted twice. XLA's temporary memory is what the
compiled executable says it needs (``memory_analysis()``), read once per compiled signature,
before its first run; a backend that does not say is counted by arguments and results alone,
and a refusal says so. Unset, the budget is three quarters of the machine's memory (its
cgroup's limit when lower) or, on an accelerator that reports its memory, of that when lower.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import numpy as np

SETTING = "NX_JAX_MAX_BYTES"
CONFIG = "config :nx_jax, max_bytes:"
# the share of the machine's memory a worker may hold when the setting is unset: the rest is
# the Python process itself, its compiled code, the frames in flight, and the BEAM beside it
DEFAULT_SHARE = (3, 4)
CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


class OverBudget(Exception):
    """A request that would take the worker past its byte budget; refused before it runs."""


class Footprint:
    """The bytes of one run of a compiled signature: its arguments, whether shipped or
    resident (``arguments``), its results, less what they take over from donated arguments
    (``results``), and XLA's temporary memory (``temp``, ``None`` where the backend does not
    say); what the run needs besides its arguments (``need``), and the most it can need besides
    the resident tensors (``bound``: a call within it skips counting its shipped arguments)."""

    __slots__ = ("arguments", "results", "temp", "need", "bound")

    def __init__(self, arguments: int, results: int, temp: int | None) -> None:
        self.arguments, self.results, self.temp = arguments, results, temp
        self.need = results + (temp or 0)
        self.bound = arguments + self.need


def host_memory() -> int | None:
    """Physical memory, or the cgroup's limit where that is lower; ``None`` if unreadable."""
    sizes: list[int] = []
    try:
        sizes.append(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError):
        pass
    for path in CGROUP_LIMITS:
        try:
            with open(path) as f:
                raw = f.read().strip()
        except OSError:
            continue
        if raw.isdigit():  # ("max" where unlimited; v1 says a huge number instead)
            sizes.append(int(raw))
    positive = [s for s in sizes if s > 0]
    return min(positive) if positive else None


def device_memory(device: Any) -> int | None:
    """The memory an accelerator reports for its arrays (``bytes_limit``), or ``None`` (the CPU
    reports none)."""
    try:
        stats = device.memory_stats() if device is not None else None
    except Exception:  # (a backend without memory statistics raises instead)
        return None
    limit = stats.get("bytes_limit") if isinstance(stats, dict) else None
    return limit if isinstance(limit, int) and limit > 0 else None


def default_max_bytes(device: Any = None) -> int:
    """``DEFAULT_SHARE`` of the smallest of the host's memory (:func:`host_memory`) and
    ``device``'s (:func:`device_memory`), of 16 GiB when neither can be read."""
    known = [m for m in (host_memory(), device_memory(device)) if m is not None]
    memory = min(known) if known else 16 << 30
    share, of = DEFAULT_SHARE
    return memory * share // of


def max_bytes(environ: Mapping[str, str] = os.environ, device: Any = None) -> int:
    """``NX_JAX_MAX_BYTES`` (a positive integer of bytes), else :func:`default_max_bytes`;
    anything else is an error naming the setting (the worker does not start)."""
    raw = environ.get(SETTING)
    if raw is None:
        return default_max_bytes(device)
    if not raw.isdigit() or int(raw) <= 0:
        raise ValueError(f"{SETTING} must be a positive integer of bytes, got: {raw!r} ({CONFIG})")
    return int(raw)


def footprint(jitted: Any, arguments: Sequence[Any], result_bytes: int) -> Footprint:
    """The footprint of ``jitted`` on arguments like ``arguments`` (arrays, or
    ``jax.ShapeDtypeStruct``), whose results take ``result_bytes``. It compiles the function
    ahead of its first run; ``jax.jit`` keeps what it compiled, so that run compiles nothing
    again. An error while lowering or compiling is the call's own error and is raised."""
    argument_bytes = sum(math.prod(a.shape) * np.dtype(a.dtype).itemsize for a in arguments)
    compiled = jitted.lower(*arguments).compile()
    try:
        analysis = compiled.memory_analysis()
        temp = int(analysis.temp_size_in_bytes)
        aliased = int(analysis.alias_size_in_bytes)
    except Exception:  # (None, or a backend that raises: both mean "not known")
        return Footprint(argument_bytes, result_bytes, None)
    return Footprint(argument_bytes, max(0, result_bytes - aliased), max(0, temp))


def specs(signature: Sequence[tuple[Any, tuple[int, ...]]]) -> list[jax.ShapeDtypeStruct]:
    """Stand-ins for arguments of ``signature`` (``py_backend.cache.signature``), for
    :func:`footprint` where the arguments themselves are not at hand."""
    return [jax.ShapeDtypeStruct(shape, dtype) for dtype, shape in signature]


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n} bytes ({n / (1 << shift):.1f} {unit})"
    return f"{n} bytes"


def refusal(what: str, parts: Sequence[tuple[str, int]], budget: int,
            unknown: str | None = None) -> OverBudget:
    """The error for ``what`` (e.g. "this call"), which needs the sum of ``parts`` (named
    figures) over ``budget``; ``unknown`` says what could not be counted, and why."""
    total = sum(n for _, n in parts)
    breakdown = " + ".join(f"{name} {n}" for name, n in parts)
    note = f"; {unknown}" if unknown else ""
    return OverBudget(
        f"{what} needs {_size(total)}: {breakdown}{note}. That is over this worker's byte "
        f"budget of {_size(budget)}, set by {SETTING} ({CONFIG}); it was refused and "
        "nothing was done. Free resident tensors, split the work, or raise the budget"
    )


def call_refusal(resident: int, arguments: int, footprint: Footprint, budget: int) -> OverBudget:
    """:func:`refusal` for a compiled call."""
    parts = [("resident tensors", resident), ("arguments", arguments),
             ("results", footprint.results)]
    if footprint.temp is None:
        return refusal("this call", parts, budget,
                       "XLA's temporary memory is not counted: memory_analysis() gives none on "
                       "this backend, so only arguments and results are")
    return refusal("this call", [*parts, ("XLA temporary memory", footprint.temp)], budget)
