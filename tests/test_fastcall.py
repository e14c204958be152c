"""The small-call fast path (py_backend/fastcall.py): learned request layouts must match only
frames that are the learned request with another id and other tensor bytes, and the worker must
answer a matched frame with exactly the bytes the generic path writes."""

from __future__ import annotations

import hashlib
import io
import random
import struct
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from py_backend import channel, fastcall
from py_backend.cache import Cache
from py_backend.channel import FrameReader, FrameWriter, atom, decode, encode_chunks
from py_backend.request_loop import RequestLoop, serve

from .helpers import GraphBuilder, from_wire, wire_tensor

# --- frames as Elixir 1.14 / OTP 25 writes them (ATOM_EXT atoms, SMALL_INTEGER/INTEGER ids) ---


def _atom(name: str) -> bytes:
    raw = name.encode()
    return b"d" + struct.pack(">H", len(raw)) + raw


def _int(value: int) -> bytes:
    if 0 <= value <= 255:
        return bytes((97, value))
    if -(2**31) <= value < 2**31:
        return b"b" + struct.pack(">i", value)
    raise ValueError(value)


def _tensor(array: np.ndarray) -> bytes:
    (kind, bits), shape, data = wire_tensor(array)
    shape_bytes = (b"h" + bytes((len(shape),)) + b"".join(_int(d) for d in shape)
                   if shape else b"h\x00")
    raw = data.value
    return (b"h\x03" + b"h\x02" + _atom(channel.atom_name(kind) or "") + _int(bits)
            + shape_bytes + b"m" + struct.pack(">I", len(raw)) + raw)


def _ref(handle: int) -> bytes:
    """``{:ref, handle}`` as Erlang encodes it (a handle is above 2**40: SMALL_BIG_EXT)."""
    digits = (handle.bit_length() + 7) // 8
    return b"h\x02" + _atom("ref") + b"n" + bytes((digits, 0)) + handle.to_bytes(digits, "little")


def elixir_call(request_id: int, key: bytes, graph: bytes | None,
                arrays: list[np.ndarray] | list[Any], keep: bool = False) -> bytearray:
    """A ``call`` request frame, byte for byte as NxJax.Worker sends it (an ``int`` among the
    arguments is the handle of a resident tensor)."""
    graph_bytes = _atom("nil") if graph is None else b"m" + struct.pack(">I", len(graph)) + graph
    tensors = (b"l" + struct.pack(">I", len(arrays))
               + b"".join(_ref(a) if isinstance(a, int) else _tensor(a) for a in arrays)
               + b"j") if arrays else b"j"
    body = (b"l\x00\x00\x00\x04" + b"m\x00\x00\x00\x18" + key + graph_bytes + tensors
            + _atom("true" if keep else "false") + b"j")
    return bytearray(b"\x83h\x05" + _atom("C") + _int(request_id) + _atom("nx_jax")
                     + _atom("call") + body)


def key_of(graph_bin: bytes) -> bytes:
    return hashlib.md5(graph_bin).digest() + len(graph_bin).to_bytes(8, "big")


def axpy_graph(type_name: str = "f32", shape: tuple[int, ...] = (3,)) -> bytes:
    """(2 * x + y, x) for two parameters of ``type_name[shape]``: two outputs."""
    g = GraphBuilder()
    x = g.param(0, type_name, shape)
    y = g.param(1, type_name, shape)
    two = g.const(2, type_name, ())
    twice = g.op("multiply", two, x, out=(type_name, shape))
    out = g.op("add", twice, y)
    return g.binary([out, x])


def reply_bytes(chunks: list[Any]) -> bytes:
    return b"".join(bytes(memoryview(c)) for c in chunks)


def stats(worker: RequestLoop) -> dict[str, int]:
    s = worker.cache.stats
    return {"compiles": s.compiles, "cache_hits": s.cache_hits, "runs": s.runs,
            "errors": s.errors, "graph_loads": s.graph_loads}


# --- the reply encoder ------------------------------------------------------------------------


@pytest.mark.parametrize("request_id", [0, 7, 255, 256, 70000, 2**31 - 1])
def test_the_tensor_reply_is_byte_for_byte_the_generic_encoding(request_id: int) -> None:
    rng = np.random.default_rng(request_id)
    arrays = [rng.standard_normal((2, 3)).astype(np.float32), np.array(5, np.int64),
              np.zeros((0, 4), np.uint8), rng.standard_normal(70000)]
    terms = [wire_tensor(a) for a in arrays]
    generic = channel.encode((atom("r"), request_id, terms))
    headers = [fastcall.tensor_header(t[0], t[1], len(t[2].value)) for t in terms]
    data = [memoryview(t[2].value) for t in terms]
    fast = reply_bytes(fastcall.encode_tensor_reply(fastcall.id_bytes(request_id), headers, data))
    assert fast == generic
    assert reply_bytes(fastcall.encode_tensor_reply(fastcall.id_bytes(request_id), [], [])) == \
        channel.encode((atom("r"), request_id, []))


@pytest.mark.parametrize("request_id", [0, 300, 2**31 - 1])
@pytest.mark.parametrize("array", [np.array(1.5, np.float32), np.arange(6, dtype=np.int16),
                                   np.zeros((0,), np.float64)])
def test_one_small_result_is_one_chunk_and_the_generic_encoding(
    request_id: int, array: np.ndarray
) -> None:
    term = wire_tensor(array)
    header = fastcall.tensor_header(term[0], term[1], array.nbytes)
    chunks = fastcall.encode_tensor_reply(fastcall.id_bytes(request_id), [header],
                                          [array.tobytes()])
    assert len(chunks) == 1
    assert reply_bytes(chunks) == channel.encode((atom("r"), request_id, [term]))


# --- learning and matching --------------------------------------------------------------------

KEY = bytes(range(24))


def learned(arrays: list[np.ndarray], keep: bool = False) -> tuple[fastcall.Layouts, bytearray]:
    layouts = fastcall.Layouts()
    frame = elixir_call(3, KEY, None, arrays, keep)
    assert layouts.learn(bytes(frame)) is not None
    return layouts, frame


def test_a_learned_layout_matches_the_same_call_with_other_ids_and_numbers() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.array(-1.5, np.float64)
    layouts, _ = learned([x, y])
    for request_id in (0, 200, 256, 123456):
        x2, y2 = x * 3 + request_id, np.array(request_id / 7, np.float64)
        frame = elixir_call(request_id, KEY, None, [x2, y2])
        match = layouts.match(frame)
        assert match is not None and match.request_id == request_id
        assert match.layout.key == KEY and match.layout.keep is False
        assert match.id_bytes == fastcall.id_bytes(request_id)
        got = layouts.arguments(frame, match)
        np.testing.assert_array_equal(got[0], x2)
        np.testing.assert_array_equal(got[1], y2)
        assert got[0].dtype == np.float32 and got[1].shape == ()


def test_every_byte_outside_the_id_and_the_data_is_checked() -> None:
    x = np.arange(3, dtype=np.int32)
    layouts, frame = learned([x, np.float32(2.0).reshape(())])
    assert layouts.match(frame) is not None
    id_at = len(b"\x83h\x05" + _atom("C"))
    data = layouts.match(frame)
    assert data is not None
    start = len(frame) - data.layout.size
    holes = {start + at + k for at, dtype, _, count in data.layout.tensors
             for k in range(count * dtype.itemsize)}
    for i in range(len(frame)):
        if i in holes or id_at < i < start:  # tensor bytes; the id's value bytes
            continue
        for flip in (1, 0x80):
            changed = bytearray(frame)
            changed[i] ^= flip
            assert layouts.match(changed) is None, f"byte {i} changed and still matched"
    assert layouts.match(frame[:-1]) is None
    assert layouts.match(frame + b"j") is None


@pytest.mark.parametrize("arrays", [
    [], [np.float32(2.0).reshape(())], [np.arange(3, dtype=np.int32), np.zeros(0, np.float64)],
    [np.arange(3, dtype=np.int32), np.float32(2.0).reshape(()), np.arange(2, dtype=np.uint8)],
])
def test_the_one_layout_readers_check_every_byte_outside_the_id_and_the_data(
    arrays: list[np.ndarray],
) -> None:
    # matcher/1 (the layout served last) and one_reader/1 (its one-tensor form) test a frame
    # against one layout without match/1: each byte of the prefix and of every constant piece
    layouts, frame = learned(arrays)
    layout = layouts.match(frame).layout
    readers = [layouts.matcher(layout)]
    if len(arrays) == 1:
        one = layouts.one_reader(layout)
        assert one is not None
        readers.append(lambda f: None if (got := one(f)) is None else bytes(got[0]))
    id_at = len(b"\x83h\x05" + _atom("C"))
    start = len(frame) - layout.size
    holes = {start + at + k for at, dtype, _, count in layout.tensors
             for k in range(count * dtype.itemsize)}
    for read in readers:
        assert read(bytearray(frame)) == bytes(frame[id_at:start])
        for i in range(len(frame)):
            if i in holes or id_at < i < start:
                continue
            for flip in (1, 0x80):
                changed = bytearray(frame)
                changed[i] ^= flip
                assert read(changed) is None, f"byte {i} changed and still read"
        assert read(frame[:-1]) is None
        assert read(frame + b"j") is None


def test_layouts_of_one_size_and_head_alternate_without_mixing_up() -> None:
    # f32[3] and s32[3] (and u8[12]) frames have the same length and head: only the tensor's
    # type bytes tell them apart, so the last-matched shortcut must check them too
    layouts = fastcall.Layouts()
    arrays = [np.zeros(3, np.float32), np.zeros(3, np.int32), np.zeros(12, np.uint8)]
    for a in arrays:
        assert layouts.learn(bytes(elixir_call(1, KEY, None, [a]))) is not None
    for round_ in range(3):
        for a in [*arrays, *reversed(arrays)]:
            value = (a + round_).astype(a.dtype)
            frame = elixir_call(round_, KEY, None, [value])
            match = layouts.match(frame)
            assert match is not None and match.layout.signature == ((a.dtype, a.shape),)
            np.testing.assert_array_equal(layouts.arguments(frame, match)[0], value)
    # and a frame of that size that is none of them still does not match
    assert layouts.match(elixir_call(9, KEY, None, [np.zeros(3, np.uint32)])) is None


def test_other_shapes_types_keep_flags_and_keys_do_not_match() -> None:
    x = np.zeros(3, np.float32)
    layouts, _ = learned([x])
    assert layouts.match(elixir_call(1, KEY, None, [np.zeros(4, np.float32)])) is None
    assert layouts.match(elixir_call(1, KEY, None, [np.zeros(3, np.int32)])) is None
    assert layouts.match(elixir_call(1, KEY, None, [np.zeros((3, 1), np.float32)])) is None
    assert layouts.match(elixir_call(1, KEY, None, [x], keep=True)) is None
    assert layouts.match(elixir_call(1, KEY, None, [x, x])) is None
    assert layouts.match(elixir_call(1, bytes(24), None, [x])) is None
    # both keep flags, learned, are two layouts of one key
    assert layouts.learn(bytes(elixir_call(1, KEY, None, [x], keep=True))) is not None
    assert len(layouts) == 2
    match = layouts.match(elixir_call(9, KEY, None, [x], keep=True))
    assert match is not None and match.layout.keep is True


def test_one_off_and_resident_calls_are_not_learned() -> None:
    layouts = fastcall.Layouts()
    x = np.zeros(3, np.float32)
    assert layouts.learn(bytes(elixir_call(1, KEY, b"graph", [x]))) is None
    ref = (b"l\x00\x00\x00\x01" + b"h\x02" + _atom("ref") + _int(5) + b"j")
    with_ref = elixir_call(1, KEY, None, []).replace(b"jd\x00\x05falsej", ref + b"d\x00\x05falsej")
    assert decode(with_ref)[4][2] == [(atom("ref"), 5)]
    assert layouts.learn(bytes(with_ref)) is None
    ping = bytearray(encode_chunks((atom("C"), 1, atom("nx_jax"), atom("ping"), []))[0])
    assert layouts.learn(bytes(ping)) is None
    assert len(layouts) == 0 and layouts.match(elixir_call(1, KEY, None, [x])) is None


def test_a_no_argument_call_and_random_garbage() -> None:
    layouts, frame = learned([])
    assert layouts.match(elixir_call(77, KEY, None, [])) is not None
    rng = random.Random(5)
    for _ in range(2000):
        junk = bytearray(frame)
        for _ in range(rng.randrange(1, 4)):
            junk[rng.randrange(len(junk))] = rng.randrange(256)
        match = layouts.match(junk)
        if match is not None:  # only the id may have changed
            assert junk[:4] == frame[:4] and len(junk) == len(frame)
            assert bytes(junk[len(junk) - match.layout.size:]) == \
                bytes(frame[len(frame) - match.layout.size:])
        # learning takes a well-formed key-only call of tensors and nothing else
        if fastcall.Layouts().learn(bytes(junk)) is not None:
            term = channel.decode(junk)
            assert term[3] == atom("call") and term[4][1] is None and len(term[4][0].value) == 24


# --- the worker: fast and generic paths give the same bytes ----------------------------------


def sampler(type_name: str, shape: tuple[int, ...], scale: float,
            seed: int) -> tuple[str, int, Callable[[], np.ndarray]]:
    """The Nx kind and bits of ``type_name`` ("f32", "bf16", ...) and a function giving random
    arrays of ``shape`` in its wire dtype (normal, times ``scale``)."""
    from py_backend.nxtypes import NxType, wire_dtype
    kind = type_name.rstrip("0123456789")
    bits = int(type_name[len(kind):])
    dtype = wire_dtype(NxType(kind, bits))
    rng = np.random.default_rng(seed)
    return kind, bits, lambda: (rng.standard_normal(shape) * scale).astype(dtype)


def primed_worker(graph: bytes, arrays: list[np.ndarray], keep: bool = False) -> RequestLoop:
    """A worker that has loaded ``graph`` and served one key-only call (learned)."""
    worker = RequestLoop()
    key = key_of(graph)
    worker.handle(elixir_call(0, key, graph, arrays, keep))
    worker.handle(elixir_call(1, key, None, arrays, keep))
    return worker


@pytest.mark.parametrize("type_name,shape", [("f32", ()), ("f32", (3,)), ("s64", (2, 2)),
                                             ("f64", (0,)), ("bf16", (4,)), ("c64", (2,)),
                                             ("u8", (100, 300))])
def test_fast_replies_equal_generic_replies(type_name: str, shape: tuple[int, ...]) -> None:
    kind, bits, sample = sampler(type_name, shape, 50, seed=1)
    graph = axpy_graph(type_name, shape)
    key = key_of(graph)
    fast = primed_worker(graph, [sample(), sample()])
    assert len(fast.layouts) == 1
    for request_id in (2, 300, 99999):
        x, y = sample(), sample()
        frame = elixir_call(request_id, key, None, [x, y])
        assert fast.layouts.match(frame) is not None
        generic = RequestLoop()  # learns nothing before this request: the generic path answers
        generic.handle(elixir_call(0, key, graph, [x, y]))
        expected = reply_bytes(generic.handle(bytearray(frame)))
        got = reply_bytes(fast.handle(bytearray(frame)))
        assert got == expected
        reply = decode(got)
        np.testing.assert_array_equal(from_wire(reply[2][1]), x)
        if kind in ("f", "c") and bits >= 32:
            np.testing.assert_allclose(from_wire(reply[2][0]), 2 * x + y, rtol=1e-6)


@pytest.mark.parametrize("out_shape", [(), (4,), (200, 200)])
def test_one_output_replies_equal_generic_replies(out_shape: tuple[int, ...]) -> None:
    # one result: small ones take the one-piece reply, a large one (160 KB from a scalar
    # argument: the request stays small enough to be learned) the chunked reply
    g = GraphBuilder()
    x = g.param(0, "f32", ())
    three = g.const(3, "f32", ())
    scaled = g.op("multiply", three, x, out=("f32", ()))
    out = g.op("broadcast", scaled, out=("f32", out_shape), axes=[]) if out_shape else scaled
    graph = g.binary([out])
    key = key_of(graph)
    fast = primed_worker(graph, [np.array(1.0, np.float32)])
    for request_id, value in ((2, 0.5), (300, -7.25)):
        frame = elixir_call(request_id, key, None, [np.array(value, np.float32)])
        assert fast.layouts.match(frame) is not None
        generic = RequestLoop()
        generic.handle(elixir_call(0, key, graph, [np.array(value, np.float32)]))
        expected = reply_bytes(generic.handle(bytearray(frame)))
        chunks = fast.handle(bytearray(frame))
        assert reply_bytes(chunks) == expected
        assert (len(chunks) == 1) == (out_shape != (200, 200))
        np.testing.assert_array_equal(from_wire(decode(expected)[2][0]),
                                      np.full(out_shape, 3 * value, np.float32))


def test_without_fast_paths_every_repeated_call_takes_the_generic_path(
        monkeypatch: pytest.MonkeyPatch) -> None:
    graph = axpy_graph()
    key = key_of(graph)
    x, y = np.ones(3, np.float32), np.arange(3, dtype=np.float32)
    monkeypatch.setenv("NX_JAX_FAST_PATHS", "0")
    worker = RequestLoop()
    assert not worker.fast_paths
    worker.handle(elixir_call(0, key, graph, [x, y], False))
    replies = [decode(reply_bytes(worker.handle(elixir_call(i, key, None, [x, y], False))))
               for i in range(1, 6)]
    s = worker.cache.stats
    assert (s.fast_one_calls, s.fast_hot_calls, s.fast_layout_calls) == (0, 0, 0)
    assert s.runs == 6 and s.cache_hits == 5
    for reply in replies:
        np.testing.assert_allclose(from_wire(reply[2][0]), 2 * x + y)
    # the same calls on a default worker are served by the fast paths from the third on
    monkeypatch.delenv("NX_JAX_FAST_PATHS")
    fast = RequestLoop()
    for i in range(6):
        fast.handle(elixir_call(i, key, graph if i == 0 else None, [x, y], False))
    s = fast.cache.stats
    assert s.fast_one_calls + s.fast_hot_calls + s.fast_layout_calls == 4


def test_the_fast_path_counts_like_the_generic_one_and_keeps_results_resident() -> None:
    graph = axpy_graph()
    key = key_of(graph)
    x, y = np.ones(3, np.float32), np.arange(3, dtype=np.float32)
    worker = primed_worker(graph, [x, y], keep=True)
    before = stats(worker)
    reply = decode(reply_bytes(worker.handle(elixir_call(5, key, None, [x, y], keep=True))))
    after = stats(worker)
    assert after == {**before, "cache_hits": before["cache_hits"] + 1, "runs": before["runs"] + 1}
    # as the generic path answers a keep: small results come with a copy of their bytes
    (_, h1, copy1), (_, h2, copy2) = reply[2]
    np.testing.assert_allclose(np.asarray(worker.resident[h1][0]), 2 * x + y)
    np.testing.assert_array_equal(np.asarray(worker.resident[h2][0]), x)
    assert channel.binary_bytes(copy1) == (2 * x + y).tobytes()
    assert channel.binary_bytes(copy2) == x.tobytes()


def test_a_forgotten_or_evicted_graph_is_unknown_on_the_fast_path_too() -> None:
    graph = axpy_graph()
    key = key_of(graph)
    x = np.ones(3, np.float32)
    worker = primed_worker(graph, [x, x])
    worker.cache = Cache(max_entries=1)  # the program is gone as if evicted
    worker.layouts.learn(bytes(elixir_call(1, key, None, [x, x])))
    reply = decode(reply_bytes(worker.handle(elixir_call(6, key, None, [x, x]))))
    assert reply[0] == atom("e") and reply[1] == 6
    assert channel.binary_bytes(reply[2][1]) == b"UnknownGraph"
    # re-sending the graph (as the client does) serves it again, by key afterwards
    assert decode(reply_bytes(worker.handle(elixir_call(7, key, graph, [x, x]))))[0] == atom("r")
    assert decode(reply_bytes(worker.handle(elixir_call(8, key, None, [x, x]))))[0] == atom("r")
    forget = bytearray(channel.encode((atom("C"), 9, atom("nx_jax"), atom("forget_graphs"), [])))
    worker.handle(forget)
    assert len(worker.layouts) == 0


def test_the_hot_path_stops_when_the_cache_drops_its_program() -> None:
    # the layout served last runs in one call (RequestLoop._hot_path) without looking its program
    # up: once the cache evicts that program, the next call must be UnknownGraph as on the
    # generic path, and serving resumes after the graph is sent again
    graph = axpy_graph()
    key = key_of(graph)
    x = np.ones(3, np.float32)
    worker = primed_worker(graph, [x, x])
    for request_id in (2, 3):  # the first builds the runner, the second runs hot
        reply = decode(reply_bytes(worker.handle(elixir_call(request_id, key, None, [x, x]))))
        assert reply[0] == atom("r") and reply[1] == request_id
    assert worker._hot is not None
    before = stats(worker)
    worker.cache.max_entries = 1
    other = GraphBuilder()
    p = other.param(0, "f32", ())
    other_graph = other.binary([other.op("negate", p)])
    worker.handle(elixir_call(4, key_of(other_graph), other_graph, [np.float32(1).reshape(())]))
    reply = decode(reply_bytes(worker.handle(elixir_call(300, key, None, [x, x]))))
    assert reply[0] == atom("e") and reply[1] == 300
    assert channel.binary_bytes(reply[2][1]) == b"UnknownGraph"
    assert stats(worker)["runs"] == before["runs"] + 1  # the other graph's run only
    assert decode(reply_bytes(worker.handle(elixir_call(301, key, graph, [x, x]))))[0] == atom("r")
    for request_id in (302, 70000):
        reply = decode(reply_bytes(worker.handle(elixir_call(request_id, key, None, [x, 2 * x]))))
        assert reply[0] == atom("r") and reply[1] == request_id
        np.testing.assert_array_equal(from_wire(reply[2][0]), 4 * x)


def test_the_hot_path_answers_resident_calls_and_errors_with_their_ids(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    graph = axpy_graph()
    key = key_of(graph)
    x, y = np.ones(3, np.float32), np.arange(3, dtype=np.float32)
    worker = primed_worker(graph, [x, y], keep=True)
    for request_id in (2, 255, 256, 2**31 - 1):
        reply = decode(reply_bytes(worker.handle(elixir_call(request_id, key, None, [x, y],
                                                             keep=True))))
        assert reply[0] == atom("r") and reply[1] == request_id
        (_, handle, copy), _ = reply[2]
        np.testing.assert_array_equal(np.asarray(worker.resident[handle][0]), 2 * x + y)
        assert channel.binary_bytes(copy) == (2 * x + y).tobytes()
    assert worker._hot is not None

    def broken(*_args: Any) -> None:
        raise RuntimeError("broken on purpose")

    monkeypatch.setattr(worker.cache, "touch", broken)
    reply = decode(reply_bytes(worker.handle(elixir_call(70001, key, None, [x, y], keep=True))))
    assert reply[0] == atom("e") and reply[1] == 70001
    assert channel.binary_bytes(reply[2][1]) == b"RuntimeError"


def scale_graph(shape: tuple[int, ...] = (3,), type_name: str = "f32") -> bytes:
    """One tensor in, one out: ``3 * x`` (the one-tensor hot path, RequestLoop._hot_one)."""
    g = GraphBuilder()
    x = g.param(0, type_name, shape)
    three = g.const(3, type_name, ())
    three = g.op("broadcast", three, out=(type_name, shape), axes=[]) if shape else three
    return g.binary([g.op("multiply", three, x, out=(type_name, shape))])


def framed_reply(worker: RequestLoop, frame: Any) -> bytes:
    """The reply ``serve()`` would write for ``frame`` (``RequestLoop.handle_framed``), without its
    length header, which must match its length."""
    reply = worker.handle_framed(frame)
    data = reply if type(reply) is bytes else b"".join([*(bytes(c) for c in reply)])
    if type(reply) is bytes:
        assert struct.unpack(">I", data[:4])[0] == len(data) - 4
        return data[4:]
    return data


def test_the_one_tensor_hot_path_gives_the_generic_bytes_and_falls_back_on_anything_else(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    graph = scale_graph()
    key = key_of(graph)
    x = np.array([1.0, -2.5, 4.0], np.float32)
    worker = primed_worker(graph, [x])
    generic = RequestLoop()
    generic.handle(elixir_call(0, key, graph, [x]))
    for request_id in (2, 3, 255, 256, 70000, 2**31 - 1):
        value = x * request_id
        frame = elixir_call(request_id, key, None, [value])
        expected = reply_bytes(generic.handle(bytearray(frame)))
        assert framed_reply(worker, bytearray(frame)) == expected
        assert reply_bytes(worker.handle(bytearray(frame))) == expected
        np.testing.assert_array_equal(from_wire(decode(expected)[2][0]), 3 * value)
    assert worker._one is not None and type(worker._one(bytearray(frame))) is bytes
    runs = stats(worker)["runs"]
    # what does not follow the layout is answered the generic way: another shape, another key,
    # a frame in a memoryview; the hot path is still there for the next learned call
    other = scale_graph((2,))
    assert worker._one(elixir_call(9, key_of(other), other, [x[:2]])) is None
    reply = decode(framed_reply(worker, elixir_call(9, key_of(other), other, [x[:2]])))
    np.testing.assert_array_equal(from_wire(reply[2][0]), 3 * x[:2])
    view = memoryview(bytes(elixir_call(10, key, None, [x])))
    assert worker._one(view) is None
    np.testing.assert_array_equal(from_wire(decode(framed_reply(worker, view))[2][0]), 3 * x)
    assert stats(worker)["runs"] == runs + 2
    # a negative id (INTEGER_EXT, sign bit set) is no learned call's
    frame = elixir_call(11, key, None, [x])
    id_at = len(b"\x83h\x05" + _atom("C"))
    negative = frame[:id_at] + b"b\xff\xff\xff\xff" + frame[id_at + 2:]
    assert worker._one(negative) is None
    reply = decode(framed_reply(worker, negative))
    assert reply[0] == atom("e") and reply[1] == -1

    # an error on the hot path is an error reply with the request's id
    def broken(*_args: Any) -> None:
        raise RuntimeError("broken on purpose")

    worker._one = worker._hot_one(worker._hot_kept)
    monkeypatch.setattr(worker.cache, "touch", broken)
    reply = decode(framed_reply(worker, elixir_call(70001, key, None, [x])))
    assert reply[0] == atom("e") and reply[1] == 70001
    assert channel.binary_bytes(reply[2][1]) == b"RuntimeError"


def hot_direct(worker: RequestLoop) -> bool | None:
    """Whether the worker's one-tensor hot path puts its results into replies as they are
    (``RequestLoop._hot_one``'s ``direct``: None before its first run)."""
    hot = worker._one
    assert hot is not None and hot.__closure__ is not None
    cells = dict(zip(hot.__code__.co_freevars, hot.__closure__, strict=True))
    return cells["direct"].cell_contents


@pytest.mark.parametrize("type_name,shape,direct", [
    ("f32", (), True), ("f32", (3,), True), ("f64", (2, 2), True), ("s64", (3,), True),
    ("u8", (5,), True), ("f16", (3,), True), ("c64", (2,), True), ("bf16", (3,), False),
])
def test_the_one_tensor_hot_path_replies_with_the_result_buffer_where_it_can(
    type_name: str, shape: tuple[int, ...], direct: bool,
) -> None:
    # from its second run on, the result's buffer goes into the reply as it is (no NumPy
    # conversion) for the types whose buffer is the wire's bytes; bfloat16's buffer cannot be
    # read that way, and takes the conversion on every call. Either way the bytes are the
    # generic path's, for values that change on every call.
    kind, bits, sample = sampler(type_name, shape, 20, seed=7)
    graph = scale_graph(shape, type_name)
    key = key_of(graph)
    worker = primed_worker(graph, [sample()])
    generic = RequestLoop()
    generic.handle(elixir_call(0, key, graph, [sample()]))
    for request_id in range(2, 40):
        x = sample()
        frame = elixir_call(request_id, key, None, [x])
        expected = reply_bytes(generic.handle(bytearray(frame)))
        assert framed_reply(worker, bytearray(frame)) == expected
        # (request 2 takes the layout's runner and sets up the hot path; 3 is its first run)
        if request_id >= 3:
            assert hot_direct(worker) is direct
        if kind in ("f", "c") and bits >= 32:
            np.testing.assert_allclose(from_wire(decode(expected)[2][0]), 3 * x, rtol=1e-6)


def test_results_go_into_replies_as_they_are_only_when_their_buffer_is_the_wire_bytes() -> None:
    import jax
    import jax.numpy as jnp

    from py_backend.request_loop import _joins_as
    f32 = np.dtype("<f4")
    value = jax.jit(lambda v: v * 3)(jnp.arange(4, dtype=jnp.float32))
    data = np.asarray(value).tobytes()
    assert _joins_as(value, data, f32, (4,))
    # another dtype or shape than the reply declares, other bytes, NumPy arrays, bfloat16
    assert not _joins_as(value, data, np.dtype("<f8"), (4,))
    assert not _joins_as(value, data, f32, (2, 2))
    assert not _joins_as(value, data[:-1] + b"\x01", f32, (4,))
    assert not _joins_as(np.asarray(value), data, f32, (4,))
    assert not _joins_as(np.asarray(value).astype(">f4"), data, f32, (4,))
    half = value.astype(jnp.bfloat16)
    assert not _joins_as(half, np.asarray(half).tobytes(), np.asarray(half).dtype, (4,))


def test_a_result_whose_buffer_cannot_be_lent_takes_the_copy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # an accelerator's array raises its runtime's own error when asked for its buffer: the
    # probe says no (the hot path then converts it), it does not fail the call
    import jax
    import jax.numpy as jnp

    from py_backend import request_loop as worker_module
    from py_backend.request_loop import _joins_as
    value = jax.jit(lambda v: v * 3)(jnp.arange(4, dtype=jnp.float32))
    data = np.asarray(value).tobytes()

    def no_buffer(_obj: Any) -> memoryview:
        raise RuntimeError("INVALID_ARGUMENT: no host buffer on this device")

    monkeypatch.setattr(worker_module, "memoryview", no_buffer, raising=False)
    assert not _joins_as(value, data, np.dtype("<f4"), (4,))
    monkeypatch.undo()
    assert _joins_as(value, data, np.dtype("<f4"), (4,))


def test_the_one_tensor_hot_path_stops_when_the_cache_drops_its_program() -> None:
    graph = scale_graph()
    key = key_of(graph)
    x = np.ones(3, np.float32)
    worker = primed_worker(graph, [x])
    for request_id in (2, 3):
        assert decode(framed_reply(worker, elixir_call(request_id, key, None, [x])))[0] \
            == atom("r")
    assert worker._one is not None
    worker.cache.max_entries = 1
    other = scale_graph((2,))
    worker.handle(elixir_call(4, key_of(other), other, [x[:2]]))
    reply = decode(framed_reply(worker, elixir_call(300, key, None, [x])))
    assert reply[0] == atom("e") and reply[1] == 300
    assert channel.binary_bytes(reply[2][1]) == b"UnknownGraph"
    # a new cache altogether (its versions are its own): not served from the old one either
    assert decode(framed_reply(worker, elixir_call(5, key, graph, [x])))[0] == atom("r")
    assert decode(framed_reply(worker, elixir_call(6, key, None, [x])))[0] == atom("r")
    worker.cache = Cache()
    reply = decode(framed_reply(worker, elixir_call(7, key, None, [x])))
    assert reply[0] == atom("e") and channel.binary_bytes(reply[2][1]) == b"UnknownGraph"


def test_bad_request_ids_take_the_generic_path() -> None:
    graph = axpy_graph()
    x = np.ones(3, np.float32)
    worker = primed_worker(graph, [x, x])
    frame = elixir_call(1, key_of(graph), None, [x, x])
    id_at = len(b"\x83h\x05" + _atom("C"))
    negative = frame[:id_at] + b"b\xff\xff\xff\xff" + frame[id_at + 2:]  # id -1
    assert worker.layouts.match(negative) is None
    reply = decode(reply_bytes(worker.handle(negative)))
    assert reply[0] == atom("e") and reply[1] == -1
    assert channel.binary_bytes(reply[2][1]) == b"BadRequest"
    # the worker goes on serving the learned call
    assert worker.layouts.match(frame) is not None
    assert decode(reply_bytes(worker.handle(frame)))[0] == atom("r")


# --- through a real worker process --------------------------------------------------------------


@pytest.mark.parametrize("spin_us", ["0", "300"])
def test_a_real_worker_serves_learned_calls_back_to_back_and_after_pauses(spin_us: str) -> None:
    # requests pipelined (several frames in one read), spaced out (the poll runs out and the
    # worker sleeps), learned and not; every reply correct and in order; EOF ends it with 0
    import time

    from .helpers import WorkerProcess

    graph = axpy_graph("f64", (2,))
    key = key_of(graph)
    w = WorkerProcess(env={"NX_JAX_SPIN_US": spin_us})
    try:
        rng = np.random.default_rng(4)
        sent: list[tuple[int, np.ndarray, np.ndarray]] = []
        for request_id in range(40):
            x, y = rng.standard_normal(2), rng.standard_normal(2)
            graph_or_none = graph if request_id == 0 else None
            w.send_raw(bytes(elixir_call(request_id, key, graph_or_none, [x, y])))
            sent.append((request_id, x, y))
            if request_id % 10 == 9:
                time.sleep(0.01)  # longer than any poll: the worker goes to sleep in between
        for request_id, x, y in sent:
            reply = w.receive()
            assert reply[0] == atom("r") and reply[1] == request_id
            np.testing.assert_allclose(from_wire(reply[2][0]), 2 * x + y, rtol=1e-12)
            np.testing.assert_array_equal(from_wire(reply[2][1]), x)
    finally:
        assert w.close() == 0


def test_serve_frees_a_call_s_results_only_after_writing_its_reply() -> None:
    # the buffers of a run's results are let go of once the reply is out (RequestLoop.spent), so
    # that freeing them is not on the caller's wait: on the layout's runner and on the
    # one-tensor hot path (requests 10, then 11 and 12)


    graph = scale_graph()
    key = key_of(graph)
    x = np.array([1.0, -2.5, 4.0], np.float32)
    worker = primed_worker(graph, [x])
    held: list[Any] = []

    class Recorder(FrameWriter):  # what the worker still holds as each reply goes out
        writing = False

        def write_framed(self, data: Any) -> None:
            if not self.writing:
                held.append(worker.spent)
            super().write_framed(data)

        def write_frame(self, chunks: Any) -> None:
            held.append(worker.spent)
            self.writing = True  # (write_frame may hand a small frame to write_framed)
            super().write_frame(chunks)
            self.writing = False

    values = [x * k for k in (2, 3, 4)]
    requests = io.BytesIO(b"".join(
        channel.frame_header(len(f)) + f
        for f in (bytes(elixir_call(10 + i, key, None, [v])) for i, v in enumerate(values))
    ))
    out = io.BytesIO()
    assert serve(FrameReader(requests), Recorder(out), worker) == 0
    assert len(held) == 3
    for results, value in zip(held, values, strict=True):
        np.testing.assert_array_equal(np.asarray(results[0]), 3 * value)
    assert worker.spent is None
    # the replies themselves are the generic ones
    replies = FrameReader(io.BytesIO(out.getvalue()))
    for i, value in enumerate(values):
        reply = decode(replies.read_frame())
        assert reply[1] == 10 + i
        np.testing.assert_array_equal(from_wire(reply[2][0]), 3 * value)


# --- resident arguments ({:ref, handle}) ------------------------------------------------------


def put(worker: RequestLoop, arrays: list[np.ndarray]) -> list[int]:
    frame = bytearray(channel.encode((atom("C"), 1, atom("nx_jax"), atom("put"),
                                      [[wire_tensor(a) for a in arrays]])))
    reply = decode(reply_bytes(worker.handle(frame)))
    assert reply[0] == atom("r"), reply
    return list(reply[2])


def fast_count(worker: RequestLoop) -> int:
    s = worker.cache.stats
    return s.fast_one_calls + s.fast_hot_calls + s.fast_layout_calls


def resident_loop(worker: RequestLoop, steps: int) -> list[tuple[Any, ...]]:
    """A loop as NxJax sends it with resident state: each call names the previous call's
    results, ``(x, y) -> (2x + y, x)``; returns each reply."""
    graph = axpy_graph()
    key = key_of(graph)
    x, y = put(worker, [np.ones(3, np.float32), np.arange(3, dtype=np.float32)])
    replies = []
    for i in range(steps):
        frame = elixir_call(10 + i, key, graph if i == 0 else None, [x, y], keep=True)
        reply = decode(reply_bytes(worker.handle(frame)))
        assert reply[0] == atom("r") and reply[1] == 10 + i, reply
        replies.append(reply)
        (_, x, _), (_, y, _) = reply[2]
    return replies


def test_calls_naming_resident_tensors_take_the_fast_path_and_answer_as_the_generic_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fast = RequestLoop()
    fast_replies = resident_loop(fast, 8)
    assert fast_count(fast) == 6  # every call after the first two (loaded, then learned)
    monkeypatch.setenv("NX_JAX_FAST_PATHS", "0")
    generic = RequestLoop()
    generic_replies = resident_loop(generic, 8)
    assert fast_count(generic) == 0
    # the same values (the copies of these small results), other handles
    x, y = np.ones(3, np.float32), np.arange(3, dtype=np.float32)
    for fast_reply, generic_reply in zip(fast_replies, generic_replies, strict=True):
        x, y = 2 * x + y, x
        for (_, h_fast, copy_fast), (_, _, copy_generic), want in zip(
            fast_reply[2], generic_reply[2], [x, y], strict=True
        ):
            assert channel.binary_bytes(copy_fast) == channel.binary_bytes(copy_generic)
            assert channel.binary_bytes(copy_fast) == want.tobytes()
            np.testing.assert_array_equal(np.asarray(fast.resident[h_fast][0]), want)
    assert fast.cache.stats.runs == generic.cache.stats.runs == 8
    assert len(fast.resident) == len(generic.resident) == 2 + 2 * 8


def test_a_freed_or_foreign_handle_on_the_fast_path_gets_the_generic_answer() -> None:
    worker = RequestLoop()
    graph = axpy_graph()
    key = key_of(graph)
    replies = resident_loop(worker, 3)
    (_, x, _), (_, y, _) = replies[-1][2]
    before = fast_count(worker), worker.cache.stats.runs
    free = bytearray(channel.encode((atom("C"), 2, atom("nx_jax"), atom("free"), [[x]])))
    worker.handle(free)
    # a freed handle: an error naming it, never another tensor's data, nothing run
    reply = decode(reply_bytes(worker.handle(elixir_call(40, key, None, [x, y], keep=True))))
    assert reply[0] == atom("e") and reply[1] == 40
    assert channel.binary_bytes(reply[2][1]) == b"UnknownHandle"
    assert str(x) in channel.binary_bytes(reply[2][2]).decode()
    # a handle of a tensor of another shape whose handle has as many digits: the frame
    # follows the layout byte for byte, the argument does not
    (other,) = put(worker, [np.ones(4, np.float32)])
    assert (other.bit_length() + 7) // 8 == (y.bit_length() + 7) // 8
    reply = decode(reply_bytes(worker.handle(elixir_call(41, key, None, [other, y], keep=True))))
    assert reply[0] == atom("e") and reply[1] == 41
    assert channel.binary_bytes(reply[2][1]) == b"ArgumentError"
    assert (fast_count(worker), worker.cache.stats.runs) == before
    # and the loop goes on, on the fast path again
    (fresh,) = put(worker, [np.full(3, 2.0, np.float32)])
    reply = decode(reply_bytes(worker.handle(elixir_call(42, key, None, [fresh, y], keep=True))))
    assert reply[0] == atom("r")
    want = 2 * np.full(3, 2.0, np.float32) + np.asarray(worker.resident[y][0])
    np.testing.assert_array_equal(np.asarray(worker.resident[reply[2][0][1]][0]), want)
    assert fast_count(worker) == before[0] + 1


def test_a_call_mixing_resident_and_wire_tensors_is_learned_with_both_kinds_of_holes() -> None:
    worker = RequestLoop()
    graph = axpy_graph()
    key = key_of(graph)
    (x,) = put(worker, [np.ones(3, np.float32)])
    for i in range(5):
        y = np.arange(3, dtype=np.float32) * i
        frame = elixir_call(i, key, graph if i == 0 else None, [x, y])
        reply = decode(reply_bytes(worker.handle(frame)))
        np.testing.assert_array_equal(from_wire(reply[2][0]), 2 * np.ones(3, np.float32) + y)
    assert fast_count(worker) == 3
    layout = worker.layouts._last
    assert layout is not None and [r[0] for r in layout.refs] == [0]
    assert layout.positions == (1,)
    # every byte outside the request id, the handle's digits and the tensor's data is checked
    frame = elixir_call(7, key, None, [x, np.arange(3, dtype=np.float32)])
    start = len(frame) - layout.size
    holes = {start + at + k for _, at, digits, _ in layout.refs for k in range(digits)}
    holes |= {start + at + k for at, dtype, _, count in layout.tensors
              for k in range(count * dtype.itemsize)}
    id_at = len(b"\x83h\x05" + _atom("C"))
    assert worker.layouts.match(frame) is not None
    for i in range(len(frame)):
        if i in holes or id_at < i < start:
            continue
        changed = bytearray(frame)
        changed[i] ^= 1
        assert worker.layouts.match(changed) is None, f"byte {i} changed and still matched"


def test_a_handle_is_encoded_as_the_generic_encoder_does() -> None:
    from py_backend.request_loop import HANDLE_RANDOM_BITS, encode_handle

    rng = random.Random(5)
    worker = RequestLoop()
    handles = [worker._keep(None, None, 0) for _ in range(50)]  # type: ignore[arg-type]
    handles += [(count << HANDLE_RANDOM_BITS) | rng.getrandbits(HANDLE_RANDOM_BITS)
                for count in (1, 255, 2**16, 2**23, 2**40, 2**200)]
    for handle in handles:
        assert encode_handle(handle) == channel.encode_leaf(handle)


# --- freed arrays, released off the path of the next call -------------------------------------


def free_request(request_id: int, handles: list[int]) -> bytearray:
    return bytearray(channel.encode((atom("C"), request_id, atom("nx_jax"), atom("free"),
                                     [handles])))


def test_a_free_releases_the_freed_arrays_at_once() -> None:
    worker = RequestLoop()
    graph = axpy_graph()
    key = key_of(graph)
    handles = put(worker, [np.full(3, float(k), np.float32) for k in range(4)])
    arrays = [weakref.ref(worker.resident[h][0]) for h in handles[:2]]
    before = worker.resident_bytes
    reply = decode(reply_bytes(worker.handle(free_request(5, handles[:2] + [12345]))))
    assert reply == (atom("r"), 5, 2)
    # forgotten (bytes, handles) and let go of: nothing of the worker holds the arrays now
    assert worker.resident_bytes == before - 24 and handles[0] not in worker.resident
    assert [a() for a in arrays] == [None, None]
    reply = decode(reply_bytes(worker.handle(elixir_call(6, key, graph, handles[2:]))))
    np.testing.assert_array_equal(from_wire(reply[2][0]), np.full(3, 7.0, np.float32))
    # a free of a freed handle is harmless
    assert decode(reply_bytes(worker.handle(free_request(7, handles[:1]))))[2] == 0


def test_kept_results_large_and_small_keep_their_order_in_the_reply() -> None:
    # large results' refs are written first and the small ones' copies last (they wait for
    # the run): the reply still lists the results in the program's order, on both paths
    g = GraphBuilder()
    x, y = g.param(0, "f32", (100,)), g.param(1, "f32", (2,))
    two = g.const(2, "f32", ())
    graph = g.binary([x, y, g.op("multiply", two, x, out=("f32", (100,))),
                      g.op("multiply", two, y, out=("f32", (2,)))])
    key = key_of(graph)
    a, b = np.arange(100, dtype=np.float32), np.array([1.5, -2.0], np.float32)
    worker = RequestLoop()
    for i in range(4):  # loaded, learned, then the fast paths
        reply = decode(reply_bytes(worker.handle(
            elixir_call(i, key, graph if i == 0 else None, [a, b], keep=True))))
        assert reply[0] == atom("r")
        refs = reply[2]
        assert [len(r) for r in refs] == [2, 3, 2, 3]
        for ref, want in zip(refs, [a, b, 2 * a, 2 * b], strict=True):
            np.testing.assert_array_equal(np.asarray(worker.resident[ref[1]][0]), want)
            if len(ref) == 3:
                assert channel.binary_bytes(ref[2]) == want.tobytes()
    assert fast_count(worker) == 2
