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

defmodule TrainLoop do
  import Nx.Defn

  @b1 0.9
  @b2 0.999
  @lr 1.0e-3
  @eps 1.0e-8

  defn loss({w1, c1, w2, c2}, x, y) do
    h = Nx.max(Nx.dot(x, w1) + c1, 0.0)
    logits = Nx.dot(h, w2) + c2
    shifted = logits - Nx.reduce_max(logits, axes: [1], keep_axes: true)
    logp = shifted - Nx.log(Nx.sum(Nx.exp(shifted), axes: [1], keep_axes: true))
    -Nx.mean(Nx.sum(y * logp, axes: [1]))
  end

  defn step({params, m, v, t}, x, y) do
    {loss, g} = value_and_grad(params, &loss(&1, x, y))
    t = t + 1
    tf = Nx.as_type(t, :f32)
    {p1, m1, v1} = adam(elem(params, 0), elem(g, 0), elem(m, 0), elem(v, 0), tf)
    {p2, m2, v2} = adam(elem(params, 1), elem(g, 1), elem(m, 1), elem(v, 1), tf)
    {p3, m3, v3} = adam(elem(params, 2), elem(g, 2), elem(m, 2), elem(v, 2), tf)
    {p4, m4, v4} = adam(elem(params, 3), elem(g, 3), elem(m, 3), elem(v, 3), tf)
    {{{p1, p2, p3, p4}, {m1, m2, m3, m4}, {v1, v2, v3, v4}, t}, loss}
  end

  defnp adam(p, g, m, v, tf) do
    m = @b1 * m + (1 - @b1) * g
    v = @b2 * v + (1 - @b2) * g * g
    mhat = m / (1 - @b1 ** tf)
    vhat = v / (1 - @b2 ** tf)
    {p - @lr * mhat / (Nx.sqrt(vhat) + @eps), m, v}
  end

  # the formulas of bench/train_loop.py's initial/1
  def grid(rows, cols, mod, scale) do
    Nx.iota({rows, cols}, type: :s64)
    |> Nx.remainder(mod)
    |> Nx.subtract(div(mod, 2))
    |> Nx.multiply(scale)
    |> Nx.as_type(:f32)
  end

  def initial do
    params =
      {grid(784, 128, 13, 0.01), Nx.broadcast(0.0, {128}), grid(128, 10, 7, 0.05),
       Nx.broadcast(0.0, {10})}

    zeros = Nx.Defn.Composite.traverse(params, &Nx.multiply(&1, 0.0))
    state = {params, zeros, zeros, Nx.tensor(0, type: :s32)}

    batches =
      for b <- 0..3 do
        x =
          Nx.iota({128, 784}, type: :s64)
          |> Nx.multiply(b + 3)
          |> Nx.remainder(255)
          |> Nx.as_type(:f32)
          |> Nx.divide(255)

        labels = Nx.iota({128}, type: :s64) |> Nx.multiply(b + 1) |> Nx.remainder(10)
        y = Nx.equal(Nx.new_axis(labels, 1), Nx.iota({1, 10}, type: :s64)) |> Nx.as_type(:f32)
        {x, y}
      end

    {state, batches}
  end

  @doc """
  Runs `steps` steps in a process of its own (as a user's loop would be): each step's time in
  us, every 100th loss, the worker's `{step, rss_mb, resident}` at `probe_at` steps, and the
  CPU seconds the worker and this VM used per step.
  """
  def run(steps, opts \\ []) do
    Task.async(fn -> loop(steps, opts) end) |> Task.await(:infinity)
  end

  defp loop(steps, opts) do
    Nx.default_backend(NxJax.Backend)
    probe_at = Keyword.get(opts, :probe_at, [])
    step = Nx.Defn.jit(&step/3, Keyword.take(opts, [:donate]))
    {state, batches} = initial()
    state = Nx.backend_transfer(state, NxJax.Backend)
    batches = batches |> Enum.map(&Nx.backend_transfer(&1, NxJax.Backend)) |> List.to_tuple()
    [worker] = NxJax.Pool.workers()
    os_pid = NxJax.Worker.os_pid(worker)
    # (the first steps compile: not counted)
    state =
      Enum.reduce(0..19, state, fn i, s ->
        {x, y} = elem(batches, rem(i, 4))
        elem(step.(s, x, y), 0)
      end)

    cpu0 = {Bench.cpu_s(os_pid), Bench.cpu_s(System.pid())}

    {_state, times, losses, probes} =
      Enum.reduce(1..steps, {state, [], [], []}, fn i, {state, times, losses, probes} ->
        {x, y} = elem(batches, rem(i, 4))
        t0 = System.monotonic_time(:nanosecond)
        {state, loss} = step.(state, x, y)
        value = Nx.to_number(loss)
        us = (System.monotonic_time(:nanosecond) - t0) / 1000
        losses = if rem(i, 100) == 0, do: [value | losses], else: losses
        probes = if i in probe_at, do: [{i, probe(worker)} | probes], else: probes
        {state, [us | times], losses, probes}
      end)

    {worker_cpu, vm_cpu} = cpu0

    %{
      times: Enum.reverse(times),
      losses: Enum.reverse(losses),
      probes: Enum.reverse(probes),
      worker_cpu_us: (Bench.cpu_s(os_pid) - worker_cpu) / steps * 1.0e6,
      vm_cpu_us: (Bench.cpu_s(System.pid()) - vm_cpu) / steps * 1.0e6
    }
  end

  defp probe(worker) do
    %{rss: rss} = NxJax.Worker.call(:memory, [false], server: worker)
    %{resident: resident} = NxJax.Worker.stats(server: worker)
    {Float.round(rss / 1_048_576, 1), resident}
  end

  @doc "The twin's run: each step's time, every 100th loss, its CPU per step (us)."
  def twin(mode, steps) do
    out = Bench.sh(Bench.python(), [Path.join(__DIR__, "train_loop.py"), mode, "#{steps}"])
    [_, list] = Regex.run(~r/"step_us": \[([^\]]*)\]/, out)
    [_, losses] = Regex.run(~r/"losses": \[([^\]]*)\]/, out)
    [_, cpu] = Regex.run(~r/"cpu_us": ([\d.e+-]+)/, out)
    %{times: floats(list), losses: floats(losses), cpu_us: String.to_float(cpu)}
  end

  defp floats(""), do: []
  defp floats(text), do: text |> String.split(", ") |> Enum.map(&String.to_float/1)

  @doc "A jitted chain of `ops` element-wise ops (multiply, add, sin) on 2 f32 values."
  def chain(ops) do
    fn x ->
      Enum.reduce(1..div(ops, 3), x, fn _, a -> Nx.sin(Nx.add(Nx.multiply(a, 1.0001), 0.5)) end)
    end
  end

  def p50(times), do: times |> Bench.percentiles() |> Map.fetch!(:p50)

  def medians(times), do: times |> Enum.chunk_every(100) |> Enum.map(&Float.round(p50(&1), 0))
end

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

Bench.restart_pool(1, modes[default_mode])
IO.puts("long run: #{long} steps")
probe_at = [1_000, div(long, 2), long] |> Enum.uniq() |> Enum.filter(&(&1 <= long))
long_run = TrainLoop.run(long, probe_at: probe_at)
IO.inspect(long_run.probes, label: "{step, {rss MB, resident}}")

# the worker's own handling of a step, in-process, the run taken out (bench/step_handling.py):
# the step's graph is the largest in the trace cache so far
{step_graph, _key} =
  for(
    {{Nx.Defn.Compiler, _, _}, {entry, _used}} <- :persistent_term.get(),
    is_tuple(entry) and elem(entry, 0) == :graph,
    do: elem(entry, 1)
  )
  |> Enum.max_by(fn {graph, _key} -> byte_size(graph) end)

graph_file = Path.join(System.tmp_dir!(), "nx_jax_bench_step_graph.etf")
File.write!(graph_file, step_graph)

handling =
  Bench.sh(Bench.python(), [Path.join(__DIR__, "step_handling.py"), graph_file, "#{rounds}"])
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
polling for the other's message (`spin_us: 0`, `reply_spin_us: 0`); target 1.3. CPU per
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

path = Path.join(Path.expand("..", __DIR__), "docs/BENCHMARKS.md")
old = File.read!(path)

kept =
  case :binary.match(old, "\n## 12. ") do
    {at, _} -> binary_part(old, 0, at)
    :nomatch -> String.trim_trailing(old)
  end

File.write!(path, kept <> "\n\n" <> section)
IO.puts(section)
