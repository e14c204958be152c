defmodule NxJax.FaultsTest do
  # async: false: replaces the application's pool with a two-worker one whose workers it kills
  use ExUnit.Case, async: false
  import NxJax.TestAssertions, only: [wait_until: 2, replaced?: 2]
  import ExUnit.CaptureLog

  @moduletag timeout: NxJax.TestTime.ms(300_000)

  defmodule Fns do
    import Nx.Defn
    defn affine(x, k), do: x * 2 + k
  end

  setup_all do
    NxJax.TestPool.replace_application_pool(2)
  end

  defp graph(nodes, outputs), do: :erlang.term_to_binary({:nx_jax_graph, 1, nodes, outputs})

  defp kill(worker) do
    os_pid = NxJax.Worker.os_pid(worker)
    System.cmd("kill", ["-9", Integer.to_string(os_pid)])
    os_pid
  end

  # the pool is full again and none of its workers is one of the OS processes `killed`: a
  # worker killed an instant ago is still registered until its exit is seen, and a call sent
  # to it then fails as the call it was running (WorkerDied)
  defp await_replaced(killed) do
    assert wait_until(
             fn ->
               os_pids =
                 for worker <- NxJax.Pool.workers() do
                   try(do: NxJax.Worker.os_pid(worker), catch: (:exit, _ -> :exiting))
                 end

               length(os_pids) == NxJax.Pool.size() and :exiting not in os_pids and
                 Enum.all?(os_pids, &(&1 not in killed))
             end,
             10_000
           )
  end

  defp await_pool,
    do: assert(wait_until(fn -> length(NxJax.Pool.workers()) == NxJax.Pool.size() end, 10_000))

  test "crash loop: workers killed again and again while 12 callers run; every call returns " <>
         "its correct result or a WorkerError, none hangs, and the pool serves on" do
    await_pool()
    parent = self()

    killer =
      spawn_link(fn ->
        killed =
          for _ <- 1..8 do
            # (spaces the kills over the callers' work, in proportion on a slow machine: timing
            # for coverage only, every outcome is checked however the kills fall)
            Process.sleep(NxJax.TestTime.ms(250))

            case NxJax.Pool.workers() do
              [] -> nil
              # the chosen worker may be exiting already: then there is nothing to kill
              workers -> try(do: kill(Enum.random(workers)), catch: (:exit, _ -> nil))
            end
          end

        send(parent, {:killer_done, Enum.reject(killed, &is_nil/1)})
      end)

    outcomes =
      1..12
      |> Enum.map(fn caller ->
        Task.async(fn ->
          for call <- 1..40 do
            x = Nx.tensor([caller * 1.0, call * 1.0])

            try do
              result = Fns.affine(x, call)
              {:ok, result == Nx.tensor([caller * 2.0 + call, call * 3.0])}
            rescue
              error in NxJax.WorkerError -> {:error, error.class}
            end
          end
        end)
      end)
      |> Enum.flat_map(&Task.await(&1, :infinity))

    assert_receive {:killer_done, killed}, NxJax.TestTime.ms(60_000)
    refute Process.alive?(killer)

    assert length(outcomes) == 12 * 40
    # nothing is lost: every call has an outcome, and no result is wrong
    refute {:ok, false} in outcomes
    # (WorkerDied: the call a killed worker was running, not retried; WorkerExited: a call whose
    # retry found no new worker in time)
    assert Enum.all?(
             outcomes,
             &(&1 in [{:ok, true}, {:error, "WorkerExited"}, {:error, "WorkerDied"}])
           )

    assert {:ok, true} in outcomes

    await_replaced(killed)
    for i <- 1..20, do: assert(Fns.affine(Nx.tensor(i * 1.0), 1) == Nx.tensor(i * 2.0 + 1))
  end

  # forty chained dots of 1500x1500 f64 matrices: 270 GFLOP, seconds of work even on many
  # cores, far past the deadlines below (the worker is killed long before the end)
  defp slow_graph do
    dims = {{:f, 64}, {1500, 1500}}
    NxJax.TestGraphs.dot_chain({0, :constant, [], %{value: 1.0e-3}, dims}, 40, dims)
  end

  describe "per-call :timeout" do
    setup do
      name = :"timeout_worker_#{System.unique_integer([:positive])}"
      {:ok, sup} = Supervisor.start_link([{NxJax.Worker, name: name}], strategy: :one_for_one)
      Process.unlink(sup)
      on_exit(fn -> Supervisor.stop(sup) end)
      assert NxJax.Worker.call(:ping, [], server: name) == :pong
      %{name: name}
    end

    test "a call past its timeout gets a Timeout error; the stuck worker is replaced and the " <>
           "call queued behind it is retried on the new worker",
         %{name: name} do
      slow = slow_graph()

      quick =
        graph(
          [
            {0, :parameter, [], %{index: 0}, {{:s, 64}, {}}},
            {1, :add, [0, 0], %{}, {{:s, 64}, {}}}
          ],
          [1]
        )

      stuck_os_pid = NxJax.Worker.os_pid(name)
      # (scaled, unlike the deadlines of other tests that only watch them pass: this test must
      # see the slow request at the worker and queue the next one before it; the slow graph
      # takes seconds however long it is)
      timeout = NxJax.TestTime.ms(200)

      slow_caller =
        Task.async(fn ->
          catch_error(NxJax.Worker.run(slow, [], server: name, timeout: timeout))
        end)

      # the slow request is at the worker, and the next one is queued behind it
      assert wait_until(fn -> NxJax.Worker.pending(name) == 1 end, 10_000),
             "the slow request was not seen at the worker before its deadline"

      queued =
        Task.async(fn ->
          NxJax.Worker.run(quick, [{{:s, 64}, {}, <<21::64-signed-native>>}], server: name)
        end)

      assert %NxJax.WorkerError{class: "Timeout", message: message} =
               Task.await(slow_caller, :infinity)

      assert message =~ "within #{timeout} ms"
      assert message =~ "replaced"

      assert [{{:s, 64}, {}, <<42::64-signed-native>>}] = Task.await(queued, :infinity)
      assert NxJax.Worker.os_pid(name) != stuck_os_pid
      refute File.exists?("/proc/#{stuck_os_pid}/cmdline") and not zombie?(stuck_os_pid)
      assert NxJax.Worker.call(:ping, [], server: name) == :pong
    end

    # one timer serves all deadlines: calls answered in time leave nothing behind that could
    # replace a worker that did nothing wrong once their deadlines pass (the shortest is 300 ms,
    # not tens: a ping on a busy CI machine may take that long, and the test must not depend on it)
    test "calls answered before their deadlines do not replace the worker later",
         %{name: name} do
      os_pid = NxJax.Worker.os_pid(name)

      for timeout <- [1_500, 400, 1_000, 300, 300, 2_000] do
        opts = [server: name, timeout: NxJax.TestTime.ms(timeout)]
        assert NxJax.Worker.call(:ping, [], opts) == :pong
      end

      # until every deadline above has passed
      Process.sleep(NxJax.TestTime.ms(2_100))
      assert NxJax.Worker.call(:ping, [], server: name) == :pong
      assert NxJax.Worker.os_pid(name) == os_pid
      assert NxJax.Worker.pending(name) == 0
    end

    # the worker keeps the deadline, not the caller: a stuck call whose caller is gone must
    # still end with the stuck Python process replaced
    test "a call whose caller died is still stopped at its deadline", %{name: name} do
      stuck_os_pid = NxJax.Worker.os_pid(name)
      slow = slow_graph()
      # (scaled: the caller must be seen at the worker and killed before its deadline)
      timeout = NxJax.TestTime.ms(300)
      caller = spawn(fn -> NxJax.Worker.run(slow, [], server: name, timeout: timeout) end)
      # killed once its request is at the worker (the deadline is the worker's to keep)
      assert wait_until(fn -> NxJax.Worker.pending(name) == 1 end, 10_000),
             "the request was not seen at the worker before its deadline"

      Process.exit(caller, :kill)

      assert replaced?(name, stuck_os_pid)

      assert NxJax.Worker.call(:ping, [], server: name) == :pong
    end

    # The caller's own limit (timeout + 5 s) only passes when the GenServer cannot answer at
    # all; here it is suspended. The reply it sends once resumed must not land in the caller's
    # mailbox (a GenServer calling nx_jax would get it as a stray message), and the caller's
    # next call must work (callers keep one reply alias from call to call; giving up drops it).
    test "a caller that gave up on an unresponsive worker does not receive its late reply",
         %{name: name} do
      :sys.suspend(name)

      assert %NxJax.WorkerError{class: "Timeout", message: message} =
               catch_error(NxJax.Worker.call(:ping, [], server: name, timeout: 100))

      assert message =~ "within 100 ms"
      :sys.resume(name)
      # the resumed worker serves the request (its deadline counts from now) and replies
      assert wait_until(fn -> NxJax.Worker.pending(name) == 0 end, 5_000)
      # (the GenServer sent its reply before its answer to pending/1: were it delivered, it
      # would be in the mailbox already)
      refute_receive _
      assert NxJax.Worker.call(:ping, [], server: name) == :pong
      assert {:messages, []} = Process.info(self(), :messages)
    end

    # A hook function runs in the caller while its call waits; a call it makes that gives up
    # must not drop the reply of the call that waits. Two stand-in workers speak the client's
    # protocol: `outer` sends a hook, and replies only once the hook's call to `silent` (which
    # never answers) has given up.
    test "a call made by a hook function that gives up leaves the waiting call's reply intact" do
      silent = spawn_link(fn -> Process.sleep(:infinity) end)

      outer =
        spawn_link(fn ->
          receive do
            {:nx_jax_request, {to, tag}, _timeout, _message} ->
              send(to, {:nx_jax_hook, tag, 0, []})
              receive(do: (:go -> send(to, {tag, {:ok, :outer_result}})))
          end
        end)

      parent = self()

      on_hook = fn 0, [] ->
        nested = catch_error(NxJax.Worker.call(:ping, [], server: silent, timeout: 100))
        send(parent, {:nested, nested})
        send(outer, :go)
      end

      # (longer than the nested call's own limit, 100 ms + 5 s)
      opts = [server: outer, on_hook: on_hook, timeout: NxJax.TestTime.ms(15_000)]
      assert NxJax.Worker.call(:ping, [], opts) == :outer_result

      assert_received {:nested, %NxJax.WorkerError{class: "Timeout"}}
    end

    test ":infinity waits without a deadline", %{name: name} do
      assert NxJax.Worker.call(:ping, [], server: name, timeout: :infinity) == :pong
    end
  end

  defp zombie?(os_pid) do
    case File.read("/proc/#{os_pid}/stat") do
      {:ok, stat} -> String.contains?(stat, ") Z ")
      _ -> true
    end
  end

  test "print, sys.stderr, os.write(1) and a native write(1) reach the Logger and leave the " <>
         "channel intact" do
    log =
      capture_log(fn ->
        worker = start_supervised!({NxJax.Worker, env: [{"NX_JAX_TEST", "1"}], stdio_to: self()})

        for how <- [:print, :stderr, :fd, :libc] do
          assert NxJax.Worker.call(:debug_print, [how, "hello via #{how}"], server: worker) == :ok
        end

        for {stream, how} <- [stdout: :print, stderr: :stderr, stdout: :fd, stdout: :libc] do
          line = "hello via #{how}"
          stream = Atom.to_string(stream)
          assert_receive {:nx_jax_stdio, ^stream, ^line}, NxJax.TestTime.ms(10_000)
        end

        # frames are intact after the output
        assert NxJax.Worker.call(:ping, [], server: worker) == :pong
        Logger.flush()
      end)

    for how <- [:print, :fd, :libc], do: assert(log =~ ~r/\[info\].*stdout: hello via #{how}/)
    assert log =~ ~r/\[warning\].*stderr: hello via stderr/
  end

  test "debug_print is refused by a worker not started with NX_JAX_TEST=1" do
    assert_raise NxJax.WorkerError, ~r/UnknownFunction/, fn ->
      NxJax.Worker.call(:debug_print, [:print, "x"])
    end
  end
end
