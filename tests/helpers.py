"""Test helpers: build graphs and messages exactly as the Elixir side writes them."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from py_backend.channel import Atom, Binary, FrameReader, FrameWriter, atom, decode, encode
from py_backend.nxtypes import NxType, from_dtype

REPO = Path(__file__).resolve().parent.parent

# One factor for every time limit of both suites (test_elixir/test_helper.exs reads it too):
# raise it on a slow or loaded machine, e.g. NX_JAX_TEST_TIME_SCALE=3 make test.
TIME_SCALE_VAR = "NX_JAX_TEST_TIME_SCALE"


def time_scale() -> float:
    """``NX_JAX_TEST_TIME_SCALE`` (a positive number; 1 when unset)."""
    raw = os.environ.get(TIME_SCALE_VAR, "").strip()
    if not raw:
        return 1.0
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise ValueError(f"{TIME_SCALE_VAR}={raw!r}: expected a positive number, such as 2")
    return value


def scaled(seconds: float) -> float:
    """A time limit of the suites, in seconds, times ``NX_JAX_TEST_TIME_SCALE``."""
    return seconds * time_scale()

TYPES = {
    "u8": ("u", 8), "u16": ("u", 16), "u32": ("u", 32), "u64": ("u", 64),
    "s8": ("s", 8), "s16": ("s", 16), "s32": ("s", 32), "s64": ("s", 64),
    "f16": ("f", 16), "f32": ("f", 32), "f64": ("f", 64), "bf16": ("bf", 16),
    "c64": ("c", 64), "c128": ("c", 128),
}


def type_term(name: str) -> tuple[Any, int]:
    kind, bits = TYPES[name]
    return (atom(kind), bits)


def elixir_term(value: Any) -> Any:
    """A Python value as term_to_binary would encode the Elixir equivalent: str -> atom,
    bytes -> binary, int lists of 0..255 -> STRING_EXT (as Erlang does), tuples/lists kept."""
    if isinstance(value, str):
        return atom(value)
    if isinstance(value, bytes):
        return Binary(value)
    if isinstance(value, list):
        if value and all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= 255
                         for x in value):
            return bytes(value)  # erlang-py encodes bytes as STRING_EXT
        return [elixir_term(x) for x in value]
    if isinstance(value, tuple):
        return tuple(elixir_term(x) for x in value)
    if isinstance(value, dict):
        return {atom(k): elixir_term(v) for k, v in value.items()}
    return value


Out = Any  # ("f32", shape) or a list of those


def out_term(out: Out) -> Any:
    if isinstance(out, list):
        return [out_term(o) for o in out]
    name, shape = out
    return (type_term(name), tuple(shape))


class GraphBuilder:
    """Append nodes, get their ids; ``term()``/``binary()`` give the graph as Elixir sends it."""

    def __init__(self) -> None:
        self.nodes: list[Any] = []
        self.outs: list[Out] = []

    def add(self, op: str, inputs: Sequence[int] = (), opts: dict[str, Any] | None = None,
            out: Out = ("f32", ())) -> int:
        node_id = len(self.nodes)
        self.nodes.append((node_id, atom(op), elixir_term(list(inputs)),
                           elixir_term(opts or {}), out_term(out)))
        self.outs.append(out)
        return node_id

    def param(self, index: int, type_name: str = "f32", shape: Sequence[int] = ()) -> int:
        return self.add("parameter", [], {"index": index}, (type_name, tuple(shape)))

    def const(self, value: Any, type_name: str = "f32", shape: Sequence[int] = ()) -> int:
        return self.add("constant", [], {"value": value}, (type_name, tuple(shape)))

    def out_of(self, node_id: int) -> Out:
        return self.outs[node_id]

    def op(self, op: str, *inputs: int, out: Out | None = None, **opts: Any) -> int:
        """An op whose out defaults to the first input's."""
        return self.add(op, inputs, opts, out if out is not None else self.outs[inputs[0]])

    def term(self, outputs: Sequence[int]) -> Any:
        return (atom("nx_jax_graph"), 1, list(self.nodes), elixir_term(list(outputs)))

    def binary(self, outputs: Sequence[int]) -> bytes:
        return encode(self.term(outputs))


def wire_tensor(array: Any) -> Any:
    array = np.asarray(array)
    t = from_dtype(array.dtype)
    return ((atom(t.kind), t.bits), tuple(array.shape),
            Binary(np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes()))


def from_wire(term: Any) -> np.ndarray:
    (kind, bits), shape, data = term
    from py_backend.nxtypes import wire_dtype
    name = kind.value.decode() if isinstance(kind.value, bytes) else kind.value
    return np.frombuffer(data.value, dtype=wire_dtype(NxType(name, bits))).reshape(shape)


def request(request_id: int, function: str, args: list[Any], module: str = "nx_jax") -> bytes:
    return encode((atom("C"), request_id, atom(module), atom(function), args))


def atom_str(term: Any) -> str:
    assert isinstance(term, Atom), term
    value = term.value
    return value.decode() if isinstance(value, bytes) else str(value)


class WorkerProcess:
    """``python -m py_backend`` as a real subprocess talking over pipes on its fds 3 and 4."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        req_r, self._req_w = os.pipe()
        self._rep_r, rep_w = os.pipe()

        # As the Erlang port does: the request pipe on the child's fd 3, the reply pipe on fd 4.
        # pass_fds hands the pipe ends over; bash (dash only knows fds 0-9) moves them to 3
        # and 4 and execs the worker
        # (no preexec_fn: forking a multithreaded JAX process must not run Python in the child).
        wire = f'exec "$0" -m py_backend 3<&{req_r} 4>&{rep_w} {req_r}<&- {rep_w}>&-'
        self.proc = subprocess.Popen(
            ["/bin/bash", "-c", wire, sys.executable],
            cwd=REPO,
            pass_fds=(req_r, rep_w),
            env={**os.environ, **(env or {})},
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        os.close(req_r)
        os.close(rep_w)
        self.writer = FrameWriter(self._req_w)
        self.reader = FrameReader(self._rep_r)

    def send_raw(self, payload: bytes) -> None:
        self.writer.write_frame(payload)

    def send_bytes(self, data: bytes) -> None:
        """Bytes as they are, no frame header added (a malformed or partial stream)."""
        view = memoryview(data)
        while view:
            view = view[os.write(self._req_w, view):]

    def receive(self) -> Any:
        frame = self.reader.read_frame()
        assert frame is not None, "worker closed its reply stream"
        return decode(frame)

    def call(self, payload: bytes) -> Any:
        self.send_raw(payload)
        return self.receive()

    def close(self, timeout: float = 30.0) -> int:
        """Close the request pipe and wait (``timeout`` seconds, scaled) for the exit code."""
        os.close(self._req_w)
        code = self.proc.wait(timeout=scaled(timeout))
        os.close(self._rep_r)
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        return code


def central(f: Callable[[np.ndarray], float], x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """The central finite difference of the scalar function ``f`` at ``x``, element by element."""
    out = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        out[i] = (f(x + e) - f(x - e)) / (2 * h)
    return out


def run_graph(g: GraphBuilder, outputs: Sequence[int], *args: Any, jit: bool = True) -> list[Any]:
    """Decode, validate and lower ``g`` in-process, run it on ``args``, return NumPy arrays."""
    import jax

    from py_backend.program import decode_graph, lower

    fn = lower(decode_graph(g.binary(outputs)))
    if jit:
        fn = jax.jit(fn)
    return [np.asarray(r) for r in fn(*[np.asarray(a) for a in args])]
