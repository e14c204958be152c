# The data behind the plots of docs/BENCHMARKS.md, and the plots: `make bench-plots` (or
# `mix run bench/plots.exs`, then `.venv/bin/python bench/plots.py docs/plots`). About 1 minute.
#
# Writes to docs/plots/:
# - latency.csv: every sample (us) of the small call (nx_jax, the raw port echo, in-process JAX),
#   quiet and beside one CPU-bound process, and of the MLP step (in-process JAX, resident and
#   shipped weights), quiet;
# - transfer.csv: MB/s of a tensor into the worker and out of it, 4 KiB to 64 MiB, against the raw
#   port and emqx-erlport (up to 4 MiB: it is quadratic beyond);
# - pool.csv: calls/s of 8 callers through pools of 1 and 2 workers here (the small defn and the
#   compute-bound one of section 5), and the 16-core rows of bench/pool_scaling.md;
# then bench/plots.py draws latency.png, transfer.png and pool.png from them (matplotlib, the
# `bench` extra). Not a test: nothing here asserts a timing.
Code.require_file("lib.exs", __DIR__)

out_dir = Path.expand("../docs/plots", __DIR__)
File.mkdir_p!(out_dir)
n_small = 2000
n_mlp = 400
Bench.restart_pool(1)
x = Nx.tensor(1.5)
Bench.small(x)

# (a field with a comma or a quote is quoted, as Python's csv module reads it)
csv_field = fn v ->
  text = to_string(v)

  if String.contains?(text, [",", "\""]),
    do: "\"" <> String.replace(text, "\"", "\"\"") <> "\"",
    else: text
end

write_csv = fn name, header, rows ->
  lines = Enum.map([header | rows], &Enum.map_join(&1, ",", csv_field))
  File.write!(Path.join(out_dir, name), Enum.join(lines, "\n") <> "\n")
  IO.puts("   wrote docs/plots/#{name} (#{length(rows)} rows)")
end

# --- latency distributions --------------------------------------------------------------------
small = fn condition ->
  IO.puts("latency: small call, #{condition}")
  rows = Bench.small_call_samples(n_small)
  jax = Bench.inprocess_scalar_samples(n_small)

  for {row, samples} <- [
        {"nx_jax defn", rows.ours},
        {"raw port echo", rows.echo_poll},
        {"in-process JAX", jax}
      ],
      us <- samples,
      do: [condition, "small call", row, Float.round(us, 2)]
end

quiet = small.("quiet")

hog =
  Port.open({:spawn_executable, Bench.python()}, [:binary, {:args, ["-c", "while True: pass"]}])

Process.sleep(500)
loaded = small.("CPU hog beside")
Bench.close_port(hog)

IO.puts("latency: MLP step, quiet")
mlp = Bench.mlp_samples(n_mlp)

mlp_rows =
  for {row, key} <- [
        {"in-process JAX", :jax},
        {"nx_jax, weights resident", :resident},
        {"nx_jax, weights shipped", :shipped}
      ],
      us <- Map.fetch!(mlp, key),
      do: ["quiet", "MLP step", row, Float.round(us, 2)]

write_csv.("latency.csv", ~w(condition workload row us), quiet ++ loaded ++ mlp_rows)

# --- transfer bandwidth -------------------------------------------------------------------------
IO.puts("transfer")
echo_port = Bench.open_port("bench/port_echo.py")
erlport_port = Bench.open_port("bench/erlport_echo.py")
mbps = fn bytes, us -> Float.round(bytes / 1_048_576 / (us / 1.0e6), 1) end

transfer =
  for shift <- [12, 14, 16, 18, 20, 22, 24, 26] do
    bytes = Bitwise.bsl(1, shift)
    IO.puts("   #{bytes} bytes")
    data = :crypto.strong_rand_bytes(bytes)
    t = {{:f, 32}, {div(bytes, 4)}, data}
    reps = if bytes >= 16_777_216, do: 5, else: 20
    # (one untimed run of every path first: the first large frame grows each process's memory)
    # (the guard kept to the end: h is freed by hand)
    [{:ref, h, guard}] = NxJax.Worker.put([t])
    NxJax.Worker.fetch([h])
    frame_in = :erlang.term_to_binary({:s, data})
    frame_out = :erlang.term_to_binary({:g, bytes})
    erlport? = bytes <= 4_194_304
    Bench.port_call(echo_port, ["s", data])
    Bench.port_call(echo_port, <<"g", bytes::64>>)
    if erlport?, do: Bench.port_call(erlport_port, frame_in)

    timed = fn op -> fn k -> for _ <- 1..k, do: Bench.time_us(op) end end

    put_free = fn k ->
      for _ <- 1..k do
        t0 = System.monotonic_time(:nanosecond)
        [{:ref, h, _guard}] = NxJax.Worker.put([t])
        us = (System.monotonic_time(:nanosecond) - t0) / 1000
        NxJax.Worker.free([h])
        us
      end
    end

    # every path once per round, so that a slow spell of the machine falls on all of them
    paths =
      [
        {{"in", "nx_jax"}, put_free},
        {{"out", "nx_jax"}, timed.(fn -> NxJax.Worker.fetch([h]) end)},
        {{"in", "raw port"}, timed.(fn -> Bench.port_call(echo_port, ["s", data]) end)},
        {{"out", "raw port"}, timed.(fn -> Bench.port_call(echo_port, <<"g", bytes::64>>) end)}
      ] ++
        if erlport?,
          do: [
            {{"in", "ErlPort"}, timed.(fn -> Bench.port_call(erlport_port, frame_in) end)},
            {{"out", "ErlPort"}, timed.(fn -> Bench.port_call(erlport_port, frame_out) end)}
          ],
          else: []

    best = Bench.interleaved_samples(paths, reps, reps)
    NxJax.Worker.free([h])
    NxJax.Guard.keep(guard)

    for {{direction, path}, _} <- paths,
        do: [bytes, direction, path, mbps.(bytes, Enum.min(best[{direction, path}]))]
  end

Bench.close_port(erlport_port)
Bench.close_port(echo_port)
write_csv.("transfer.csv", ~w(bytes direction path mb_s), Enum.concat(transfer))

# --- pool scaling -------------------------------------------------------------------------------
IO.puts("pool scaling")
here = "#{System.schedulers_online()} cores (this machine)"

pool_here =
  for {workload, opts, calls} <- [
        {"small defn", [], 400},
        {"compute-bound defn", [fun: &Bench.wide/1, one_thread: true], 40}
      ],
      size <- [1, 2] do
    _ = Bench.pool_throughput(size, 8, div(calls, 4), opts)
    %{rate: rate} = Bench.pool_throughput(size, 8, calls, opts)
    [here, workload, size, Float.round(rate, 1)]
  end

Bench.restart_pool(1)

# the larger machine's rows, from the table bench/pool_scaling.exs wrote there
pool_md = File.read!(Path.expand("pool_scaling.md", __DIR__))
[_, cores] = Regex.run(~r/, (\d+) cores,/, pool_md)

pool_there =
  for [_, workers, rate] <- Regex.scan(~r/^\| (\d+) \| (\d+) \|/m, pool_md),
      do: ["#{cores} cores (bench/pool_scaling.md)", "small defn", workers, rate]

write_csv.("pool.csv", ~w(machine workload workers calls_s), pool_here ++ pool_there)

# --- the pictures -------------------------------------------------------------------------------
info = NxJax.Worker.call(:info, [])

File.write!(Path.join(out_dir, "README.md"), """
# Data of the plots in docs/BENCHMARKS.md

Run: #{Date.utc_today()}, #{Bench.cpu_model()}, #{System.schedulers_online()} cores, Erlang/OTP #{System.otp_release()}, Elixir #{System.version()}, JAX #{info[:jax_version]} (#{info[:backend]})

Written by `make bench-plots` (bench/plots.exs measures and writes the CSV files, bench/plots.py
draws the PNG files from them). Times are microseconds, bandwidth MB/s (2^20 bytes per second).

- latency.csv / latency.png: every sample of the small call (#{n_small} calls per row: nx_jax,
  the raw port echo with its caller polling, in-process jitted JAX), quiet and with one
  CPU-bound process beside the run, and of the MLP training step (#{n_mlp} steps per row), quiet.
- transfer.csv / transfer.png: the best of 20 (5 from 16 MiB), every path once per round, of a put (Elixir to worker) and a
  fetch (worker to Elixir), against the raw port (bench/port_echo.py) and emqx-erlport (up to
  4 MiB, bench/erlport_echo.py).
- pool.csv / pool.png: calls/s of 8 callers through pools of 1 and 2 workers on this machine (the
  small defn, 400 calls each; the compute-bound defn of section 5, 40 calls each, every worker
  running XLA on one thread), and the rows of bench/pool_scaling.md from a larger machine.
""")

{text, status} =
  System.cmd(Bench.python(), [Path.expand("plots.py", __DIR__), out_dir], stderr_to_stdout: true)

IO.puts(text)
if status != 0, do: raise("bench/plots.py failed (#{status}); is the bench extra installed?")
