defmodule NxJax.RealNx.ServingTest do
  # Real Nx's Nx.Serving with `compiler: NxJax`: a served MLP gives the values of the direct
  # call, and `partitions: true` runs one partition per worker of the pool
  # (NxJax.__partitions_options__/1). Nx 0.7.2's own serving tests, distributed ones included,
  # run through test_real_nx/serving_suite/run.exs (`make serving-suite`).
  use ExUnit.Case, async: false

  import NxJax.RealNxCase, only: [assert_close: 2]

  defmodule MLP do
    import Nx.Defn

    defn predict({w1, b1, w2, b2}, x) do
      x
      |> Nx.dot(w1)
      |> Nx.add(b1)
      |> Nx.max(0)
      |> Nx.dot(w2)
      |> Nx.add(b2)
      |> softmax()
    end

    defnp softmax(logits) do
      exp = Nx.exp(logits - Nx.reduce_max(logits, axes: [1], keep_axes: true))
      exp / Nx.sum(exp, axes: [1], keep_axes: true)
    end
  end

  # A serving of MLP.predict that reports, for each batch, its partition and the worker that
  # computed it (the batch's results are resident there: NxJax.Backend in the task that runs it)
  defmodule PinnedMLP do
    @behaviour Nx.Serving

    @impl true
    def init(_type, {params, test}, partitions) do
      jits = for opts <- partitions, do: Nx.Defn.jit(&MLP.predict(params, &1), opts)
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

  # fixed weights and inputs (8 features, 16 hidden, 4 classes)
  defp params do
    w1 = Nx.iota({8, 16}, type: :f32) |> Nx.multiply(0.37) |> Nx.sin()
    b1 = Nx.iota({16}, type: :f32) |> Nx.multiply(0.01)
    w2 = Nx.iota({16, 4}, type: :f32) |> Nx.multiply(0.23) |> Nx.cos()
    b2 = Nx.tensor([0.1, -0.2, 0.3, 0.0], type: :f32)
    {w1, b1, w2, b2}
  end

  defp input(row), do: Nx.iota({8}, type: :f32) |> Nx.add(row) |> Nx.multiply(0.1) |> Nx.cos()

  # the direct call, under real Nx's own evaluator
  defp expected(params, rows) do
    x = Nx.stack(Enum.map(rows, &input/1))
    Nx.Defn.jit_apply(&MLP.predict/2, [params, x], compiler: Nx.Defn.Evaluator)
  end

  defp take_ran do
    receive do
      {:ran, partition, worker} -> [{partition, worker} | take_ran()]
    after
      0 -> []
    end
  end

  defp serving(params), do: Nx.Serving.jit(&MLP.predict(params, &1), compiler: NxJax)

  # this module's pool: 2 workers in place of the application's, restored afterwards
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

  test "Nx.Serving.run/2 with compiler: NxJax gives the direct call's values" do
    params = params()
    batch = Nx.Batch.stack(Enum.map(0..4, &input/1))
    served = Nx.Serving.run(serving(params), batch)
    assert_close(served, expected(params, 0..4))

    # and the direct call through NxJax agrees
    x = Nx.stack(Enum.map(0..4, &input/1))
    assert_close(Nx.Defn.jit_apply(&MLP.predict/2, [params, x], compiler: NxJax), served)
  end

  test "partitions: one per worker of the pool, each pinned to its worker" do
    second = NxJax.Pool.name(1)
    assert second != NxJax.Worker

    assert NxJax.__partitions_options__(compiler: NxJax, batch_keys: [:default]) == [
             [server: NxJax.Worker, compiler: NxJax, batch_keys: [:default]],
             [server: second, compiler: NxJax, batch_keys: [:default]]
           ]

    # options that name a worker already stay on it
    assert NxJax.__partitions_options__(server: second) == [[server: second]]
  end

  test "batched_run on a 2-worker pool with partitions: true: the direct call's values; " <>
         "partition i runs on worker i",
       config do
    params = params()

    start_supervised!(
      {Nx.Serving,
       serving: Nx.Serving.new(PinnedMLP, {params, self()}, compiler: NxJax),
       name: config.test,
       batch_size: 4,
       batch_timeout: 20,
       partitions: true}
    )

    # 32 clients of two rows each, at once: batches of 4 rows, on 2 partitions. (Two rows
    # each, so that no request is split over two batches: real Nx 0.7.2's client puts the
    # pieces of a split request together in the order they arrive, which batches running on
    # two partitions at once need not keep.)
    results =
      0..31
      |> Enum.map(fn client ->
        rows = [client, client + 100]

        Task.async(fn ->
          batch = Nx.Batch.stack(Enum.map(rows, &input/1))
          {rows, Nx.Serving.batched_run(config.test, batch)}
        end)
      end)
      |> Task.await_many(60_000)

    for {rows, served} <- results do
      assert_close(served, expected(params, rows))
    end

    ran = take_ran()
    # (64 rows in batches of at most 4)
    assert length(ran) >= 16

    by_partition = Enum.group_by(ran, &elem(&1, 0), &elem(&1, 1))
    assert Enum.sort(Map.keys(by_partition)) == [0, 1]

    workers =
      for {partition, pids} <- by_partition, into: %{} do
        assert [pid] = Enum.uniq(pids),
               "partition #{partition} ran on #{inspect(Enum.uniq(pids))}"

        {partition, pid}
      end

    assert workers == %{
             0 => Enum.at(NxJax.Pool.workers(), 0),
             1 => Enum.at(NxJax.Pool.workers(), 1)
           }
  end
end
