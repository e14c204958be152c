defmodule NxJax.WorkerTest do
  use ExUnit.Case, async: true
  import NxJax.TestAssertions, only: [wait_until: 2]

  # A worker of our own for the tests that kill or misuse it, so the application's worker used
  # by the other test modules is never disturbed.
  setup do
    worker = start_supervised!({NxJax.Worker, []})
    %{worker: worker}
  end

  defp f32(x), do: <<x::float-32-native>>

  defp graph(nodes, outputs), do: :erlang.term_to_binary({:nx_jax_graph, 1, nodes, outputs})

  # the slow graph's matrices (slow_graph/0): 1024x1024 f64 of 2^-10
  @side 1024
  @dims {{:f, 64}, {@side, @side}}
  @entry :math.pow(2, -10)

  test "answers ping and info", %{worker: w} do
    assert NxJax.Worker.call(:ping, [], server: w) == :pong
    info = NxJax.Worker.call(:info, [], server: w)
    assert info[:protocol] == 1
    assert is_binary(info[:jax_version])
    # the worker grows both pipes of its channel where the system allows it (Linux)
    assert [size, size] = info[:pipe_bytes]
    if match?({:unix, :linux}, :os.type()), do: assert(size > 65_536)
  end

  describe "spinning between requests (:spin_us)" do
    defp cpu_ticks(os_pid) do
      [_, rest] = String.split(File.read!("/proc/#{os_pid}/stat"), ") ", parts: 2)
      fields = String.split(rest, " ")
      String.to_integer(Enum.at(fields, 11)) + String.to_integer(Enum.at(fields, 12))
    end

    test "the option reaches the worker, which serves and then sleeps when idle" do
      for spin <- [0, 2_000] do
        name = :"spin_worker_#{spin}"
        start_supervised!({NxJax.Worker, name: name, spin_us: spin}, id: name)
        for _ <- 1..50, do: assert(NxJax.Worker.call(:ping, [], server: name) == :pong)
        pid = NxJax.Worker.os_pid(name)
        argv = "/proc/#{pid}/cmdline" |> File.read!() |> String.split(<<0>>)

        assert ["--spin-us", Integer.to_string(spin)] ==
                 Enum.take(Enum.drop_while(argv, &(&1 != "--spin-us")), 2)

        # idle for a second after the last request: a spin that never stopped would burn
        # about 100 ticks (one core) here (a window to measure in, not a wait for anything:
        # not scaled)
        before = cpu_ticks(pid)
        Process.sleep(1_000)
        assert cpu_ticks(pid) - before <= 10
        assert NxJax.Worker.call(:ping, [], server: name) == :pong
      end
    end
  end

  describe "the caller polling for its reply (:reply_spin_us)" do
    # the caller's own reductions over one call of a dot chain (slow_graph/0's twelve dots take
    # a second or so here); every chain's result is 2^-10 throughout
    defp reductions_of_call(w, spin, graph \\ slow_graph()) do
      {:reductions, before} = Process.info(self(), :reductions)

      [{{:f, 64}, {@side, @side}, data}] =
        NxJax.Worker.run(graph, [], server: w, reply_spin_us: spin)

      {:reductions, later} = Process.info(self(), :reductions)
      assert data == :binary.copy(<<@entry::float-64-native>>, @side * @side)
      later - before
    end

    test "0 sleeps in receive at once; a spin longer than the call polls all through it; " <>
           "either way the reply is the same",
         %{worker: w} do
      # (the first call compiles the graph, so that both measured calls take as long)
      reductions_of_call(w, 0)
      asleep = reductions_of_call(w, 0)
      polling = reductions_of_call(w, 60_000_000)
      # decoding a 8 MiB reply and encoding the request cost the same in both
      assert asleep < 5_000
      assert polling > asleep + 20_000
    end

    # each poll counts a time slice of reductions (NxJax.Worker.poll_reductions/0), so that its
    # scheduler, which checks the worker's pipe once enough reductions have run, checks it
    # between polls (a poll that yielded counted a few reductions and the reply waited)
    test "each poll counts a time slice of reductions and schedules the caller out",
         %{worker: w} do
      graph = dot_chain({0, :constant, [], %{value: @entry}, @dims}, 1)
      reductions_of_call(w, 0, graph)
      me = self()

      tracer =
        spawn_link(fn ->
          count = fn count, outs ->
            receive do
              {:trace, ^me, :out, _} -> count.(count, outs + 1)
              {:trace, ^me, :in, _} -> count.(count, outs)
              {:outs, from} -> send(from, {:outs, outs})
            end
          end

          count.(count, 0)
        end)

      :erlang.trace(me, true, [:running, {:tracer, tracer}])
      reductions = reductions_of_call(w, 60_000_000, graph)
      :erlang.trace(me, false, [:running])
      send(tracer, {:outs, me})
      assert_receive {:outs, outs}, NxJax.TestTime.ms(5_000)
      # (the dot takes milliseconds: many polls)
      assert outs > 20
      assert reductions >= div(outs, 2) * NxJax.Worker.poll_reductions()
    end

    # (twenty-four dots: more than the 100 ms of polling even on a many-core machine)
    test "a caller whose replies come after its polling twice in a row stops polling, until a " <>
           "reply comes within it or every 16th call",
         %{worker: w} do
      long = dot_chain({0, :constant, [], %{value: @entry}, @dims}, 24)
      # the caller's reductions over one long call polling up to 100 ms
      long_call = fn -> reductions_of_call(w, 100_000, long) end

      ping = &NxJax.Worker.call(:ping, [], server: w, reply_spin_us: &1)
      NxJax.Worker.run(long, [], server: w, reply_spin_us: 0)
      # polls, and its reply comes late
      assert long_call.() > 20_000
      # one late reply alone does not stop the polling: the next call polls too, comes late
      assert long_call.() > 20_000
      # and after two in a row the next one sleeps at once
      assert long_call.() < 5_000
      # thirteen more late replies (1 us is always too short): the 16th call polls again
      for _ <- 1..13, do: :pong = ping.(1)
      assert long_call.() > 20_000
      # a reply within the polling time (10 s) resets the count: polling from the next call on
      :pong = ping.(10_000_000)
      assert long_call.() > 20_000
    end

    # the caller monitors the worker only once it stops polling: while it polls, a dead local
    # worker ends the polling
    test "a caller polling for its reply, or sleeping, hears at once that the worker process " <>
           "itself died" do
      for spin <- [60_000_000, 0] do
        w = start_supervised!({NxJax.Worker, []}, id: {:killed_worker, spin})

        caller =
          Task.async(fn ->
            catch_error(NxJax.Worker.run(slow_graph(), [], server: w, reply_spin_us: spin))
          end)

        assert wait_until(fn -> NxJax.Worker.pending(w) == 1 end, 10_000)
        started = System.monotonic_time(:millisecond)
        Process.exit(w, :kill)
        # (at once, not at the call's own limit: its 60 s timeout and 5 s more)
        assert {:ok, %NxJax.WorkerError{class: "WorkerExited"}} =
                 Task.yield(caller, NxJax.TestTime.ms(5_000))

        assert System.monotonic_time(:millisecond) - started < NxJax.TestTime.ms(5_000)
      end
    end

    test "a reply_spin_us that is not a non-negative integer is refused before anything is sent",
         %{worker: w} do
      for bad <- [-1, 1.5, "100", nil] do
        assert_raise ArgumentError, ~r/reply_spin_us must be a non-negative integer/, fn ->
          NxJax.Worker.call(:ping, [], server: w, reply_spin_us: bad)
        end
      end

      assert NxJax.Worker.call(:ping, [], server: w, reply_spin_us: 0) == :pong
      assert NxJax.Worker.pending(w) == 0
    end

    test "a spin does not outlast the caller's own limit: a call past its timeout still gets " <>
           "its Timeout error",
         %{worker: w} do
      started = System.monotonic_time(:millisecond)

      assert %NxJax.WorkerError{class: "Timeout"} =
               catch_error(
                 NxJax.Worker.run(slow_graph(), [],
                   server: w,
                   timeout: 100,
                   reply_spin_us: 600_000_000
                 )
               )

      assert System.monotonic_time(:millisecond) - started < NxJax.TestTime.ms(30_000)
    end
  end

  test "request ids of every size are encoded as term_to_binary does", %{worker: w} do
    # ids are written without term_to_binary on the hot path: small, 32-bit and big integers,
    # by the GenServer and by calls that borrow its port
    ids = :sys.get_state(w).lend

    g =
      graph(
        [{0, :parameter, [], %{index: 0}, {{:f, 32}, {2}}}, {1, :exp, [0], %{}, {{:f, 32}, {2}}}],
        [1]
      )

    key = NxJax.Worker.graph_key(g)
    zeros = [{{:f, 32}, {2}, <<0::64>>}]
    ones = [{{:f, 32}, {2}, <<1.0::float-32-little, 1.0::float-32-little>>}]
    assert NxJax.Worker.run_cached(key, g, zeros, false, server: w) == ones

    for first <- [250, 2_147_483_640] do
      :atomics.put(ids, 2, first)
      lent_before = NxJax.Worker.stats(server: w).lent_calls

      for _ <- 1..10 do
        assert NxJax.Worker.call(:ping, [], server: w) == :pong
        assert NxJax.Worker.run_cached(key, g, zeros, false, server: w) == ones

        [{:ref, handle, guard}] = NxJax.Worker.put([{{:f, 32}, {}, <<0::32>>}], server: w)
        assert [{{:f, 32}, {}, _}] = NxJax.Worker.fetch([handle], server: w)
        NxJax.Guard.keep(guard)
      end

      # each id range went through the borrowed path too. Not necessarily all ten calls: a
      # call that finds the port busy (a handle's free still in flight, the keeper's drain) is
      # served by the GenServer instead, and once in a CI run one was (19 of 20)
      assert NxJax.Worker.stats(server: w).lent_calls > lent_before
    end

    assert :atomics.get(ids, 2) > 2_147_483_648
  end

  test "runs a graph on wire tensors", %{worker: w} do
    g =
      graph(
        [
          {0, :parameter, [], %{index: 0}, {{:f, 32}, {2}}},
          {1, :exp, [0], %{}, {{:f, 32}, {2}}}
        ],
        [1]
      )

    assert [{{:f, 32}, {2}, data}] =
             NxJax.Worker.run(g, [{{:f, 32}, {2}, f32(0.0) <> f32(1.0)}], server: w)

    <<a::float-32-native, b::float-32-native>> = data
    assert a == 1.0
    assert_in_delta b, 2.7182817, 1.0e-6
  end

  test "a bad graph is an error reply and the worker keeps serving", %{worker: w} do
    bad = graph([{0, :no_such_op, [], %{}, {{:f, 32}, {}}}], [0])

    error = assert_raise NxJax.WorkerError, fn -> NxJax.Worker.run(bad, [], server: w) end
    assert error.class == "GraphError"
    assert error.message =~ "no_such_op"

    assert_raise NxJax.WorkerError, ~r/UnknownFunction/, fn ->
      NxJax.Worker.call(:system, ["echo hi"], server: w)
    end

    assert NxJax.Worker.call(:ping, [], server: w) == :pong
  end

  test "concurrent callers each get their own reply", %{worker: w} do
    g =
      graph(
        [
          {0, :parameter, [], %{index: 0}, {{:f, 64}, {}}},
          {1, :multiply, [0, 0], %{}, {{:f, 64}, {}}}
        ],
        [1]
      )

    results =
      1..40
      |> Task.async_stream(
        fn i ->
          [{_, _, <<y::float-64-native>>}] =
            NxJax.Worker.run(g, [{{:f, 64}, {}, <<i * 1.0::float-64-native>>}], server: w)

          {i, y}
        end,
        max_concurrency: 20,
        timeout: :infinity
      )
      |> Enum.map(fn {:ok, r} -> r end)

    for {i, y} <- results, do: assert(y == i * i * 1.0)
  end

  # twelve chained dots of 1024x1024 f64 matrices of 2^-10, made on the worker (so no large
  # request is being written when the process is killed): seconds of work on two cores, and
  # every product is 2^-10 again, exactly
  defp dot_chain(first_node, dots \\ 12), do: NxJax.TestGraphs.dot_chain(first_node, dots, @dims)

  defp slow_graph, do: dot_chain({0, :constant, [], %{value: @entry}, @dims})

  # kills the named worker's Python process once it holds one request: the call is then
  # certainly in flight, however fast this machine runs the graph (regression: a fixed 50 ms
  # sleep let a fast dot finish first, and the caller got its result instead of an error)
  defp kill_in_flight(name), do: kill_in_flight_of(name, 1)

  defp kill_in_flight_of(name, pending) do
    assert wait_until(fn -> NxJax.Worker.pending(name) == pending end, 10_000)
    System.cmd("kill", ["-9", Integer.to_string(NxJax.Worker.os_pid(name))])
  end

  defp entries_arg,
    do: {{:f, 64}, {@side, @side}, :binary.copy(<<@entry::float-64-native>>, @side * @side)}

  defp restartable_worker do
    name = :"worker_restart_#{System.unique_integer([:positive])}"
    {:ok, sup} = Supervisor.start_link([{NxJax.Worker, name: name}], strategy: :one_for_one)
    assert NxJax.Worker.call(:ping, [], server: name) == :pong
    {name, sup}
  end

  test "with retry: false, a caller in flight when the Python process is killed gets " <>
         "WorkerDied with the exit status within 1 s, and the worker is restarted" do
    {name, sup} = restartable_worker()
    old = Process.whereis(name)
    graph = slow_graph()

    caller =
      Task.async(fn ->
        catch_error(NxJax.Worker.run(graph, [], server: name, retry: false))
      end)

    kill_in_flight(name)

    # the issue's bound: every caller hears of the exit within 1 s (scaled on a slow machine)
    assert {:ok, %NxJax.WorkerError{class: "WorkerDied", message: message}} =
             Task.yield(caller, NxJax.TestTime.ms(1_000))

    assert message =~ "exited with status 137 (killed by signal 9) while running this call"

    new = wait_for_new_pid(name, old)
    assert NxJax.Worker.call(:ping, [], server: new) == :pong
    Supervisor.stop(sup)
  end

  test "a signal killing the worker: the call it ran fails with WorkerDied and is not " <>
         "retried (it may be a poison call); the call queued behind it is retried once" do
    {name, sup} = restartable_worker()
    graph = slow_graph()
    running = Task.async(fn -> catch_error(NxJax.Worker.run(graph, [], server: name)) end)
    assert wait_until(fn -> NxJax.Worker.pending(name) == 1 end, 10_000)
    queued = Task.async(fn -> NxJax.Worker.run(graph, [], server: name) end)
    kill_in_flight_of(name, 2)

    assert %NxJax.WorkerError{class: "WorkerDied", message: message} =
             Task.await(running, :infinity)

    assert message =~ "while running this call. It is not retried"

    # the queued call never ran: it goes to the new worker, which has never seen the graph
    # (it is sent again and compiled there)
    assert [{{:f, 64}, {@side, @side}, data}] = Task.await(queued, :infinity)
    assert data == :binary.copy(<<@entry::float-64-native>>, @side * @side)
    Supervisor.stop(sup)
  end

  test "a call on resident handles is not retried on a new worker: the handles died with it" do
    {name, sup} = restartable_worker()
    [{:ref, handle, guard}] = NxJax.Worker.put([entries_arg()], server: name)
    graph = dot_chain({0, :parameter, [], %{index: 0}, @dims})

    key = NxJax.Worker.graph_key(graph)

    caller =
      Task.async(fn ->
        catch_error(NxJax.Worker.run_cached(key, graph, [{:ref, handle}], false, server: name))
      end)

    kill_in_flight(name)
    assert %NxJax.WorkerError{class: "WorkerDied"} = Task.await(caller, :infinity)
    NxJax.Guard.keep(guard)
    Supervisor.stop(sup)
  end

  test "a deeply nested argument is refused under its request id; the same worker serves on",
       %{worker: w} do
    os_pid = NxJax.Worker.os_pid(w)

    for depth <- [500, 1_000, 10_000, 100_000] do
      deep = Enum.reduce(1..depth, 1, fn _, inner -> {inner} end)

      # a reply lost to an unknown id would leave the call waiting its whole timeout, to fail
      # with another class
      error =
        assert_raise NxJax.WorkerError, fn ->
          NxJax.Worker.call(:ping, [deep], server: w, timeout: 60_000)
        end

      assert error.class == "BadRequest"
      assert error.message =~ "nested deeper than 200 levels"
      assert NxJax.Worker.call(:ping, [], server: w) == :pong
    end

    assert NxJax.Worker.os_pid(w) == os_pid
  end

  test "a Python exception arrives with its class, message and traceback; the worker serves on",
       %{worker: w} do
    error = catch_error(NxJax.Worker.fetch([12_345], server: w))
    assert %NxJax.WorkerError{class: "UnknownHandle", message: message, traceback: tb} = error
    assert message =~ "no resident tensor 12345"
    assert tb =~ "Traceback (most recent call last)"
    assert tb =~ "py_backend/request_loop.py"
    assert Exception.message(error) =~ "Python traceback:"
    assert NxJax.Worker.call(:ping, [], server: w) == :pong
  end

  defp wait_for_new_pid(name, old) do
    assert wait_until(fn -> Process.whereis(name) not in [nil, old] end, 10_000)
    Process.whereis(name)
  end
end
