# A paired check of one Elixir-side latency mechanism (NxJax.Worker.Config.mechanisms/0): two
# workers with it and two with `off: [name]`, interleaved in 20 rounds, quiet and beside a CPU
# hog; the small call (through the GenServer for `kept_alias`, the only calls it serves) and
# the training step of section 3 (its replies come after the caller's polling), p50 and the
# BEAM's CPU time per step (all schedulers). Prints its figures; writes no section.
#
#   mix run bench/mechanism_pairs.exs name [small_calls] [steps]
Code.require_file("lib.exs", __DIR__)

{name, n_small, n_steps} =
  case System.argv() do
    [name] -> {name, 20_000, 4_000}
    [name, a, b] -> {name, String.to_integer(a), String.to_integer(b)}
  end

mechanism = String.to_existing_atom(name)
[^mechanism] = NxJax.Worker.Config.mechanisms_off(off: [mechanism])
base = if mechanism == :kept_alias, do: [lend_port: false], else: []
x = Nx.tensor(1.5)

put_on = fn t, pid ->
  [{:ref, handle, guard}] = NxJax.Worker.put([{t.type, t.shape, Nx.to_binary(t)}], server: pid)
  %Nx.Tensor{t | data: %NxJax.Backend{worker: pid, handle: handle, guard: guard}}
end

xs = Nx.iota({64, 256}, type: :f32) |> Nx.remainder(17) |> Nx.subtract(8) |> Nx.divide(8)
ys = Nx.divide(Nx.iota({64, 1}, type: :f32), 64)
w1 = Nx.iota({256, 256}, type: :f32) |> Nx.remainder(13) |> Nx.subtract(6) |> Nx.divide(120)
w2 = Nx.iota({256, 1}, type: :f32) |> Nx.remainder(7) |> Nx.subtract(3) |> Nx.divide(60)

variants = [
  on_a: base,
  off_a: [off: [mechanism]] ++ base,
  on_b: base,
  off_b: [off: [mechanism]] ++ base
]

started =
  for {row, opts} <- variants do
    {:ok, pid} = NxJax.Worker.start_link(opts)
    small = Nx.Defn.jit(&Bench.small/1, server: pid)
    small.(x)
    step = Nx.Defn.jit(&Bench.step/3, server: pid)
    {rx, ry} = {put_on.(xs, pid), put_on.(ys, pid)}
    Process.put({:bench_state, row}, step.({put_on.(w1, pid), put_on.(w2, pid)}, rx, ry))
    {row, fn -> small.(x) end, fn w -> step.(w, rx, ry) end}
  end

measure = fn label ->
  for {row, _, _} <- started, do: Bench.step_cpu(row)

  small =
    Bench.interleaved(for({row, f, _} <- started, do: {row, &Bench.samples(&1, f)}), n_small, 20)

  train =
    Bench.interleaved(
      for({row, _, s} <- started, do: {row, &Bench.resident_steps(row, s, &1)}),
      n_steps,
      20
    )

  load = File.read!("/proc/loadavg") |> String.split() |> Enum.take(3) |> Enum.join(" ")

  for {row, _, _} <- started do
    {ms, n} = Bench.step_cpu(row)

    IO.puts(
      "#{label} (load #{load}) #{row}: small call p50 #{Float.round(small[row].p50, 1)} us; " <>
        "training step p50 #{Float.round(train[row].p50, 0)} us, BEAM CPU " <>
        "#{Float.round(ms * 1000 / n, 0)} us/step"
    )
  end
end

IO.puts(
  "#{mechanism}: on_* with it, off_* with off: [#{inspect(mechanism)}]#{if base != [], do: ", all with #{inspect(base)}"}"
)

measure.("quiet")

hog =
  Port.open({:spawn_executable, Bench.python()}, [:binary, {:args, ["-c", "while True: pass"]}])

Process.sleep(500)
measure.("hog")
Bench.close_port(hog)
