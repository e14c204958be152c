# Does spinning cost the small call when its caller and worker share one CPU? The small defn
# on workers with and without their spin (`spin_us`), called with and without reply polling
# (`reply_spin_us`), beside the floor (bench/jax_echo.py, spinning or not), quiet and then
# with a CPU-bound process beside it: `pinned` (the default) puts the BEAM and the Python
# processes on CPU 0 and the hog on CPU 1 (Linux, taskset); `hog` leaves placement to the OS.
# No section of docs/BENCHMARKS.md regenerates it (the runs of 2026-12-05 are in git:
# `git show 19d163f:docs/BENCHMARKS.md`, "What the Elixir client's layers are made of").
#
#   mix run bench/spin_colocated.exs [calls] [pinned | hog]
#
# Rows: floor_poll / floor_sleep (the floor, caller polling or sleeping), floor0_sleep (the floor
# without its spin); wS_rR: nx_jax with worker spin S us and reply polling R us.
Code.require_file("lib.exs", __DIR__)
n = with [a | _] <- System.argv(), do: String.to_integer(a), else: (_ -> 2000)
mode = with [_, m] <- System.argv(), do: m, else: (_ -> "pinned")
Bench.restart_pool(1)
x = Nx.tensor(1.5)
Bench.small(x)
spin = Integer.to_string(NxJax.Worker.spin_us())
floor = Bench.open_port("bench/jax_echo.py", ["--spin-us", spin])
<<_::32>> = Bench.port_call(floor, <<1.5::float-32-little>>)
floor0 = Bench.open_port("bench/jax_echo.py", ["--spin-us", "0"])
<<_::32>> = Bench.port_call(floor0, <<1.5::float-32-little>>)

workers =
  for {name, ws} <- [w100: 100, w0: 0], into: %{} do
    {:ok, w} = NxJax.Worker.start_link(spin_us: ws)
    {name, w}
  end

mk = fn w, rs ->
  f = Nx.Defn.jit(&Bench.small/1, server: w, reply_spin_us: rs)
  f.(x)
  fn -> f.(x) end
end

rows = [
  floor_poll: fn -> <<_::32>> = Bench.port_call_polling(floor, <<1.5::float-32-little>>) end,
  floor_sleep: fn -> <<_::32>> = Bench.port_call(floor, <<1.5::float-32-little>>) end,
  floor0_sleep: fn -> <<_::32>> = Bench.port_call(floor0, <<1.5::float-32-little>>) end,
  w100_r100: mk.(workers.w100, 100),
  w0_r100: mk.(workers.w0, 100),
  w100_r0: mk.(workers.w100, 0),
  w0_r0: mk.(workers.w0, 0)
]

os_pids =
  [System.pid(), elem(Port.info(floor, :os_pid), 1), elem(Port.info(floor0, :os_pid), 1)] ++
    for {_, w} <- workers, do: NxJax.Worker.Caller.local(w).os_pid

measure = fn ->
  for {_, f} <- rows, _ <- 1..200, do: f.()
  Bench.interleaved(for({name, f} <- rows, do: {name, &Bench.samples(&1, f)}), n, 10)
end

quiet = measure.()
taskset = System.find_executable("taskset")

hog =
  Port.open({:spawn_executable, Bench.python()}, [:binary, {:args, ["-c", "while True: pass"]}])

{:os_pid, hog_pid} = Port.info(hog, :os_pid)

if mode == "pinned" do
  for p <- os_pids, do: {_, 0} = System.cmd(taskset, ["-a", "-p", "-c", "0", "#{p}"])
  {_, 0} = System.cmd(taskset, ["-p", "-c", "1", "#{hog_pid}"])
end

Process.sleep(500)
hogged = measure.()
Bench.close_port(hog)

for {name, _} <- rows do
  IO.puts(
    "#{name}\tquiet p50 #{Float.round(quiet[name].p50 / 1, 1)} p99 #{Float.round(quiet[name].p99 / 1, 1)}\t#{mode} p50 #{Float.round(hogged[name].p50 / 1, 1)} p99 #{Float.round(hogged[name].p99 / 1, 1)}"
  )
end
