defmodule NxJax.TraceCacheTest do
  # async: false: shrinks the node-wide trace cache (other modules' entries would be evicted)
  use ExUnit.Case, async: false

  # the worker's counters and the front end's (traces, the trace cache)
  defp stats, do: Map.merge(NxJax.Pool.stats(), Nx.Defn.Compiler.counters())

  setup do
    NxJax.TestAppEnv.put(:trace_cache_size, 8, :nx)
  end

  defp cached?(fun) do
    Enum.any?(:persistent_term.get(), &match?({{Nx.Defn.Compiler, {:jit, ^fun}, _}, _}, &1))
  end

  test "the cache holds at most trace_cache_size entries, keeps the one in use, counts " <>
         "evictions, and every result stays right" do
    hot = &Nx.multiply(&1, 3)
    x = Nx.tensor([1.0, 2.0])
    assert Nx.to_flat_list(Nx.Defn.jit(hot).(x)) == [3.0, 6.0]
    before = stats()

    for k <- 1..40 do
      # 40 graphs never seen before (a closure over k is a function of its own)
      new = fn t -> Nx.add(t, k) end
      assert Nx.to_flat_list(Nx.Defn.jit(new).(x)) == [1.0 + k, 2.0 + k]
      # the hot function, used between every two new ones, is never the one evicted
      assert Nx.to_flat_list(Nx.Defn.jit(hot).(x)) == [3.0, 6.0]
      assert cached?(hot)
      assert stats().trace_cache_entries <= 8
    end

    after_ = stats()
    # one trace per new function, none for the hot one (nothing else runs: async: false)
    assert after_.traces - before.traces == 40
    assert after_.trace_cache_evictions - before.trace_cache_evictions >= 32
    assert after_.trace_cache_entries <= 8
    # (the cache's persistent terms: a trace and its "used" counter)
    traces = &match?({{Nx.Defn.Compiler, _, _}, {_, {:atomics, _}}}, &1)
    assert Enum.count(:persistent_term.get(), traces) <= 8
  end

  test "a size that is not a positive integer is refused with the setting's name" do
    Application.put_env(:nx, :trace_cache_size, 0)

    assert_raise ArgumentError, ~r/config :nx, trace_cache_size: must be a positive/, fn ->
      Nx.Defn.jit(fn t -> Nx.subtract(t, 123.25) end).(Nx.tensor(1.0))
    end
  end

  # A jitted closure is cached under a digest of its code and captured values, worked out by
  # Nx.Defn.jit/2 once: under the closure itself, each call hashed and compared the captured
  # values (3 ms a call over a 4 MB tensor).
  test "a jitted closure's trace is keyed by a digest of what it captures, not by the values" do
    x = Nx.tensor([1.0, 2.0])
    big = Nx.iota({250_000}, type: :f32)
    add_first = fn big -> fn t -> Nx.add(t, big[0..1]) end end
    over_big = add_first.(big)
    # (an eager op traces too: made before the counts)
    shifted = Nx.add(big, 10)
    before = Nx.Defn.Compiler.counters()
    assert Nx.to_flat_list(Nx.Defn.jit(over_big).(x)) == [1.0, 3.0]
    refute cached?(over_big)

    assert Enum.any?(
             :persistent_term.get(),
             &match?({{Nx.Defn.Compiler, {:jit_digest, <<_::128>>}, _}, _}, &1)
           )

    # an equal closure, made again, reuses the trace; one over other values traces its own
    # and computes with its own values
    for _ <- 1..3, do: assert(Nx.to_flat_list(Nx.Defn.jit(add_first.(big)).(x)) == [1.0, 3.0])
    mid = Nx.Defn.Compiler.counters()
    assert mid.traces - before.traces == 1
    assert mid.trace_cache_hits - before.trace_cache_hits >= 3
    other = add_first.(shifted)
    assert Nx.to_flat_list(Nx.Defn.jit(other).(x)) == [11.0, 13.0]
    assert Nx.Defn.Compiler.counters().traces - mid.traces == 1
    # a closure that captures nothing keeps itself as its key
    plain = &Nx.multiply(&1, 5)
    assert Nx.to_flat_list(Nx.Defn.jit(plain).(x)) == [5.0, 10.0]
    assert cached?(plain)
  end
end
