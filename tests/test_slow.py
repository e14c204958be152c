"""py_backend/slow.py: one line on stderr for work that runs past the threshold, and nothing
for work that ends in time; through the worker, a long compile is logged while it runs."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

from py_backend import slow
from py_backend.channel import Binary

from .helpers import GraphBuilder, WorkerProcess, atom_str, request, scaled, wire_tensor


def test_a_notice_prints_once_past_its_threshold(capsys: pytest.CaptureFixture[str]) -> None:
    with slow.Notice(lambda: "sleeping 0.3 s", after=0.05) as notice:
        time.sleep(0.3)
    assert notice.said
    assert capsys.readouterr().err == "nx_jax worker: sleeping 0.3 s is taking more than 0.05 s\n"


def test_work_that_ends_in_time_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    described = []
    with slow.Notice(lambda: described.append(1) or "never", after=5.0) as notice:
        pass
    time.sleep(0.05)
    assert not notice.said and described == []
    assert capsys.readouterr().err == ""


def test_the_threshold_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NX_JAX_SLOW_S", "0.5")
    assert slow.threshold() == 0.5
    monkeypatch.setenv("NX_JAX_SLOW_S", "soon")
    assert slow.threshold() == 2.0
    monkeypatch.delenv("NX_JAX_SLOW_S")
    assert slow.threshold() == 2.0


def test_the_worker_logs_a_compile_that_runs_past_the_threshold() -> None:
    # a threshold of 0: every compile is "long"; the line goes to the worker's stderr (which
    # the Elixir side forwards to Logger), naming the graph's size and the arguments
    # (300 chained ops: a compile of a good fraction of a second, which the watcher, looking
    # every 10 ms, cannot miss)
    g = GraphBuilder()
    y = g.param(0, "f32", (3,))
    for i in range(300):
        y = g.op("sin" if i % 2 else "cos", y)
    w = WorkerProcess(env={"NX_JAX_SLOW_S": "0"})
    graph = Binary(g.binary([y]))
    reply = w.call(request(1, "run", [graph, [wire_tensor(np.zeros(3, np.float32))]]))
    assert atom_str(reply[0]) == "r"
    # the same call again compiles nothing: no second line
    again = w.call(request(2, "run", [graph, [wire_tensor(np.ones(3, np.float32))]]))
    assert atom_str(again[0]) == "r"
    assert w.proc.stderr is not None
    os.close(w._req_w)  # (EOF: the worker exits, its stderr ends)
    err = w.proc.stderr.read().decode()
    assert w.proc.wait(timeout=scaled(30)) == 0
    assert err.count("nx_jax worker: compiling a graph of 301 nodes for arguments float32[3] "
                     "(0.0 MiB) is taking more than 0 s\n") == 1


def test_notices_start_no_thread_of_their_own() -> None:
    # a thread per notice cost about 100 us per large request; one watcher serves them all
    with slow.Notice(lambda: "warming", after=5.0):
        pass
    threads = threading.active_count()
    for _ in range(100):
        with slow.Notice(lambda: "quick", after=5.0):
            pass
    assert threading.active_count() == threads
    assert sum(t.name == "nx_jax-slow" for t in threading.enumerate()) == 1
