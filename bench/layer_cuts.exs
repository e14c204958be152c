# The small call entered at each boundary of the Elixir client, from the lent port's own steps
# up to the jitted defn, quiet and co-located (the BEAM and every Python process on CPU 0, a
# CPU-bound process on CPU 1, as bench/layers.exs does); with three probes that add known work
# to the bare round trip, to see what kind of work grows when the CPU is shared. Every row that
# calls a worker has a worker of its own; all rows in interleaved rounds.
#
#   mix run bench/layer_cuts.exs [calls]      (the co-located half needs Linux, taskset, 2 CPUs)
#
# The "lent round trip" row takes its worker's port through the lent-port steps alone (lock,
# request id, connect, write, poll, connect back, unlock), skipping the protocol's counters and
# checks: safe here because nothing else calls that worker. No section of docs/BENCHMARKS.md
# regenerates its table; the runs of 2026-12-05 are in git (`git show 19d163f:docs/BENCHMARKS.md`, "The client's
# layers on a shared CPU, cut one by one").
Code.require_file("lib.exs", __DIR__)

n = with [a] <- System.argv(), do: String.to_integer(a), else: (_ -> 4000)

Bench.restart_pool(1)
x = Nx.tensor(1.5)
Bench.small(x)
{graph, key} = Bench.small_graph()
wire_x = {{:f, 32}, {}, Nx.to_binary(x)}
body = NxJax.Wire.small_body([wire_x])

workers =
  for name <- [:bare, :wait, :lent, :api, :run, :defn], into: %{} do
    {:ok, pid} = NxJax.Worker.start_link([])
    [_] = NxJax.Worker.run_cached(key, graph, [wire_x], false, server: pid)
    {name, pid}
  end

local = fn name -> NxJax.Worker.Caller.local(workers[name]) end
limits = {NxJax.Worker.default_timeout(), NxJax.Worker.reply_spin_us()}

# the lock and the request-id counter of the lent port's atomics (NxJax.Worker.Lease, "The lock")
lent_round_trip = fn name, wait ->
  %{me: me, lend: lend, port: port, keeper: keeper} = l = local.(name)

  fn ->
    :ok = :atomics.compare_exchange(lend, 1, 0, me)
    id = :atomics.add_get(lend, 2, 1)
    send(port, {keeper, {:connect, self()}})
    true = Port.command(port, NxJax.Wire.graph_call_frame(id, key, nil, body, false))

    {:ok, [_]} =
      if wait,
        do:
          NxJax.Worker.Caller.wait_reply(
            port,
            workers[name],
            limits,
            0,
            nil,
            {id, l.os_pid, lend}
          ),
        else: port |> Bench.await_polling() |> NxJax.Wire.fast_reply(id) |> elem(1)

    :erlang.port_connect(port, keeper)
    :ok = :atomics.compare_exchange(lend, 1, me, 0)
  end
end

bare = lent_round_trip.(:bare, false)
message = {:graph_call, key, graph, body, false, self()}
lent_local = local.(:lent)
{:graph, compiled, _, _, templates, hooks} = Bench.small_trace()
run_opts = Keyword.merge(Nx.Defn.default_options(), server: workers.run)
defn = Nx.Defn.jit(&Bench.small/1, server: workers.defn)
defn.(x)

# probes: a short arithmetic loop; one call into each of 20 modules of 200 functions each;
# encoding the argument as the client does (Nx.to_binary/1 and one term_to_binary)
modules =
  for i <- 1..20 do
    name = Module.concat(LayerCutsProbe, "M#{i}")

    defs =
      for j <- 1..200,
          do: quote(do: def(unquote(:"g#{j}")(x), do: {x, unquote(j), x * 2, [x]}))

    contents =
      quote do
        def f(x), do: x + unquote(i)
        unquote_splicing(defs)
      end

    Module.create(name, contents, Macro.Env.location(__ENV__))

    name
  end

rows = [
  bare: {"the lent round trip alone (lock, connect, write, poll, connect back, unlock)", bare},
  wait:
    {"... waiting with `Caller.wait_reply/6` instead of a bare poll",
     lent_round_trip.(:wait, true)},
  lent:
    {"`LentPort.call/4` (its checks and counters, give back, forwarding)",
     fn ->
       wait = &NxJax.Worker.Caller.wait_reply(&1, workers.lent, limits, 0, nil, &2)
       {:ok, [_]} = NxJax.Worker.LentPort.call(workers.lent, lent_local, message, wait)
     end},
  api:
    {"`NxJax.Worker.run_cached/5` (options, size check, hook choice)",
     fn -> [_] = NxJax.Worker.run_cached(key, graph, [wire_x], false, server: workers.api) end},
  run:
    {"`NxJax.__run__/5` (pool, wire form of the arguments, results as tensors)",
     fn -> NxJax.__run__(compiled, [x], templates, hooks, run_opts) end},
  defn:
    {"the jitted defn (`Nx.Defn.Compiler`: options, trace cache, signature)", fn -> defn.(x) end},
  loop:
    {"probe: the lent round trip + a 300-step arithmetic loop",
     fn -> bare.() && Enum.reduce(1..300, 0, &(&1 + &2)) end},
  modules:
    {"probe: the lent round trip + one call into each of 20 modules",
     fn -> bare.() && Enum.reduce(modules, 0, & &1.f(&2)) end},
  encode:
    {"probe: the lent round trip + encoding the argument",
     fn -> bare.() && NxJax.Wire.small_body([{{:f, 32}, {}, Nx.to_binary(x)}]) end}
]

measure = fn ->
  for {_, {_, f}} <- rows, _ <- 1..200, do: f.()
  Bench.interleaved(for({name, {_, f}} <- rows, do: {name, &Bench.samples(&1, f)}), n, 10)
end

quiet = measure.()
os_pids = [System.pid() | for({_, pid} <- workers, do: NxJax.Worker.Caller.local(pid).os_pid)]
colocated = Bench.colocated(os_pids, measure)

f = fn v -> :erlang.float_to_binary(v / 1, decimals: 1) end
d = fn v -> if v >= 0, do: "+" <> f.(v), else: f.(v) end
layers = [:bare, :wait, :lent, :api, :run, :defn]

table =
  for {name, {label, _}} <- rows do
    # a layer row's step is over the row above; a probe's over the bare round trip
    base =
      if name in layers,
        do: Enum.at(layers, max(Enum.find_index(layers, &(&1 == name)) - 1, 0)),
        else: :bare

    step = fn m -> if name == :bare, do: "", else: d.(m[name].p50 - m[base].p50) end
    c = if colocated, do: "#{f.(colocated[name].p50)} | #{step.(colocated)}", else: "- | -"
    "| #{label} | #{f.(quiet[name].p50)} | #{step.(quiet)} | #{c} |"
  end

{:ok, now} = DateTime.now("Etc/UTC")

IO.puts("""
`mix run bench/layer_cuts.exs #{n}`, #{Calendar.strftime(now, "%Y-%m-%d %H:%M")} UTC, #{Bench.cpu_model()}, #{System.schedulers_online()} cores.
p50 in us, #{n} calls per row in 10 interleaved rounds; "step": the row minus the row above
(a probe: minus the bare round trip).

| small call entered at | quiet | step | co-located | step |
| --- | --- | --- | --- | --- |
#{Enum.join(table, "\n")}
""")
