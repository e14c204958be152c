defmodule NxJax.ServingBatchingTest do
  # The clean room's Nx.Serving and Nx.Batch (nx/lib/nx/serving.ex, batch.ex) on nx_jax's
  # worker: results against direct calls of the same function, the batching of concurrent
  # clients, splitting, padding, errors, streaming, and requests through :pg.
  use ExUnit.Case, async: true

  import Nx.Defn
  import NxJax.TestAssertions, only: [wait_until: 1]

  doctest Nx.Batch
  doctest Nx.Serving

  defn mlp(params, x) do
    {w1, b1, w2, b2} = params
    hidden = Nx.tanh(Nx.dot(x, w1) + b1)
    Nx.dot(hidden, w2) + b2
  end

  defn double_then_shift(x) do
    x
    |> Nx.multiply(2)
    |> hook(:doubled)
    |> Nx.add(100)
    |> hook(:shifted)
  end

  defp params do
    key = Nx.Random.key(7)
    {w1, key} = Nx.Random.normal(key, shape: {4, 8})
    {b1, key} = Nx.Random.normal(key, shape: {8})
    {w2, key} = Nx.Random.normal(key, shape: {8, 3})
    {b2, _key} = Nx.Random.normal(key, shape: {3})
    {w1, b1, w2, b2}
  end

  # a serving function that reports each batch it computes (size and padding) to `parent`
  # and pads the batch up to `pad_to` rows before computing x * 2 + 1
  defp reporting(parent, pad_to) do
    Nx.Serving.new(fn opts ->
      fn batch ->
        send(parent, {:computed, batch.size, batch.key})
        batch = Nx.Batch.pad(batch, max(pad_to - batch.size, 0))
        Nx.Defn.jit_apply(&(&1 |> Nx.multiply(2) |> Nx.add(1)), [batch], opts)
      end
    end)
  end

  defp start_serving!(config, opts) do
    start_supervised!({Nx.Serving, [name: config.test] ++ opts})
  end

  # how long a test waits for a batch to be computed: its first computation compiles, which
  # takes seconds on a loaded machine (ExUnit's default of assert_receive is not enough)
  defp computing_ms, do: NxJax.TestTime.ms(60_000)

  defp computed_sizes do
    receive do
      {:computed, size, _key} -> [size | computed_sizes()]
    after
      0 -> []
    end
  end

  describe "values" do
    test "a served defn gives the rows of the direct call, inline and batched", config do
      params = params()
      x = Nx.iota({10, 4}, type: :f32) |> Nx.divide(10)
      direct = Nx.Defn.jit(&mlp/2).(params, x)
      serving = Nx.Serving.jit(&mlp(params, &1))

      inline = Nx.Serving.run(serving, Nx.Batch.concatenate([x]))
      assert inline.shape == {10, 3}
      assert Nx.all_close(inline, direct, atol: 1.0e-6) == Nx.tensor(1, type: :u8)

      start_serving!(config, serving: serving, batch_size: 4, batch_timeout: 20)

      rows =
        for i <- 0..9 do
          Task.async(fn ->
            Nx.Serving.batched_run(config.test, Nx.Batch.stack([x[i]]))
          end)
        end
        |> Task.await_many(:infinity)

      for {row, i} <- Enum.with_index(rows) do
        assert row.shape == {1, 3}
        assert Nx.all_close(row[0], direct[i], atol: 1.0e-6) == Nx.tensor(1, type: :u8)
      end
    end

    test "the batches are computed by nx_jax's worker (the default compiler)" do
      serving = Nx.Serving.jit(&Nx.exp/1)
      before = NxJax.Pool.stats().runs
      result = Nx.Serving.run(serving, Nx.Batch.concatenate([Nx.tensor([0.0, 1.0])]))
      assert NxJax.Pool.stats().runs > before
      assert Nx.to_flat_list(result) == [1.0, :math.exp(1.0)] |> Nx.tensor() |> Nx.to_flat_list()
    end

    test "rows resident on the worker are batched and answered as binary ones are", config do
      start_serving!(config,
        serving: Nx.Serving.jit(&Nx.multiply(&1, 3)),
        batch_size: 3,
        batch_timeout: 5_000
      )

      rows = [Nx.tensor([1.0, 2.0]), Nx.tensor([[3.0, 4.0], [5.0, 6.0]])]

      [first, second] =
        for {row, how} <- Enum.zip(rows, [:stack, :concatenate]) do
          Task.async(fn ->
            row = Nx.backend_transfer(row, NxJax.Backend)
            batch = apply(Nx.Batch, how, [[row]])
            result = Nx.Serving.batched_run(config.test, batch)
            {result.data.__struct__, Nx.backend_copy(result, Nx.BinaryBackend)}
          end)
        end
        |> Task.await_many(:infinity)

      assert first == {NxJax.Backend, Nx.tensor([[3.0, 6.0]])}
      assert second == {NxJax.Backend, Nx.tensor([[9.0, 12.0], [15.0, 18.0]])}
    end

    test "containers go through whole, each tensor its own rows" do
      serving = Nx.Serving.jit(fn %{a: a, b: b} -> {Nx.add(a, b), Nx.multiply(a, b)} end)

      batch =
        Nx.Batch.stack([
          %{a: Nx.tensor([1, 2]), b: Nx.tensor([10, 20])},
          %{a: Nx.tensor([3, 4]), b: Nx.tensor([30, 40])}
        ])

      {sum, product} = Nx.Serving.run(serving, batch)
      assert sum == Nx.tensor([[11, 22], [33, 44]])
      assert product == Nx.tensor([[10, 40], [90, 160]])
    end
  end

  describe "rows of a batch" do
    test "joined, padded and split by bytes give what Nx's own ops give, for every type" do
      for type <- [{:u, 8}, {:s, 16}, {:s, 64}, {:f, 16}, {:bf, 16}, {:f, 64}, {:c, 64}] do
        a = Nx.iota({2, 3}, type: type)
        b = Nx.iota({1, 3}, type: type) |> Nx.add(Nx.tensor(7, type: type))
        batch = Nx.Batch.concatenate([a, b]) |> Nx.Batch.pad(2)
        realized = Nx.Defn.jit_apply(&Function.identity/1, [batch])
        zero = Nx.tensor(0, type: type)
        expected = Nx.pad(Nx.concatenate([a, b]), zero, [{0, 2, 0}, {0, 0, 0}])
        assert realized == expected, "#{inspect(type)}"

        {first, rest} = Nx.Batch.split(batch, 1)
        assert Nx.Defn.jit_apply(&Function.identity/1, [first]) == a[0..0]

        assert Nx.Defn.jit_apply(&Function.identity/1, [rest]) ==
                 Nx.slice_along_axis(expected, 1, 4)

        stacked = Nx.Batch.stack([a[0], a[1]]) |> Nx.Batch.pad(1)

        assert Nx.Defn.jit_apply(&Function.identity/1, [stacked]) ==
                 Nx.concatenate([a, Nx.broadcast(zero, {1, 3})])
      end
    end
  end

  describe "batching" do
    test "concurrent clients share batches and each gets its own rows, padding removed",
         config do
      start_serving!(config, serving: reporting(self(), 4), batch_size: 4, batch_timeout: 5_000)

      # 8 one-row clients fill two batches of 4 exactly (the timeout never fires)
      results =
        for i <- 1..8 do
          Task.async(fn ->
            {i, Nx.Serving.batched_run(config.test, Nx.Batch.stack([Nx.tensor([i, -i])]))}
          end)
        end
        |> Task.await_many(:infinity)

      for {i, result} <- results do
        assert result == Nx.tensor([[2 * i + 1, -2 * i + 1]])
      end

      assert_receive {:computed, 4, :default}, computing_ms()
      assert_receive {:computed, 4, :default}, computing_ms()
      assert computed_sizes() == []
    end

    test "a request larger than the batch size is split and put back together", config do
      start_serving!(config, serving: reporting(self(), 3), batch_size: 3, batch_timeout: 10)
      x = Nx.iota({7, 2})

      assert Nx.Serving.batched_run(config.test, Nx.Batch.concatenate([x])) ==
               x |> Nx.multiply(2) |> Nx.add(1)

      assert_receive {:computed, 3, :default}, computing_ms()
      assert_receive {:computed, 3, :default}, computing_ms()
      assert_receive {:computed, 1, :default}, computing_ms()
    end

    test "run/2 with batch_size/2 computes parts of that size at most" do
      serving = reporting(self(), 0) |> Nx.Serving.batch_size(2)
      x = Nx.tensor([5, 6, 7, 8, 9])

      assert Nx.Serving.run(serving, Nx.Batch.concatenate([x])) == Nx.tensor([11, 13, 15, 17, 19])
      assert computed_sizes() == [2, 2, 1]
    end

    test "a partial batch is computed after the batch timeout", config do
      start_serving!(config, serving: reporting(self(), 4), batch_size: 4, batch_timeout: 30)
      assert Nx.Serving.batched_run(config.test, Nx.Batch.stack([Nx.tensor(3)])) == Nx.tensor([7])
      assert computed_sizes() == [1]
    end

    test "a batch that times out while no partition is free keeps taking rows", config do
      parent = self()

      # the first batch (rows of 100) is computed only when the test says so
      serving =
        Nx.Serving.new(fn opts ->
          fn batch ->
            x = Nx.Defn.jit_apply(&Function.identity/1, [batch], opts)
            send(parent, {:computing, self(), Nx.to_flat_list(x)})

            if Nx.to_flat_list(x) == [100, 100] do
              receive do: (:go -> :ok)
            end

            Nx.Defn.jit_apply(&Nx.negate/1, [batch], opts)
          end
        end)

      start_serving!(config, serving: serving, batch_size: 2, batch_timeout: 20)
      state = fn -> :sys.get_state(config.test) end

      request = fn values ->
        Task.async(fn ->
          Nx.Serving.batched_run(config.test, Nx.Batch.stack(Enum.map(values, &Nx.tensor/1)))
        end)
      end

      first = request.([100, 100])
      assert_receive {:computing, computing, [100, 100]}, computing_ms()

      # one row: an open batch with a timer, which fires while the partition is busy
      second = request.([7])
      assert wait_until(fn -> state.().keys.default.timer == :expired end)
      assert %{count: 1} = state.().keys.default
      assert :queue.to_list(state.().ready) == [:default]

      # another row fills it: closed, and still once in `ready`
      third = request.([8])
      assert wait_until(fn -> state.().keys.default.count == 0 end)
      assert %{timer: nil, entries: []} = state.().keys.default
      assert :queue.len(state.().keys.default.closed) == 1
      assert :queue.to_list(state.().ready) == [:default]

      send(computing, :go)
      assert Task.await(first, NxJax.TestTime.ms(60_000)) == Nx.tensor([-100, -100])
      assert_receive {:computing, _, [7, 8]}, computing_ms()
      assert Task.await(second, NxJax.TestTime.ms(60_000)) == Nx.tensor([-7])
      assert Task.await(third, NxJax.TestTime.ms(60_000)) == Nx.tensor([-8])
      # (the task tells its clients before it tells the serving it is done)
      assert wait_until(fn -> state.().running == %{} end)
      assert :queue.is_empty(state.().ready)
      assert :queue.to_list(state.().free) == [0]
    end

    test "batch keys gather apart", config do
      serving =
        Nx.Serving.new(fn
          :twice, opts -> Nx.Defn.jit(&Nx.multiply(&1, 2), opts)
          :negated, opts -> Nx.Defn.jit(&Nx.negate/1, opts)
        end)

      start_serving!(config,
        serving: serving,
        batch_size: 2,
        batch_timeout: 5_000,
        batch_keys: [:twice, :negated]
      )

      request = fn value, key ->
        Task.async(fn ->
          batch = Nx.Batch.stack([Nx.tensor(value)]) |> Nx.Batch.key(key)
          Nx.Serving.batched_run(config.test, batch)
        end)
      end

      tasks = [
        request.(1, :twice),
        request.(2, :negated),
        request.(3, :twice),
        request.(4, :negated)
      ]

      assert Task.await_many(tasks, :infinity) == Enum.map([2, -2, 6, -4], &Nx.tensor([&1]))

      assert_raise ArgumentError,
                   "unknown batch key: :other (expected one of [:twice, :negated])",
                   fn ->
                     Nx.Serving.batched_run(
                       config.test,
                       Nx.Batch.stack([Nx.tensor(1)]) |> Nx.Batch.key(:other)
                     )
                   end
    end

    test "two partitions compute two batches at once", config do
      parent = self()

      serving =
        Nx.Serving.new(
          fn opts ->
            fn batch ->
              send(parent, {:computing, self()})

              receive do
                :go -> Nx.Defn.jit_apply(&Nx.add(&1, 1), [batch], opts)
              end
            end
          end,
          compiler: Nx.Defn.Evaluator,
          max_concurrency: 2
        )

      start_serving!(config, serving: serving, batch_size: 1, partitions: true)

      tasks =
        for i <- [10, 20] do
          Task.async(fn -> Nx.Serving.batched_run(config.test, Nx.Batch.stack([Nx.tensor(i)])) end)
        end

      # both batches are being computed before either may finish
      assert_receive {:computing, first}, computing_ms()
      assert_receive {:computing, second}, computing_ms()
      assert first != second
      send(first, :go)
      send(second, :go)
      assert Enum.sort(Task.await_many(tasks, :infinity)) == [Nx.tensor([11]), Nx.tensor([21])]
    end
  end

  describe "pre and postprocessing" do
    test "the client's steps run around the batch, inline and batched", config do
      serving =
        Nx.Serving.jit(&Nx.multiply(&1, 3))
        |> Nx.Serving.client_preprocessing(fn numbers ->
          {Nx.Batch.stack(Enum.map(numbers, &Nx.tensor/1)), length(numbers)}
        end)
        |> Nx.Serving.client_postprocessing(fn {output, metadata}, count ->
          {Nx.to_flat_list(output), metadata, count}
        end)

      assert Nx.Serving.run(serving, [1, 2, 3]) == {[3, 6, 9], :server_info, 3}

      start_serving!(config, serving: serving, batch_size: 8, batch_timeout: 10)
      assert Nx.Serving.batched_run(config.test, [4, 5]) == {[12, 15], :server_info, 2}
    end

    test "a preprocessing that gives no batch is a clear error" do
      serving = Nx.Serving.jit(&Nx.negate/1) |> Nx.Serving.client_preprocessing(&{&1, nil})

      assert_raise RuntimeError,
                   ~r/must return a two element tuple where the first element/,
                   fn ->
                     Nx.Serving.run(serving, :not_a_batch)
                   end

      assert_raise ArgumentError, "cannot run with empty Nx.Batch", fn ->
        Nx.Serving.run(Nx.Serving.jit(&Nx.negate/1), Nx.Batch.new())
      end
    end
  end

  defmodule Picky do
    # a serving module whose computation fails on a batch holding a negative number, and
    # whose handle_batch/3 itself fails on a batch of key :broken
    @behaviour Nx.Serving

    @impl true
    def init(_type, _arg, [defn_options | _]), do: {:ok, defn_options}

    @impl true
    def handle_batch(%Nx.Batch{key: :broken}, _partition, _state) do
      raise ArgumentError, "this serving cannot take :broken batches"
    end

    def handle_batch(batch, _partition, defn_options) do
      compute = fn ->
        x = Nx.Defn.jit_apply(&Function.identity/1, [batch], defn_options)

        if Nx.to_number(Nx.reduce_min(x)) < 0 do
          raise "negative input: #{inspect(Nx.to_flat_list(x))}"
        end

        {Nx.Defn.jit_apply(&Nx.sqrt/1, [batch], defn_options), :ok}
      end

      {:execute, compute, defn_options}
    end
  end

  describe "errors" do
    @tag :capture_log
    test "a failing batch reaches its caller; the serving goes on", config do
      pid = start_serving!(config, serving: Nx.Serving.new(Picky, nil), batch_size: 1)

      assert {{%RuntimeError{message: "negative input: [-4.0]"}, _stack},
              {Nx.Serving, :local_batched_run, [_, _]}} =
               catch_exit(Nx.Serving.batched_run(config.test, Nx.Batch.stack([Nx.tensor(-4.0)])))

      assert Nx.Serving.batched_run(config.test, Nx.Batch.stack([Nx.tensor(9.0)])) ==
               Nx.tensor([3.0])

      assert Process.alive?(pid)
    end

    @tag :capture_log
    test "an exception of handle_batch/3 reaches the caller; the serving goes on", config do
      start_serving!(config,
        serving: Nx.Serving.new(Picky, nil),
        batch_size: 1,
        batch_keys: [:default, :broken]
      )

      server = Process.whereis(config.test)
      broken = Nx.Batch.stack([Nx.tensor(1.0)]) |> Nx.Batch.key(:broken)

      assert {{%ArgumentError{message: "this serving cannot take :broken batches"}, _},
              {Nx.Serving, :local_batched_run, [_, _]}} =
               catch_exit(Nx.Serving.batched_run(config.test, broken))

      assert Process.whereis(config.test) == server

      assert Nx.Serving.batched_run(config.test, Nx.Batch.stack([Nx.tensor(16.0)])) ==
               Nx.tensor([4.0])
    end

    test "start_link's options are checked" do
      serving = Nx.Serving.jit(&Nx.negate/1)

      assert_raise ArgumentError, ~r/does not match the batch size given/, fn ->
        Nx.Serving.start_link(
          name: :unused,
          serving: Nx.Serving.batch_size(serving, 2),
          batch_size: 3
        )
      end

      assert_raise ArgumentError, ":distribution_weight must be an integer", fn ->
        Nx.Serving.start_link(name: :unused, serving: serving, distribution_weight: 1.5)
      end

      assert_raise ArgumentError, ~r/unknown keys \[:batch_sise\]/, fn ->
        Nx.Serving.start_link(name: :unused, serving: serving, batch_sise: 3)
      end

      assert_raise ArgumentError, ~r/:name option is expected/, fn ->
        Nx.Serving.child_spec(serving: serving)
      end
    end

    test "a serving not started" do
      assert {:noproc, {Nx.Serving, :local_batched_run, _}} =
               catch_exit(Nx.Serving.batched_run({:local, :no_such_serving}, Nx.Batch.new()))

      assert {:noproc, {Nx.Serving, :distributed_batched_run, _}} =
               catch_exit(Nx.Serving.batched_run(:no_such_serving, Nx.Batch.new()))
    end

    @tag :capture_log
    test "stopping the serving tells the clients waiting for a batch", config do
      start_serving!(config, serving: reporting(self(), 0), batch_size: 4, batch_timeout: 60_000)

      {_pid, ref} =
        spawn_monitor(fn ->
          Nx.Serving.batched_run(config.test, Nx.Batch.stack([Nx.tensor(1)]))
        end)

      # (the request is in the open batch, which waits a minute for more rows)
      assert wait_until(fn ->
               match?(%{keys: %{default: %{count: 1}}}, :sys.get_state(config.test))
             end)

      stop_supervised!(config.test)

      assert_receive {:DOWN, ^ref, _, _, {:noproc, {Nx.Serving, :local_batched_run, [_, _]}}}
      assert computed_sizes() == []
    end
  end

  describe "streaming" do
    test "parts of a request as events", config do
      serving = reporting(self(), 0) |> Nx.Serving.batch_size(2) |> Nx.Serving.streaming()
      events = Nx.Serving.run(serving, Nx.Batch.concatenate([Nx.tensor([1, 2, 3])]))

      assert Enum.to_list(events) == [
               {:batch, Nx.tensor([3, 5]), :server_info},
               {:batch, Nx.tensor([7]), :server_info}
             ]

      start_serving!(config, serving: serving, batch_size: 2, batch_timeout: 10)
      events = Nx.Serving.batched_run(config.test, Nx.Batch.concatenate([Nx.tensor([4, 5, 6])]))

      assert Enum.to_list(events) == [
               {:batch, Nx.tensor([9, 11]), :server_info},
               {:batch, Nx.tensor([13]), :server_info}
             ]
    end

    test "hooks as events, each client its own rows", config do
      serving =
        Nx.Serving.jit(&double_then_shift/1) |> Nx.Serving.streaming(hooks: [:doubled, :shifted])

      assert Enum.to_list(Nx.Serving.run(serving, Nx.Batch.stack([Nx.tensor([1, 2])]))) == [
               {:doubled, Nx.tensor([[2, 4]])},
               {:shifted, Nx.tensor([[102, 104]])},
               {:batch, Nx.tensor([[102, 104]]), :server_info}
             ]

      start_serving!(config, serving: serving, batch_size: 4, batch_timeout: 5_000)

      [first, second] =
        for i <- [1, 2] do
          Task.async(fn ->
            batch = Nx.Batch.concatenate([Nx.tensor([[i, i], [10 * i, 10 * i]])])
            config.test |> Nx.Serving.batched_run(batch) |> Enum.to_list()
          end)
        end
        |> Task.await_many(:infinity)

      assert first == [
               {:doubled, Nx.tensor([[2, 2], [20, 20]])},
               {:shifted, Nx.tensor([[102, 102], [120, 120]])},
               {:batch, Nx.tensor([[102, 102], [120, 120]]), :server_info}
             ]

      assert second == [
               {:doubled, Nx.tensor([[4, 4], [40, 40]])},
               {:shifted, Nx.tensor([[104, 104], [140, 140]])},
               {:batch, Nx.tensor([[104, 104], [140, 140]]), :server_info}
             ]
    end

    test "a stream of batches as input", config do
      start_serving!(config, serving: reporting(self(), 0), batch_size: 2, batch_timeout: 10)
      input = Stream.map([[1, 2], [3], [4, 5]], &Nx.Batch.concatenate([Nx.tensor(&1)]))

      assert Nx.Serving.batched_run(config.test, input) == Nx.tensor([3, 5, 7, 9, 11])
      assert Nx.Serving.run(reporting(self(), 0), input) == Nx.tensor([3, 5, 7, 9, 11])
      refute_received {:DOWN, _, _, _, _}
    end
  end

  describe "distribution" do
    test "{:distributed, name} reaches a serving through :pg, with both callbacks", config do
      parent = self()

      serving =
        Nx.Serving.jit(&Nx.multiply(&1, 5))
        |> Nx.Serving.distributed_postprocessing(fn output ->
          send(parent, {:post, output})
          Nx.add(output, 1)
        end)

      start_serving!(config, serving: serving, batch_size: 2, distribution_weight: 3)
      assert length(:pg.get_members(Nx.Serving.PG, {Nx.Serving, config.test})) == 3

      pre = fn batch ->
        send(parent, {:pre, batch.size})
        batch
      end

      batch = Nx.Batch.concatenate([Nx.tensor([1, 2])])
      assert Nx.Serving.batched_run({:distributed, config.test}, batch, pre) == Nx.tensor([6, 11])
      assert_received {:pre, 2}
      assert_received {:post, post}
      assert post == Nx.tensor([5, 10])
    end
  end
end
