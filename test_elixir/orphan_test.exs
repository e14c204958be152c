defmodule NxJax.OrphanTest do
  # When the BEAM that owns a worker dies (here: SIGKILL, so no cleanup code runs), the
  # Python process exits on its own: no orphans.
  use ExUnit.Case, async: true
  import NxJax.TestAssertions, only: [wait_until: 2]

  # The worker ends within a second of losing its BEAM in every state: idle (EOF on fd 3),
  # computing an endless loop, and stopped by SIGSTOP (neither reads its pipe; the kernel's
  # parent-death signal and the worker's lifeline thread end them, py_backend/lifeline.py).
  for state <- [:idle, :computing, :stopped] do
    test "a worker exits when the Elixir OS process that owns it is killed (#{state})" do
      {python, beam, port} = start_beam(unquote(state))
      assert alive?(python)

      if unquote(state) == :computing do
        # the endless while loop keeps a core busy in the worker: 1.5 s of CPU past what the
        # worker had used when it answered the ping (its start) and more than its compile takes
        base = cpu_ticks(python)

        assert wait_until(fn -> cpu_ticks(python) - base > 150 end, 30_000),
               "the worker did not start computing"

        assert proc_state(python) == "R"
      end

      if unquote(state) == :stopped do
        System.cmd("kill", ["-STOP", Integer.to_string(python)])
        assert wait_until(fn -> proc_state(python) == "T" end, 5_000)
      end

      System.cmd("kill", ["-9", Integer.to_string(beam)])
      assert_receive {^port, {:exit_status, _}}, NxJax.TestTime.ms(10_000)

      assert wait_until(fn -> not alive?(python) end, 1_000),
             "worker #{python} (#{unquote(state)}) still running 1 s after its BEAM died"
    end
  end

  defp start_beam(state) do
    # nx_jax's code and that of the Nx it depends on (a regression, 2026-12-06: with the
    # clean-room Nx an application of its own, the VM could not start nx_jax without it)
    paths = Enum.flat_map([NxJax.Worker, Nx], &["-pa", Path.dirname(:code.which(&1))])

    script = """
    # the application: defn then runs on its worker
    {:ok, _} = Application.ensure_all_started(:nx_jax)
    [worker] = NxJax.Pool.workers()
    :pong = NxJax.Worker.call(:ping, [], server: worker)
    if #{inspect(state)} == :computing do
      defmodule Endless do
        import Nx.Defn
        # f32: x stops growing at 2**24, so the condition never turns false
        defn run(x) do
          while x, x >= 0.0 do
            x + 1.0
          end
        end
      end
      spawn(fn -> Nx.Defn.jit(&Endless.run/1, timeout: :infinity).(Nx.tensor(0.0)) end)
    end
    IO.puts("python=\#{NxJax.Worker.os_pid(worker)} beam=\#{System.pid()}")
    Process.sleep(:infinity)
    """

    port =
      Port.open({:spawn_executable, System.find_executable("elixir")}, [
        :binary,
        :exit_status,
        {:line, 1024},
        args: paths ++ ["-e", script]
      ])

    {python, beam} = read_pids(port)
    {python, beam, port}
  end

  defp read_pids(port) do
    receive do
      {^port, {:data, {:eol, "python=" <> rest}}} ->
        [python, "beam=" <> beam] = String.split(rest, " ")
        {String.to_integer(python), String.to_integer(beam)}

      {^port, {:data, _other}} ->
        read_pids(port)

      {^port, {:exit_status, status}} ->
        flunk("the Elixir process exited with status #{status} before starting its worker")
    after
      NxJax.TestTime.ms(60_000) -> flunk("the Elixir process did not report its worker")
    end
  end

  # /proc/<pid>/stat: the state letter and the user + system CPU ticks
  defp stat_fields(pid) do
    case File.read("/proc/#{pid}/stat") do
      {:ok, stat} -> stat |> String.split(") ") |> List.last() |> String.split(" ")
      {:error, _} -> []
    end
  end

  defp proc_state(pid), do: pid |> stat_fields() |> List.first()

  defp cpu_ticks(pid) do
    case stat_fields(pid) do
      [] -> 0
      fields -> String.to_integer(Enum.at(fields, 11)) + String.to_integer(Enum.at(fields, 12))
    end
  end

  # A process is gone when it no longer exists or is a zombie waiting to be reaped.
  defp alive?(pid) do
    case File.read("/proc/#{pid}/stat") do
      {:ok, stat} -> not String.contains?(stat, ") Z ")
      {:error, _} -> false
    end
  end
end
