# Where the worker and the baseline's echo run beside a CPU hog, round by round: the small call
# on one default worker and the polling raw port echo, in alternating rounds of 100 calls, with
# `others` more default workers called in rounds of their own between them (as the rows of
# bench/mechanisms.exs are), and one CPU-bound process (unpinned) for the whole run. Each line:
# a round's p50 in us for the echo and the small call, and the CPU each last ran on (the
# BEAM's scheduler threads and the hog too).
#
#   mix run bench/colocation_rounds.exs [rounds] [others]      (Linux: reads /proc)
#
# No section of docs/BENCHMARKS.md regenerates it; the runs of 2026-12-05 are read in git
# (`git show 19d163f:docs/BENCHMARKS.md`, "A spin that lost its CPU moves and spins on").
Code.require_file("lib.exs", __DIR__)

{rounds, others} =
  case System.argv() do
    [r, o] -> {String.to_integer(r), String.to_integer(o)}
    [r] -> {String.to_integer(r), 5}
    [] -> {12, 5}
  end

Bench.restart_pool(1)
x = Nx.tensor(1.5)

jitted = fn ->
  {:ok, pid} = NxJax.Worker.start_link([])
  fun = Nx.Defn.jit(&Bench.small/1, server: pid)
  fun.(x)
  {pid, fun}
end

{pid, fun} = jitted.()
more = for _ <- 1..others//1, do: elem(jitted.(), 1)
worker_os_pid = NxJax.Worker.Caller.local(pid).os_pid
spin = Integer.to_string(NxJax.Worker.spin_us())
echo = Bench.open_port("bench/port_echo.py", ["--spin-us", spin])
{:os_pid, echo_os_pid} = Port.info(echo, :os_pid)
echo_frame = <<"e", 0::64>>

# the CPU a thread last ran on (/proc/<pid>/task/<tid>/stat, field 39)
cpu = fn pid, tid ->
  case File.read("/proc/#{pid}/task/#{tid}/stat") do
    {:ok, stat} ->
      [_, rest] = String.split(stat, ") ", parts: 2)
      rest |> String.split(" ") |> Enum.at(36)

    _ ->
      "?"
  end
end

beam = System.pid()

schedulers =
  for tid <- File.ls!("/proc/#{beam}/task"),
      name = String.trim(File.read!("/proc/#{beam}/task/#{tid}/comm")),
      String.ends_with?(name, "_scheduler") and not String.contains?(name, "dirty"),
      do: {name, tid}

hog = Port.open({:spawn_executable, Bench.python()}, [:binary, args: ["-c", "while True: pass"]])
{:os_pid, hog_os_pid} = Port.info(hog, :os_pid)
Process.sleep(300)

p50 = fn samples -> Enum.at(Enum.sort(samples), div(length(samples), 2)) end
f = fn v -> :erlang.float_to_binary(v / 1, decimals: 1) end

where = fn ->
  beam_cpus = Enum.map_join(schedulers, " ", fn {name, tid} -> "#{name}@#{cpu.(beam, tid)}" end)
  "#{beam_cpus} hog@#{cpu.(hog_os_pid, hog_os_pid)}"
end

IO.puts("`mix run bench/colocation_rounds.exs #{rounds} #{others}`, #{Bench.cpu_model()}")

for round <- 1..rounds do
  e = Bench.samples(100, fn -> Bench.port_call_polling(echo, echo_frame) end)
  e_where = "echo@#{cpu.(echo_os_pid, echo_os_pid)} #{where.()}"
  c = Bench.samples(100, fn -> fun.(x) end)
  c_where = "worker@#{cpu.(worker_os_pid, worker_os_pid)} #{where.()}"
  for g <- more, do: Bench.samples(100, fn -> g.(x) end)
  IO.puts("round #{round}: echo #{f.(p50.(e))} [#{e_where}]; call #{f.(p50.(c))} [#{c_where}]")
end

System.cmd("kill", [Integer.to_string(hog_os_pid)])
