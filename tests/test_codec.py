"""The ETF codec wrapper around erlang-py (PROTOCOL.md sections 1-2)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import erlang
import numpy as np
import pytest

from py_backend.channel import (
    MAX_DEPTH,
    Atom,
    Binary,
    BinaryView,
    CodecError,
    _NotFast,
    atom,
    atom_name,
    binary,
    binary_bytes,
    binary_view,
    decode,
    decode_fast,
    encode,
    encode_chunks,
    int_list,
    text,
)

from .helpers import scaled


def erl_eval(expr: str, opts: str = "[]") -> bytes:
    """term_to_binary of an Erlang expression, computed by a real Erlang VM."""
    code = f"ok = file:write_file(\"/dev/stdout\", term_to_binary({expr}, {opts})), halt()."
    return subprocess.run(["erl", "-noshell", "-eval", code], capture_output=True,
                          check=True, timeout=scaled(60)).stdout


TERMS: list[Any] = [
    0, 255, 256, -1, 2**31, -(2**31) - 1, 2**70, 1.5, -0.0,
    atom("pong"), atom("C"), None, True, False,
    (), (1, 2), tuple(range(300)), [], [1, [2, 3], (4,)], [1000, 2000],
    {atom("a"): 1, atom("b"): [atom("x")]},
    binary(b""), binary(b"abc"), binary(bytes(range(256)) * 300),
]


@pytest.mark.parametrize("term", TERMS, ids=lambda t: type(t).__name__)
def test_round_trip(term: Any) -> None:
    assert decode(encode(term)) == term


@pytest.mark.parametrize("term", TERMS, ids=lambda t: type(t).__name__)
def test_chunked_encoding_equals_erlang_py(term: Any) -> None:
    assert encode(term) == erlang.term_to_binary(term)


def test_big_binaries_are_passed_as_chunks_without_copying() -> None:
    payload = np.arange(1 << 16, dtype=np.float32)
    view = payload.view(np.uint8).data
    chunks = encode_chunks((atom("r"), 1, [binary(view)]))
    assert any(isinstance(c, memoryview) and np.shares_memory(np.frombuffer(c, np.uint8), payload)
               for c in chunks)
    assert decode(b"".join(chunks)) == (atom("r"), 1, [binary(payload.tobytes())])


def test_an_erlang_integer_list_arrives_as_string_and_is_normalized() -> None:
    term = decode(erl_eval("[0, 1]"))
    assert term == b"\x00\x01"
    assert int_list(term) == [0, 1]
    assert int_list(decode(erl_eval("[0, 1000]"))) == [0, 1000]
    assert int_list(decode(erl_eval("[]"))) == []
    assert int_list([1, True]) is None and int_list(3) is None


def test_real_erlang_terms_decode_with_normalized_helpers() -> None:
    term = decode(erl_eval("{'C', 7, nx_jax, run, [<<1,2,3>>, nil, true, 'neg_infinity']}"))
    tag, request_id, module, function, args = term
    assert atom_name(tag) == "C" and request_id == 7
    assert atom_name(module) == "nx_jax" and atom_name(function) == "run"
    assert binary_bytes(args[0]) == b"\x01\x02\x03"
    assert args[1] is None and args[2] is True and atom_name(args[3]) == "neg_infinity"


def test_utf8_atoms_decode_to_the_same_name() -> None:
    utf8 = erl_eval("{pong, nil, true}", "[{minor_version, 2}]")  # SMALL_ATOM_UTF8_EXT
    assert utf8[3] == 119
    pong, nil, true = decode(utf8)
    assert atom_name(pong) == "pong" and nil is None and true is True
    assert atom_name(decode(encode(atom("héllo")))) == "héllo"
    assert atom_name(Atom("x")) == "x" and atom_name(Atom(b"x")) == "x" and atom_name(1) is None


def test_compressed_terms_are_refused_without_inflating() -> None:
    term = (atom("ok"), binary(b"z" * 10000))
    for data in (erlang.term_to_binary(term, compressed=True),
                 erl_eval("lists:seq(1, 500)", "[compressed]")):
        with pytest.raises(CodecError, match="compressed terms are refused"):
            decode(data)
    # nested (erlang-py would inflate a compressed term anywhere) and in a large frame
    inner = erlang.term_to_binary(term, compressed=True)[1:]
    nested = b"\x83l\x00\x00\x00\x01" + inner + b"j"
    with pytest.raises(CodecError, match="compressed terms are refused"):
        decode(nested)
    big = encode([binary(b"x" * (2 << 20)), atom("ok")])
    assert big.endswith(b"\x02okj")  # the atom, then the list's tail
    with pytest.raises(CodecError, match="compressed terms are refused"):
        decode(big[:-5] + inner + b"j")


def test_integers_longer_than_1024_bytes_are_refused() -> None:
    assert decode(encode(2**8000)) == 2**8000  # 1001 bytes: decoded
    with pytest.raises(CodecError, match="an integer of 1251 bytes is refused"):
        decode(encode(2**10000))


def nested(depth: int, inner: bytes = b"a\x01") -> bytes:
    """``inner`` (encoded, no version byte) inside ``depth`` one-element tuples and lists."""
    return b"\x83" + b"h\x01l\x00\x00\x00\x01" * (depth // 2) + b"h\x01" * (depth % 2) + inner \
        + b"j" * (depth // 2)


def test_terms_nested_deeper_than_max_depth_are_refused() -> None:
    big = encode(binary(b"x" * (2 << 20)))[1:]  # a frame above COPY_BELOW: no fast path
    for inner in (b"a\x01", big):
        assert decode(nested(MAX_DEPTH, inner)) is not None
        for depth in (MAX_DEPTH + 1, 500, 1000, 10_000, 100_000):
            with pytest.raises(CodecError, match=f"nested deeper than {MAX_DEPTH} levels"):
                decode(nested(depth, inner))
    # in a map (which only erlang-py decodes) too
    deep_value = nested(MAX_DEPTH)[1:]
    with pytest.raises(CodecError, match="nested deeper"):
        decode(b"\x83t\x00\x00\x00\x01a\x01" + deep_value)
    # the fast path declines what erlang-py refuses, and agrees at the bound
    with pytest.raises(_NotFast):
        decode_fast(nested(MAX_DEPTH + 1))
    assert decode_fast(nested(MAX_DEPTH)) == erlang.binary_to_term(nested(MAX_DEPTH))


def test_our_encoding_is_read_by_real_erlang(tmp_path: Path) -> None:
    reply = (atom("e"), 3, (atom("python"), text("GraphError"), text("node 1 (exp): é"),
                             text("")))
    path = tmp_path / "reply.etf"
    path.write_bytes(encode(reply))
    code = f"IO.write(inspect(:erlang.binary_to_term(File.read!({str(path)!r}))))".replace("'", '"')
    out = subprocess.run(["elixir", "-e", code],
                         capture_output=True, check=True, timeout=scaled(60)).stdout
    assert out.decode() == '{:e, 3, {:python, "GraphError", "node 1 (exp): é", ""}}'


def test_python_bytes_need_wrapping_to_be_binaries() -> None:
    assert decode(encode(b"ab")) == b"ab"  # a string (list) on the Erlang side
    assert isinstance(decode(encode(Binary(b"ab"))), Binary)


def test_garbage_is_a_codec_error() -> None:
    for bad in (b"", b"\x83", b"\x00abc", b"\x83\x68\x05"):
        with pytest.raises(CodecError):
            decode(bad)
    with pytest.raises(CodecError):
        encode(object())


def test_large_binaries_decode_as_views_into_the_frame() -> None:
    payload = bytes(range(256)) * 8192  # 2 MiB: a frame above COPY_BELOW
    frame = bytearray(encode((atom("r"), [binary(payload), binary(b"small")])))
    _, [big, small] = decode(frame)
    assert isinstance(big, BinaryView) and isinstance(big.value, memoryview)
    assert big.value.readonly and big.value.obj is frame  # no copy
    assert bytes(big.value) == payload and big == binary(payload)
    assert hash(big) == hash(binary(payload))
    assert encode(big) == encode(binary(payload))
    assert type(small) is Binary and small.value == b"small"
    view = binary_view(big)
    assert view is not None and np.frombuffer(view, np.uint8)[-1] == 255


def test_lists_of_big_integers_decode_as_erlang_writes_them() -> None:
    # a run of SMALL_BIG_EXT integers (handles, as a free sends them) is read in a loop of
    # its own: signs, sizes that change, a run that ends before other terms, an empty run
    handles = [(k << 40) | 12345 for k in (1, 255, 2**16, 2**23)]
    expr = ("[[" + ",".join(str(h) for h in handles) + "], "
            "[-1099511627776, 1099511627777, 2.5, 18446744073709551616, a], [], "
            "[1, 1099511627776]]")
    want = [handles, [-(2**40), 2**40 + 1, 2.5, 2**64, atom("a")], [], [1, 2**40]]
    assert decode(erl_eval(expr)) == want
    assert decode_fast(erl_eval(expr)) == want
    # a digit count that runs past the frame is refused, not read
    frame = bytearray(encode([[2**40]]))
    frame[frame.index(110) + 1] = 200
    with pytest.raises(CodecError):
        decode(bytes(frame))
