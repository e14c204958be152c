"""First end-to-end check: ping and a simple run through a real subprocess."""

import numpy as np

from py_backend.channel import Binary

from .helpers import GraphBuilder, WorkerProcess, atom_str, from_wire, request, wire_tensor


def test_ping_and_simple_run_through_subprocess() -> None:
    g = GraphBuilder()
    x = g.param(0, "f32", (3,))
    y = g.op("add", g.op("exp", x), x)
    worker = WorkerProcess()
    try:
        reply = worker.call(request(1, "ping", []))
        assert atom_str(reply[0]) == "r" and reply[1] == 1 and atom_str(reply[2]) == "pong"
        x_val = np.array([1.0, 2.0, 3.0], np.float32)
        reply = worker.call(request(2, "run", [Binary(g.binary([y])), [wire_tensor(x_val)]]))
        assert atom_str(reply[0]) == "r" and reply[1] == 2
        np.testing.assert_allclose(from_wire(reply[2][0]), np.exp(x_val) + x_val, rtol=1e-6)
    finally:
        assert worker.close() == 0
