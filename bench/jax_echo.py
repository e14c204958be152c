"""The floor of any Python worker that calls JAX, for bench/run.exs section 1.

The raw port of ``port_echo.py`` (same reader, same ``--spin-us`` polling as the worker) and, for
each frame of 4 bytes (a little-endian f32), the jitted ``x * 2 + 1`` of the small-call bench,
its result's 4 bytes written back. No term codec, no request parsing, no GenServer: what a call
costs at least when a Python process between an Erlang port and JAX does nothing else.
"""

from __future__ import annotations

import jax
import numpy as np
from port_echo import RawPort, spin_ns_from_argv


def main() -> None:
    f = jax.jit(lambda x: x * np.float32(2) + np.float32(1))
    port = RawPort(spin_ns_from_argv())
    while (frame := port.read_frame()) is not None:
        x = np.frombuffer(frame, "<f4").reshape(())
        port.write(np.asarray(f(x)).tobytes())


if __name__ == "__main__":
    main()
