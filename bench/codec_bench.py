"""ETF codec benchmark: erlang-py (our choice) vs emqx-erlport's ``erlterms``.

Usage (from the repository root):

    .venv/bin/python bench/codec_bench.py                 # erlang-py and py_backend.channel
    /path/to/venv-with-emqx-erlport/bin/python bench/codec_bench.py   # adds erlterms

The second form needs ``pip install emqx-erlport erlang-py numpy`` in that environment and the
repository root on ``sys.path`` (the script adds it). Results go to stdout as a Markdown table;
PROTOCOL.md section 6 records them.

Workloads:
- "64 MB request": ``{:"C", 1, :nx_jax, :run, [graph_bin, [{{:f, 32}, {4096, 4096}, data}]]}``
  with 64 MiB of tensor data, decoded (Elixir -> Python direction);
- "64 MB reply": ``{:r, 1, [{{:f, 32}, {4096, 4096}, data}]}`` encoded (Python -> Elixir);
- "graph": a 2000-node graph term like Nx.Defn.WireEncoder writes (tuples, atoms, int lists, opts
  maps), decoded and encoded. ``erlterms`` cannot decode maps (MAP_EXT), so for it the opts maps
  are replaced by lists of pairs, which is slightly less work than the real thing.
"""

from __future__ import annotations

import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import erlang  # noqa: E402

MB64 = 64 * 1024 * 1024


def best_of(fn: Callable[[], Any], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def erlang_py_terms(data: bytes) -> tuple[Any, Any, Any]:
    A, B = erlang.OtpErlangAtom, erlang.OtpErlangBinary
    f32 = (A(b"f"), 32)
    tensor = (f32, (4096, 4096), B(data))
    request = (A(b"C"), 1, A(b"nx_jax"), A(b"run"), [B(b"\x83graph"), [tensor]])
    reply = (A(b"r"), 1, [tensor])
    nodes = []
    for i in range(2000):
        op = A(b"parameter") if i == 0 else A(b"add")
        inputs = b"" if i == 0 else bytes([(i - 1) % 256])  # STRING_EXT, as Erlang sends
        opts = {A(b"axes"): b"\x00\x01", A(b"keep_axes"): False}
        nodes.append((i, op, inputs, opts, (f32, (64, 64))))
    graph = (A(b"nx_jax_graph"), 1, nodes, [1999])
    return request, reply, graph


def main() -> None:
    data = bytes(range(256)) * (MB64 // 256)
    request, reply, graph = erlang_py_terms(data)
    request_bin = erlang.term_to_binary(request)
    graph_bin = erlang.term_to_binary(graph)
    print(f"Python {platform.python_version()} on {platform.machine()}, best of N runs\n")
    print("| codec | 64 MB request decode | 64 MB reply encode | graph decode | graph encode |")
    print("| --- | --- | --- | --- | --- |")

    def row(name: str, cells: list[float | None]) -> None:
        text = [("n/a" if c is None else f"{c * 1000:.2f} ms") for c in cells]
        print(f"| {name} | " + " | ".join(text) + " |")

    row("erlang-py " + _version("erlang-py"), [
        best_of(lambda: erlang.binary_to_term(request_bin), 5),
        best_of(lambda: erlang.term_to_binary(reply), 5),
        best_of(lambda: erlang.binary_to_term(graph_bin), 10),
        best_of(lambda: erlang.term_to_binary(graph), 10),
    ])

    try:
        from py_backend import channel
    except ImportError:  # e.g. jax missing in a scratch venv: channel itself needs no jax
        channel = None  # type: ignore[assignment]
    if channel is not None:
        request_frame, graph_frame = bytearray(request_bin), bytearray(graph_bin)  # as read
        row("py_backend.channel (erlang-py + chunked encoder)", [
            best_of(lambda: channel.decode(request_frame), 5),
            best_of(lambda: channel.encode_chunks(reply), 5),
            best_of(lambda: channel.decode(graph_frame), 10),
            best_of(lambda: channel.encode_chunks(graph), 10),
        ])

    try:
        from emqx.erlport import erlterms
    except ImportError:
        print("\n(emqx-erlport not installed here: erlterms not measured)")
        return
    e_tensor = ((erlterms.Atom(b"f"), 32), (4096, 4096), data)
    e_request = (erlterms.Atom(b"C"), 1, erlterms.Atom(b"nx_jax"), erlterms.Atom(b"run"),
                 [b"\x83graph", [e_tensor]])
    e_reply = (erlterms.Atom(b"r"), 1, [e_tensor])
    e_request_bin = erlterms.encode(e_request)
    # (erlterms writes ATOM_EXT where erlang-py writes SMALL_ATOM_EXT: same terms, both valid)
    assert len(e_request_bin) - len(request_bin) < 100
    e_graph = (erlterms.Atom(b"nx_jax_graph"), 1,
               [(i, erlterms.Atom(b"add"), [max(i - 1, 0)],
                 [(erlterms.Atom(b"axes"), [0, 1]), (erlterms.Atom(b"keep_axes"), False)],
                 ((erlterms.Atom(b"f"), 32), (64, 64))) for i in range(2000)], [1999])
    e_graph_bin = erlterms.encode(e_graph)
    try:
        erlterms.decode(graph_bin)
        maps = "decodes maps"
    except ValueError:
        maps = "cannot decode maps (MAP_EXT): graph measured with opts as lists of pairs"
    row("emqx-erlport erlterms " + _version("emqx-erlport"), [
        best_of(lambda: erlterms.decode(e_request_bin), 5),
        best_of(lambda: erlterms.encode(e_reply), 5),
        best_of(lambda: erlterms.decode(e_graph_bin), 10),
        best_of(lambda: erlterms.encode(e_graph), 10),
    ])
    print(f"\nerlterms {maps}.")


def _version(dist: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "?"


if __name__ == "__main__":
    main()
