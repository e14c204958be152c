defmodule NxJax.PoolThreadsTest do
  # async: false: starts its own worker processes and reads the application environment
  use ExUnit.Case, async: false

  @flags "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"

  test "a pool of more than one worker runs each worker's XLA on one thread" do
    assert [{"XLA_FLAGS", flags}, {"A", "b"}] = NxJax.Pool.thread_env(2, [{"A", "b"}])
    assert String.ends_with?(flags, @flags)
  end

  test "a single worker keeps XLA's default threads" do
    assert NxJax.Pool.thread_env(1, [{"A", "b"}]) == [{"A", "b"}]
  end

  test "XLA_FLAGS given in worker_env wins" do
    assert NxJax.Pool.thread_env(3, [{"XLA_FLAGS", "--mine"}]) == [{"XLA_FLAGS", "--mine"}]
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

      x = Nx.iota({8, 8}, type: :f32)
      dot = Nx.Defn.jit(&Nx.dot/2, server: w).(x, x)
      last = Enum.sum(for k <- 0..7, do: (56 + k) * (8 * k + 7))
      assert List.last(Nx.to_flat_list(dot)) == last
      assert dot == Nx.dot(x, x)
    after
      GenServer.stop(w)
    end
  end
end
