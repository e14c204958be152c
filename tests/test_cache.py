"""The compiled-program cache (py_backend/cache.py): least recently used entries go first,
whether a use came through a lookup or through the fast path's ``touch``, and ``version``
changes exactly when an entry leaves."""

from __future__ import annotations

import numpy as np

from py_backend.cache import Cache, signature

from .helpers import GraphBuilder


def graph(constant: float) -> bytes:
    """x + constant over an f32 scalar: one graph per constant."""
    g = GraphBuilder()
    x = g.param(0, "f32", ())
    return g.binary([g.op("add", x, g.const(constant, "f32", ()))])


def sig(n: int) -> tuple:
    return signature([np.zeros(n, np.float32)])


def test_the_least_recently_used_program_goes_first() -> None:
    cache = Cache(max_entries=2)
    key_a, _ = cache.program(graph(1.0))
    key_b, _ = cache.program(graph(2.0))
    assert cache.program_by_key(key_a) is not None  # A is now the more recent
    key_c, _ = cache.program(graph(3.0))
    assert cache.program_by_key(key_b) is None
    assert cache.program_by_key(key_a) is not None and cache.program_by_key(key_c) is not None
    assert cache.stats.graph_loads == 3 and cache.stats.unknown_graphs == 1


def test_a_touch_counts_and_marks_a_use_as_hit_does() -> None:
    cache = Cache(max_entries=2)
    key_a, _ = cache.program(graph(1.0))
    key_b, _ = cache.program(graph(2.0))
    found_a = cache.hit(key_a, sig(1))
    assert found_a is not None
    program_a, use_a = found_a
    assert cache.stats.compiles == 1 and cache.stats.cache_hits == 0
    assert cache.hit(key_b, sig(1)) is not None  # B is now the more recent
    cache.touch(program_a, use_a)  # and now A again
    assert cache.stats.cache_hits == 1 and cache.stats.compiles == 2
    cache.program(graph(3.0))
    assert cache.program_by_key(key_b) is None
    assert cache.program_by_key(key_a) is program_a


def test_the_least_recently_used_signature_goes_first_and_is_compiled_again() -> None:
    cache = Cache(max_entries=2)
    key, program = cache.program(graph(1.0))
    for n in (1, 2):
        cache.executable_for(key, program, sig(n))
    found = cache.hit(key, sig(1))  # signature 1 is now the more recent
    assert found is not None and cache.stats.cache_hits == 1
    cache.executable_for(key, program, sig(3))  # drops signature 2
    assert cache.stats.compiles == 3
    cache.executable_for(key, program, sig(1))
    assert (cache.stats.compiles, cache.stats.cache_hits) == (3, 2)
    cache.executable_for(key, program, sig(2))
    assert (cache.stats.compiles, cache.stats.cache_hits) == (4, 2)


def test_the_version_changes_when_an_entry_leaves_and_differs_between_caches() -> None:
    cache, other = Cache(max_entries=2), Cache(max_entries=2)
    assert cache.version != other.version
    start = cache.version
    key, program = cache.program(graph(1.0))
    cache.executable_for(key, program, sig(1))
    cache.program(graph(2.0))
    assert cache.hit(key, sig(1)) is not None
    assert cache.version == start  # adding and using drop nothing
    cache.program(graph(3.0))  # drops graph 2
    evicted = cache.version
    assert evicted != start
    cache.clear()
    assert cache.version not in (start, evicted)
    assert cache.program_by_key(key) is None
