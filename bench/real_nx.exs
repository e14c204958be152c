# The two front ends side by side, and against JAX in-process; writes section 13 of
# docs/BENCHMARKS.md.
#
#     elixir bench/real_nx.exs [ROUNDS] [STEPS]        (make bench-real-nx: 4 500)
#
# Each round runs bench/real_nx_measure.exs under each build, the clean room (`mix run`) and
# real Nx 0.7.2 with NxJax as its compiler (`NX_JAX_NX=$REAL_NX mix run`, REAL_NX defaulting
# to _build/real-nx-src), which of the two first alternating from round to round; that script
# runs each training loop in blocks of 20 steps alternating with its Python twin's
# (bench/train_loop.py serve), so that each ratio to the twin compares steps run in the same
# seconds. Both builds must be compiled (the make target
# does it). A plain `elixir` script: it only starts the others and reads what they print.
Code.require_file("section.exs", __DIR__)
root = Path.expand("..", __DIR__)
real_nx = System.get_env("REAL_NX", "_build/real-nx-src")

{rounds, steps} =
  case Enum.map(System.argv(), &String.to_integer/1) do
    [r, s] -> {r, s}
    [r] -> {r, 500}
    [] -> {3, 500}
  end

run! = fn cmd, args, env ->
  {out, status} = System.cmd(cmd, args, cd: root, env: env, stderr_to_stdout: true)
  if status != 0, do: raise("#{cmd} #{Enum.join(args, " ")} failed (#{status}):\n#{out}")
  out
end

measure = fn build, round ->
  env = [{"NX_JAX_NX", if(build == :real, do: real_nx, else: "")}]
  out = run!.("mix", ["run", "bench/real_nx_measure.exs", "#{steps}", "#{round}"], env)
  [_, term] = Regex.run(~r/^RESULT (\S+)$/m, out)
  %{build: ^build} = :erlang.binary_to_term(Base.decode64!(term))
end

load = fn -> File.read!("/proc/loadavg") |> String.split(" ") |> hd() end
load_before = load.()
IO.puts("bench-real-nx: #{rounds} rounds, #{steps} training steps each")

rows =
  for round <- 1..rounds do
    order = if rem(round, 2) == 1, do: [:real, :clean], else: [:clean, :real]
    row = Map.new(order, &{&1, measure.(&1, round)})

    step = fn build, way ->
      "#{round(row[build].train[way].p50)}/#{round(row[build].train[way].jax_p50)}"
    end

    IO.puts(
      "round #{round}: small call real #{round(row.real.small.small)} us, clean " <>
        "#{round(row.clean.small.small)} us; step/twin us: real jit #{step.(:real, :jit)}, " <>
        "real compile #{step.(:real, :compile)}, clean jit #{step.(:clean, :jit)}"
    )

    row
  end

load_after = load.()

# --- section 13 of docs/BENCHMARKS.md -------------------------------------------------------
r0 = &round/1
r2 = &Float.round(&1 * 1.0, 2)
med = fn list -> Enum.at(Enum.sort(list), div(length(list), 2)) end
range = fn list -> "#{Enum.min(list)}-#{Enum.max(list)}" end
cells = fn list -> Enum.join(list, ", ") end

cpu =
  with {:ok, text} <- File.read("/proc/cpuinfo"),
       [_, name] <- Regex.run(~r/model name\s*:\s*(.+)/, text) do
    "#{name}, #{System.schedulers_online()} cores"
  else
    _ -> "unknown CPU"
  end

verdict = &if(&1, do: "met", else: "missed")
small_ratio = Enum.map(rows, &r2.(&1.real.small.small / &1.clean.small.small))

by_ping =
  &(&1.real.small.small / &1.real.small.ping / (&1.clean.small.small / &1.clean.small.ping))

small_by_ping = Enum.map(rows, &r2.(by_ping.(&1)))
ratio = fn run -> r2.(run.ratio) end
train_ratio = fn build, way -> Enum.map(rows, &ratio.(&1[build].train[way])) end

small_rows =
  rows
  |> Enum.with_index(1)
  |> Enum.map_join("\n", fn {row, i} ->
    "| #{i} | #{r0.(row.real.small.small)} | #{r0.(row.clean.small.small)} | " <>
      "#{r2.(row.real.small.small / row.clean.small.small)} | #{r0.(row.real.small.ping)} | " <>
      "#{r0.(row.clean.small.ping)} | #{r2.(by_ping.(row))} |"
  end)

train_rows =
  for {row, i} <- Enum.with_index(rows, 1), build <- [:real, :clean] do
    cells =
      for way <- [:jit, :compile, :donate] do
        run = row[build].train[way]
        "#{r0.(run.p50)} / #{r0.(run.jax_p50)} (#{ratio.(run)})"
      end

    name = if build == :real, do: "real Nx + NxJax", else: "clean room"
    "| #{i} | #{name} | #{Enum.join(cells, " | ")} |"
  end
  |> Enum.join("\n")

# the losses every 100 steps, each run against the twin's
loss_gap =
  for row <- rows, build <- [:real, :clean], {_way, run} <- row[build].train do
    Enum.zip_with(run.losses, run.jax_losses, &abs(&1 - &2))
  end
  |> List.flatten()
  |> Enum.max(fn -> 0.0 end)

front = Enum.map(rows, & &1.real.front)
cache = List.last(rows).real.trace_cache

section = """
## 13. The front ends side by side: real Nx 0.7.2 with NxJax as its compiler, and the clean room

`make bench-real-nx` (`elixir bench/real_nx.exs #{rounds} #{steps}`) writes this section. Each
round runs `bench/real_nx_measure.exs` in each build: the clean room, and real Nx 0.7.2 with `compiler: NxJax` (`NX_JAX_NX`), the order
alternating from round to round, so that the figures of a row come from runs a minute or so
apart. #{cpu}, #{Date.utc_today()}, the host's load average #{load_before} at the start and
#{load_after} at the end (it is shared: each run's worker ping is shown beside it, and the
ratio of the two front ends is also given with each call over its own run's ping).

The small call (section 1's jitted `x * 2 + 1` on a scalar f32, host tensors in and out), p50
in us over 20 interleaved rounds of 100 calls (target: real Nx at most 2x the clean room):

| round | real Nx + NxJax | clean room | ratio | ping (real Nx's run) | ping (clean room's run) | ratio, each over its ping |
| --- | --- | --- | --- | --- | --- | --- |
#{small_rows}

Median ratio #{med.(small_ratio)} (#{range.(small_ratio)}); each over its run's ping,
#{med.(small_by_ping)} (#{range.(small_by_ping)}): the target is #{verdict.(med.(small_ratio) <= 2 and med.(small_by_ping) <= 2)}. The compiler's own work per call
under real Nx (real Nx's `__jit__` up to the compiler with no argument list, so no run: the
argument signature, the trace lookup in `NxJax.TraceCache`, the options), mean us over 20,000
calls: the small call #{cells.(Enum.map(front, &r2.(&1.small)))}, the training step's 15
arguments #{cells.(Enum.map(front, &r2.(&1.step)))}.

The training loop (`bench/train_step.exs`, as in section 12: a 784-128-10 MLP, Adam, batches
of 128, the state resident, the loss read back every step), #{steps} steps after 20 uncounted,
in blocks of 20 alternating with its twin's (`TrainLoop.interleaved/3`; the twin,
`bench/train_loop.py serve`, is the same step jitted in-process in JAX, a process kept between
its blocks), so that both run in the same seconds whatever the shared host's speed does: the
step medians in us, ours / the twin's, and the median of the blocks' ratios (target under real
Nx: at most 1.5):

| round | front end | `Nx.Defn.jit` | `Nx.Defn.compile` | jit with `donate: [0]` |
| --- | --- | --- | --- | --- |
#{train_rows}

The step's graph as each front end writes it (real Nx differentiates in Elixir; the clean
room sends a `grad` node that JAX differentiates), jitted in-process by
`bench/step_handling.py` with no port, p50 us per step: real Nx's
#{cells.(Enum.map(rows, &r0.(&1.real.graph_run)))}, the clean room's
#{cells.(Enum.map(rows, &r0.(&1.clean.graph_run)))}.

The blocks' ratio, median over the rounds (their range), under real Nx: through `jit` #{med.(train_ratio.(:real, :jit))}
(#{range.(train_ratio.(:real, :jit))}), through `compile`
#{med.(train_ratio.(:real, :compile))} (#{range.(train_ratio.(:real, :compile))}), donating
the state #{med.(train_ratio.(:real, :donate))} (#{range.(train_ratio.(:real, :donate))});
under the clean room: through `jit` #{med.(train_ratio.(:clean, :jit))}
(#{range.(train_ratio.(:clean, :jit))}), through `compile`
#{med.(train_ratio.(:clean, :compile))} (#{range.(train_ratio.(:clean, :compile))}),
donating #{med.(train_ratio.(:clean, :donate))} (#{range.(train_ratio.(:clean, :donate))}).
The target under real Nx is #{verdict.(med.(train_ratio.(:real, :jit)) <= 1.5)} through `jit`
and #{verdict.(med.(train_ratio.(:real, :compile)) <= 1.5)} through `compile` in this run. Every run's loss at each hundredth step is
#{if loss_gap == 0, do: "equal to", else: "within #{:erlang.float_to_binary(loss_gap / 1, scientific: 1)} of"} its twin's. The real-Nx run's trace cache at its end:
#{cache.entries} entries of #{cache.size}, #{cache.traces} traces, #{cache.hits} hits,
#{cache.evictions} evictions.
"""

# (section 13 replaced in place; the sections around it, written by other commands, stay)
BenchSection.replace!(13, section)
IO.puts(section)
