defmodule NxJax.LentPortTest do
  # "Lent port" (NxJax.Worker, docs/ARCHITECTURE.md): a repeated graph call borrows its worker's
  # port for its own round trip. Each test has workers of its own.
  use ExUnit.Case, async: true
  import NxJax.TestAssertions, only: [wait_until: 2, replaced?: 2]
  import ExUnit.CaptureLog

  defmodule Fns do
    import Nx.Defn
    defn affine(x, k), do: x * 2 + k
    defn hooked(x), do: hook(Nx.exp(x), :seen) + 1

    defn several(x) do
      {x * 2, Nx.as_type(x, {:s, 64}), Nx.as_type(Nx.abs(x), {:u, 8}), Nx.sum(x),
       Nx.as_type(x, {:bf, 16}), Nx.reshape(x, {1, 3, 1})}
    end

    # n products of 200x200 matrices (about 0.15 ms each on the 2-core CI machine), in a loop:
    # ones in, ones out
    defn busy(x, n) do
      {x, _} =
        while {x, i = 0}, i < n do
          {Nx.dot(x, x) / 200, i + 1}
        end

      x
    end
  end

  # exp of an f32 vector of two
  @exp :erlang.term_to_binary(
         {:nx_jax_graph, 1,
          [
            {0, :parameter, [], %{index: 0}, {{:f, 32}, {2}}},
            {1, :exp, [0], %{}, {{:f, 32}, {2}}}
          ], [1]}
       )
  @zeros {{:f, 32}, {2}, <<0::64>>}
  @ones {{:f, 32}, {2}, <<1.0::float-32-native, 1.0::float-32-native>>}
  defp exp_call(server, args, keep \\ false),
    do: NxJax.Worker.run_cached(NxJax.Worker.graph_key(@exp), @exp, args, keep, server: server)

  # a call of `n` products (by default long enough, about half a second, to catch it while it
  # holds the port, short enough to wait for); its result is checked
  defp slow_call(server, n \\ 3_000, opts \\ []) do
    ones = Nx.broadcast(1.0, {200, 200})
    result = Nx.Defn.jit(&Fns.busy/2, [server: server] ++ opts).(ones, n)
    assert result == ones
    result
  end

  # a worker of this test that has served the busy loop once (through its GenServer, which sent
  # the graph): its next busy calls can borrow the port
  defp busy_worker do
    w = start_worker()
    slow_call(w, 1)
    w
  end

  defp start_worker(opts \\ []) do
    name = :"lent_port_#{System.unique_integer([:positive])}"
    start_supervised!({NxJax.Worker, [name: name] ++ opts}, id: name)
    name
  end

  defp port(name), do: :sys.get_state(name).port
  defp lent_calls(name), do: NxJax.Worker.stats(server: name).lent_calls

  # a task running `fun`, once its call holds the port of worker `name`
  defp holding(name, fun) do
    task = Task.async(fun)
    await_holder(name, task.pid)
    task
  end

  # waits until `pid` holds the port of worker `name`
  defp await_holder(name, pid) do
    port = port(name)
    assert wait_until(fn -> Port.info(port, :connected) == {:connected, pid} end, 10_000)
  end

  # `fun` jitted on a worker that lends its port and on one that does not
  defp lending_and_holding(fun) do
    lending = start_worker()
    holding = start_worker(lend_port: false)
    {lending, holding, Nx.Defn.jit(fun, server: lending), Nx.Defn.jit(fun, server: holding)}
  end

  test "repeated calls borrow the port and give what a worker that lends nothing gives" do
    {lending, holding, on, off} = lending_and_holding(&Fns.affine/2)

    for i <- 1..50 do
      x = Nx.tensor([i * 1.0, i / 2])
      result = on.(x, i)
      assert result == Nx.tensor([i * 3.0, i * 2.0])
      assert result == off.(x, i)
    end

    # the first call carries the graph, through the GenServer; all others borrow the port
    assert %{graph_sends: 1, key_calls: 49, lent_calls: 49} = NxJax.Worker.stats(server: lending)
    assert %{graph_sends: 1, key_calls: 49, lent_calls: 0} = NxJax.Worker.stats(server: holding)
    # the port is back with its keeper, suspended, and free
    keeper = :sys.get_state(lending).keeper
    assert Port.info(port(lending), :connected) == {:connected, keeper}
    assert Process.info(keeper, :status) == {:status, :suspended}
    assert :atomics.get(:sys.get_state(lending).lend, 1) == 0
    refute Enum.member?(elem(Process.info(self(), :links), 1), port(lending))
  end

  # a worker that has served Fns.affine/2 on `x` twice (its next calls borrow the port)
  defp affine_worker do
    w = start_worker()
    f = Nx.Defn.jit(&Fns.affine/2, server: w)
    x = Nx.tensor([1.0, 2.0])
    f.(x, 1)
    f.(x, 1)
    {w, f, x}
  end

  test "borrowed calls do not wake the GenServer; the port's answers wait in the suspended " <>
         "keeper until it is drained" do
    {w, f, x} = affine_worker()
    %{keeper: keeper} = :sys.get_state(w)
    gen_server = GenServer.whereis(w)
    before = lent_calls(w)

    received =
      received_during(gen_server, fn ->
        for _ <- 1..200, do: assert(f.(x, 1) == Nx.tensor([3.0, 5.0]))
      end)

    assert lent_calls(w) - before == 200
    # the GenServer only drains the keeper meanwhile, every 20 ms (its timer's ticks and the
    # keeper's answers, as many as the calls took time: a count of its reductions, under 1000
    # on an idle machine, passed 1000 on a busy one); a GenServer woken by each call, as when
    # it was the port's owner at rest, got the port's answer to each connect
    assert Enum.reject(received, &drain_message?/1) == []
    # the keeper holds the port's answers to the borrowers' connects until its next drain
    assert wait_until(
             fn -> Process.info(keeper, :message_queue_len) == {:message_queue_len, 0} end,
             3_000
           )

    assert Process.info(keeper, :status) == {:status, :suspended}
  end

  # the messages process `pid` receives while `fun` runs
  defp received_during(pid, fun) do
    parent = self()

    tracer =
      spawn_link(fn ->
        collect = fn collect, messages ->
          receive do
            {:trace, ^pid, :receive, message} -> collect.(collect, [message | messages])
            :collected -> send(parent, {:received, Enum.reverse(messages)})
          end
        end

        collect.(collect, [])
      end)

    :erlang.trace(pid, true, [:receive, {:tracer, tracer}])
    fun.()
    :erlang.trace(pid, false, [:receive])
    # (every trace message is with the tracer before :collected)
    delivered = :erlang.trace_delivered(pid)
    assert_receive {:trace_delivered, ^pid, ^delivered}
    send(tracer, :collected)
    assert_receive {:received, messages}
    messages
  end

  # the worker's drain of its keeper: its timer, and the keeper's answers (to Process.info/2
  # and to the drain request)
  defp drain_message?({:timeout, _timer, {:nx_jax_drain, _due}}), do: true
  defp drain_message?({ref, _answer}) when is_reference(ref), do: true
  defp drain_message?(_other), do: false

  test "a Python process that dies while its port rests with the keeper: its exit status is " <>
         "reported, and the worker is restarted" do
    {w, f, x} = affine_worker()
    gen_server = GenServer.whereis(w)
    ref = Process.monitor(gen_server)
    assert Port.info(port(w), :connected) == {:connected, :sys.get_state(w).keeper}

    log =
      ExUnit.CaptureLog.capture_log(fn ->
        System.cmd("kill", ["-KILL", Integer.to_string(NxJax.Worker.os_pid(w))])
        assert_receive {:DOWN, ^ref, :process, _, reason}, NxJax.TestTime.ms(5_000)
        assert reason == {:shutdown, {:worker_exited, 137}}
      end)

    assert log =~ "exited with status 137 (killed by signal 9)"
    assert wait_until(fn -> GenServer.whereis(w) not in [nil, gen_server] end, 5_000)
    assert f.(x, 2) == Nx.tensor([4.0, 6.0])
  end

  test "borrowed calls of several results of several types give what the GenServer gives" do
    {lending, _holding, on, off} = lending_and_holding(&Fns.several/1)

    for i <- 1..20 do
      x = Nx.tensor([i * 1.5, -i * 1.0, 100.0 + i])
      result = on.(x)
      assert result == off.(x)
      assert elem(result, 1) == Nx.tensor([trunc(i * 1.5), -i, 100 + i], type: {:s, 64})
      assert elem(result, 3) == Nx.tensor(i * 0.5 + 100.0 + i)
    end

    assert %{lent_calls: 19} = NxJax.Worker.stats(server: lending)
  end

  # a term as the Python worker encodes it (atoms as SMALL_ATOM_EXT), for lent_reply/2
  defp py_term(term), do: IO.iodata_to_binary([131, py_body(term)])
  defp py_body(atom) when is_atom(atom), do: [115, byte_size(to_string(atom)), to_string(atom)]
  defp py_body(int) when is_integer(int) and int in 0..255, do: [97, int]
  defp py_body(int) when is_integer(int), do: <<98, int::signed-32>>
  defp py_body(bin) when is_binary(bin), do: [<<109, byte_size(bin)::32>>, bin]
  defp py_body([]), do: [106]

  defp py_body(list) when is_list(list),
    do: [<<108, length(list)::32>>, Enum.map(list, &py_body/1), 106]

  defp py_body(tuple) when is_tuple(tuple),
    do: [104, tuple_size(tuple), tuple |> Tuple.to_list() |> Enum.map(&py_body/1)]

  test "the reply of a borrowed call is read as the generic decoder reads it" do
    scalar = {{:f, 32}, {}, <<1.5::float-32-native>>}
    vector = {{:s, 64}, {3}, <<1::64-native, 2::64-native, 3::64-native>>}
    matrix = {{:u, 8}, {2, 2}, <<1, 2, 3, 4>>}
    long = {{:c, 64}, {70_000}, :binary.copy(<<0>>, 8 * 70_000)}
    brain = {{:bf, 16}, {1}, <<0, 0>>}

    for id <- [5, 300, 2_147_483_647],
        results <- [[scalar], [vector, matrix], [long, scalar], [], [brain], [scalar, brain]] do
      frame = py_term({:r, id, results})
      assert NxJax.Wire.lent_reply(frame, id) == {id, {:ok, results}}
      # a reply to another request, as decode_reply/1 gives it
      assert NxJax.Wire.lent_reply(frame, id + 1) == {id, {:ok, results}}
    end

    error = py_term({:e, 7, {:python, "ValueError", "bad", "tb"}})
    assert NxJax.Wire.lent_reply(error, 7) == {7, {:error, {"ValueError", "bad", "tb"}}}
    log = py_term({:log, :stderr, "a line", 3})
    assert NxJax.Wire.lent_reply(log, 7) == {:log, :stderr, "a line", 3}
  end

  test "calls with resident arguments, resident results or hooks go through the GenServer" do
    w = start_worker()
    assert exp_call(w, [@zeros]) == [@ones]
    before = lent_calls(w)

    [{:ref, handle, guard}] = NxJax.Worker.put([@zeros], server: w)
    assert exp_call(w, [{:ref, handle}]) == [@ones]
    # (a result of 8 bytes comes with a copy of its data)
    assert [{:ref, kept, kept_guard, _copy}] = exp_call(w, [@zeros], true)
    assert NxJax.Worker.fetch([kept], server: w) == [@ones]
    NxJax.Guard.keep({guard, kept_guard})

    parent = self()
    hooked = Nx.Defn.jit(&Fns.hooked/1, server: w, hooks: %{seen: &send(parent, {:seen, &1})})

    for _ <- 1..3 do
      assert hooked.(Nx.tensor(0.0)) == Nx.tensor(2.0)
      assert_receive {:seen, seen}
      assert seen == Nx.tensor(1.0)
    end

    assert lent_calls(w) == before
  end

  # Frames that are not the borrowed call's reply (here the hook frames of a graph called
  # without a hook function) go to the GenServer; none is left in the caller's mailbox.
  test "a borrowed call hands the GenServer the frames that are not its reply" do
    w = start_worker()
    parent = self()
    hooked = Nx.Defn.jit(&Fns.hooked/1, server: w, hooks: %{seen: &send(parent, {:seen, &1})})
    assert hooked.(Nx.tensor(0.0)) == Nx.tensor(2.0)
    assert_receive {:seen, _}

    # its trace, by the function itself (other test modules trace functions named `hooked`)
    [{graph_bin, key}] =
      Enum.uniq(
        for {{Nx.Defn.Compiler, {:jit, fun}, _}, {entry, _used}} <- :persistent_term.get(),
            fun == (&Fns.hooked/1) and is_tuple(entry) and elem(entry, 0) == :graph,
            do: elem(entry, 1)
      )

    lent = lent_calls(w)
    zero = [{{:f, 32}, {}, <<0::32>>}]
    two = [{{:f, 32}, {}, <<2.0::float-32-native>>}]

    log =
      capture_log(fn ->
        for _ <- 1..5,
            do: assert(NxJax.Worker.run_cached(key, graph_bin, zero, false, server: w) == two)

        assert NxJax.Worker.call(:ping, [], server: w) == :pong
        Logger.flush()
      end)

    assert lent_calls(w) == lent + 5
    refute log =~ "unexpected"
    assert {:messages, []} = Process.info(self(), :messages)
  end

  test "the worker's output lines are logged in the order printed while the port moves " <>
         "between borrowers, the keeper and the GenServer" do
    w = start_worker(env: [{"NX_JAX_TEST", "1"}], stdio_to: self())
    exp_call(w, [@zeros])
    lent = lent_calls(w)
    lines = 300

    log =
      capture_log(fn ->
        # two processes borrow the port in a loop while a third prints through the GenServer
        borrowers =
          for _ <- 1..2 do
            Task.async(fn ->
              Stream.repeatedly(fn -> exp_call(w, [@zeros]) end)
              |> Stream.take_while(fn reply -> reply == [@ones] and not_told_to_stop() end)
              |> Stream.run()
            end)
          end

        # (bursts of 5 lines, so that lines come while the port is with each of them)
        for i <- 1..div(lines, 5) do
          text = Enum.map_join(1..5, "\n", &"line #{5 * (i - 1) + &1}")
          assert NxJax.Worker.call(:debug_print, [:print, text], server: w) == :ok
        end

        got =
          for _ <- 1..lines do
            assert_receive {:nx_jax_stdio, "stdout", line}, NxJax.TestTime.ms(10_000)
            line
          end

        # (on a loaded machine the prints can all pass before a borrower's call finds the port
        # free: the borrowers go on until one has borrowed it)
        assert wait_until(fn -> lent_calls(w) > lent end, 30_000)

        for task <- borrowers do
          send(task.pid, :stop)
          Task.await(task, NxJax.TestTime.ms(30_000))
        end

        assert got == for(i <- 1..lines, do: "line #{i}")
        Logger.flush()
      end)

    refute log =~ "unexpected"
  end

  defp not_told_to_stop do
    receive do
      :stop -> false
    after
      0 -> true
    end
  end

  test "a request made while a call holds the port waits for it; both are answered" do
    w = busy_worker()
    lent = lent_calls(w)
    slow = holding(w, fn -> slow_call(w) end)

    # the GenServer holds this one back until the port is given back
    assert NxJax.Worker.call(:ping, [], server: w) == :pong
    assert Task.await(slow, :infinity) == Nx.broadcast(1.0, {200, 200})
    assert lent_calls(w) == lent + 1

    # free again: the next repeated call borrows it
    slow_call(w, 1)
    assert lent_calls(w) == lent + 2
  end

  # Invariants 3 and 5 of NxJax.Worker.Lease: frames held back while a call holds the port
  # are written in the order they came, and at rest the port is free, with its keeper.
  test "requests held back while a call holds the port are written in order" do
    w = busy_worker()
    slow = holding(w, fn -> slow_call(w) end)
    parent = self()

    # one process's requests, queued behind the borrower: answered in the order sent
    asker =
      spawn_link(fn ->
        tasks =
          for i <- 1..5, do: {i, Task.async(fn -> NxJax.Worker.call(:ping, [], server: w) end)}

        send(parent, {:answers, for({i, t} <- tasks, do: {i, Task.await(t, :infinity)})})
      end)

    assert wait_until(fn -> length(:sys.get_state(w).lease.held_back) >= 1 end, 10_000)
    assert Task.await(slow, :infinity) == Nx.broadcast(1.0, {200, 200})
    assert_receive {:answers, answers}, 30_000
    assert answers == for(i <- 1..5, do: {i, :pong})
    refute Process.alive?(asker)
    assert_at_rest(w)
  end

  test "at rest after many mixed calls from several processes: free, with the keeper" do
    w = start_worker()
    x = {{:f, 32}, {2}, <<0.5::float-32-native, -1.0::float-32-native>>}
    want = for v <- [0.5, -1.0], into: <<>>, do: <<:math.exp(v)::float-32-native>>
    # alone, the second call of a known graph borrows the port; under the mixed load below the
    # GenServer may hold it for every call, so no count is asserted there
    for _ <- 1..2, do: assert(exp_call(w, [x]) == [{{:f, 32}, {2}, want}])
    assert lent_calls(w) >= 1

    results =
      1..4
      |> Enum.map(fn k ->
        Task.async(fn ->
          for i <- 1..40 do
            case rem(i + k, 3) do
              # a call that may borrow the port
              0 -> exp_call(w, [x]) == [{{:f, 32}, {2}, want}]
              # through the GenServer
              1 -> NxJax.Worker.call(:ping, [], server: w) == :pong
              # resident results: through the GenServer, then freed
              2 -> free_kept(w, exp_call(w, [x], true))
            end
          end
        end)
      end)
      |> Enum.flat_map(&Task.await(&1, :infinity))

    assert Enum.all?(results)
    assert_at_rest(w)
    # one id per request, from one counter: at least the 160 requests (and the frees)
    assert :atomics.get(:sys.get_state(w).lend, 2) >= 160
  end

  test "a worker that lends no port holds it for good" do
    w = start_worker(lend_port: false)
    state = :sys.get_state(w)
    assert state.keeper == nil and NxJax.Worker.Lease.held?(state.lease)
    for _ <- 1..5, do: assert([{_, {2}, _}] = exp_call(w, [@zeros]))
    state = :sys.get_state(w)
    assert :atomics.get(state.lend, 1) == -1
    assert Port.info(state.port, :connected) == {:connected, GenServer.whereis(w)}
    assert lent_calls(w) == 0
  end

  # (a small result's ref also holds a copy of its data)
  defp free_kept(w, [ref]) when elem(ref, 0) == :ref,
    do: NxJax.Worker.free([elem(ref, 1)], server: w) == 1

  defp assert_at_rest(w) do
    assert wait_until(fn -> NxJax.Worker.pending(w) == 0 end, 10_000)
    # once nothing is pending, the GenServer gives a port it holds back to the keeper when its
    # drain ends, which on a loaded machine can come a while after the last reply (seen at a
    # load average of 8: the lock still -1, held): wait for that, then check every part
    assert wait_until(fn -> at_rest?(:sys.get_state(w)) end, 10_000)
    state = :sys.get_state(w)
    assert :atomics.get(state.lend, 1) == 0
    assert :atomics.get(state.lend, 3) == 0
    assert Port.info(state.port, :connected) == {:connected, state.keeper}

    assert %NxJax.Worker.Lease{state: :free, borrower: nil, monitor: nil, held_back: []} =
             state.lease
  end

  defp at_rest?(state) do
    :atomics.get(state.lend, 1) == 0 and :atomics.get(state.lend, 3) == 0 and
      state.lease.state == :free and state.lease.held_back == []
  end

  test "a caller killed while it holds the port: the worker serves on, its tensors intact" do
    w = busy_worker()
    os_pid = NxJax.Worker.os_pid(w)
    [{:ref, kept, guard}] = NxJax.Worker.put([@ones], server: w)

    log =
      capture_log(fn ->
        caller = spawn(fn -> slow_call(w) end)
        await_holder(w, caller)
        Process.exit(caller, :kill)

        # the GenServer takes the port back from the dead caller, and drops its late reply
        assert NxJax.Worker.call(:ping, [], server: w) == :pong
        slow_call(w, 1)
        Logger.flush()
      end)

    assert NxJax.Worker.os_pid(w) == os_pid
    assert NxJax.Worker.fetch([kept], server: w) == [@ones]
    NxJax.Guard.keep(guard)
    refute log =~ "unknown request"
  end

  # A borrower connected with port_connect/2 was linked to the port in the instant before its
  # unlink, and killing it there closed the port (within 30 kills of 3000). The connect is now
  # the port message, which links nothing.
  test "callers killed at random moments of their calls never close the port" do
    w = start_worker()
    os_pid = NxJax.Worker.os_pid(w)
    affine = Nx.Defn.jit(&Fns.affine/2, server: w)
    x = Nx.tensor([1.0, 2.0])
    affine.(x, 1)
    parent = self()

    capture_log(fn ->
      for i <- 1..500 do
        # each caller makes one call before it is counted as ready, then calls in a loop
        caller =
          spawn(fn ->
            affine.(x, 1)
            send(parent, {:ready, self()})
            for _ <- 1..100_000, do: affine.(x, 1)
          end)

        assert_receive {:ready, ^caller}, NxJax.TestTime.ms(10_000)
        # (killed at a moment that varies with i: timing for coverage, the test passes however
        # it falls)
        wait_until_us(System.monotonic_time(:microsecond) + rem(i * 7919, 100))
        Process.exit(caller, :kill)
      end
    end)

    # the port is free again and lent again
    lent = lent_calls(w)
    for _ <- 1..3, do: assert(affine.(x, 1) == Nx.tensor([3.0, 5.0]))
    assert lent_calls(w) > lent
    assert NxJax.Worker.os_pid(w) == os_pid
  end

  defp wait_until_us(until) do
    if System.monotonic_time(:microsecond) < until, do: wait_until_us(until)
  end

  # The lock names its holder (NxJax.Worker.Lease.pid_word/1), so the GenServer monitors it: a
  # holder that dies before it connects the port, or after it connected it back but before it
  # freed it, leaves the port free for the GenServer; a live one is waited for.
  test "a port held by a caller that died is taken back; one held by a live caller is not" do
    w = start_worker()
    lend = :sys.get_state(w).lend

    dead = spawn(fn -> :ok end)
    ref = Process.monitor(dead)
    assert_receive {:DOWN, ^ref, :process, ^dead, _}
    :ok = :atomics.compare_exchange(lend, 1, 0, NxJax.Worker.Lease.pid_word(dead))
    assert NxJax.Worker.call(:ping, [], server: w) == :pong
    # (the GenServer replies, then frees the port in the same step: its next message sees it)
    assert :atomics.get(:sys.get_state(w).lend, 1) == 0

    holder = spawn(fn -> Process.sleep(:infinity) end)
    :ok = :atomics.compare_exchange(lend, 1, 0, NxJax.Worker.Lease.pid_word(holder))
    ping = Task.async(fn -> NxJax.Worker.call(:ping, [], server: w) end)
    # (a window to see it wait in, as refute_receive's: not scaled)
    assert Task.yield(ping, 300) == nil
    Process.exit(holder, :kill)
    assert Task.await(ping, :infinity) == :pong
    assert :atomics.get(:sys.get_state(w).lend, 1) == 0
  end

  # One deadline for both paths (NxJax.Worker.Deadline): the caller keeping it while it holds
  # the port, the GenServer for its own requests; the same error either way.
  test "a borrowed call past its timeout: the Timeout error of a call through the GenServer, " <>
         "and the worker is replaced and serves on" do
    w = busy_worker()
    os_pid = NxJax.Worker.os_pid(w)
    held = start_worker(lend_port: false)
    slow_call(held, 1)
    held_os_pid = NxJax.Worker.os_pid(held)

    capture_log(fn ->
      # (a hundred thousand products: many seconds)
      slow = holding(w, fn -> catch_error(slow_call(w, 100_000, timeout: 300)) end)
      assert %NxJax.WorkerError{class: "Timeout", message: message} = Task.await(slow, :infinity)
      assert message =~ "within 300 ms"
      assert message =~ "replaced"

      # the same call on a worker that lends no port: its GenServer times it out
      lent = lent_calls(held)

      assert %NxJax.WorkerError{class: "Timeout", message: through_gen_server} =
               catch_error(slow_call(held, 100_000, timeout: 300))

      assert through_gen_server ==
               String.replace(message, "OS pid #{os_pid}", "OS pid #{held_os_pid}")

      assert lent == 0
    end)

    assert replaced?(w, os_pid)
    assert replaced?(held, held_os_pid)
    assert NxJax.Worker.call(:ping, [], server: w) == :pong
    assert slow_call(w, 1) == Nx.broadcast(1.0, {200, 200})
  end

  test "the Python process killed during a borrowed call: the call fails with WorkerDied, " <>
         "not retried (it was the call running)" do
    w = busy_worker()
    os_pid = NxJax.Worker.os_pid(w)

    capture_log(fn ->
      # (ten thousand products, a second or two: the half second of the default call could
      # end, on a busy machine, before `kill` had run)
      slow = holding(w, fn -> catch_error(slow_call(w, 10_000)) end)
      System.cmd("kill", ["-9", Integer.to_string(os_pid)])
      assert %NxJax.WorkerError{class: "WorkerDied"} = Task.await(slow, :infinity)
    end)

    # (the old GenServer may still be going down when the call's error arrives: wait for the
    # new one, as the tests above do)
    assert replaced?(w, os_pid)
  end

  test "a graph the worker forgot is sent again by the GenServer, transparently" do
    w = start_worker()
    assert exp_call(w, [@zeros]) == [@ones]
    :ok = NxJax.Worker.call(:forget_graphs, [], server: w)
    assert exp_call(w, [@zeros]) == [@ones]
    assert exp_call(w, [@zeros]) == [@ones]

    # (the last call borrows the port; the one before may too, unless the GenServer has not
    # yet given the port back after the resend, which a busy machine shows)
    assert %{graph_sends: 2, graph_resends: 1, unknown_graphs: 1, lent_calls: lent} =
             NxJax.Worker.stats(server: w)

    assert lent in 1..2
  end
end
