"""The small-call fast path (issue #4): ``channel.decode_fast`` and the leaf encoder.

``decode_fast`` must give exactly the term erlang-py's ``binary_to_term`` gives, or decline
(``_NotFast``) so that ``channel.decode`` falls back to erlang-py; the encoder must write exactly
the bytes of erlang-py's ``term_to_binary``. Both are checked on random terms (hypothesis), on
real Erlang encodings, on every truncation and byte flip of a real ``call`` request, and
through the worker's ``handle``.
"""

from __future__ import annotations

import subprocess
from typing import Any

import erlang
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from py_backend import channel
from py_backend.channel import Atom, Binary, CodecError, _NotFast, decode, decode_fast, encode
from py_backend.request_loop import RequestLoop, graph_key
from tests.helpers import GraphBuilder, request, scaled, wire_tensor


def fuzz(max_examples: int) -> settings:
    return settings(max_examples=max_examples, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])


def same(a: Any, b: Any) -> bool:
    """Equal values of equal Python types, all the way down (``==`` alone would let
    ``1 == True`` or a bytes atom equal a str one through)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, tuple | list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, Atom):
        return type(a.value) is type(b.value) and a.value == b.value
    if isinstance(a, Binary):
        return a.bits == b.bits and bytes(a.value) == bytes(b.value)
    if isinstance(a, float):
        return a == b or (a != a and b != b)
    return bool(a == b)


names = st.text(min_size=0, max_size=12)
leaves = st.one_of(
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
    names.filter(str.isascii).map(lambda s: Atom(s.encode())),  # latin-1 atom tags
    names.map(Atom),  # UTF-8 atom tags
    st.binary(max_size=40).map(Binary),
    st.binary(max_size=40),  # a Python bytes encodes as an Erlang string (STRING_EXT)
)
terms = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=6),
        st.lists(inner, max_size=6).map(tuple),
        st.dictionaries(st.integers(0, 9), inner, max_size=3),  # maps: erlang-py's path
    ),
    max_leaves=30,
)


def general(data: bytes) -> Any:
    return erlang.binary_to_term(data)


@fuzz(1500)
@given(terms)
def test_fast_decoder_gives_erlang_pys_term_or_declines(term: Any) -> None:
    data = erlang.term_to_binary(term)
    try:
        fast = decode_fast(data)
    except _NotFast:
        return  # a tag it leaves to erlang-py (maps, big integers over 255 bytes, ...)
    assert same(fast, general(data)), (term, fast)


@fuzz(1000)
@given(terms)
def test_our_encoder_writes_erlang_pys_bytes(term: Any) -> None:
    assert encode(term) == erlang.term_to_binary(term)


@fuzz(1000)
@given(terms)
def test_decode_goes_through_the_fast_path_and_agrees(term: Any) -> None:
    data = erlang.term_to_binary(term)
    assert same(decode(data), general(data))


def erl_terms(expr: str, opts: str = "[]") -> bytes:
    code = f'ok = file:write_file("/dev/stdout", term_to_binary({expr}, {opts})), halt().'
    return subprocess.run(["erl", "-noshell", "-eval", code], capture_output=True,
                          check=True, timeout=scaled(60)).stdout


@pytest.mark.parametrize("opts", ["[]", "[{minor_version, 2}]"])
def test_real_erlang_requests_decode_fast_to_the_same_term(opts: str) -> None:
    data = erl_terms(
        "{'C', 123456, nx_jax, call, [<<1:192>>, nil, [{{f, 32}, {}, <<0,0,192,63>>}, "
        "{ref, 70000}, {{s, 64}, {2, 3}, <<0:384>>}], true, -5, 1.5, \"ab\", 1 bsl 70, "
        "'héllo', [], {}]}", opts)
    fast = decode_fast(data)
    assert same(fast, general(data))
    assert channel.atom_name(fast[3]) == "call" and fast[4][1] is None and fast[4][3] is True


def call_request(request_id: int = 7) -> bytes:
    g = GraphBuilder()
    out = g.op("add", g.param(0), g.const(1.0))
    graph_bin = g.binary([out])
    return request(request_id, "call", [Binary(graph_key(graph_bin)), Binary(graph_bin),
                                        [wire_tensor(np.float32(1.5))], False])


def test_every_truncation_and_byte_flip_of_a_request_agrees_with_erlang_py() -> None:
    data = call_request()
    cases = [data[:n] for n in range(len(data))]
    cases += [data[:i] + bytes([b]) + data[i + 1:] for i in range(1, len(data))
              for b in (0, 1, 97, 104, 106, 108, 109, 255)]
    for case in cases:
        try:
            expected: Any = general(case)
        except Exception:
            expected = CodecError
        try:
            fast: Any = decode_fast(case)
        except _NotFast:
            continue
        assert expected is not CodecError, case  # fast never accepts what erlang-py refuses
        assert same(fast, expected), case


def test_a_malformed_request_still_gets_one_error_reply() -> None:
    worker = RequestLoop()
    data = call_request(5)
    # answered under the id in the frame's head when there is one (its caller waits for it)
    for bad, request_id in ((data[:-1], 5), (data[:20], 5), (data + b"\x00", 5),
                            (data[:8] + b"\xff" + data[9:], 5), (b"\x83\x68\x05\x61", -1)):
        chunks = worker.handle(bytearray(bad))
        reply = decode(b"".join(bytes(c) for c in chunks))
        assert channel.atom_name(reply[0]) == "e" and reply[1] == request_id, reply
        assert reply[2][1].value == b"BadRequest", reply
    ok = decode(b"".join(bytes(c) for c in worker.handle(bytearray(data))))
    assert channel.atom_name(ok[0]) == "r" and ok[1] == 5
    ((_, shape, payload),) = ok[2]
    assert shape == () and np.frombuffer(payload.value, "<f4")[0] == 2.5


def test_repeated_calls_reuse_the_argument_layout_and_still_check_sizes() -> None:
    worker = RequestLoop()
    data = call_request(1)
    for _ in range(3):
        reply = decode(b"".join(bytes(c) for c in worker.handle(bytearray(data))))
        assert channel.atom_name(reply[0]) == "r", reply
        assert np.frombuffer(reply[2][0][2].value, "<f4")[0] == 2.5
    # same type and shape, wrong byte count: still refused after the layout is known
    bad = data.replace(b"m\x00\x00\x00\x04\x00\x00\xc0?", b"m\x00\x00\x00\x03\x00\x00\xc0")
    assert bad != data
    reply = decode(b"".join(bytes(c) for c in worker.handle(bytearray(bad))))
    assert channel.atom_name(reply[0]) == "e"
    assert b"bytes" in reply[2][2].value
    assert worker.cache.stats.compiles == 1 and worker.cache.stats.cache_hits == 2
