"""Long work tells the user: a compile, or the arrival of a large request, that runs past
``NX_JAX_SLOW_S`` seconds (default 2) prints one line on stderr saying what it is and how big,
while it still runs (a timer thread; nothing is printed for work that ends in time). The worker
forwards stderr to the Elixir side, where the line is logged as a warning (PROTOCOL.md 2.1)."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from types import TracebackType


def threshold() -> float:
    """Seconds before a notice (``NX_JAX_SLOW_S``; default 2)."""
    try:
        return max(float(os.environ.get("NX_JAX_SLOW_S", "2")), 0.0)
    except ValueError:
        return 2.0


class Notice:
    """``with Notice(describe): ...`` prints ``nx_jax worker: <describe()> is taking more than
    N s`` once if the block runs past the threshold. ``describe`` is only called then."""

    def __init__(self, describe: Callable[[], str], after: float | None = None) -> None:
        self.describe = describe
        self.after = threshold() if after is None else after
        self.said = False
        self._timer: threading.Timer | None = None

    def _say(self) -> None:
        self.said = True
        print(f"nx_jax worker: {self.describe()} is taking more than {self.after:g} s",
              file=sys.stderr, flush=True)

    def __enter__(self) -> Notice:
        self._timer = threading.Timer(self.after, self._say)
        self._timer.daemon = True
        self._timer.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
