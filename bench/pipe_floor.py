"""The training step of bench/train_loop.exs with no BEAM: a worker process started as the
Erlang port starts it (``python -m py_backend``, requests on its fd 3, replies on its fd 4)
serves the step's calls, and this script is its client, doing as little as a client can (the
request's bytes spliced from a template, the reply decoded, the previous steps' results freed
every other step, the free sent after the call). Its blocks of 20 steps alternate with blocks of
the same step jitted in-process in JAX (bench/train_loop.py's twin), so both are timed in the
same seconds: what the pipe crossings and the worker cost a step, whatever the client.

    python bench/pipe_floor.py GRAPH_FILE [BLOCKS] [NUMERICS] [SPIN_US]

GRAPH_FILE holds the step's graph binary as the Elixir side sent it (bench/step_timeline.exs
writes it); NUMERICS (default native) and SPIN_US (default 100) are the worker's
``NX_JAX_NUMERICS`` and ``NX_JAX_SPIN_US``, as NxJax's defaults set them. Prints one JSON
object: ``ours`` and ``twin`` (step medians in us), ``ratio`` (the median of the blocks'
ratios) and ``client_us`` (this client's own work per step, median: the request made and the
reply decoded).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

import train_loop  # noqa: E402 (bench/train_loop.py: the state's formulas and the twin)

from py_backend import channel  # noqa: E402
from py_backend.channel import FrameReader, FrameWriter, atom  # noqa: E402
from py_backend.request_loop import _REF2, encode_handle, graph_key  # noqa: E402

BLOCK = 20


class Worker:
    """``python -m py_backend`` on pipes at its fds 3 and 4."""

    def __init__(self, env: dict[str, str]) -> None:
        # (fds 3 and 4 of this process taken first, so that no pipe end gets them: the shell
        # below would close a pipe end it had just moved there)
        spare = [os.open(os.devnull, os.O_RDONLY) for _ in range(3)]
        req_r, self._req_w = os.pipe()
        self._rep_r, rep_w = os.pipe()
        for fd in spare:
            os.close(fd)
        wire = f'exec "$0" -m py_backend 3<&{req_r} 4>&{rep_w} {req_r}<&- {rep_w}>&-'
        self.proc = subprocess.Popen(
            ["/bin/bash", "-c", wire, sys.executable], cwd=ROOT, pass_fds=(req_r, rep_w),
            env={**os.environ, **env}, stdin=subprocess.DEVNULL,
        )
        os.close(req_r)
        os.close(rep_w)
        self.writer = FrameWriter(self._req_w)
        self.reader = FrameReader(self._rep_r)

    def send(self, frame: bytes) -> None:
        self.writer.write_frame(frame)

    def receive(self) -> Any:
        """The next reply (a ``{:pressure, bytes}`` notice is skipped: the frees keep up)."""
        while True:
            frame = self.reader.read_frame()
            if frame is None:
                raise RuntimeError("the worker closed its reply stream")
            reply = channel.decode(frame)
            if reply[0] != atom("pressure"):
                if reply[0] != atom("r"):
                    raise RuntimeError(f"the worker answered {reply!r}")
                return reply[2]

    def close(self) -> None:
        os.close(self._req_w)
        self.proc.wait(timeout=60)
        os.close(self._rep_r)


def request(function: str, args: list[Any]) -> bytes:
    return channel.encode((atom("C"), 7, atom("nx_jax"), atom(function), args))


def wire(array: np.ndarray) -> Any:
    kind = {np.dtype(np.float32): ("f", 32), np.dtype(np.int32): ("s", 32)}[array.dtype]
    return ((atom(kind[0]), kind[1]), tuple(array.shape), channel.binary(array.tobytes()))


def main() -> None:
    graph = Path(sys.argv[1]).read_bytes()
    blocks = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    numerics = sys.argv[3] if len(sys.argv) > 3 else "native"
    spin = sys.argv[4] if len(sys.argv) > 4 else "100"
    key = channel.binary(graph_key(graph))
    worker = Worker({"NX_JAX_NUMERICS": numerics, "NX_JAX_SPIN_US": spin})
    try:
        result = measure(worker, key, graph, blocks)
    finally:
        worker.close()
    print(json.dumps(result))


def measure(worker: Worker, key: Any, graph: bytes, blocks: int) -> dict[str, Any]:
    (params, m, v, t), batches = train_loop.initial(np)
    arrays = [*params, *m, *v, np.asarray(t, np.int32)] + [a for b in batches for a in b]
    worker.send(request("put", [[wire(a) for a in arrays]]))
    handles = worker.receive()
    state, batch_handles = handles[:13], handles[13:]
    worker.send(request("call", [key, channel.binary(graph),
                                 [(atom("ref"), h) for h in [*state, *batch_handles[:2]]], True]))
    state = [ref[1] for ref in worker.receive()[:13]]

    # the call's bytes: a template around its 15 refs, each {:ref, handle}
    probe = 2**45 + 7
    template = request("call", [key, atom("nil"), [(atom("ref"), probe)] * 15, True])
    one = _REF2 + encode_handle(probe)
    at = template.index(one)
    head, tail = template[:at], template[at + 15 * len(one):]
    batch_refs = [_REF2 + encode_handle(batch_handles[2 * k]) +
                  _REF2 + encode_handle(batch_handles[2 * k + 1]) for k in range(4)]
    client: list[float] = []
    freed: list[int] = []

    def steps(first: int, count: int) -> list[float]:
        nonlocal state, freed
        times = []
        for i in range(first, first + count):
            t0 = time.perf_counter_ns()
            worker.send(b"".join((head, *[_REF2 + encode_handle(h) for h in state],
                                  batch_refs[i % 4], tail)))
            sent = time.perf_counter_ns()
            free = bool(freed) and i % 2 == 0
            if free:  # (after the call: the worker frees while this client takes its turn)
                worker.send(request("free", [freed]))
            out = worker.receive()
            got = time.perf_counter_ns()
            loss = out[13]
            float(np.frombuffer(loss[2].value, np.float32)[0])
            freed = [*freed, *state, loss[1]] if not free else [*state, loss[1]]
            if free:
                worker.receive()
            state = [ref[1] for ref in out[:13]]
            end = time.perf_counter_ns()
            times.append((end - t0) / 1000)
            client.append((sent - t0 + end - got) / 1000)
        return times

    twin = train_loop.mlp_blocks()
    steps(0, BLOCK)  # (uncounted, as the twin's first steps are)
    client.clear()
    ours_all: list[float] = []
    twin_all: list[float] = []
    ratios = []
    for b in range(blocks):
        theirs, _losses = twin(BLOCK)
        ours = steps((b + 1) * BLOCK, BLOCK)
        ours_all += ours
        twin_all += theirs
        ratios.append(statistics.median(ours) / statistics.median(theirs))
    return {
        "ours": round(statistics.median(ours_all), 1),
        "twin": round(statistics.median(twin_all), 1),
        "ratio": round(statistics.median(ratios), 3),
        "client_us": round(statistics.median(client), 1),
    }


if __name__ == "__main__":
    main()
