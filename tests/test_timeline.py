"""py_backend/timeline.py: a worker started with NX_JAX_TIMELINE_FILE writes a row per request
(and per kept call served by a runner) when it exits; without it, nothing is recorded."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from py_backend import timeline
from py_backend.channel import atom

from .helpers import WorkerProcess, from_wire
from .test_fastcall import axpy_graph, elixir_call, key_of


def test_a_worker_without_the_variable_records_nothing() -> None:
    # (the test process itself starts without NX_JAX_TIMELINE_FILE)
    assert "NX_JAX_TIMELINE_FILE" not in os.environ
    assert timeline.rows is None
    timeline.add(("request", 1, 2, 3, 4))
    assert timeline.rows is None


def test_a_recording_worker_writes_its_rows_on_exit(tmp_path: Path) -> None:
    graph = axpy_graph("f32", (3,))
    key = key_of(graph)
    w = WorkerProcess(env={"NX_JAX_TIMELINE_FILE": str(tmp_path / "worker")})
    try:
        x = np.array([1.0, 2.0, 3.0], np.float32)
        y = np.array([0.5, 0.25, -1.0], np.float32)
        # the graph's first call, then the same call four more times by its key (learned, then
        # served by a runner): every call keeps its results
        for request_id in range(5):
            reply = w.call(bytes(elixir_call(request_id, key, graph if request_id == 0 else None,
                                             [x, y], keep=True)))
            assert reply[0] == atom("r") and reply[1] == request_id
            refs = reply[2]
            assert [r[0] for r in refs] == [atom("ref"), atom("ref")]
        # the last call's results are the values asked for (the small ones come with a copy)
        plain = w.call(bytes(elixir_call(5, key, None, [x, y])))
        np.testing.assert_allclose(from_wire(plain[2][0]), 2 * x + y)
    finally:
        assert w.close() == 0

    files = list(tmp_path.iterdir())
    assert len(files) == 1 and files[0].name.startswith("worker.")
    rows = [line.split(" ") for line in files[0].read_text().splitlines()]
    requests = [[int(v) for v in row[1:]] for row in rows if row[0] == "request"]
    kept = [[int(v) for v in row[1:]] for row in rows if row[0] == "kept"]
    assert {row[0] for row in rows} <= {"request", "kept"}
    # one row per request (the six calls, and the handshake's if any), each in order
    assert len(requests) >= 6
    for read, handled, written, size in requests:
        assert read <= handled <= written and size > 0
    # the kept calls after the first, served by the runner: their stamps in order, inside a
    # request's span
    assert len(kept) >= 2
    for stamps in kept:
        assert stamps == sorted(stamps)
        assert any(r[0] <= stamps[0] and stamps[-1] <= r[1] for r in requests)
