"""The worker: in-process dispatch and ``python -m py_backend`` as a real subprocess on fds 3/4
(PROTOCOL.md sections 2 and 5)."""

from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from py_backend import channel
from py_backend.channel import Binary, atom, decode, encode, text
from py_backend.request_loop import RequestLoop

from .helpers import (
    GraphBuilder,
    WorkerProcess,
    atom_str,
    from_wire,
    request,
    wire_tensor,
)

F32 = np.float32


def exp_graph(shape: tuple[int, ...] = (3,)) -> bytes:
    g = GraphBuilder()
    x = g.param(0, "f32", shape)
    return g.binary([g.op("add", g.op("exp", x), x)])


def run_request(request_id: int, graph_bin: bytes, *arrays: Any) -> bytes:
    return request(request_id, "run", [Binary(graph_bin), [wire_tensor(a) for a in arrays]])


def assert_error(reply: Any, request_id: int, cls: str, match: str = "") -> str:
    assert atom_str(reply[0]) == "e", reply
    assert reply[1] == request_id
    python, klass, message, trace = reply[2]
    assert atom_str(python) == "python"
    assert klass.value.decode() == cls, message.value
    assert isinstance(trace, Binary)
    assert match in message.value.decode()
    return str(message.value.decode())


def assert_pong(reply: Any, request_id: int) -> None:
    assert atom_str(reply[0]) == "r" and reply[1] == request_id and atom_str(reply[2]) == "pong"


@pytest.fixture(scope="module")
def proc() -> Iterator[WorkerProcess]:
    worker = WorkerProcess()
    yield worker
    assert worker.close() == 0


# --- subprocess ------------------------------------------------------------------------------


def test_ping(proc: WorkerProcess) -> None:
    assert_pong(proc.call(request(1, "ping", [])), 1)


def test_info(proc: WorkerProcess) -> None:
    reply = proc.call(request(2, "info", []))
    assert atom_str(reply[0]) == "r"
    info = {atom_str(k): v for k, v in reply[2].items()}
    assert info["protocol"] == 1
    assert info["backend"].value == b"cpu"
    assert info["codec"].value.startswith(b"erlang-py")
    assert isinstance(info["jax_version"], Binary) and isinstance(info["devices"], list)
    # the worker grew both pipes of its channel (on Linux, to pipe-max-size, at most 1 MiB)
    r, w = os.pipe()
    try:
        expected = channel.grow_pipe(r)
    finally:
        os.close(r)
        os.close(w)
    assert info["pipe_bytes"] == [expected, expected]
    if expected is not None:
        assert expected > 65536


def test_run_returns_one_tensor_per_output(proc: WorkerProcess) -> None:
    x = np.array([1.0, 2.0, 3.0], F32)
    g = GraphBuilder()
    p = g.param(0, "f32", (3,))
    e = g.op("exp", p)
    s = g.op("sum", p, axes=None, keep_axes=False, out=("f64", ()))
    reply = proc.call(run_request(3, g.binary([e, s, e]), x))
    assert atom_str(reply[0]) == "r" and reply[1] == 3
    e1, total, e2 = reply[2]
    assert e1[0] == (atom("f"), 32) and e1[1] == (3,)
    np.testing.assert_allclose(from_wire(e1), np.exp(x), rtol=1e-6)
    assert total[0] == (atom("f"), 64) and total[1] == () and from_wire(total) == 6.0
    assert from_wire(e2).tolist() == from_wire(e1).tolist()


def test_run_with_grad_and_custom_grad(proc: WorkerProcess) -> None:
    g = GraphBuilder()
    t = g.param(0)
    y = g.op("log1p", g.op("exp", t))
    cot = g.add("cotangent", [], {}, ("f32", ()))
    one = g.const(1.0)
    grad = g.op("multiply", cot,
                g.op("subtract", one, g.op("divide", one, g.op("add", one, g.op("exp", t)))))
    cg = g.add("custom_grad", [y], {"wrt": [t], "cotangents": [cot], "grads": [grad],
                                    "tuple": False})
    gr = g.add("grad", [cg, t], {}, [("f32", ())])
    dt = g.op("elem", gr, index=0, out=("f32", ()))
    reply = proc.call(run_request(4, g.binary([cg, dt]), F32(100.0)))
    value, grad_value = (from_wire(r) for r in reply[2])
    assert value == np.inf and grad_value == 1.0


def test_scalar_and_empty_tensors_travel(proc: WorkerProcess) -> None:
    g = GraphBuilder()
    a = g.param(0, "s64", ())
    b = g.param(1, "f32", (0, 3))
    reply = proc.call(run_request(5, g.binary([g.op("negate", a), g.op("exp", b)]),
                                  np.int64(-2**40), np.zeros((0, 3), F32)))
    neg, empty = reply[2]
    assert neg[1] == () and from_wire(neg) == 2**40
    assert empty[1] == (0, 3) and empty[2].value == b""


def test_bad_term_gets_bad_request_and_the_next_request_works(proc: WorkerProcess) -> None:
    proc.send_raw(b"\x83\x68\x09garbage")
    assert_error(proc.receive(), -1, "BadRequest")
    proc.send_raw(b"")
    assert_error(proc.receive(), -1, "BadRequest")
    assert_pong(proc.call(request(6, "ping", [])), 6)


def test_wrong_message_shape_gets_bad_request(proc: WorkerProcess) -> None:
    assert_error(proc.call(encode((atom("call"), 7, atom("nx_jax"), atom("ping"), []))), 7,
                 "BadRequest")
    assert_error(proc.call(encode([1, 2, 3])), -1, "BadRequest")
    assert_error(proc.call(encode((atom("C"), atom("x"), atom("nx_jax"), atom("ping"), []))),
                 -1, "BadRequest")
    assert_error(proc.call(encode((atom("C"), 8, atom("nx_jax"), atom("ping"), atom("x")))),
                 8, "BadRequest")
    assert_error(proc.call(request(9, "ping", [1])), 9, "BadRequest", "takes 0 arguments")
    assert_pong(proc.call(request(10, "ping", [])), 10)


def test_unknown_function_is_refused(proc: WorkerProcess) -> None:
    assert_error(proc.call(request(11, "system", [text("touch /tmp/pwned")], module="os")), 11,
                 "UnknownFunction", "os")
    assert_error(proc.call(request(12, "eval", [])), 12, "UnknownFunction", "eval")
    assert_error(proc.call(request(13, "ping", [], module="builtins")), 13, "UnknownFunction")
    assert not os.path.exists("/tmp/pwned")
    assert_pong(proc.call(request(14, "ping", [])), 14)


def test_unknown_op_and_wrong_arity_are_graph_errors(proc: WorkerProcess) -> None:
    g = GraphBuilder()
    x = g.param(0, "f32", (3,))
    g.op("frobnicate", x)
    assert_error(proc.call(run_request(15, g.binary([1]), np.zeros(3, F32))), 15, "GraphError",
                 "node 1 (frobnicate): unknown op")
    g = GraphBuilder()
    x = g.param(0, "f32", (3,))
    g.add("add", [x], {}, ("f32", (3,)))
    assert_error(proc.call(run_request(16, g.binary([1]), np.zeros(3, F32))), 16, "GraphError",
                 "node 1 (add): takes 2 inputs, got 1")
    assert_error(proc.call(request(17, "run", [Binary(b"\x83junk"), []])), 17, "GraphError")
    assert_pong(proc.call(request(18, "ping", [])), 18)


def test_arguments_not_matching_parameters_are_argument_errors(proc: WorkerProcess) -> None:
    graph = exp_graph((3,))
    assert_error(proc.call(run_request(19, graph, np.zeros(4, F32))), 19, "ArgumentError",
                 "argument 0")
    assert_error(proc.call(run_request(20, graph, np.zeros(3, np.float64))), 20,
                 "ArgumentError")
    assert_error(proc.call(run_request(21, graph)), 21, "ArgumentError", "got 0 arguments")
    bad_tensor = ((atom("f"), 32), (3,), Binary(b"\x00" * 5))
    assert_error(proc.call(request(22, "run", [Binary(graph), [bad_tensor]])), 22,
                 "ArgumentError", "5 bytes")
    assert_pong(proc.call(request(23, "ping", [])), 23)


def test_a_shape_error_from_jax_is_reported(proc: WorkerProcess) -> None:
    g = GraphBuilder()
    x = g.param(0, "f32", (2, 3))
    g.op("sum", x, axes=[1], keep_axes=False, out=("f32", (3,)))
    assert_error(proc.call(run_request(24, g.binary([1]), np.zeros((2, 3), F32))), 24,
                 "ShapeError", "node 1 (sum)")


def test_large_tensors_round_trip(proc: WorkerProcess) -> None:
    x = np.arange(1 << 24, dtype=F32).reshape(1 << 12, 1 << 12)  # 64 MB each way
    g = GraphBuilder()
    p = g.param(0, "f32", x.shape)
    reply = proc.call(run_request(25, g.binary([g.op("negate", p)]), x))
    np.testing.assert_array_equal(from_wire(reply[2][0]), -x)


def test_stats_count_compiles_hits_runs_and_errors() -> None:
    w = WorkerProcess()
    try:
        graph = exp_graph((3,))
        for i in range(3):
            assert atom_str(w.call(run_request(i, graph, np.zeros(3, F32)))[0]) == "r"
        assert atom_str(w.call(run_request(3, graph, np.zeros(3, F32) + 1))[0]) == "r"
        assert atom_str(w.call(run_request(4, exp_graph((2,)), np.zeros(2, F32)))[0]) == "r"
        w.call(request(5, "nope", []))
        reply = w.call(request(6, "stats", []))
        stats = {atom_str(k): v for k, v in reply[2].items()}
        assert stats == {"compiles": 2, "cache_hits": 3, "runs": 5, "errors": 1,
                         "graph_loads": 2, "unknown_graphs": 0, "resident": 0,
                         "resident_bytes": 0, "pressure_notices": 0, "fast_one_calls": 0,
                         "fast_hot_calls": 0, "fast_layout_calls": 0,
                         "paused_spins": 0}
    finally:
        assert w.close() == 0


def test_oversize_frame_gets_an_error_and_the_stream_stays_in_sync() -> None:
    w = WorkerProcess(env={"NX_JAX_MAX_FRAME": "1000"})
    try:
        assert_error(w.call(encode(Binary(b"x" * 5000))), -1, "BadRequest", "NX_JAX_MAX_FRAME")
        assert_pong(w.call(request(1, "ping", [])), 1)
        # a refused request is answered under its own id (its caller is not left waiting),
        # read from the frame's first bytes; the worker keeps serving
        big = Binary(b"y" * 5000)
        for request_id in (7, 70_000):
            assert_error(w.call(request(request_id, "put", [[big]])), request_id,
                         "BadRequest", "exceeds the limit of 1000 bytes")
        assert_pong(w.call(request(2, "ping", [])), 2)
    finally:
        assert w.close() == 0


def test_a_deeply_nested_request_is_refused_under_its_id_and_the_worker_serves_on(
        proc: WorkerProcess) -> None:
    for request_id, depth in enumerate((500, 1000, 10_000, 100_000), start=20):
        # {:"C", id, :nx_jax, :ping, [{{...{1}...}}]}, the tuples written by hand
        frame = request(request_id, "ping", [7])
        assert frame.endswith(b"a\x07j")
        deep = frame[:-3] + b"h\x01" * depth + b"a\x01j"
        assert_error(proc.call(deep), request_id, "BadRequest",
                     f"nested deeper than {channel.MAX_DEPTH} levels")
        assert_pong(proc.call(request(request_id, "ping", [])), request_id)


def test_eof_ends_the_worker_with_status_0() -> None:
    w = WorkerProcess()
    assert_pong(w.call(request(1, "ping", [])), 1)
    assert w.close() == 0


def test_eof_inside_a_frame_ends_the_worker_with_status_0() -> None:
    w = WorkerProcess()
    os.write(w._req_w, struct.pack(">I", 100) + b"abc")
    assert w.close() == 0


# --- in-process --------------------------------------------------------------------------------


def handle(worker: RequestLoop, payload: bytes) -> Any:
    return decode(b"".join(bytes(c) for c in worker.handle(payload)))


def test_in_process_every_request_gets_exactly_one_reply() -> None:
    worker = RequestLoop()
    assert_pong(handle(worker, request(1, "ping", [])), 1)
    error = handle(worker, run_request(2, b"\x83\x6a", np.zeros(3, F32)))
    assert_error(error, 2, "GraphError", "nx_jax_graph")
    assert "Traceback" in error[2][3].value.decode()


def test_in_process_args_as_erlang_string_are_accepted() -> None:
    # [1, 2] would arrive as STRING_EXT: the dispatcher must not mistake it for a non-list.
    payload = encode((atom("C"), 3, atom("nx_jax"), atom("ping"), b"\x01\x02"))
    assert_error(handle(RequestLoop(), payload), 3, "BadRequest",
                 "takes 0 arguments")


def test_in_process_run_with_bf16_and_s64_tensors() -> None:
    import ml_dtypes

    g = GraphBuilder()
    x = g.param(0, "bf16", (2,))
    n = g.param(1, "s64", (2,))
    payload = run_request(1, g.binary([g.op("multiply", x, x), g.op("add", n, n)]),
                          np.array([1.5, 3.0], ml_dtypes.bfloat16),
                          np.array([2**62, -(2**40)], np.int64))
    reply = handle(RequestLoop(), payload)
    sq, twice = reply[2]
    assert sq[0] == (atom("bf"), 16) and from_wire(sq).astype(np.float32).tolist() == [2.25, 9.0]
    assert from_wire(twice).tolist() == [-(2**63), -(2**41)]  # real s64: 2**63 wraps around


# --- call by key, resident tensors (PROTOCOL.md section 7) ---------------------------------------


def key_of(graph_bin: bytes) -> Any:
    return Binary(hashlib.md5(graph_bin).digest() + len(graph_bin).to_bytes(8, "big"))


def call_request(request_id: int, graph_bin: bytes, send_graph: bool, args: list[Any],
                 keep: bool = False) -> bytes:
    graph = Binary(graph_bin) if send_graph else None
    return request(request_id, "call", [key_of(graph_bin), graph, args, keep])


def stats_of(worker: RequestLoop) -> dict[str, int]:
    reply = handle(worker, request(99, "stats", []))
    return {atom_str(k): v for k, v in reply[2].items()}


def test_call_by_key_runs_without_the_graph_once_it_was_sent() -> None:
    worker = RequestLoop()
    graph = exp_graph((3,))
    x = np.array([0.0, 1.0, 2.0], F32)
    first = handle(worker, call_request(1, graph, True, [wire_tensor(x)]))
    second = handle(worker, call_request(2, graph, False, [wire_tensor(x)]))
    np.testing.assert_allclose(from_wire(first[2][0]), np.exp(x) + x, rtol=1e-6)
    np.testing.assert_array_equal(from_wire(second[2][0]), from_wire(first[2][0]))
    stats = stats_of(worker)
    assert (stats["graph_loads"], stats["compiles"], stats["cache_hits"]) == (1, 1, 1)


def test_call_with_an_unknown_key_is_refused_with_unknown_graph() -> None:
    worker = RequestLoop()
    graph = exp_graph((3,))
    x = wire_tensor(np.zeros(3, F32))
    assert_error(handle(worker, call_request(1, graph, False, [x])), 1, "UnknownGraph",
                 "send the graph")
    handle(worker, call_request(2, graph, True, [x]))
    assert atom_str(handle(worker, call_request(3, graph, False, [x]))[0]) == "r"
    handle(worker, request(4, "forget_graphs", []))
    assert_error(handle(worker, call_request(5, graph, False, [x])), 5, "UnknownGraph")
    assert stats_of(worker)["unknown_graphs"] == 2


def test_call_refuses_a_key_that_is_not_the_graph_hash() -> None:
    worker = RequestLoop()
    payload = request(1, "call", [Binary(b"k" * 24), Binary(exp_graph((3,))),
                                  [wire_tensor(np.zeros(3, F32))], False])
    assert_error(handle(worker, payload), 1, "BadRequest", "md5")


def test_resident_results_feed_later_calls_and_come_back_by_fetch() -> None:
    worker = RequestLoop()
    graph = exp_graph((3,))
    x = np.array([0.0, 0.5, 1.0], F32)
    kept = handle(worker, call_request(1, graph, True, [wire_tensor(x)], keep=True))[2]
    assert atom_str(kept[0][0]) == "ref"
    handle_1 = kept[0][1]
    again = handle(worker, call_request(2, graph, False, [(atom("ref"), handle_1)], keep=True))
    handle_2 = again[2][0][1]
    fetched = handle(worker, request(3, "fetch", [[handle_1, handle_2]]))[2]
    fx = np.exp(x) + x  # exp_graph
    np.testing.assert_allclose(from_wire(fetched[0]), fx, rtol=1e-6)
    np.testing.assert_allclose(from_wire(fetched[1]), np.exp(fx) + fx, rtol=1e-6)
    assert stats_of(worker)["resident"] == 2
    assert handle(worker, request(4, "free", [[handle_1, handle_2, 12345]]))[2] == 2
    assert stats_of(worker)["resident"] == 0
    assert_error(handle(worker, request(5, "fetch", [[handle_1]])), 5, "UnknownHandle", "freed")


def test_handles_cannot_be_guessed_and_are_never_given_out_twice() -> None:
    """A handle is a count over 40 random bits: a free (or fetch) of guessed, sequential
    handles from another sender touches no resident tensor, and a handle once freed never
    names another tensor (a late free of it is harmless)."""
    worker = RequestLoop()
    x = np.arange(3, dtype=F32)
    handles = [worker.put([[wire_tensor(x)]])[0] for _ in range(50)]
    assert len(set(handles)) == 50 and all(0 < h < 2**64 for h in handles)
    assert [h >> 40 for h in handles] == list(range(1, 51))
    # (the 40 low bits: 50 draws below 2**20 have a probability of about 1e-10)
    assert sum(h & (2**40 - 1) < 2**20 for h in handles) < 3
    assert worker.free([list(range(1, 10_000))]) == 0
    assert len(worker.resident) == 50
    assert worker.free([handles[:2]]) == 2
    later = [worker.put([[wire_tensor(x)]])[0] for _ in range(50)]
    assert not set(later) & set(handles)
    assert worker.free([handles[:2]]) == 0 and len(worker.resident) == 98


def test_put_makes_tensors_resident_with_their_type() -> None:
    worker = RequestLoop()
    x = np.array([[1, -2], [3, 4]], np.int64)
    [h] = handle(worker, request(1, "put", [[wire_tensor(x)]]))[2]
    [back] = handle(worker, request(2, "fetch", [[h]]))[2]
    assert back[0] == (atom("s"), 64)
    np.testing.assert_array_equal(from_wire(back), x)


def test_a_small_kept_result_comes_with_its_bytes_and_a_large_one_without() -> None:
    """A kept result of at most 64 bytes (a loss) is answered ``{:ref, handle, data}``, so that
    reading it costs the client no request; a larger one ``{:ref, handle}``."""
    worker = RequestLoop()
    for n, with_data in [(16, True), (17, False)]:
        graph = exp_graph((n,))
        x = np.linspace(0, 1, n, dtype=F32)
        [ref] = handle(worker, call_request(1, graph, True, [wire_tensor(x)], keep=True))[2]
        assert atom_str(ref[0]) == "ref" and (len(ref) == 3) == with_data
        [fetched] = handle(worker, request(2, "fetch", [[ref[1]]]))[2]
        if with_data:
            assert ref[2].value == fetched[2].value
            np.testing.assert_allclose(np.frombuffer(ref[2].value, F32), np.exp(x) + x, rtol=1e-6)


def test_a_resident_argument_of_another_type_or_shape_is_refused() -> None:
    worker = RequestLoop()
    graph = exp_graph((3,))
    for wrong in (np.zeros(4, F32), np.zeros(3, np.float64)):
        [h] = worker.put([[wire_tensor(wrong)]])
        reply = handle(worker, call_request(1, graph, True, [(atom("ref"), h)], keep=True))
        assert_error(reply, 1, "ArgumentError", "argument 0 is")


@pytest.mark.parametrize("n", [2**31, 2**40 + 12345, (2**24 << 40) | 7, 2**64 - 1])
def test_large_handles_encode_as_erlang_py_encodes_them(n: int) -> None:
    import erlang
    assert channel.encode(n) == bytes(erlang.term_to_binary(n))
    assert decode(channel.encode(n)) == n


def test_resident_bytes_follow_keep_put_and_free() -> None:
    worker = RequestLoop()
    graph = exp_graph((3,))
    [h1] = worker.put([[wire_tensor(np.zeros((4, 5), np.float64))]])
    kept = handle(worker, call_request(1, graph, True, [wire_tensor(np.zeros(3, F32))],
                                       keep=True))[2]
    assert stats_of(worker)["resident_bytes"] == 160 + 12
    worker.free([[h1, kept[0][1], h1]])
    assert stats_of(worker)["resident_bytes"] == 0


def test_a_pressure_notice_each_time_resident_bytes_grow_by_the_setting(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``{:pressure, bytes}`` goes out (before the reply) when the bytes kept reach the mark;
    the next mark is the setting above them, and a free brings it down to the setting above
    what is left."""
    monkeypatch.setenv("NX_JAX_RESIDENT_GC_BYTES", "4000")
    worker = RequestLoop()
    sent: list[Any] = []
    worker.emit = lambda chunks: sent.append(decode(b"".join(bytes(c) for c in chunks)))
    x = wire_tensor(np.zeros(250, F32))  # 1000 bytes
    handles = [worker.put([[x]])[0] for _ in range(9)]
    notices = [(atom_str(t[0]), t[1]) for t in sent]
    # at 4000 bytes (next mark 8000), at 8000 (next 12000)
    assert notices == [("pressure", 4000), ("pressure", 8000)]
    worker.free([handles[:8]])
    assert worker.pressure_mark == 1000 + 4000
    sent.clear()
    for _ in range(4):
        worker.put([[x]])
    assert [(atom_str(t[0]), t[1]) for t in sent] == [("pressure", 5000)]
    assert stats_of(worker)["pressure_notices"] == 3


@pytest.mark.parametrize("raw", ["100", "-5", "1e6", "lots", "0"])
def test_the_pressure_setting_is_checked(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("NX_JAX_RESIDENT_GC_BYTES", raw)
    if raw == "100":
        assert RequestLoop().resident_gc_bytes == 100
    else:
        with pytest.raises(ValueError, match="NX_JAX_RESIDENT_GC_BYTES must be a positive"):
            RequestLoop()


def test_a_donated_resident_argument_is_reused_and_no_longer_resident() -> None:
    worker = RequestLoop()
    graph = exp_graph((3,))
    x = np.array([0.0, 0.5, 1.0], F32)
    [h] = worker.put([[wire_tensor(x)]])
    [kept] = handle(worker, request(1, "call", [key_of(graph), Binary(graph),
                                                [(atom("ref"), h)], True, [0]]))[2]
    assert h not in worker.resident and kept[1] in worker.resident
    np.testing.assert_allclose(from_wire(handle(worker, request(2, "fetch", [[kept[1]]]))[2][0]),
                               np.exp(x) + x, rtol=1e-6)
    assert stats_of(worker)["resident_bytes"] == 12
    assert_error(handle(worker, request(3, "fetch", [[h]])), 3, "UnknownHandle")
    # a loop that donates its state keeps one tensor resident
    state = kept[1]
    for i in range(20):
        [ref] = handle(worker, request(4 + i, "call", [key_of(graph), None,
                                                      [(atom("ref"), state)], True, [0]]))[2]
        state = ref[1]
    assert list(worker.resident) == [state]


@pytest.mark.parametrize("donate, args, match", [
    ([2], "one", "not a position"),
    ([1], "one", "not resident"),
    ([0], "wire", "not resident"),
    ("x", "one", "must be a list"),
    ([True], "one", "not a position"),
    ([0], "twice", "also donated"),
])
def test_donation_refuses_what_it_cannot_give(donate: Any, args: str, match: str) -> None:
    worker = RequestLoop()
    g = GraphBuilder()
    a, b = g.param(0, "f32", (3,)), g.param(1, "f32", (3,))
    graph = g.binary([g.op("add", a, b)])
    [h] = worker.put([[wire_tensor(np.ones(3, F32))]])
    ref = (atom("ref"), h)
    wire = wire_tensor(np.ones(3, F32))
    call_args = {"one": [ref, wire], "wire": [wire, wire], "twice": [ref, ref]}[args]
    reply = handle(worker, request(1, "call", [key_of(graph), Binary(graph), call_args, True,
                                               donate]))
    assert_error(reply, 1, "BadRequest", match)
    assert h in worker.resident


def test_ten_thousand_kept_steps_with_frees_hold_one_tensor_and_bounded_rss() -> None:
    """The loop a client with garbage-collected tensors drives: each step keeps its result
    and frees the one before."""
    worker = RequestLoop()
    g = GraphBuilder()
    p = g.param(0, "s32", (256, 256))
    graph = g.binary([g.op("add", p, g.const(1, "s32"))])
    [state] = worker.put([[wire_tensor(np.zeros((256, 256), np.int32))]])
    rss = []
    for i in range(10_000):
        [ref] = handle(worker, request(i, "call", [key_of(graph), Binary(graph) if i == 0 else None,
                                                  [(atom("ref"), state)], True]))[2]
        assert worker.free([[state]]) == 1
        state = ref[1]
        if i + 1 in (1_000, 10_000):
            rss.append({atom_str(k): v for k, v in worker.memory([False]).items()}["rss"])
    assert len(worker.resident) == 1 and worker.resident_bytes == 256 * 256 * 4
    np.testing.assert_array_equal(from_wire(worker.fetch([[state]])[0]),
                                  np.full((256, 256), 10_000, np.int32))
    assert rss[1] - rss[0] < 32 << 20


def test_memory_reports_rss_and_peak() -> None:
    reply = handle(RequestLoop(), request(1, "memory", [True]))[2]
    mem = {atom_str(k): v for k, v in reply.items()}
    assert 0 < mem["rss"] <= mem["peak_rss"]


def test_a_large_call_holds_under_three_copies_of_its_tensor() -> None:
    # 128 MB in, 128 MB out: the worker's peak RSS above its idle RSS stays under 3x the tensor
    # (the request frame is released once the argument is on the device)
    w = WorkerProcess()
    try:
        n = 32 << 20  # f32 elements: 128 MB
        g = GraphBuilder()
        p = g.param(0, "f32", (n,))
        graph = g.binary([g.op("negate", p)])
        small_x = np.ones(n, F32)
        assert atom_str(w.call(call_request(1, graph, True, [wire_tensor(small_x)]))[0]) == "r"
        del small_x
        idle = {atom_str(k): v for k, v in w.call(request(2, "memory", [True]))[2].items()}
        x = np.arange(n, dtype=F32)
        reply = w.call(call_request(3, graph, False, [wire_tensor(x)]))
        np.testing.assert_array_equal(from_wire(reply[2][0])[:5], -x[:5])
        after = {atom_str(k): v for k, v in w.call(request(4, "memory", [False]))[2].items()}
        assert after["peak_rss"] - idle["rss"] < 3 * x.nbytes
    finally:
        assert w.close() == 0


# --- stdout / stderr forwarding (py_backend/stdio.py) ------------------------------------------


def test_split_lines_keeps_the_unfinished_rest_and_cuts_long_lines() -> None:
    from py_backend import stdio

    assert stdio.split_lines(b"", b"one\ntwo\n") == ([b"one", b"two"], b"")
    assert stdio.split_lines(b"par", b"tial") == ([], b"partial")
    long = b"x" * (stdio.MAX_LINE + 3)
    assert stdio.split_lines(b"", long + b"\nend") == ([long[: stdio.MAX_LINE], b"xxx"], b"end")
    assert stdio.split_lines(b"", long) == ([long[: stdio.MAX_LINE]], b"xxx")


def test_line_numbers_follow_the_order_of_the_frames_across_threads() -> None:
    import threading

    from py_backend import stdio

    r, w = os.pipe()
    sender = stdio.LineSender(channel.FrameWriter(w))
    per_thread = 300

    def send_lines(stream: str) -> None:
        for i in range(per_thread):
            sender.send(stream, f"{stream} {i}".encode())

    threads = [threading.Thread(target=send_lines, args=(s,)) for s in ("stdout", "stderr")]
    frames: list[Any] = []
    reader = channel.FrameReader(r)

    def read_all() -> None:
        for _ in range(2 * per_thread):
            frames.append(decode(reader.read_frame()))

    collector = threading.Thread(target=read_all)
    collector.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    collector.join()
    os.close(w)
    os.close(r)
    # 1, 2, 3, ... in the order the frames came, whichever thread wrote each
    assert [f[3] for f in frames] == list(range(1, 2 * per_thread + 1))
    for stream in ("stdout", "stderr"):
        lines = [f[2].value for f in frames if atom_str(f[1]) == stream]
        assert lines == [f"{stream} {i}".encode() for i in range(per_thread)]


def test_debug_print_is_refused_unless_nx_jax_test_is_set() -> None:
    payload = request(1, "debug_print", [atom("print"), text("hi")])
    assert_error(handle(RequestLoop(test_functions=False), payload), 1, "UnknownFunction",
                 "is not served")
    assert atom_str(handle(RequestLoop(test_functions=True), request(2, "info", []))[0]) == "r"


def test_output_on_fds_1_and_2_is_forwarded_as_log_frames_between_intact_replies() -> None:
    import subprocess
    import sys

    from py_backend.channel import FrameReader, FrameWriter

    from .helpers import REPO, scaled

    req_r, req_w = os.pipe()
    rep_r, rep_w = os.pipe()
    wire = f'exec "$0" -m py_backend --forward-stdio 3<&{req_r} 4>&{rep_w} {req_r}<&- {rep_w}>&-'
    proc = subprocess.Popen(
        ["/bin/bash", "-c", wire, sys.executable], cwd=REPO, pass_fds=(req_r, rep_w),
        env={**os.environ, "NX_JAX_TEST": "1"}, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    os.close(req_r)
    os.close(rep_w)
    writer, reader = FrameWriter(req_w), FrameReader(rep_r)
    logs: list[tuple[str, bytes]] = []
    seqs: list[int] = []

    def reply_to(request_id: int) -> Any:
        while True:
            frame = reader.read_frame()
            assert frame is not None
            term = decode(frame)
            if atom_str(term[0]) == "log":
                logs.append((atom_str(term[1]), term[2].value))
                seqs.append(term[3])
            else:
                assert term[1] == request_id, term
                return term

    try:
        modes = ["print", "stderr", "fd", "libc"]
        for i, how in enumerate(modes):
            writer.write_frame(request(i, "debug_print", [atom(how), text(f"line from {how}")]))
            assert atom_str(reply_to(i)[2]) == "ok"
        # the pump threads may still be sending: ask until every line has come through
        for i in range(100, 200):
            writer.write_frame(run_request(i, exp_graph((2,)), np.zeros(2, F32)))
            reply = reply_to(i)
            assert from_wire(reply[2][0]).tolist() == [1.0, 1.0]
            if len(logs) >= 4:
                break
        assert sorted(logs) == sorted([
            ("stdout", b"line from print"), ("stderr", b"line from stderr"),
            ("stdout", b"line from fd"), ("stdout", b"line from libc"),
        ])
        # numbered in the order they came through the channel, both streams together
        assert seqs == [1, 2, 3, 4]
    finally:
        os.close(req_w)
        assert proc.wait(timeout=scaled(30)) == 0
        assert proc.stdout is not None and proc.stdout.read() == b""  # nothing escaped to fd 1
        os.close(rep_r)


def test_to_host_converts_the_dtype_and_keeps_c_order_bytes() -> None:
    from py_backend.request_loop import to_host

    square = np.arange(6, dtype=np.float32).reshape(2, 3)
    # a transposed view (not C-contiguous) of another dtype: converted, bytes in C order
    host = to_host(square.astype(np.float64).T, np.dtype("<f4"), (3, 2))
    assert host.dtype == np.dtype("<f4")
    assert host.tobytes() == np.ascontiguousarray(square.T).tobytes()
    assert host.reshape(-1).view(np.uint8).tobytes() == np.ascontiguousarray(square.T).tobytes()
    with pytest.raises(ValueError, match="not the declared"):
        to_host(square, np.dtype("<f4"), (3, 2))
