"""Hostile input: the decoder, the dispatcher and the graph validator never crash.

Every case feeds the worker's request handler (``RequestLoop.handle``, the function the loop calls
for each frame) and checks that exactly one well-formed reply comes back: ``{:r, id, _}`` for
a valid request, ``{:e, id, {:python, class, message, traceback}}`` otherwise. The last test
sends random frames to a real worker process and checks it keeps serving.

Example counts (``max_examples``) add up to 4,200 cases in ``make test`` (drawn anew each run);
``NX_JAX_FUZZ_SCALE=10`` runs ten times as many.
"""

from __future__ import annotations

import os
import random
import struct
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from py_backend.channel import Binary, atom, decode, encode
from py_backend.request_loop import FUNCTIONS, RequestLoop
from tests.helpers import GraphBuilder, WorkerProcess, atom_str, request, wire_tensor

# NX_JAX_FUZZ_SCALE=10 runs ten times as many examples (a deeper run than `make test`'s)
FUZZ_SCALE = float(os.environ.get("NX_JAX_FUZZ_SCALE", "1"))


def fuzz(max_examples: int) -> settings:
    return settings(
        max_examples=max(1, int(max_examples * FUZZ_SCALE)),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        database=None,
    )


@pytest.fixture(scope="module")
def worker() -> RequestLoop:
    return RequestLoop()


def reply_of(worker: RequestLoop, frame: bytes) -> Any:
    chunks = worker.handle(frame)
    return decode(b"".join(bytes(c) for c in chunks))


def assert_error_reply(reply: Any, request_id: int | None = None) -> str:
    assert isinstance(reply, tuple) and len(reply) == 3, reply
    assert atom_str(reply[0]) == "e", reply
    if request_id is not None:
        assert reply[1] == request_id
    tag, klass, message, trace = reply[2]
    assert atom_str(tag) == "python"
    for field in (klass, message, trace):
        assert isinstance(field, Binary), reply
    return bytes(klass.value).decode()


# --- strategies ----------------------------------------------------------------------------

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_CreEx", min_size=1, max_size=12)
atoms = names.map(atom)
# Erlang has no NaN or infinite floats: a codec may refuse to encode them, so leave them out.
scalars = st.one_of(
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=False, allow_infinity=False),
    atoms,
    st.binary(max_size=64).map(Binary),
    st.none(),
    st.booleans(),
)
terms = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=6),
        st.lists(inner, max_size=6).map(tuple),
        st.dictionaries(atoms, inner, max_size=4),
    ),
    max_leaves=25,
)
functions = st.one_of(st.sampled_from([*FUNCTIONS, "system", "eval", "__import__"]), names)
modules = st.one_of(st.sampled_from(["nx_jax", "os", "builtins", "subprocess"]), names)


@st.composite
def requests(draw: st.DrawFn) -> tuple[int, str, str, bool, bytes]:
    request_id = draw(st.integers(min_value=0, max_value=2**40))
    module = draw(modules)
    function = draw(functions)
    args = draw(st.lists(terms, max_size=3))
    return request_id, module, function, args == [], request(request_id, function, args, module)


# --- the cases -----------------------------------------------------------------------------


@fuzz(1000)
@given(frame=st.binary(max_size=200))
def test_random_bytes_get_an_error_reply(worker: RequestLoop, frame: bytes) -> None:
    reply = reply_of(worker, frame)
    if atom_str(reply[0]) == "r":  # random bytes that happen to be a valid ping
        return
    assert_error_reply(reply)


@fuzz(1000)
@given(term=terms)
def test_any_term_that_is_not_a_request_gets_bad_request(worker: RequestLoop, term: Any) -> None:
    reply = reply_of(worker, encode(term))
    assert assert_error_reply(reply) == "BadRequest"


@fuzz(800)
@given(req=requests())
def test_requests_to_anything_but_the_closed_table_are_refused(
    worker: RequestLoop, req: tuple[int, str, str, bool, bytes]
) -> None:
    request_id, module, function, no_args, frame = req
    reply = reply_of(worker, frame)
    served = module == "nx_jax" and function in FUNCTIONS
    if served and function in ("ping", "info", "stats") and no_args:
        assert atom_str(reply[0]) == "r" and reply[1] == request_id
        return
    if served and atom_str(reply[0]) == "r":  # a served function that accepted random args
        assert reply[1] == request_id
        return
    klass = assert_error_reply(reply, request_id)
    if not served:
        assert klass == "UnknownFunction"


def valid_run_request() -> bytes:
    g = GraphBuilder()
    x = g.param(0, "f32", (3,))
    y = g.op("exp", x)
    s = g.add("sum", [y], {"axes": None, "keep_axes": False}, ("f32", ()))
    return request(7, "run", [Binary(g.binary([s])), [wire_tensor(np.ones(3, np.float32))]])


VALID = valid_run_request()


@fuzz(700)
@given(
    cuts=st.lists(st.integers(min_value=0, max_value=len(VALID) - 1), min_size=1, max_size=4),
    flips=st.lists(
        st.tuples(st.integers(min_value=0, max_value=len(VALID) - 1), st.integers(0, 255)),
        max_size=6,
    ),
)
def test_truncated_and_corrupted_requests_get_one_reply(
    worker: RequestLoop, cuts: list[int], flips: list[tuple[int, int]]
) -> None:
    data = bytearray(VALID)
    for position, value in flips:
        data[position] = value
    frame = bytes(data[: max(cuts)]) if len(cuts) > 1 else bytes(data)
    reply = reply_of(worker, frame)
    if atom_str(reply[0]) == "r":
        return  # a flip that kept the request valid (e.g. inside the tensor's data)
    assert_error_reply(reply)


OPS = ["parameter", "constant", "exp", "add", "sum", "reshape", "transpose", "dot", "grad",
       "custom_grad", "elem", "cotangent", "stop_grad", "metadata", "nope", "select", "slice"]
TYPES = [("f", 32), ("f", 64), ("s", 64), ("u", 8), ("x", 3), ("f", 7)]
OPTS: list[dict[str, Any]] = [
    {}, {"index": 0}, {"value": 1.5}, {"axes": [0]}, {"axes": None, "keep_axes": False},
    {"index": -1}, {"wrt": [0], "cotangents": [0], "grads": [0], "tuple": False},
    {"axes": [5, 5]}, {"value": "bad"},
]


@st.composite
def graphs(draw: st.DrawFn) -> tuple[Any, list[Any]]:
    count = draw(st.integers(min_value=0, max_value=6))
    nodes = []
    for node_id in range(count):
        op = draw(st.sampled_from(OPS))
        inputs = draw(st.lists(st.integers(min_value=-1, max_value=count), max_size=3))
        opts = {atom(k): v for k, v in draw(st.sampled_from(OPTS)).items()}
        kind, bits = draw(st.sampled_from(TYPES))
        shape = tuple(draw(st.lists(st.integers(min_value=-1, max_value=3), max_size=2)))
        if draw(st.integers(0, 20)) == 0:
            shape = (2**40, 2**40)
        ident = draw(st.sampled_from([node_id, node_id, node_id, node_id + 1, -1]))
        nodes.append((ident, atom(op), inputs, opts, ((atom(kind), bits), shape)))
    outputs = draw(st.lists(st.integers(min_value=-1, max_value=count), max_size=2))
    version = draw(st.sampled_from([1, 1, 1, 2]))
    args = [wire_tensor(_zeros(draw(st.sampled_from([(), (1,), (3,)]))))]
    return (atom("nx_jax_graph"), version, nodes, outputs), args


def _zeros(shape: tuple[int, ...]) -> Any:
    return np.zeros(shape, np.float32)


@fuzz(700)
@given(case=graphs())
def test_random_graphs_are_refused_or_run_never_crash(
    worker: RequestLoop, case: tuple[Any, list[Any]]
) -> None:
    graph, args = case
    reply = reply_of(worker, request(3, "run", [Binary(encode(graph)), args]))
    assert reply[1] == 3
    if atom_str(reply[0]) == "e":
        assert_error_reply(reply, 3)


def random_frames(seed: int, count: int) -> Iterator[bytes]:
    rng = random.Random(seed)
    for i in range(count):
        kind = i % 4
        if kind == 0:
            yield rng.randbytes(rng.randrange(0, 64))
        elif kind == 1:
            yield VALID[: rng.randrange(1, len(VALID))]
        elif kind == 2:
            data = bytearray(VALID)
            for _ in range(4):
                data[rng.randrange(len(data))] = rng.randrange(256)
            yield bytes(data)
        else:
            # a term claiming a huge length inside a small frame
            yield b"\x83m" + struct.pack(">I", 2**31) + rng.randbytes(8)


def test_a_real_worker_process_survives_random_frames() -> None:
    proc = WorkerProcess()
    try:
        for frame in random_frames(seed=5, count=400):
            reply = proc.call(frame)
            assert isinstance(reply, tuple) and len(reply) == 3
            assert atom_str(reply[0]) in ("r", "e")
        reply = proc.call(request(99, "ping", []))
        assert atom_str(reply[0]) == "r" and reply[1] == 99 and atom_str(reply[2]) == "pong"
    finally:
        assert proc.close() == 0
