defmodule NxJax.PoolThreadsTest do
  # async: false: starts its own worker processes and reads the application environment
  use ExUnit.Case, async: false

  @flags "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"

  test "a pool of more than one worker runs each worker's XLA on one thread" do
    assert [{"NPROC", "1"}, {"XLA_FLAGS", flags}, {"A", "b"}] =
             NxJax.Pool.thread_env(2, [{"A", "b"}])

    assert String.ends_with?(flags, @flags)
  end

  test "a single worker keeps XLA's default threads" do
    assert NxJax.Pool.thread_env(1, [{"A", "b"}]) == [{"A", "b"}]
  end

  test "XLA_FLAGS or NPROC given in worker_env wins" do
    assert NxJax.Pool.thread_env(3, [{"XLA_FLAGS", "--mine"}]) ==
             [{"NPROC", "1"}, {"XLA_FLAGS", "--mine"}]

    assert [{"XLA_FLAGS", _}, {"NPROC", "2"}] = NxJax.Pool.thread_env(3, [{"NPROC", "2"}])
  end

  test "worker_threads: :all turns the single-thread flags off" do
    Application.put_env(:nx_jax, :worker_threads, :all)

    try do
      assert NxJax.Pool.thread_env(2, []) == []
    after
      Application.delete_env(:nx_jax, :worker_threads)
    end
  end

  test "a worker started with the single-thread flags has them and computes correctly" do
    {:ok, w} = NxJax.Worker.start_link(env: NxJax.Pool.thread_env(2, []))

    try do
      # after a first reply the Python process has exec'd (its environ is the worker's)
      assert NxJax.Worker.call(:ping, [], server: w) == :pong
      environ = File.read!("/proc/#{NxJax.Worker.os_pid(w)}/environ")
      assert environ =~ @flags
      assert "NPROC=1" in String.split(environ, <<0>>)

      x = Nx.iota({8, 8}, type: :f32)
      dot = Nx.Defn.jit(&Nx.dot/2, server: w).(x, x)
      last = Enum.sum(for k <- 0..7, do: (56 + k) * (8 * k + 7))
      assert List.last(Nx.to_flat_list(dot)) == last
      assert dot == Nx.dot(x, x)
    after
      GenServer.stop(w)
    end
  end

  # A large elementwise op, which XLA's CPU client splits over its intra-op threads.
  defp wide(x) do
    Nx.iota({400_000}, type: :f32) |> Nx.multiply(x) |> Nx.sin() |> Nx.cos() |> Nx.sum()
  end

  # CPU time (clock ticks) of each thread of an OS process, by thread id.
  defp thread_ticks(os_pid) do
    for tid <- File.ls!("/proc/#{os_pid}/task"), into: %{} do
      case File.read("/proc/#{os_pid}/task/#{tid}/stat") do
        {:ok, stat} ->
          [_, fields] = String.split(stat, ") ", parts: 2)
          [utime, stime] = fields |> String.split(" ") |> Enum.slice(11, 2)
          {tid, String.to_integer(utime) + String.to_integer(stime)}

        {:error, _} ->
          {tid, 0}
      end
    end
  end

  # How the CPU time of 300 calls of `wide/1` on a worker started with `env` spread over its
  # threads: {ticks of the busiest thread, ticks of all threads}.
  defp spread(env) do
    {:ok, w} = NxJax.Worker.start_link(env: env)

    try do
      f = Nx.Defn.jit(&wide/1, server: w)
      x = Nx.tensor(0.5)
      expected = f.(x)
      os_pid = NxJax.Worker.os_pid(w)
      before = thread_ticks(os_pid)
      for _ <- 1..300, do: assert(f.(x) == expected)
      used = for {tid, t} <- thread_ticks(os_pid), do: t - Map.get(before, tid, 0)
      {Enum.max(used), Enum.sum(used)}
    after
      GenServer.stop(w)
    end
  end

  # Regression: the XLA_FLAGS alone left JAX 0.10's CPU client on every core (a pool of 2 on
  # 2 cores then ran 4 busy threads); NPROC=1 keeps the work on one thread.
  test "a pool worker's XLA does its work on one thread" do
    {busiest, total} = spread(NxJax.Pool.thread_env(2, []))
    assert busiest >= 10
    assert total <= busiest * 1.25, "threads' ticks: #{busiest} of #{total}"

    # the control: where more than one CPU is there, XLA's default spreads the same work
    if :erlang.system_info(:logical_processors_available) > 1 do
      {busiest, total} = spread([])
      assert total > busiest * 1.3, "threads' ticks: #{busiest} of #{total}"
    end
  end
end
