defmodule NxJax.LentPortTest do
  # "Lent port" (NxJax.Worker, docs/ARCHITECTURE.md): a repeated graph call borrows its worker's
  # port for its own round trip. Each test has workers of its own.
  use ExUnit.Case, async: true
  import NxJax.TestAssertions, only: [wait_until: 2, replaced?: 2]
  import ExUnit.CaptureLog

  @moduletag timeout: 120_000

  defmodule Fns do
    import Nx.Defn
    defn affine(x, k), do: x * 2 + k
    defn hooked(x), do: hook(Nx.exp(x), :seen) + 1

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
    assert wait_until(fn -> Port.info(port, :connected) == {:connected, pid} end, 1_000)
  end

  test "repeated calls borrow the port and give what a worker that lends nothing gives" do
    lending = start_worker()
    holding = start_worker(lend_port: false)
    on = Nx.Defn.jit(&Fns.affine/2, server: lending)
    off = Nx.Defn.jit(&Fns.affine/2, server: holding)

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

  test "borrowed calls wake neither the GenServer nor the keeper; the keeper is drained" do
    w = start_worker()
    f = Nx.Defn.jit(&Fns.affine/2, server: w)
    x = Nx.tensor([1.0, 2.0])
    f.(x, 1)
    f.(x, 1)
    %{keeper: keeper} = :sys.get_state(w)
    gen_server = GenServer.whereis(w)
    before = lent_calls(w)
    {:reductions, gs_before} = Process.info(gen_server, :reductions)
    {:reductions, keeper_before} = Process.info(keeper, :reductions)

    for _ <- 1..200, do: assert(f.(x, 1) == Nx.tensor([3.0, 5.0]))

    assert lent_calls(w) - before == 200
    # (the stats call above and a drain tick or two cost a few hundred reductions; a GenServer
    # woken by each call, as when it was the port's owner at rest, costs thousands)
    {:reductions, gs_after} = Process.info(gen_server, :reductions)
    {:reductions, keeper_after} = Process.info(keeper, :reductions)
    assert gs_after - gs_before < 1_000
    assert keeper_after - keeper_before < 200
    # the keeper holds the port's answers to the borrowers' connects until its next drain
    assert wait_until(
             fn -> Process.info(keeper, :message_queue_len) == {:message_queue_len, 0} end,
             300
           )

    assert Process.info(keeper, :status) == {:status, :suspended}
  end

  test "a Python process that dies while its port rests with the keeper: its exit status is " <>
         "reported, and the worker is restarted" do
    w = start_worker()
    f = Nx.Defn.jit(&Fns.affine/2, server: w)
    x = Nx.tensor([1.0, 2.0])
    f.(x, 1)
    f.(x, 1)
    gen_server = GenServer.whereis(w)
    ref = Process.monitor(gen_server)
    assert Port.info(port(w), :connected) == {:connected, :sys.get_state(w).keeper}

    log =
      ExUnit.CaptureLog.capture_log(fn ->
        System.cmd("kill", ["-KILL", Integer.to_string(NxJax.Worker.os_pid(w))])
        assert_receive {:DOWN, ^ref, :process, _, reason}, 5_000
        assert reason == {:shutdown, {:worker_exited, 137}}
      end)

    assert log =~ "exited with status 137 (killed by signal 9)"
    assert wait_until(fn -> GenServer.whereis(w) not in [nil, gen_server] end, 500)
    assert f.(x, 2) == Nx.tensor([4.0, 6.0])
  end

  test "calls with resident arguments, resident results or hooks go through the GenServer" do
    w = start_worker()
    assert exp_call(w, [@zeros]) == [@ones]
    before = lent_calls(w)

    [handle] = NxJax.Worker.put([@zeros], server: w)
    assert exp_call(w, [{:ref, handle}]) == [@ones]
    assert [{:ref, kept}] = exp_call(w, [@zeros], true)
    assert NxJax.Worker.fetch([kept], server: w) == [@ones]

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
        for {{Nx.Defn.Compiler, {:jit, fun}, _}, entry} <- :persistent_term.get(),
            fun == (&Fns.hooked/1) and is_tuple(entry) and elem(entry, 0) == :graph,
            do: {elem(entry, 1), elem(entry, 2)}
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

  test "a request made while a call holds the port waits for it; both are answered" do
    w = busy_worker()
    lent = lent_calls(w)
    slow = holding(w, fn -> slow_call(w) end)

    # the GenServer holds this one back until the port is given back
    assert NxJax.Worker.call(:ping, [], server: w) == :pong
    assert Task.await(slow, 60_000) == Nx.broadcast(1.0, {200, 200})
    assert lent_calls(w) == lent + 1

    # free again: the next repeated call borrows it
    slow_call(w, 1)
    assert lent_calls(w) == lent + 2
  end

  test "a caller killed while it holds the port: the worker serves on, its tensors intact" do
    w = busy_worker()
    os_pid = NxJax.Worker.os_pid(w)
    [kept] = NxJax.Worker.put([@ones], server: w)

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

        assert_receive {:ready, ^caller}, 10_000
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

  # The lock names its holder (NxJax.Worker.pid_word/1), so the GenServer monitors it: a
  # holder that dies before it connects the port, or after it connected it back but before it
  # freed it, leaves the port free for the GenServer; a live one is waited for.
  test "a port held by a caller that died is taken back; one held by a live caller is not" do
    w = start_worker()
    lend = :sys.get_state(w).lend

    dead = spawn(fn -> :ok end)
    ref = Process.monitor(dead)
    assert_receive {:DOWN, ^ref, :process, ^dead, _}
    :ok = :atomics.compare_exchange(lend, 1, 0, NxJax.Worker.pid_word(dead))
    assert NxJax.Worker.call(:ping, [], server: w) == :pong
    assert :atomics.get(lend, 1) == 0

    holder = spawn(fn -> Process.sleep(:infinity) end)
    :ok = :atomics.compare_exchange(lend, 1, 0, NxJax.Worker.pid_word(holder))
    ping = Task.async(fn -> NxJax.Worker.call(:ping, [], server: w) end)
    assert Task.yield(ping, 300) == nil
    Process.exit(holder, :kill)
    assert Task.await(ping, 10_000) == :pong
    assert :atomics.get(lend, 1) == 0
  end

  test "a borrowed call past its timeout: a Timeout error, and the worker is replaced" do
    w = busy_worker()
    os_pid = NxJax.Worker.os_pid(w)

    capture_log(fn ->
      # (a hundred thousand products: many seconds)
      slow = holding(w, fn -> catch_error(slow_call(w, 100_000, timeout: 300)) end)
      assert %NxJax.WorkerError{class: "Timeout", message: message} = Task.await(slow, 30_000)
      assert message =~ "within 300 ms"
      assert message =~ "replaced"
    end)

    assert replaced?(w, os_pid)
    assert NxJax.Worker.call(:ping, [], server: w) == :pong
  end

  test "the Python process killed during a borrowed call: the call is retried on the new worker" do
    w = busy_worker()
    os_pid = NxJax.Worker.os_pid(w)

    capture_log(fn ->
      slow = holding(w, fn -> slow_call(w) end)
      System.cmd("kill", ["-9", Integer.to_string(os_pid)])
      assert Task.await(slow, 60_000) == Nx.broadcast(1.0, {200, 200})
    end)

    assert NxJax.Worker.os_pid(w) != os_pid
  end

  test "a graph the worker forgot is sent again by the GenServer, transparently" do
    w = start_worker()
    assert exp_call(w, [@zeros]) == [@ones]
    :ok = NxJax.Worker.call(:forget_graphs, [], server: w)
    assert exp_call(w, [@zeros]) == [@ones]
    assert exp_call(w, [@zeros]) == [@ones]

    assert %{graph_sends: 2, graph_resends: 1, unknown_graphs: 1, lent_calls: 2} =
             NxJax.Worker.stats(server: w)
  end
end
