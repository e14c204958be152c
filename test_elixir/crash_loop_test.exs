defmodule NxJax.CrashLoopTest do
  # async: false: replaces the application's pool with a one-worker pool whose worker it kills
  # again and again, each time soon after it started (a crash loop, as a poison call or a
  # broken environment makes one)
  use ExUnit.Case, async: false
  import ExUnit.CaptureLog
  import NxJax.TestAssertions, only: [wait_for: 2, wait_until: 2]

  @moduletag timeout: NxJax.TestTime.ms(300_000)

  setup_all do
    NxJax.TestPool.replace_application_pool(1)
  end

  defp worker_other_than(old) do
    wait_for(
      fn ->
        case GenServer.whereis(NxJax.Worker) do
          pid when is_pid(pid) and pid != old -> pid
          _ -> nil
        end
      end,
      30_000
    ) || flunk("no new worker registered")
  end

  test "restarts back off, the application stays up, callers get a fast clear error while " <>
         "no worker runs, and service returns by itself" do
    top = Process.whereis(NxJax.Supervisor)

    log =
      capture_log(fn ->
        Enum.reduce(1..7, nil, fn _, old ->
          pid = worker_other_than(old)
          os_pid = NxJax.Worker.os_pid(pid)
          System.cmd("kill", ["-9", Integer.to_string(os_pid)])
          pid
        end)

        # the 7th quick death in a row: the next start waits 5 s
        assert wait_until(fn -> NxJax.Pool.restart_wait(NxJax.Worker) != nil end, 10_000)
        t0 = System.monotonic_time(:millisecond)
        error = assert_raise NxJax.WorkerError, fn -> NxJax.Worker.call(:ping, []) end
        elapsed = System.monotonic_time(:millisecond) - t0

        assert error.class == "WorkerExited"
        assert error.message =~ "no worker is running (NxJax.Worker)"

        assert error.message =~
                 ~r/died 7 time\(s\) in a row soon after starting and starts again in \d+ ms/

        # at once, not after a retry's wait for a worker
        assert elapsed < NxJax.TestTime.ms(1_000)

        # a defn placed on the pool: the same error, at once
        assert_raise NxJax.WorkerError, ~r/starts again in/, fn ->
          Nx.Defn.jit(&Nx.add(&1, 1)).(Nx.tensor(1.0))
        end

        # service returns by itself
        assert wait_until(
                 fn -> match?(:pong, catch_call(fn -> NxJax.Worker.call(:ping, []) end)) end,
                 20_000
               )
      end)

    assert log =~ "starting it again in 100 ms"
    assert log =~ "starting it again in 3200 ms"
    assert log =~ "starting it again in 5000 ms"
    # the application never went down
    assert Process.whereis(NxJax.Supervisor) == top
    assert :nx_jax in Enum.map(Application.started_applications(), &elem(&1, 0))
    assert Nx.to_number(Nx.Defn.jit(&Nx.add(&1, 1)).(Nx.tensor(1.0))) == 2.0
  end

  defp catch_call(fun) do
    fun.()
  rescue
    NxJax.WorkerError -> :error
  end
end
