"""The worker ends with the process that started it, whatever it is doing.

End of input on the request pipe ends an idle worker, but a worker that is computing (a long
XLA program, an endless ``while``), compiling, blocked in a host callback or stopped by a
signal does not read its pipe. Two ties cover those states:

- On Linux, ``prctl(PR_SET_PDEATHSIG, SIGKILL)``: the kernel kills the worker when its parent
  (the BEAM's ``erl_child_setup``, which exits with the BEAM) exits. It reaches a stopped
  process too.
- Everywhere, a daemon thread that checks every ``CHECK_EVERY_S`` whether the parent changed
  (a dead parent's children are re-parented) and then ends the process at once. Python threads
  take turns with a busy main thread, and XLA releases the GIL while it computes.

No JAX and no ports here.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1
CHECK_EVERY_S = 0.1
EXIT_PARENT_GONE = 3  # the status of a worker whose parent is gone (nobody reads it)


def parent_death_signal() -> bool:
    """Asks the kernel to SIGKILL this process when its parent exits; whether it could."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _watch(parent: int) -> None:
    while True:
        time.sleep(CHECK_EVERY_S)
        if os.getppid() != parent:
            os._exit(EXIT_PARENT_GONE)


def tie_to_parent() -> bool:
    """Both ties (module docstring); returns whether the kernel's is in place. A process whose
    parent is already gone (re-parented to init) ends at once."""
    parent = os.getppid()
    kernel = parent_death_signal()
    # the parent may have died before the kernel's tie was in place
    if parent == 1 or os.getppid() != parent:
        os._exit(EXIT_PARENT_GONE)
    threading.Thread(target=_watch, args=(parent,), name="nx_jax-lifeline", daemon=True).start()
    return kernel
