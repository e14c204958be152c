"""The worker's own handling of one training step, in-process (no port), for
bench/train_loop.exs; prints one JSON object of microseconds.

    python bench/step_handling.py GRAPH_FILE [ROUNDS] [NUMERICS]

GRAPH_FILE holds the step's graph binary as the Elixir side sent it (the training loop's Adam
step of bench/train_loop.exs). A worker made here puts the loop's state and batches (the formulas
of bench/train_loop.py), then serves the loop as NxJax does: a key-only ``call`` naming 15
resident tensors, keeping its 14 results, and a ``free`` of the previous step's results, each
as a request frame. The run itself is taken out (the program returns the arrays of one real
run), so what is timed is the rest: reading the request, finding the arguments, keeping the
results, writing the reply, and the free.

- ``handling``: call and free, median over ROUNDS rounds of 1,000 steps;
- ``run``: the jitted step alone, its loss read back (in-process, the same arrays).
"""

from __future__ import annotations

import os
import sys

# NUMERICS (default native, the default of `config :nx_jax, numerics:`) is the mode of the
# worker made here, as the loop's worker has it from the Elixir side: it decides the lowering
# (:nx adds Nx's exact rounding), so it is set before py_backend is imported
os.environ["NX_JAX_NUMERICS"] = sys.argv[3] if len(sys.argv) > 3 else "native"

import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import train_loop  # noqa: E402 (bench/train_loop.py: the state's formulas)

from py_backend import channel  # noqa: E402
from py_backend.channel import atom  # noqa: E402
from py_backend.request_loop import RequestLoop, graph_key  # noqa: E402


def frame(function: str, args: list[Any]) -> bytearray:
    return bytearray(channel.encode((atom("C"), 7, atom("nx_jax"), atom(function), args)))


def wire(array: np.ndarray) -> Any:
    kind = {np.dtype(np.float32): ("f", 32), np.dtype(np.int32): ("s", 32)}[array.dtype]
    return ((atom(kind[0]), kind[1]), tuple(array.shape), channel.binary(array.tobytes()))


def reply_of(chunks: list[Any]) -> Any:
    return channel.decode(b"".join(bytes(memoryview(c)) for c in chunks))


def main() -> None:
    graph = Path(sys.argv[1]).read_bytes()
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    key = graph_key(graph)
    worker = RequestLoop()
    (params, m, v, t), batches = train_loop.initial(np)
    arrays = [*params, *m, *v, np.asarray(t, np.int32)] + [a for b in batches for a in b]
    handles = reply_of(worker.handle(frame("put", [[wire(a) for a in arrays]])))[2]
    state, batch_handles = handles[:13], handles[13:]
    refs = [(atom("ref"), h) for h in [*state, *batch_handles[:2]]]
    worker.handle(frame("call", [channel.binary(key), channel.binary(graph), refs, True]))
    program = worker.cache.program_by_key(key)
    assert program is not None
    inputs = [worker.resident[h][0] for h in [*state, *batch_handles[:2]]]
    jitted = program.jitted
    one_run = jitted(*inputs)
    jax.block_until_ready(one_run)

    def run_us(n: int) -> float:
        times = []
        for _ in range(n):
            t0 = time.perf_counter_ns()
            np.asarray(jitted(*inputs)[-1])
            times.append((time.perf_counter_ns() - t0) / 1000)
        return statistics.median(times)

    # the run taken out: the program gives one run's arrays
    program.jitted = lambda *_args: list(one_run)
    worker._hot = worker._one = None
    call_frame = bytes(frame("call", [channel.binary(key), atom("nil"), refs, True]))

    def handling_us(n: int) -> float:
        times = []
        for _ in range(n):
            t0 = time.perf_counter_ns()
            reply = worker.handle(bytearray(call_frame))
            t1 = time.perf_counter_ns()
            # (decoding the reply and encoding the free are this script's work: not counted)
            free = frame("free", [[r[1] for r in reply_of(reply)[2]]])
            t2 = time.perf_counter_ns()
            worker.handle(free)
            times.append((t1 - t0 + time.perf_counter_ns() - t2) / 1000)
        return statistics.median(times)

    out: dict[str, list[float]] = {"handling": [], "run": []}
    for _ in range(rounds):
        out["handling"].append(round(handling_us(1000), 1))
        program.jitted = jitted
        out["run"].append(round(run_us(300), 1))
        program.jitted = lambda *_args: list(one_run)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
