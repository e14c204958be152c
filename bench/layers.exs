# Where the small call's time goes, one layer of the client at a time: the same scalar call
# made through more and more of nx_jax, quiet and with the BEAM and every Python process on one
# CPU and a CPU-bound process on the other (what a CPU hog beside the benchmark brings about on a
# 2-core machine, made steady with taskset). Every row is its own Python process; all rows in
# interleaved rounds.
#
#   mix run bench/layers.exs [calls]        (make bench-layers; the co-located half needs Linux,
#                                             taskset and 2 or more CPUs)
#
# Prints a markdown table; no section of docs/BENCHMARKS.md regenerates it (the runs of
# 2026-12-05 are in git: `git show 19d163f:docs/BENCHMARKS.md`, "Where the small call's time goes beside a
# CPU hog, layer by layer").
Code.require_file("lib.exs", __DIR__)

n = with [a] <- System.argv(), do: String.to_integer(a), else: (_ -> 3000)

Bench.restart_pool(1)
x = Nx.tensor(1.5)
Bench.small(x)
{graph, key} = Bench.small_graph()
wire_x = {{:f, 32}, {}, Nx.to_binary(x)}
args = NxJax.Wire.small_body([wire_x])
spin = Integer.to_string(NxJax.Worker.spin_us())

# our Python worker on a port of this script's own: the request frames NxJax.Worker sends, no
# GenServer, no lent port, the caller polling as the baseline's does
raw =
  Port.open({:spawn_executable, Bench.python()}, [
    {:packet, 4},
    :binary,
    :nouse_stdio,
    {:args, ["-m", "py_backend", "--spin-us", spin]},
    {:cd, NxJax.Worker.Sources.project_root()},
    {:env, for({k, v} <- NxJax.Worker.Sources.env(), do: {to_charlist(k), to_charlist(v)})}
  ])

ids = :counters.new(1, [])

raw_call = fn graph_or_nil ->
  :counters.add(ids, 1, 1)
  id = :counters.get(ids, 1)
  true = Port.command(raw, NxJax.Wire.graph_call_frame(id, key, graph_or_nil, args, false))
  {^id, {:ok, [{{:f, 32}, {}, <<_::32>>}]}} = NxJax.Wire.decode_reply(Bench.await_polling(raw))
end

raw_call.(graph)

floor = Bench.open_port("bench/jax_echo.py", ["--spin-us", spin])
<<_::32>> = Bench.port_call(floor, <<1.5::float-32-little>>)
{:ok, api_worker} = NxJax.Worker.start_link([])
{:ok, defn_worker} = NxJax.Worker.start_link([])
defn = Nx.Defn.jit(&Bench.small/1, server: defn_worker)
defn.(x)
[_] = NxJax.Worker.run_cached(key, graph, [wire_x], false, server: api_worker)

rows = [
  floor:
    {"floor: `bench/jax_echo.py` (raw port and the jitted call), caller polling",
     fn -> <<_::32>> = Bench.port_call_polling(floor, <<1.5::float-32-little>>) end},
  raw:
    {"our Python worker, the request frame written and its reply read by this script",
     fn -> raw_call.(nil) end},
  api:
    {"`NxJax.Worker.run_cached/5` (lent port, reply polling, retries, checks)",
     fn -> NxJax.Worker.run_cached(key, graph, [wire_x], false, server: api_worker) end},
  defn:
    {"the jitted defn, `Nx.Defn.jit(&Bench.small/1).(x)` (the small call of section 1)",
     fn -> defn.(x) end}
]

os_pids = [
  System.pid(),
  elem(Port.info(raw, :os_pid), 1),
  elem(Port.info(floor, :os_pid), 1),
  NxJax.Worker.Caller.local(api_worker).os_pid,
  NxJax.Worker.Caller.local(defn_worker).os_pid
]

measure = fn ->
  for {_, {_, f}} <- rows, _ <- 1..200, do: f.()
  Bench.interleaved(for({name, {_, f}} <- rows, do: {name, &Bench.samples(&1, f)}), n, 10)
end

quiet = measure.()

colocated = Bench.colocated(os_pids, measure)

f = fn v -> :erlang.float_to_binary(v / 1, decimals: 1) end

layer = fn rows, name, prev ->
  if prev do
    d = rows[name].p50 - rows[prev].p50
    if d >= 0, do: "+" <> f.(d), else: f.(d)
  else
    ""
  end
end

prev = Enum.zip(Keyword.keys(rows), [nil | Keyword.keys(rows)])

table =
  for {name, before} <- prev do
    {label, _} = rows[name]
    q = "#{f.(quiet[name].p50)} | #{layer.(quiet, name, before)}"

    c =
      if colocated,
        do: "#{f.(colocated[name].p50)} | #{layer.(colocated, name, before)}",
        else: "- | -"

    "| #{label} | #{q} | #{c} |"
  end

{:ok, now} = DateTime.now("Etc/UTC")

IO.puts("""
`mix run bench/layers.exs #{n}` (`make bench-layers`), #{Calendar.strftime(now, "%Y-%m-%d %H:%M")} UTC, #{Bench.cpu_model()}, #{System.schedulers_online()} cores.
p50 in us, #{n} calls per row in 10 interleaved rounds; "layer" is the row minus the row above.
Co-located: the BEAM and every Python process pinned to CPU 0, a CPU-bound process to CPU 1.

| small call through | quiet p50 | layer | co-located p50 | layer |
| --- | --- | --- | --- | --- |
#{Enum.join(table, "\n")}
""")

Bench.close_port(raw)
Bench.close_port(floor)
