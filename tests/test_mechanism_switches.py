"""The switches that turn latency mechanisms off one by one (``NX_JAX_OFF``,
py_backend/request_loop.py ``MECHANISMS``; measured by bench/mechanisms.exs): each switched-off
mechanism no longer fires, and the replies stay the same."""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np
import pytest

from py_backend import channel
from py_backend.channel import FrameReader, decode
from py_backend.request_loop import MECHANISMS, RequestLoop, mechanisms_off

from .helpers import from_wire
from .test_channel import frame
from .test_fastcall import (
    elixir_call,
    key_of,
    reply_bytes,
    scale_graph,
)


def test_nx_jax_off_names_mechanisms_and_refuses_unknown_ones() -> None:
    assert mechanisms_off({}) == frozenset()
    assert mechanisms_off({"NX_JAX_OFF": ""}) == frozenset()
    assert mechanisms_off({"NX_JAX_OFF": " fast_one, fast_hot ,"}) == {"fast_one", "fast_hot"}
    assert mechanisms_off({"NX_JAX_OFF": ",".join(MECHANISMS)}) == set(MECHANISMS)
    with pytest.raises(ValueError, match=r"unknown mechanisms \['fast_tier'\]; known: spin_pause"):
        mechanisms_off({"NX_JAX_OFF": "fast_one,fast_tier"})


def test_a_worker_reads_nx_jax_off_as_it_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NX_JAX_OFF", "fast_hot")
    assert RequestLoop().off == {"fast_hot"}
    monkeypatch.delenv("NX_JAX_OFF")
    assert RequestLoop().off == frozenset()
    assert RequestLoop(off=frozenset({"fast_one"})).off == {"fast_one"}


def _served(worker: RequestLoop, request: bytearray) -> Any:
    """The decoded reply ``serve()`` would write for ``request``."""
    got = worker.handle_framed(request)
    return decode(got[4:] if type(got) is bytes else reply_bytes(got))


def _tier_counts(worker: RequestLoop) -> tuple[int, int, int]:
    s = worker.cache.stats
    return s.fast_one_calls, s.fast_hot_calls, s.fast_layout_calls


@pytest.mark.parametrize(
    ("off", "one_tensor", "keep"),
    [
        # one tensor in, one small out: tier 1 serves it, or with tier 1 off tier 2, or with
        # both off tier 3 (the layout lookup), every call after the first two
        (frozenset(), (4, 0, 1), (0, 4, 1)),
        (frozenset({"fast_one"}), (0, 4, 1), (0, 4, 1)),
        (frozenset({"fast_hot"}), (4, 0, 1), (0, 0, 5)),
        (frozenset({"fast_one", "fast_hot"}), (0, 0, 5), (0, 0, 5)),
    ],
)
def test_each_fast_tier_switched_off_leaves_the_calls_to_the_tiers_below_it(
    off: frozenset[str], one_tensor: tuple[int, int, int], keep: tuple[int, int, int]
) -> None:
    graph = scale_graph()
    key = key_of(graph)
    x = np.array([1.0, -2.5, 4.0], np.float32)
    worker = RequestLoop(off=off)
    replies = [_served(worker, elixir_call(i, key, graph if i == 0 else None, [x * i]))
               for i in range(7)]
    assert _tier_counts(worker) == one_tensor
    for i, reply in enumerate(replies):
        np.testing.assert_array_equal(from_wire(reply[2][0]), 3 * x * i)
    # a call that keeps its results: never tier 1
    kept = RequestLoop(off=off)
    for i in range(7):
        reply = _served(kept, elixir_call(i, key, graph if i == 0 else None, [x * i], keep=True))
        assert reply[0] == channel.atom("r")
    assert _tier_counts(kept) == keep
    assert len(kept.resident) == 7


def test_free_after_reply_off_holds_no_results_past_the_run() -> None:
    graph = scale_graph()
    key = key_of(graph)
    x = np.array([1.0, -2.5, 4.0], np.float32)
    for off, held in ((frozenset(), True), (frozenset({"free_after_reply"}), False)):
        worker = RequestLoop(off=off)
        # the third call through the layout's runner, the ones after it through tier 1
        for i in range(5):
            reply = _served(worker, elixir_call(i, key, graph if i == 0 else None, [x * i]))
            np.testing.assert_array_equal(from_wire(reply[2][0]), 3 * x * i)
            if i >= 2:
                assert (worker.spent is not None) == held
        assert _tier_counts(worker) == (2, 0, 1)


@pytest.mark.parametrize(
    ("switches", "moves", "paused"),
    [
        # every spin "loses its CPU": it moves to spin on, loses again and pauses (the
        # defaults), or without one rule or another
        ({}, [True], 1),
        ({"move": False}, [], 1),
        ({"pause": False}, [True], 0),
        ({"pause": False, "move": False}, [], 0),
    ],
)
def test_each_spin_rule_switched_off_no_longer_fires(
    monkeypatch: pytest.MonkeyPatch, switches: dict[str, bool], moves: list[bool], paused: int
) -> None:
    monkeypatch.setattr(channel, "PREEMPTED_NS", -1)
    monkeypatch.setattr(channel, "MOVE_GAP_NS", 10**18)
    made: list[bool] = []

    def move() -> bool:
        made.append(True)
        return True

    monkeypatch.setattr(channel, "move_off_this_cpu", move)
    r, w = os.pipe()
    try:
        # (a spin of 50 ms, not paused, still ends: then the read blocks in select)
        reader = FrameReader(r, spin_us=50_000, **switches)
        timer = threading.Timer(0.1, lambda: os.write(w, frame(b"late") + frame(b"next")))
        timer.start()
        assert reader.read_frame() == b"late"
        assert reader.read_frame() == b"next"
        timer.join()
        assert made == moves
        assert reader.paused_spins == paused
        assert os.get_blocking(r) == (paused == 1)
    finally:
        os.close(r)
        os.close(w)


def test_decode_fast_off_leaves_the_generic_path_to_erlang_py(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    graph = scale_graph()
    key = key_of(graph)
    x = np.array([1.0, -2.5, 4.0], np.float32)
    hand = channel.decode_fast
    read: list[int] = []

    def counted(data: bytes) -> Any:
        read.append(len(data))
        return hand(data)

    monkeypatch.setattr(channel, "decode_fast", counted)
    for off, by_hand in ((frozenset(), True), (frozenset({"decode_fast"}), False)):
        # without the learned layouts every request is decoded the generic way
        worker = RequestLoop(fast_paths=False, off=off)
        for i in range(4):
            request = elixir_call(i, key, graph if i == 0 else None, [x * i])
            read.clear()
            got = worker.handle_framed(request)
            # (each request is a small frame: read by hand unless switched off; the first
            # one's graph is decoded apart, once per graph)
            if i > 0:
                assert (read != []) == by_hand
            reply = decode(got[4:] if type(got) is bytes else reply_bytes(got))
            np.testing.assert_array_equal(from_wire(reply[2][0]), 3 * x * i)
        assert _tier_counts(worker) == (0, 0, 0)
