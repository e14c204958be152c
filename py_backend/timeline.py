"""Timestamps of the worker's requests, for ``make bench-timeline`` (bench/step_timeline.exs,
docs/BENCHMARKS.md "Where a training step's time goes"), the worker's half of
``NxJax.Timeline``.

Recorded only when the worker starts with ``NX_JAX_TIMELINE_FILE`` set: each request's times
(``time.perf_counter_ns``, the OS's monotonic clock, which the Elixir side's marks read too)
are kept in memory, at most ``LIMIT`` rows, and written to that path, followed by ``.`` and
the process id, when the worker exits. Without it ``rows`` is ``None`` and nothing is
recorded.

Two kinds of rows, one per line, space-separated:

- ``request READ HANDLED WRITTEN SIZE``: a request frame read whole, its reply made, its
  reply written, and the frame's size;
- ``kept START DISPATCHED READY KEPT ENCODED``: a call that keeps its results, served by a
  runner of RequestLoop: its start (the arguments not yet read), the run dispatched, the run
  finished (the timeline's runner waits for it here, where the normal runner keeps the
  results while it computes), the results kept with the copies of the small ones, and the
  reply encoded.
"""

from __future__ import annotations

import atexit
import os

LIMIT = 200_000

PATH = os.environ.get("NX_JAX_TIMELINE_FILE") or None

rows: list[tuple[object, ...]] | None = [] if PATH else None


def _write() -> None:
    if rows is None or PATH is None:
        return
    with open(f"{PATH}.{os.getpid()}", "w", encoding="ascii") as out:
        for row in rows:
            out.write(" ".join(str(value) for value in row) + "\n")


def add(row: tuple[object, ...]) -> None:
    """Keeps ``row`` (while fewer than ``LIMIT`` are kept)."""
    if rows is not None and len(rows) < LIMIT:
        rows.append(row)


if rows is not None:
    atexit.register(_write)
