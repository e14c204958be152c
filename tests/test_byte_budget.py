"""The worker's byte budget (py_backend/budget.py): a call that would take the worker past
``NX_JAX_MAX_BYTES`` in its arguments, its results or XLA's temporary memory is refused with
``OverBudget`` before it runs, on every path a call takes, and the worker serves on."""

from __future__ import annotations

import hashlib
from typing import Any

import jax
import numpy as np
import pytest

from py_backend import budget
from py_backend.channel import Binary, atom, decode
from py_backend.request_loop import RequestLoop

from .helpers import GraphBuilder, WorkerProcess, atom_str, from_wire, request, wire_tensor

F32 = np.float32
SETTING_NAMES = ("NX_JAX_MAX_BYTES", "config :nx_jax, max_bytes:")


def handle(worker: RequestLoop, payload: bytes) -> Any:
    """The reply to ``payload`` as ``request_loop.serve`` gets it (every fast path)."""
    reply = worker.handle_framed(bytearray(payload))
    if isinstance(reply, bytes):  # a whole frame, its 4-byte length first
        return decode(reply[4:])
    return decode(b"".join(bytes(c) for c in reply))


def call(worker: RequestLoop, request_id: int, graph_bin: bytes, args: list[Any],
         keep: bool = False, send_graph: bool = True, donate: list[int] | None = None) -> Any:
    key = Binary(hashlib.md5(graph_bin).digest() + len(graph_bin).to_bytes(8, "big"))
    extra = [] if donate is None else [donate]
    return handle(worker, request(request_id, "call", [
        key, Binary(graph_bin) if send_graph else None, args, keep, *extra]))


def refused(reply: Any, request_id: int) -> str:
    """The message of an ``OverBudget`` reply, which names the budget's setting."""
    assert atom_str(reply[0]) == "e", reply
    assert reply[1] == request_id
    _python, klass, message, trace = reply[2]
    text = message.value.decode()
    assert klass.value.decode() == "OverBudget", text
    assert trace.value == b""  # (a refusal, not a crash: no traceback)
    for name in SETTING_NAMES:
        assert name in text
    return str(text)


def figures(text: str) -> dict[str, int]:
    """The named figures of a refusal: ``{"resident tensors": 0, "arguments": 4000, ...}``
    (and ``"needs"``, their sum, and ``"budget"``)."""
    needs = text.split(" needs ")[1]
    total, breakdown = needs.split(": ", 1)
    parts = breakdown.split(";")[0].split(". That is")[0].split(" + ")
    named = {part.rsplit(" ", 1)[0]: int(part.rsplit(" ", 1)[1]) for part in parts}
    named["needs"] = int(total.split(" ")[0])
    named["budget"] = int(text.split("byte budget of ")[1].split(" ")[0])
    assert named["needs"] == sum(v for k, v in named.items() if k not in ("needs", "budget"))
    assert named["needs"] > named["budget"]
    return named


def result(reply: Any, request_id: int) -> Any:
    assert atom_str(reply[0]) == "r", reply
    assert reply[1] == request_id
    return reply[2]


def runs(worker: RequestLoop) -> int:
    return worker.cache.stats.runs


def first_graph(n: int) -> bytes:
    """f32[n] -> its first element, f32[1]: n * 4 argument bytes, 4 result bytes."""
    g = GraphBuilder()
    x = g.param(0, "f32", (n,))
    return g.binary([g.op("slice", x, start_indices=[0], lengths=[1], strides=[1],
                          out=("f32", (1,)))])


def broadcasts_graph(n: int, copies: int) -> bytes:
    """f32[] -> ``copies`` outputs f32[n], each the argument broadcast (results only)."""
    g = GraphBuilder()
    x = g.param(0, "f32", ())
    outs = [g.op("add", g.op("broadcast", x, axes=[], out=("f32", (n,))),
                 g.const(float(k), "f32", (n,)))
            for k in range(copies)]
    return g.binary(outs)


def temporary_graph(n: int) -> bytes:
    """f32[n] -> a scalar through an f32[n, n] intermediate XLA must hold (a cumulative sum of
    the argument broadcast to a square): temporary memory of at least 4 n^2 bytes."""
    g = GraphBuilder()
    x = g.param(0, "f32", (n,))
    square = g.op("broadcast", x, axes=[1], out=("f32", (n, n)))
    running = g.op("cumulative_sum", square, axis=0, reverse=False)
    return g.binary([g.op("sum", running, axes=None, keep_axes=False, out=("f32", ()))])


def small_worker(monkeypatch: pytest.MonkeyPatch, max_bytes: int, **options: Any) -> RequestLoop:
    monkeypatch.setenv("NX_JAX_MAX_BYTES", str(max_bytes))
    worker = RequestLoop(**options)
    assert worker.max_bytes == max_bytes
    return worker


# --- the setting ------------------------------------------------------------------------------


@pytest.mark.parametrize("raw", ["0", "-1", "1e9", "12 GB", "", "abc"])
def test_the_setting_must_be_a_positive_integer_of_bytes(monkeypatch: pytest.MonkeyPatch,
                                                         raw: str) -> None:
    monkeypatch.setenv("NX_JAX_MAX_BYTES", raw)
    with pytest.raises(ValueError, match="NX_JAX_MAX_BYTES must be a positive integer") as info:
        RequestLoop()
    assert "config :nx_jax, max_bytes:" in str(info.value)


def test_unset_the_budget_is_three_quarters_of_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NX_JAX_MAX_BYTES", raising=False)
    memory = budget.host_memory()
    assert memory is not None and memory > 0
    assert RequestLoop().max_bytes == memory * 3 // 4
    # an accelerator that reports less memory than the host bounds it (the CPU reports none)
    assert budget.device_memory(jax.devices()[0]) is None

    class Accelerator:
        def memory_stats(self) -> dict[str, int]:
            return {"bytes_limit": 4000}

    assert budget.default_max_bytes(Accelerator()) == 3000


def test_a_worker_with_a_bad_setting_does_not_start() -> None:
    proc = WorkerProcess(env={"NX_JAX_MAX_BYTES": "lots"})
    assert proc.proc.wait(timeout=120) != 0
    assert proc.proc.stderr is not None
    assert b"NX_JAX_MAX_BYTES must be a positive integer of bytes" in proc.proc.stderr.read()
    proc.close()


# --- a call over the budget, by where its bytes are -------------------------------------------


def test_a_call_over_the_budget_in_its_arguments_is_refused_and_the_next_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    worker = small_worker(monkeypatch, 3000)
    before = runs(worker)
    text = refused(call(worker, 1, first_graph(1000), [wire_tensor(np.ones(1000, F32))]), 1)
    named = figures(text)
    assert (named["resident tensors"], named["arguments"], named["results"]) == (0, 4000, 4)
    assert "XLA temporary memory" in named and named["budget"] == 3000
    assert "budget of 3000 bytes" in text
    assert runs(worker) == before
    ok = result(call(worker, 2, first_graph(100), [wire_tensor(np.arange(100, dtype=F32) + 7)]),
                2)
    assert from_wire(ok[0]).tolist() == [7.0]


def test_a_call_over_the_budget_in_its_results_is_refused_and_the_next_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the case, scaled down: 13 outputs of n elements from one scalar
    worker = small_worker(monkeypatch, 50_000)
    text = refused(call(worker, 1, broadcasts_graph(1000, 13), [wire_tensor(F32(2))]), 1)
    named = figures(text)
    assert (named["arguments"], named["results"]) == (4, 52_000)
    assert runs(worker) == 0
    ok = result(call(worker, 2, broadcasts_graph(1000, 2), [wire_tensor(F32(2))]), 2)
    assert [from_wire(t)[-1] for t in ok] == [2.0, 3.0]


def test_a_call_over_the_budget_in_xla_temporary_memory_is_refused_and_the_next_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    worker = small_worker(monkeypatch, 500_000)
    text = refused(call(worker, 1, temporary_graph(512), [wire_tensor(np.ones(512, F32))]), 1)
    named = figures(text)
    assert (named["arguments"], named["results"]) == (2048, 4)
    assert named["XLA temporary memory"] >= 4 * 512 * 512
    assert runs(worker) == 0
    ok = result(call(worker, 2, temporary_graph(64), [wire_tensor(np.ones(64, F32))]), 2)
    assert from_wire(ok[0]).tolist() == sum(range(1, 65)) * 64


def test_resident_tensors_count_once_and_a_run_needs_them_all(
        monkeypatch: pytest.MonkeyPatch) -> None:
    worker = small_worker(monkeypatch, 6000)
    (handle_,) = result(handle(worker, request(1, "put", [[wire_tensor(np.ones(1000, F32))]])), 1)
    # a resident argument is among the resident bytes, not counted again as an argument
    ok = result(call(worker, 2, first_graph(1000), [(atom("ref"), handle_)]), 2)
    assert from_wire(ok[0]).tolist() == [1.0]
    # another 4000 bytes shipped beside the 4000 resident ones: over
    text = refused(call(worker, 3, first_graph(1000), [wire_tensor(np.ones(1000, F32))]), 3)
    named = figures(text)
    assert (named["resident tensors"], named["arguments"], named["results"]) == (4000, 4000, 4)
    # a put over the budget makes nothing resident
    text = refused(handle(worker, request(4, "put", [[wire_tensor(np.ones(1000, F32))]])), 4)
    assert text.startswith("this put needs 8000 bytes (7.8 KiB): ")
    assert figures(text) == {"resident tensors": 4000, "tensors put": 4000, "needs": 8000,
                             "budget": 6000}
    assert (len(worker.resident), worker.resident_bytes) == (1, 4000)
    # freed, the same call runs
    assert result(handle(worker, request(5, "free", [[handle_]])), 5) == 1
    ok = result(call(worker, 6, first_graph(1000), [wire_tensor(np.ones(1000, F32))]), 6)
    assert from_wire(ok[0]).tolist() == [1.0]


def test_results_that_reuse_donated_memory_are_not_counted_twice(
        monkeypatch: pytest.MonkeyPatch) -> None:
    g = GraphBuilder()
    x = g.param(0, "f32", (1000,))
    double = g.binary([g.op("add", x, x)])
    worker = small_worker(monkeypatch, 6000)
    (handle_,) = result(handle(worker, request(1, "put", [[wire_tensor(np.ones(1000, F32))]])), 1)
    # 4000 resident + 4000 of results: over, unless the results take the argument's memory
    named = figures(refused(call(worker, 2, double, [(atom("ref"), handle_)]), 2))
    assert (named["resident tensors"], named["arguments"], named["results"]) == (4000, 0, 4000)
    (ref,) = result(call(worker, 3, double, [(atom("ref"), handle_)], keep=True, donate=[0]), 3)
    assert (len(worker.resident), worker.resident_bytes) == (1, 4000)
    fetched = result(handle(worker, request(4, "fetch", [[ref[1]]])), 4)
    assert from_wire(fetched[0]).tolist() == [2.0] * 1000


def test_without_a_memory_analysis_arguments_and_results_count_and_the_refusal_says_so(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jax.stages.Compiled, "memory_analysis", lambda self: None)
    worker = small_worker(monkeypatch, 500_000)
    # the temporary memory goes uncounted: the call runs
    ok = result(call(worker, 1, temporary_graph(128), [wire_tensor(np.ones(128, F32))]), 1)
    assert from_wire(ok[0]).tolist() == sum(range(1, 129)) * 128
    text = refused(call(worker, 2, first_graph(200_000), [wire_tensor(np.ones(200_000, F32))]),
                   2)
    assert figures(text) == {"resident tensors": 0, "arguments": 800_000, "results": 4,
                             "needs": 800_004, "budget": 500_000}
    assert "; XLA's temporary memory is not counted: memory_analysis() gives none on this " \
           "backend, so only arguments and results are" in text


# --- every path a call takes ------------------------------------------------------------------


@pytest.mark.parametrize("keep", [False, True])
def test_a_learned_call_is_checked_on_its_fast_path(monkeypatch: pytest.MonkeyPatch,
                                                    keep: bool) -> None:
    """A repeated small call runs on a byte-matched path (py_backend/fastcall.py); once
    resident tensors fill the budget it is refused there too, and runs again once they go."""
    worker = small_worker(monkeypatch, 6000)
    graph = first_graph(100)
    x = wire_tensor(np.ones(100, F32))
    result(call(worker, 1, graph, [x], keep=keep), 1)
    for i in range(2, 5):
        result(call(worker, i, graph, [x], keep=keep, send_graph=False), i)
    stats = worker.cache.stats
    fast = stats.fast_one_calls + stats.fast_hot_calls + stats.fast_layout_calls
    assert fast >= 2
    (big,) = result(handle(worker, request(5, "put", [[wire_tensor(np.ones(1400, F32))]])), 5)
    before = runs(worker)
    named = figures(refused(call(worker, 6, graph, [x], keep=keep, send_graph=False), 6))
    assert (named["arguments"], named["results"]) == (400, 4)
    assert runs(worker) == before
    assert stats.fast_one_calls + stats.fast_hot_calls + stats.fast_layout_calls == fast + 1
    assert result(handle(worker, request(7, "free", [[big]])), 7) == 1
    ok = result(call(worker, 8, graph, [x], keep=keep, send_graph=False), 8)
    assert runs(worker) == before + 1
    if not keep:
        assert from_wire(ok[0]).tolist() == [1.0]


def test_the_graph_carrying_run_and_debug_run_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    worker = small_worker(monkeypatch, 3000)
    for function in ("run", "debug_run"):
        payload = request(1, function, [Binary(first_graph(1000)),
                                        [wire_tensor(np.ones(1000, F32))]])
        text = refused(handle(worker, payload), 1)
        named = figures(text)
        assert (named["arguments"], named["results"]) == (4000, 4)
        ok = handle(worker, request(2, function, [Binary(first_graph(10)),
                                                  [wire_tensor(np.ones(10, F32))]]))
        assert from_wire(result(ok, 2)[0]).tolist() == [1.0]
    assert "debug_run runs op by op" in text


def test_a_worker_process_refuses_a_call_over_its_budget_and_serves_on() -> None:
    proc = WorkerProcess(env={"NX_JAX_MAX_BYTES": "50000"})
    try:
        payload = request(1, "run", [Binary(broadcasts_graph(1000, 13)), [wire_tensor(F32(1))]])
        refused(proc.call(payload), 1)
        ok = proc.call(request(2, "run", [Binary(broadcasts_graph(1000, 2)),
                                          [wire_tensor(F32(1))]]))
        assert [from_wire(t)[0] for t in result(ok, 2)] == [1.0, 2.0]
    finally:
        assert proc.close() == 0


def test_calls_of_tens_of_gigabytes_are_refused_before_anything_is_allocated(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Shapes every per-tensor check lets through: 13 f32 outputs of 2 * 10^9 elements
    (104 GB), one c128 tensor of 2^31 - 1 elements (34 GB)."""
    worker = small_worker(monkeypatch, 8 << 30)
    g = GraphBuilder()
    x = g.param(0, "f32", ())
    big = ("f32", (2_000_000_000,))
    outs = [g.op("add", g.op("broadcast", x, axes=[], out=big), g.const(float(k)), out=big)
            for k in range(13)]
    named = figures(refused(call(worker, 1, g.binary(outs), [wire_tensor(F32(1))]), 1))
    assert named["results"] == 13 * 2_000_000_000 * 4
    g = GraphBuilder()
    z = g.param(0, "c128", ())
    wide = g.op("broadcast", z, axes=[], out=("c128", (2**31 - 1,)))
    named = figures(refused(call(worker, 2, g.binary([wide]), [wire_tensor(np.complex128(1))]),
                            2))
    assert named["results"] == (2**31 - 1) * 16
    assert runs(worker) == 0
    ok = result(call(worker, 3, first_graph(10), [wire_tensor(np.ones(10, F32))]), 3)
    assert from_wire(ok[0]).tolist() == [1.0]


def test_a_learned_call_whose_compiled_entry_left_the_cache_is_measured_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    stand_ins: list[Any] = []  # signatures measured without their arguments at hand
    specs = budget.specs
    monkeypatch.setattr(budget, "specs", lambda sig: stand_ins.append(sig) or specs(sig))
    worker = small_worker(monkeypatch, 6000)
    worker.cache.max_entries = 1  # (one program, one compiled entry at a time)
    g = GraphBuilder()
    x = g.param(0, "f32", (100,))
    graph = g.binary([g.op("add", x, x)])
    ones = wire_tensor(np.ones(100, F32))
    for i in range(1, 4):  # sent, then learned
        result(call(worker, i, graph, [ones], send_graph=i == 1), i)
    # the same graph donating a resident argument: another entry, which drops the first
    (held,) = result(handle(worker, request(4, "put", [[ones]])), 4)
    (ref,) = result(call(worker, 5, graph, [(atom("ref"), held)], keep=True, send_graph=False,
                         donate=[0]), 5)
    assert result(handle(worker, request(6, "free", [[ref[1]]])), 6) == 1
    ok = result(call(worker, 7, graph, [ones], send_graph=False), 7)  # on its learned layout
    assert from_wire(ok[0]).tolist() == [2.0] * 100
    assert stand_ins == [((np.dtype(F32), (100,)),)]
    (big,) = result(handle(worker, request(8, "put", [[wire_tensor(np.ones(1400, F32))]])), 8)
    named = figures(refused(call(worker, 9, graph, [ones], send_graph=False), 9))
    assert (named["resident tensors"], named["arguments"], named["results"]) == (5600, 400, 400)
