"""Long work tells the user: a compile, or the arrival of a large request, that runs past
``NX_JAX_SLOW_S`` seconds (default 2) prints one line on stderr saying what it is and how big,
while it still runs; nothing is printed for work that ends in time. The worker forwards stderr
to the Elixir side, where the line is logged as a warning (PROTOCOL.md 2.1).

One watcher thread, started with the first notice, looks at the work in progress while there
is some (every 10 ms for thresholds under a second, else every 250 ms) and sleeps on an event
otherwise: entering and leaving a :class:`Notice` costs a clock read, a list update and an
event set (a thread per notice cost about 100 us, more than a 64 KiB request takes to
arrive)."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType


def threshold() -> float:
    """Seconds before a notice (``NX_JAX_SLOW_S``; default 2)."""
    try:
        return max(float(os.environ.get("NX_JAX_SLOW_S", "2")), 0.0)
    except ValueError:
        return 2.0


_active: list[Notice] = []  # the notices whose work runs now (appends and removes are atomic)
_watcher: threading.Thread | None = None
_wake = threading.Event()  # set when a notice begins, for a watcher with nothing to watch
_start_lock = threading.Lock()


def _watch() -> None:
    while True:
        if not _active:  # idle: sleep until a notice begins
            _wake.wait()
            _wake.clear()
            continue
        now = time.monotonic()
        for notice in list(_active):
            if not notice.said and now - notice.started >= notice.after:
                notice.said = True
                print(f"nx_jax worker: {notice.describe()} is taking more than "
                      f"{notice.after:g} s", file=sys.stderr, flush=True)
        time.sleep(0.01 if any(n.after < 1 for n in _active) else 0.25)


def _ensure_watcher() -> None:
    global _watcher
    if _watcher is None:
        with _start_lock:
            if _watcher is None:
                _watcher = threading.Thread(target=_watch, name="nx_jax-slow", daemon=True)
                _watcher.start()


class Notice:
    """``with Notice(describe): ...`` prints ``nx_jax worker: <describe()> is taking more than
    N s`` once if the block runs past the threshold. ``describe`` is only called then."""

    def __init__(self, describe: Callable[[], str], after: float | None = None) -> None:
        self.describe = describe
        self.after = threshold() if after is None else after
        self.said = False
        self.started = 0.0

    def __enter__(self) -> Notice:
        self.started = time.monotonic()
        _active.append(self)  # (before the watcher starts: its first look finds this one)
        _ensure_watcher()
        _wake.set()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        _active.remove(self)
