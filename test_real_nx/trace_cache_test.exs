defmodule NxJax.RealNx.TraceCacheTest do
  # The compiler's trace cache under real Nx (NxJax.TraceCache): bounded by
  # `config :nx_jax, trace_cache_size:`, a function in use kept, evictions counted. Not async:
  # it sizes and empties the one cache of the VM.
  use ExUnit.Case, async: false

  @size 8

  setup do
    Application.put_env(:nx_jax, :trace_cache_size, @size)
    :ok = NxJax.TraceCache.reset()

    on_exit(fn ->
      Application.delete_env(:nx_jax, :trace_cache_size)
      NxJax.TraceCache.reset()
    end)
  end

  # a new closure at each call (it captures `c`): real Nx's key for it is new each time
  defp fresh(c), do: Nx.Defn.jit(fn x -> Nx.add(x, c) end, compiler: NxJax)

  test "closures jitted once each leave at most trace_cache_size traces, counted as evicted" do
    x = Nx.tensor([1.0, 2.0])

    for i <- 1..(3 * @size) do
      assert fresh(i * 1.0).(x) == Nx.tensor([1.0 + i, 2.0 + i])
      assert NxJax.trace_cache_stats().entries <= @size
    end

    stats = NxJax.trace_cache_stats()
    assert stats.size == @size
    assert stats.entries == @size
    assert stats.traces == 3 * @size
    assert stats.evictions == 2 * @size
    assert stats.hits == 0
  end

  test "a function called between fresh closures stays cached: it is traced once" do
    pid = self()

    hot =
      Nx.Defn.jit(
        fn x ->
          send(pid, :hot_traced)
          Nx.multiply(x, 3)
        end,
        compiler: NxJax
      )

    x = Nx.tensor([1.0, -2.0])

    for i <- 1..(3 * @size) do
      # (the fresh closure between makes the hot call look its trace up in the table)
      assert fresh(i * 1.0).(x) == Nx.add(x, i * 1.0)
      assert hot.(Nx.tensor([i * 1.0, 0.5])) == Nx.tensor([i * 3.0, 1.5])
    end

    assert_received :hot_traced
    refute_received :hot_traced

    # from another process too (no last entry of its own): a hit
    before = NxJax.trace_cache_stats()
    assert Task.await(Task.async(fn -> hot.(x) end)) == Nx.tensor([3.0, -6.0])
    after_ = NxJax.trace_cache_stats()
    assert {after_.traces, after_.hits} == {before.traces, before.hits + 1}
    refute_received :hot_traced

    stats = NxJax.trace_cache_stats()
    assert stats.entries <= @size
    assert stats.traces == 3 * @size + 1
    assert stats.evictions == stats.traces - stats.entries
  end

  test "Nx.Defn.compile keeps its trace whatever the cache evicts later" do
    compiled = Nx.Defn.compile(&Nx.exp/1, [Nx.template({2}, :f32)], compiler: NxJax)
    for i <- 1..(2 * @size), do: fresh(i * 1.0).(Nx.tensor(0.0))
    assert NxJax.trace_cache_stats().entries <= @size
    assert_in_delta Nx.to_number(compiled.(Nx.tensor([0.0, 1.0]))[1]), :math.exp(1.0), 1.0e-5
  end

  test "a bad trace_cache_size is an ArgumentError that names the setting" do
    for bad <- [0, -3, 2.5, :big] do
      Application.put_env(:nx_jax, :trace_cache_size, bad)

      assert_raise ArgumentError, ~r/config :nx_jax, trace_cache_size: must be a positive/, fn ->
        NxJax.TraceCache.reset()
      end
    end

    # (the cache itself is untouched, and runs on)
    assert NxJax.trace_cache_stats().size == @size
    assert fresh(2.0).(Nx.tensor(1.0)) == Nx.tensor(3.0)
  end
end
