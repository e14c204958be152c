# Each latency mechanism of the small call, switched off one at a time, measured on a quiet
# machine and again with one CPU-bound process (a Python busy loop) running beside the benchmark;
# the MLP step with resident and with shipped weights in the same two conditions. Every figure is
# a ratio to a baseline measured in the same condition of the same run.
#
#   mix run bench/mechanisms.exs [small_calls] [mlp_steps]     (make bench-mechanisms)
#
# Rewrites section 8 of docs/BENCHMARKS.md and prints it.
Code.require_file("lib.exs", __DIR__)
Code.require_file("section.exs", __DIR__)

{n_small, n_mlp} =
  case System.argv() do
    [a, b] -> {String.to_integer(a), String.to_integer(b)}
    [a] -> {String.to_integer(a), 400}
    [] -> {2000, 400}
  end

Bench.restart_pool(1)
x = Nx.tensor(1.5)
Bench.small(x)
no_fast = [{"NX_JAX_FAST_PATHS", "0"}]

# {row, worker options, jit options}: each row one worker of its own, started alike
variants = [
  all_on: {[], []},
  no_reply_spin: {[], [reply_spin_us: 0]},
  no_worker_spin: {[spin_us: 0], []},
  no_lent_port: {[lend_port: false], []},
  no_fast_paths: {[env: no_fast], []},
  none: {[spin_us: 0, lend_port: false, env: no_fast], [reply_spin_us: 0]}
]

started =
  for {name, {worker_opts, jit_opts}} <- variants do
    {:ok, pid} = NxJax.Worker.start_link(worker_opts)
    fun = Nx.Defn.jit(&Bench.small/1, [server: pid] ++ jit_opts)
    fun.(x)
    {name, pid, fun}
  end

spin = Integer.to_string(NxJax.Worker.spin_us())
echo_port = Bench.open_port("bench/port_echo.py", ["--spin-us", spin])
echo_frame = <<"e", 0::64>>

measure = fn ->
  calls =
    [echo: fn -> Bench.port_call_polling(echo_port, echo_frame) end] ++
      for {name, _pid, fun} <- started, do: {name, fn -> fun.(x) end}

  rows =
    Bench.interleaved(for({name, f} <- calls, do: {name, &Bench.samples(&1, f)}), n_small, 20)

  jax = Bench.inprocess(n_small)["scalar"]
  mlp = Bench.mlp_rows(n_mlp)
  %{rows: rows, jax: jax, mlp: mlp}
end

quiet = measure.()

# the CPU hog: one busy Python process for the whole second measurement
hog =
  Port.open({:spawn_executable, Bench.python()}, [:binary, {:args, ["-c", "while True: pass"]}])

Process.sleep(500)
loaded = measure.()
Bench.close_port(hog)

Bench.close_port(echo_port)
for {_name, pid, _fun} <- started, do: GenServer.stop(pid)

f = fn v, d -> :erlang.float_to_binary(v / 1, decimals: d) end
baseline = fn r -> r.rows.echo.p50 + r.jax.p50 end

labels = [
  all_on: "every mechanism on (the defaults)",
  no_reply_spin: "caller sleeps in `receive` at once (`reply_spin_us: 0`)",
  no_worker_spin: "worker sleeps in `read` at once (`spin_us: 0`)",
  no_lent_port: "no lent port (`lend_port: false`: every call through the GenServer)",
  no_fast_paths: "no byte-matched requests (`NX_JAX_FAST_PATHS=0`: the generic decoder)",
  none: "none of the four"
]

row = fn name ->
  q = quiet.rows[name]
  l = loaded.rows[name]

  "| #{labels[name]} | #{f.(q.p50, 1)} | #{f.(q.p99, 1)} | #{f.(q.p50 / baseline.(quiet), 2)} | " <>
    "#{f.(l.p50, 1)} | #{f.(l.p99, 1)} | #{f.(l.p50 / baseline.(loaded), 2)} |"
end

saves = fn name ->
  q = quiet.rows[name].p50 - quiet.rows.all_on.p50
  l = loaded.rows[name].p50 - loaded.rows.all_on.p50
  "| #{labels[name]} | #{f.(q, 1)} | #{f.(l, 1)} |"
end

mlp_row = fn name, label ->
  q = quiet.mlp[name].p50
  l = loaded.mlp[name].p50

  "| #{label} | #{f.(q, 0)} | #{f.(q / quiet.mlp.jax.p50, 2)} | #{f.(l, 0)} | " <>
    "#{f.(l / loaded.mlp.jax.p50, 2)} |"
end

{:ok, now} = DateTime.now("Etc/UTC")

section = """
## 8. Latency mechanisms, each on its own, quiet and beside a CPU hog

`mix run bench/mechanisms.exs #{n_small} #{n_mlp}` (`make bench-mechanisms`), #{Calendar.strftime(now, "%Y-%m-%d %H:%M")} UTC.
Each row is the small defn of section 1 on a worker of its own with one mechanism switched
off; all rows and the baseline's echo in 20 interleaved rounds of #{div(n_small, 20)} calls. The
"hog" columns are the same measurement again with one CPU-bound process (`python -c "while
True: pass"`) running beside it for its whole duration, on this #{System.schedulers_online()}-core machine. Baseline: the
polling raw port echo (`bench/port_echo.py --spin-us`, caller polling) plus the in-process
jitted JAX call, both measured in the same condition.

| small call | quiet p50 (us) | quiet p99 | quiet / baseline | hog p50 (us) | hog p99 | hog / baseline |
| --- | --- | --- | --- | --- | --- | --- |
| baseline: echo + in-process JAX | #{f.(baseline.(quiet), 1)} | | 1.00 | #{f.(baseline.(loaded), 1)} | | 1.00 |
| — the polling raw port echo | #{f.(quiet.rows.echo.p50, 1)} | #{f.(quiet.rows.echo.p99, 1)} | | #{f.(loaded.rows.echo.p50, 1)} | #{f.(loaded.rows.echo.p99, 1)} | |
| — the in-process jitted JAX call | #{f.(quiet.jax.p50, 1)} | #{f.(quiet.jax.p99, 1)} | | #{f.(loaded.jax.p50, 1)} | #{f.(loaded.jax.p99, 1)} | |
#{Enum.map_join(Keyword.keys(variants), "\n", row)}

What each mechanism saves (p50 without it minus p50 with all on, us; negative: it costs):

| switched off | quiet | hog |
| --- | --- | --- |
#{Enum.map_join(Keyword.keys(variants) -- [:all_on], "\n", saves)}

MLP step of section 3 (default worker, #{n_mlp} steps in 4 interleaved rounds; p50 in us):

| | quiet | / in-process JAX | hog | / in-process JAX |
| --- | --- | --- | --- | --- |
#{mlp_row.(:jax, "in-process JAX (bench/inprocess.py)")}
#{mlp_row.(:resident, "nx_jax, resident weights")}
#{mlp_row.(:shipped, "nx_jax, weights shipped each step")}
"""

# (section 8 replaced in place; the sections around it, written by other commands, stay)
BenchSection.replace!(8, section)
IO.puts(section)
