"""Where the worker's time goes on one small ``call`` request, in-process (no port), for
bench/run.exs; prints one JSON object of microseconds (median of 5 rounds of n calls each).

argv: the request frame written by bench/run.exs (a ``call`` that carries the graph, then the
same call by key only), and n.

- ``handle``: ``RequestLoop.handle`` on the key-only request once its layout is learned (the path
  every repeated call takes: py_backend/fastcall.py); ``match``: recognising the layout;
- ``handle_generic``: the same request through the generic path (layouts switched off): decode,
  parse, check, run, encode;
- ``decode_fast`` / ``decode_erlang_py``: the request decoded by our term decoder's fast path /
  by erlang-py; ``encode``: the reply term encoded by the generic encoder;
- ``jit``: the jitted call alone, result read back.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import erlang
import numpy as np

from py_backend import channel, fastcall
from py_backend.request_loop import RequestLoop


class NoLayouts(fastcall.Layouts):
    """Layouts switched off: every request takes the generic path."""

    def match(self, frame: channel.Chunk) -> fastcall.Match | None:
        return None

    def learn(self, frame: bytes) -> fastcall.Layout | None:
        return None


def per_call(fn: Callable[[], Any], n: int) -> float:
    for _ in range(200):
        fn()
    rounds = []
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        rounds.append((time.perf_counter_ns() - t0) / 1000 / n)
    return statistics.median(rounds)


def main() -> None:
    with open(sys.argv[1], "rb") as f:
        with_graph = f.read()
    with open(sys.argv[2], "rb") as f:
        by_key = f.read()
    n = int(sys.argv[3])
    worker = RequestLoop()
    worker.handle(bytearray(with_graph))
    reply = channel.decode(b"".join(bytes(c) for c in worker.handle(bytearray(by_key))))
    term = channel.decode(by_key)
    program = worker.cache.program_by_key(channel.binary_bytes(term[4][0]) or b"")
    assert program is not None
    arg = np.frombuffer(term[4][2][0][2].value, "<f4").reshape(()).copy()
    worker.handle(bytearray(by_key))  # served once more: now learned
    frame = bytearray(by_key)
    assert worker.layouts.match(frame) is not None, "the key-only call was not learned"
    generic = RequestLoop()
    generic.handle(bytearray(with_graph))
    generic.layouts = NoLayouts()
    out = {
        "handle": per_call(lambda: worker.handle(bytearray(by_key)), n),
        "match": per_call(lambda: worker.layouts.match(frame), n),
        "handle_generic": per_call(lambda: generic.handle(bytearray(by_key)), n),
        "decode_fast": per_call(lambda: channel.decode_fast(by_key), n),
        "decode_erlang_py": per_call(lambda: erlang.binary_to_term(by_key), n),
        "encode": per_call(lambda: channel.encode_chunks(reply), n),
        "jit": per_call(lambda: np.asarray(program.jitted(arg)[0]), n),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
