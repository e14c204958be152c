defmodule NxJax.ServingPartitionsTest do
  # The clean room's Nx.Serving with `compiler: NxJax` and `partitions: true`: one partition
  # per worker of the pool (NxJax.__partitions_options__/1), partition i computing on worker i,
  # each client getting the direct call's values. (test_real_nx/serving_test.exs checks the
  # same under real Nx.)
  use ExUnit.Case, async: false

  defmodule Pinned do
    # a serving that reports, for each batch, its partition and the worker that computed it
    @behaviour Nx.Serving

    @impl true
    def init(_type, test, partitions) do
      jits = for opts <- partitions, do: Nx.Defn.jit(&Nx.multiply(Nx.sin(&1), 2), opts)
      {:ok, {List.to_tuple(jits), test}}
    end

    @impl true
    def handle_batch(batch, partition, {jits, test} = state) do
      run = fn ->
        Nx.default_backend(NxJax.Backend)
        result = elem(jits, partition).(batch)
        send(test, {:ran, partition, result.data.worker})
        {Nx.backend_transfer(result, Nx.BinaryBackend), :ran}
      end

      {:execute, run, state}
    end
  end

  setup_all do
    :ok = Supervisor.terminate_child(NxJax.Supervisor, NxJax.Pool)
    {:ok, pool} = NxJax.Pool.start_link(size: 2)
    Process.unlink(pool)

    on_exit(fn ->
      Supervisor.stop(pool)
      {:ok, _} = Supervisor.restart_child(NxJax.Supervisor, NxJax.Pool)
    end)

    :ok
  end

  defp take_ran do
    receive do
      {:ran, partition, worker} -> [{partition, worker} | take_ran()]
    after
      0 -> []
    end
  end

  test "partitions: one per worker of the pool, each pinned to its worker" do
    second = NxJax.Pool.name(1)
    assert second != NxJax.Worker

    assert NxJax.__partitions_options__(compiler: NxJax) == [
             [server: NxJax.Worker, compiler: NxJax],
             [server: second, compiler: NxJax]
           ]

    assert NxJax.__partitions_options__(server: second) == [[server: second]]
  end

  test "batched_run with partitions: true: the direct call's values, partition i on worker i",
       config do
    start_supervised!(
      {Nx.Serving,
       serving: Nx.Serving.new(Pinned, self(), compiler: NxJax),
       name: config.test,
       batch_size: 4,
       batch_timeout: 20,
       partitions: true}
    )

    results =
      0..31
      |> Enum.map(fn client ->
        Task.async(fn ->
          x = Nx.tensor([client, client + 0.5], type: :f32)
          {x, Nx.Serving.batched_run(config.test, Nx.Batch.stack([x[0], x[1]]))}
        end)
      end)
      |> Task.await_many(60_000)

    for {x, served} <- results do
      want = Nx.multiply(Nx.sin(x), 2)
      assert served.shape == {2}
      assert Nx.to_number(Nx.reduce_max(Nx.abs(Nx.subtract(served, want)))) < 1.0e-6
    end

    by_partition = Enum.group_by(take_ran(), &elem(&1, 0), &elem(&1, 1))
    assert Enum.sort(Map.keys(by_partition)) == [0, 1]

    for {partition, pids} <- by_partition do
      assert Enum.uniq(pids) == [Enum.at(NxJax.Pool.workers(), partition)]
    end
  end
end
