defmodule NxJax.TraceCacheTest do
  # async: false: shrinks the node-wide trace cache (other modules' entries would be evicted)
  use ExUnit.Case, async: false

  setup do
    old = Application.fetch_env(:nx_jax, :trace_cache_size)
    Application.put_env(:nx_jax, :trace_cache_size, 8)

    on_exit(fn ->
      case old do
        {:ok, value} -> Application.put_env(:nx_jax, :trace_cache_size, value)
        :error -> Application.delete_env(:nx_jax, :trace_cache_size)
      end
    end)
  end

  defp cached?(fun) do
    Enum.any?(:persistent_term.get(), &match?({{Nx.Defn.Compiler, {:jit, ^fun}, _}, _}, &1))
  end

  test "the cache holds at most trace_cache_size entries, keeps the one in use, counts " <>
         "evictions, and every result stays right" do
    hot = &Nx.multiply(&1, 3)
    x = Nx.tensor([1.0, 2.0])
    assert Nx.to_flat_list(Nx.Defn.jit(hot).(x)) == [3.0, 6.0]
    before = NxJax.Pool.stats()

    for k <- 1..40 do
      # 40 graphs never seen before (a closure over k is a function of its own)
      new = fn t -> Nx.add(t, k) end
      assert Nx.to_flat_list(Nx.Defn.jit(new).(x)) == [1.0 + k, 2.0 + k]
      # the hot function, used between every two new ones, is never the one evicted
      assert Nx.to_flat_list(Nx.Defn.jit(hot).(x)) == [3.0, 6.0]
      assert cached?(hot)
      assert NxJax.Pool.stats().trace_cache_entries <= 8
    end

    after_ = NxJax.Pool.stats()
    # one trace per new function, none for the hot one (nothing else runs: async: false)
    assert after_.traces - before.traces == 40
    assert after_.trace_cache_evictions - before.trace_cache_evictions >= 32
    assert after_.trace_cache_entries <= 8
    # (the cache's persistent terms: a trace and its "used" counter)
    traces = &match?({{Nx.Defn.Compiler, _, _}, {_, {:atomics, _}}}, &1)
    assert Enum.count(:persistent_term.get(), traces) <= 8
  end

  test "a size that is not a positive integer is refused with the setting's name" do
    Application.put_env(:nx_jax, :trace_cache_size, 0)

    assert_raise ArgumentError, ~r/config :nx_jax, trace_cache_size: must be a positive/, fn ->
      Nx.Defn.jit(fn t -> Nx.subtract(t, 123.25) end).(Nx.tensor(1.0))
    end
  end
end
