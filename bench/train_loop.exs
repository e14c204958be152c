# A training loop as an Nx user writes it, against its Python twin (bench/train_loop.py), and
# what the numerics modes cost; writes section 12 of docs/BENCHMARKS.md.
#
#     mix run bench/train_loop.exs [STEPS] [ROUNDS] [LONG]     (make bench-train: 500 3 10000)
#
# The loop: a 784-128-10 MLP (relu, softmax cross-entropy) trained with Adam on batches of 128,
# its state (parameters, two moment tuples, a step count) resident on the worker through
# `Nx.default_backend(NxJax.Backend)`, the loss read back after every step, nothing freed by
# hand. Each round runs the twin, then the loop in each numerics mode, then with its state
# donated (`donate: [0]`), so ratios compare runs a few seconds apart. A long run of LONG steps
# reads the worker's resident count and RSS along the way. Then a jitted chain of 750
# element-wise ops on 2 f32 values, in each mode and in-process. Not a test: nothing here
# asserts a timing.
Code.require_file("lib.exs", __DIR__)
Code.require_file("train_step.exs", __DIR__)
Code.require_file("section.exs", __DIR__)

{steps, rounds, long} =
  case System.argv() |> Enum.map(&String.to_integer/1) do
    [s, r, l] -> {s, r, l}
    [s, r] -> {s, r, 10_000}
    [s] -> {s, 3, 10_000}
    [] -> {500, 3, 10_000}
  end

# (worker_env: one environment per worker)
modes = %{nx: [[{"NX_JAX_NUMERICS", "nx"}]], native: [[{"NX_JAX_NUMERICS", "native"}]]}
default_mode = NxJax.Worker.Server.default_numerics()
other_mode = if default_mode == :native, do: :nx, else: :native
IO.puts("training loop: #{rounds} rounds of #{steps} steps, default numerics #{default_mode}")

rows =
  for round <- 1..rounds do
    jax = TrainLoop.twin("mlp", steps)
    Bench.restart_pool(1, modes[default_mode])
    ours = TrainLoop.run(steps)
    donated = TrainLoop.run(steps, donate: [0])
    Bench.restart_pool(1, modes[other_mode])
    other = TrainLoop.run(steps)
    # neither the worker nor the caller polls (spin_us: 0, reply_spin_us: 0)
    Application.put_env(:nx_jax, :spin_us, 0)
    Application.put_env(:nx_jax, :reply_spin_us, 0)
    NxJax.Pool.reload_config()
    Bench.restart_pool(1, modes[default_mode])
    still = TrainLoop.run(steps)
    Application.delete_env(:nx_jax, :spin_us)
    Application.delete_env(:nx_jax, :reply_spin_us)
    NxJax.Pool.reload_config()
    row = %{jax: jax, ours: ours, donated: donated, other: other, still: still}
    ratio = fn r -> Float.round(TrainLoop.p50(r.times) / TrainLoop.p50(jax.times), 2) end

    IO.puts(
      "round #{round}: JAX #{Float.round(TrainLoop.p50(jax.times), 0)} us, ours " <>
        "#{ratio.(ours)}x, donated #{ratio.(donated)}x, #{other_mode} #{ratio.(other)}x, " <>
        "no polling #{ratio.(still)}x; " <>
        "per hundred #{inspect(TrainLoop.medians(ours.times))} against " <>
        "#{inspect(TrainLoop.medians(jax.times))}"
    )

    row
  end

# the loop and its twin in alternating blocks of 20 steps (TrainLoop.interleaved/3): both in the
# same seconds, whatever the host's speed does between the rounds above
Bench.restart_pool(1, modes[default_mode])
alternating = TrainLoop.interleaved(40, 20)

IO.puts(
  "alternating blocks: ratios #{inspect(Enum.map(alternating.ratios, &Float.round(&1, 2)))}"
)

Bench.restart_pool(1, modes[default_mode])
IO.puts("long run: #{long} steps")
probe_at = [1_000, div(long, 2), long] |> Enum.uniq() |> Enum.filter(&(&1 <= long))
long_run = TrainLoop.run(long, probe_at: probe_at)
IO.inspect(long_run.probes, label: "{step, {rss MB, resident}}")

# the worker's own handling of a step, in-process, the run taken out (bench/step_handling.py):
# the step's graph is the largest in the trace cache so far
step_graph = TrainLoop.step_graph()

graph_file = Path.join(System.tmp_dir!(), "nx_jax_bench_step_graph.etf")
File.write!(graph_file, step_graph)

handling =
  Bench.sh(Bench.python(), [
    Path.join(__DIR__, "step_handling.py"),
    graph_file,
    "#{rounds}",
    "#{default_mode}"
  ])
  |> String.split("\n", trim: true)
  |> List.last()
  |> then(fn line ->
    for key <- ~w(handling run), into: %{} do
      [_, list] = Regex.run(~r/"#{key}": \[([^\]]*)\]/, line)
      {String.to_atom(key), list |> String.split(", ") |> Enum.map(&String.to_float/1)}
    end
  end)

IO.inspect(handling, label: "step handling in-process (us)")

IO.puts("chain of 750 element-wise ops")
chain_calls = 2000
x2 = Nx.tensor([0.25, 0.75], type: :f32)

chain_rows =
  for round <- 1..rounds do
    jax = TrainLoop.twin("chain", chain_calls)

    by_mode =
      for mode <- [:nx, :native], into: %{} do
        Bench.restart_pool(1, modes[mode])
        f = Nx.Defn.jit(TrainLoop.chain(750))
        {mode, TrainLoop.p50(Bench.samples(chain_calls, fn -> f.(x2) end))}
      end

    # (the pool is in :native now)
    f = Nx.Defn.jit(TrainLoop.chain(750), reply_spin_us: 0)

    by_mode =
      Map.put(by_mode, :still, TrainLoop.p50(Bench.samples(chain_calls, fn -> f.(x2) end)))

    row = Map.put(by_mode, :jax, TrainLoop.p50(jax.times))
    IO.puts("round #{round}: #{inspect(row)}")
    row
  end

Bench.restart_pool(1)

# --- section 12 of docs/BENCHMARKS.md -------------------------------------------------------
join = &Enum.join(&1, ", ")
med = fn list -> Enum.at(Enum.sort(list), div(length(list), 2)) end
range = fn list -> "#{Enum.min(list)}-#{Enum.max(list)}" end
r2 = &Float.round(&1 * 1.0, 2)
r0 = &round/1

ratios = fn key ->
  Enum.map(rows, &r2.(TrainLoop.p50(&1[key].times) / TrainLoop.p50(&1.jax.times)))
end

cpu = fn key, field -> Enum.map(rows, &r0.(&1[key][field])) end

round_rows =
  rows
  |> Enum.with_index(1)
  |> Enum.map_join("\n", fn {row, i} ->
    cells =
      for key <- [:jax, :ours, :donated, :other, :still] do
        p = TrainLoop.p50(row[key].times)

        if key == :jax,
          do: "#{r0.(p)}",
          else: "#{r0.(p)} (#{r2.(p / TrainLoop.p50(row.jax.times))})"
      end

    "| #{i} | #{Enum.join(cells, " | ")} | #{inspect(TrainLoop.medians(row.ours.times))} |"
  end)

[{_, {rss_1000, res_1000}} | _] = long_run.probes
{_, {rss_end, res_end}} = List.last(long_run.probes)

probe_cells =
  Enum.map_join(long_run.probes, ", ", fn {s, {mb, res}} ->
    "step #{s}: #{mb} MB, #{res} resident"
  end)

chain_line = fn key -> chain_rows |> Enum.map(&r0.(&1[key])) end
block_ratios = Enum.sort(alternating.ratios)
quartile = fn q -> r2.(Enum.at(block_ratios, trunc(q * (length(block_ratios) - 1)))) end

section = """
## 12. A training loop, and the numerics modes

`make bench-train` (`mix run bench/train_loop.exs 500 3 10000`) writes this section. The loop
is the one every Nx user writes: a 784-128-10 MLP (relu, softmax cross-entropy) trained with
Adam on batches of 128, its whole state (parameters, two moment tuples, a step count) resident
through `Nx.default_backend(NxJax.Backend)`, the batches resident, `Nx.to_number(loss)` after
every step, nothing freed by hand. Its twin, `bench/train_loop.py`, is the same step jitted
in-process in JAX (state on the device, `float(loss)` every step), run just before each round
with the worker's XLA settings (its default threads). The two runs' losses agree to 3
decimals over 1,000 steps (2026-12-06). Step p50 in us over #{steps} steps (after 20 uncounted), the ratio to the twin in
parentheses; #{Bench.cpu_model()}, #{Date.utc_today()}:

| round | in-process JAX | nx_jax (`:#{default_mode}`, the default) | the same, `donate: [0]` | nx_jax in `:#{other_mode}` | nx_jax, no polling | nx_jax per 100 steps |
| --- | --- | --- | --- | --- | --- | --- |
#{round_rows}

Median ratio to the twin: #{med.(ratios.(:ours))} (#{range.(ratios.(:ours))}) in the default
mode, #{med.(ratios.(:donated))} (#{range.(ratios.(:donated))}) donating the state,
#{med.(ratios.(:other))} (#{range.(ratios.(:other))}) in `:#{other_mode}`,
#{med.(ratios.(:still))} (#{range.(ratios.(:still))}) with neither the worker nor the caller
polling for the other's message (`spin_us: 0`, `reply_spin_us: 0`); target 1.3. The loop
and its twin in alternation, 40 blocks of 20 steps each (`TrainLoop.interleaved/3`: the twin a
Python process of its own kept between its blocks), so that both run in the same seconds
whatever the host's speed does: the blocks' ratio #{quartile.(0.5)} (median; quartiles
#{quartile.(0.25)} and #{quartile.(0.75)}), the steps' medians #{r0.(TrainLoop.p50(alternating.ours))} us against
#{r0.(TrainLoop.p50(alternating.twin))} us. docs/BENCHMARKS.md section 15 times each hand-over
of such a step. CPU per
step (user and system time of the whole process, every thread): the worker
#{join.(cpu.(:ours, :worker_cpu_us))} us and the BEAM #{join.(cpu.(:ours, :vm_cpu_us))} us, against
the twin's #{join.(Enum.map(rows, &r0.(&1.jax.cpu_us)))} us.

Where a step's time goes besides the run: the worker's own handling of one step, in-process
with the run taken out (`bench/step_handling.py`: reading the call, finding its 15 resident
arguments, keeping its 14 results, the reply, and the free of the previous step's results),
#{join.(handling.handling)} us per step in #{rounds} rounds, beside the jitted run alone in the
same process, #{join.(handling.run)} us. The loop's process plans
the call (`Nx.Defn.Compiler`'s per-process plan of a repeated call, containers included), so a
step does not walk its arguments' signature or look up the trace cache again.

Memory over #{long} steps in the default mode (the worker's RSS and resident count, read
between steps): #{probe_cells}. From step 1,000 to step #{long} the RSS grew by
#{Float.round(rss_end - rss_1000, 1)} MB (target: under 32) and the resident count went from
#{res_1000} to #{res_end}: a step's results are freed once the loop's process has collected
their terms (`NxJax.Guard`), or when the worker's resident bytes have grown by
`resident_gc_bytes` (64 MiB) and it has the loop's process collected.

A jitted chain of 750 element-wise ops (multiply, add, sin, 250 times) on 2 f32 values, p50 per
call in us over #{chain_calls} calls, #{rounds} rounds: `:nx` #{join.(chain_line.(:nx))},
`:native` #{join.(chain_line.(:native))}, `:native` with the caller not polling for its reply
(`reply_spin_us: 0`) #{join.(chain_line.(:still))}; in-process JAX #{join.(chain_line.(:jax))}.
"""

# (section 12 replaced in place; the sections around it, written by other commands, stay)
BenchSection.replace!(12, section)
IO.puts(section)
