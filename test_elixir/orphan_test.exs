defmodule NxJax.OrphanTest do
  # When the BEAM that owns a worker dies (here: SIGKILL, so no cleanup code runs), the
  # Python process sees EOF on fd 3 and exits on its own: no orphans.
  use ExUnit.Case, async: true
  import NxJax.TestAssertions, only: [wait_until: 2]

  test "a worker exits when the Elixir OS process that owns it is killed" do
    ebin = Path.dirname(:code.which(NxJax.Worker))

    script = """
    {:ok, _} = NxJax.Worker.start_link(name: NxJax.Worker)
    :pong = NxJax.Worker.call(:ping, [])
    IO.puts("python=\#{NxJax.Worker.os_pid()} beam=\#{System.pid()}")
    Process.sleep(:infinity)
    """

    port =
      Port.open({:spawn_executable, System.find_executable("elixir")}, [
        :binary,
        :exit_status,
        {:line, 1024},
        args: ["-pa", ebin, "-e", script]
      ])

    {python, beam} = read_pids(port)
    assert alive?(python)

    System.cmd("kill", ["-9", Integer.to_string(beam)])
    assert_receive {^port, {:exit_status, _}}, NxJax.TestTime.ms(10_000)

    assert wait_until(fn -> not alive?(python) end, 10_000),
           "worker #{python} still running after its BEAM died"
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

  # A process is gone when it no longer exists or is a zombie waiting to be reaped.
  defp alive?(pid) do
    case File.read("/proc/#{pid}/stat") do
      {:ok, stat} -> not String.contains?(stat, ") Z ")
      {:error, _} -> false
    end
  end
end
