# A served MLP under real Nx 0.7.2 (Nx.Serving is real Nx's, NxJax the compiler): requests per
# second and p50/p99 latency for 1, 8 and 64 concurrent clients, each sending one-row requests,
# served with batch_size 1 and 32, against the clients calling the jitted function directly;
# then the same serving on a second BEAM node reached through Nx.Serving's `:pg` group. Writes
# section 14 of docs/BENCHMARKS.md.
#
#     NX_JAX_NX=_build/real-nx-src mix run --no-start bench/serving.exs [ROUNDS] [SECONDS]
#
# (`make bench-serving`: 2 rounds of 1 s per configuration.) This node runs a pool of 2
# workers, and each serving `partitions: true` (one partition per worker); the direct calls are
# placed on the same 2 workers. The second node (`:peer`, this node's code paths) runs nx_jax
# with a pool of its own, also of 2 workers.

Code.require_file("section.exs", __DIR__)

{rounds, seconds} =
  case Enum.map(System.argv(), &String.to_integer/1) do
    [r, s] -> {r, s}
    [r] -> {r, 1}
    [] -> {2, 1}
  end

batch_timeout_ms = 2

Application.put_env(:nx_jax, :pool_size, 2)
{:ok, _} = Application.ensure_all_started(:nx_jax)
Nx.Defn.global_default_options(compiler: NxJax)

# The model and the serving, in a module compiled here and loaded on the other node too.
[{_, _} | _] =
  modules =
  Code.compile_string("""
  defmodule NxJax.Bench.ServedMLP do
    import Nx.Defn

    # a 784-128-10 MLP's inference, softmax at the end
    defn predict({w1, b1, w2, b2}, x) do
      logits = x |> Nx.dot(w1) |> Nx.add(b1) |> Nx.max(0) |> Nx.dot(w2) |> Nx.add(b2)
      exp = Nx.exp(logits - Nx.reduce_max(logits, axes: [1], keep_axes: true))
      exp / Nx.sum(exp, axes: [1], keep_axes: true)
    end

    def params do
      w1 = Nx.iota({784, 128}, type: :f32) |> Nx.multiply(0.001) |> Nx.sin() |> Nx.multiply(0.05)
      b1 = Nx.iota({128}, type: :f32) |> Nx.multiply(0.001)
      w2 = Nx.iota({128, 10}, type: :f32) |> Nx.multiply(0.01) |> Nx.cos() |> Nx.multiply(0.1)
      b2 = Nx.iota({10}, type: :f32) |> Nx.multiply(0.01)
      {w1, b1, w2, b2}
    end

    # the batch as it comes, not padded (Nx.Batch.pad/2 costs milliseconds on the binary
    # backend): each batch size is traced once and compiled once per worker, before the clock
    # runs (warm/1). `fun` is made once, so that every jit of it shares its traces.
    def serving(fun), do: Nx.Serving.new(fn opts -> Nx.Defn.jit(fun, opts) end)

    def warm(fun, batch_size) do
      for index <- 0..(NxJax.Pool.size() - 1), rows <- 1..batch_size do
        x = Nx.iota({rows, 784}, type: :f32)
        Nx.Defn.jit(fun, compiler: NxJax, server: NxJax.Pool.name(index)).(x)
      end

      :ok
    end

    def start_serving(name, fun, batch_size, batch_timeout) do
      Nx.Serving.start_link(
        serving: serving(fun),
        name: name,
        batch_size: batch_size,
        batch_timeout: batch_timeout,
        partitions: true
      )
    end

    # on another node: a serving that lives as long as `parent`
    def serve_for(parent, name, params, batch_size, batch_timeout) do
      fun = &predict(params, &1)
      :ok = warm(fun, batch_size)
      {:ok, _} = start_serving(name, fun, batch_size, batch_timeout)
      ref = Process.monitor(parent)

      receive do
        {:DOWN, ^ref, _, _, _} -> :ok
      end
    end
  end
  """)

alias NxJax.Bench.ServedMLP
params = ServedMLP.params()

row = fn i ->
  Nx.iota({1, 784}, type: :f32) |> Nx.add(i) |> Nx.multiply(0.01) |> Nx.sin()
end

# `clients` processes, each sending one-row requests through `call` until `seconds` have
# passed: the requests per second over all of them and the latency of each request (us)
measure = fn clients, call ->
  deadline = System.monotonic_time(:microsecond) + seconds * 1_000_000
  start = System.monotonic_time(:microsecond)

  tasks =
    for c <- 1..clients do
      Task.async(fn ->
        x = row.(c)

        Stream.repeatedly(fn ->
          t0 = System.monotonic_time(:microsecond)
          call.(x)
          t1 = System.monotonic_time(:microsecond)
          {t1 - t0, t1}
        end)
        |> Enum.reduce_while([], fn {us, t1}, acc ->
          if t1 >= deadline, do: {:halt, [us | acc]}, else: {:cont, [us | acc]}
        end)
      end)
    end

  latencies = tasks |> Task.await_many(:infinity) |> List.flatten()
  elapsed = System.monotonic_time(:microsecond) - start
  sorted = Enum.sort(latencies)
  n = length(sorted)

  %{
    rps: n / (elapsed / 1_000_000),
    p50: Enum.at(sorted, div(n, 2)),
    p99: Enum.at(sorted, min(n - 1, trunc(n * 0.99))),
    n: n
  }
end

# the checks that each way computes what the direct call does
expected = Nx.Defn.jit_apply(&ServedMLP.predict/2, [params, row.(1)], compiler: Nx.Defn.Evaluator)

check! = fn result, what ->
  unless Nx.to_number(Nx.all_close(result, expected, atol: 1.0e-5)) == 1 do
    raise "#{what} gave #{inspect(result)}, expected #{inspect(expected)}"
  end
end

fun = &ServedMLP.predict(params, &1)
:ok = ServedMLP.warm(fun, 32)
direct = Nx.Defn.jit(fun, compiler: NxJax)
check!.(direct.(row.(1)), "the direct call")

servings =
  for batch_size <- [1, 32], into: %{} do
    name = :"served_mlp_#{batch_size}"
    {:ok, pid} = ServedMLP.start_serving(name, fun, batch_size, batch_timeout_ms)
    batched = fn x -> Nx.Serving.batched_run(name, Nx.Batch.concatenate([x])) end
    Task.await_many(for _ <- 1..8, do: Task.async(fn -> check!.(batched.(row.(1)), name) end))
    {batch_size, {pid, batched}}
  end

ways = [
  {"direct", direct},
  {"direct, a new process per call",
   fn x -> Task.async(fn -> direct.(x) end) |> Task.await(:infinity) end},
  {"serving, batch_size 1", elem(servings[1], 1)},
  {"serving, batch_size 32", elem(servings[32], 1)}
]

client_counts = [1, 8, 64]
load = fn -> File.read!("/proc/loadavg") |> String.split(" ") |> hd() end
load_before = load.()

local =
  for round <- 1..rounds do
    order = if rem(round, 2) == 1, do: ways, else: Enum.reverse(ways)

    for clients <- client_counts, {way, call} <- order, into: %{} do
      result = measure.(clients, call)

      IO.puts(
        "round #{round}, #{clients} clients, #{way}: #{round(result.rps)} req/s, " <>
          "p50 #{result.p50} us, p99 #{result.p99} us"
      )

      {{clients, way}, result}
    end
  end

# (Nx.Serving's group holds every serving of every node, whatever its name, and
# {:distributed, name} tries members at random: the servings above stop first)
for {_batch_size, {pid, _}} <- servings, do: Supervisor.stop(pid)

# --- the serving on a second node ---------------------------------------------------------
{"", 0} = System.cmd("epmd", ["-daemon"])

Enum.find(1..100, fn _ ->
  match?({:ok, _}, :erl_epmd.names({127, 0, 0, 1})) or (Process.sleep(100) && false)
end) || raise "epmd did not start"

{:ok, _} = Node.start(:"bench_serving_primary@127.0.0.1", :longnames)

{:ok, peer_pid, peer} =
  :peer.start(%{
    name: :"bench_serving_secondary@127.0.0.1",
    args: [~c"-setcookie", Atom.to_charlist(Node.get_cookie())]
  })

true = :erpc.call(peer, :code, :set_path, [:code.get_path()])

for {key, value} <- Application.get_all_env(:nx_jax) do
  :ok = :erpc.call(peer, Application, :put_env, [:nx_jax, key, value])
end

{:ok, _} = :erpc.call(peer, Application, :ensure_all_started, [:nx_jax], 120_000)
:erpc.call(peer, Nx.Defn, :global_default_options, [[compiler: NxJax]])

for {module, binary} <- modules do
  {:module, ^module} = :erpc.call(peer, :code, :load_binary, [module, ~c"nofile", binary])
end

remote_name = :served_mlp_remote
# (Nx.Serving's scope tells this process when the other node's serving joins its group)
_ = :pg.monitor_scope(Nx.Serving.PG)
Node.spawn(peer, ServedMLP, :serve_for, [self(), remote_name, params, 32, batch_timeout_ms])

receive do
  {_, :join, Nx.Serving, _} -> :ok
after
  60_000 -> raise "the serving on #{peer} did not join Nx.Serving's group"
end

remote = fn x ->
  Nx.Serving.batched_run({:distributed, remote_name}, Nx.Batch.concatenate([x]))
end

Task.await_many(
  for(_ <- 1..8, do: Task.async(fn -> check!.(remote.(row.(1)), "the remote serving") end)),
  60_000
)

# `call` measured with the name also served on this node (a local lookup finds it first;
# {:distributed, name} picks any member of the group at random, one entry per partition)
served_here = fn clients, call ->
  {:ok, pid} = ServedMLP.start_serving(remote_name, fun, 32, batch_timeout_ms)
  nodes = Nx.Serving.PG |> :pg.get_members(Nx.Serving) |> Enum.map(&node/1) |> Enum.uniq()
  true = length(nodes) == 2
  Task.await_many(for _ <- 1..8, do: Task.async(fn -> check!.(call.(row.(1)), "served here") end))
  result = measure.(clients, call)
  Supervisor.stop(pid)
  result
end

local_name = fn x -> Nx.Serving.batched_run(remote_name, Nx.Batch.concatenate([x])) end

dist_ways = [
  {"this node", fn clients -> served_here.(clients, local_name) end},
  {"the other node", fn clients -> measure.(clients, remote) end},
  {"both nodes", fn clients -> served_here.(clients, remote) end}
]

distributed =
  for round <- 1..rounds do
    for clients <- [8, 64], {way, how} <- dist_ways, into: %{} do
      result = how.(clients)

      IO.puts(
        "round #{round}, #{clients} clients, #{way} (batch_size 32): #{round(result.rps)} req/s, " <>
          "p50 #{result.p50} us, p99 #{result.p99} us"
      )

      {{clients, way}, result}
    end
  end

load_after = load.()
traces = NxJax.trace_cache_stats()
:peer.stop(peer_pid)

# --- section 14 of docs/BENCHMARKS.md -------------------------------------------------------
ms = fn us -> :erlang.float_to_binary(us / 1000, decimals: 2) end

cpu =
  with {:ok, text} <- File.read("/proc/cpuinfo"),
       [_, name] <- Regex.run(~r/model name\s*:\s*(.+)/, text) do
    "#{name}, #{System.schedulers_online()} cores"
  else
    _ -> "unknown CPU"
  end

# one cell: requests per second (and its ratio to `base`, the same round's), p50 / p99 in ms
cell = fn result, base ->
  ratio =
    if base, do: " (#{:erlang.float_to_binary(result.rps / base.rps, decimals: 2)}x)", else: ""

  "#{round(result.rps)}#{ratio}, #{ms.(result.p50)} / #{ms.(result.p99)}"
end

round_headers = Enum.map_join(1..rounds, " | ", &"round #{&1}")
round_rules = Enum.map_join(1..rounds, " | ", fn _ -> "---" end)

local_rows =
  for clients <- client_counts, {way, _} <- ways do
    cells =
      Enum.map_join(local, " | ", fn round ->
        base = if way == "direct", do: nil, else: round[{clients, "direct"}]
        cell.(round[{clients, way}], base)
      end)

    "| #{clients} | #{way} | #{cells} |"
  end

dist_rows =
  for clients <- [8, 64], {way, _} <- dist_ways do
    cells =
      Enum.map_join(distributed, " | ", fn round ->
        base = if way == "this node", do: nil, else: round[{clients, "this node"}]
        cell.(round[{clients, way}], base)
      end)

    "| #{clients} | #{way} | #{cells} |"
  end

# the reading of the tables: each ratio's values over the rounds
ratios = fn list, clients, way, base ->
  list
  |> Enum.map(
    &:erlang.float_to_binary(&1[{clients, way}].rps / &1[{clients, base}].rps, decimals: 2)
  )
  |> Enum.join(", ")
end

reading = """
Read within each round: with 64 clients the batching serving (`batch_size: 32`) serves
#{ratios.(local, 64, "serving, batch_size 32", "direct")} times the requests per second of the
direct calls; with one client it waits for its batch to fill (up to the `batch_timeout`) and
serves #{ratios.(local, 1, "serving, batch_size 32", "direct")} times as many. `batch_size: 1`
serves #{ratios.(local, 8, "serving, batch_size 1", "direct, a new process per call")} times as many as `direct, a new process per call` with 8 clients:
most of its distance from `direct` is the cost of a call made by a new process, which has no
trace of its own remembered (`NxJax.TraceCache`) and looks the trace up by its key, the
jitted closure with its 400 KB of captured weights (#{ratios.(local, 1, "direct, a new process per call", "direct")} times the direct
calls' requests per second with one client). The other node's serving, reached through `:pg`,
served #{ratios.(distributed, 64, "the other node", "this node")} times this node's with 64
clients; both nodes together #{ratios.(distributed, 64, "both nodes", "this node")} times (the
two nodes' four workers share two cores).
"""

{date, _} = :calendar.local_time()
{y, m, d} = date
today = :io_lib.format("~4..0B-~2..0B-~2..0B", [y, m, d]) |> to_string()

section = """
## 14. Serving a model: Nx.Serving under real Nx 0.7.2, NxJax the compiler

`make bench-serving` (`NX_JAX_NX=_build/real-nx-src mix run --no-start bench/serving.exs
#{rounds} #{seconds}`) writes this section. #{cpu}, #{today}; the host is shared (load average
#{load_before} at the start, #{load_after} at the end): its figures move from run to run, so
compare the ratios within one round, not figures across runs.

A 784-128-10 MLP's inference (f32, softmax), its weights captured by the jitted function. Each
client is a process sending one-row requests (`{1, 784}`) back to back for #{seconds} s; a cell
is the requests per second over all clients (in parentheses, over the direct call's in the same
round), then the p50 / p99 latency of a request in ms. `direct`: each client calls the jitted
function itself (`Nx.Defn.jit(fun, compiler: NxJax)`, placed on the least busy worker);
`direct, a new process per call`: the same, each call made by a new process, as Nx.Serving
makes each batch's call in a task of its own.
`serving, batch_size n`: `Nx.Serving.batched_run/2` on a serving of the same function
(`Nx.Serving.new/1` with `Nx.Defn.jit/2`), `batch_size: n`, `batch_timeout: #{batch_timeout_ms}` (ms),
`partitions: true`: one partition per worker of this node's pool of 2. Batches are not padded
(`Nx.Batch.pad/2` took about 4 ms here on the binary backend, for a batch of one row padded to
32): each batch size from 1 to 32 was traced and compiled on both workers before the clock ran,
and every way checked against real Nx's evaluator.

| clients | way | #{round_headers} |
| --- | --- | #{round_rules} |
#{Enum.join(local_rows, "\n")}

The same serving (`batch_size: 32`) on a second BEAM node on this machine (`:peer`, nx_jax
with its own pool of 2 workers), reached with `Nx.Serving.batched_run({:distributed, name},
batch)` through Nx.Serving's `:pg` group; `both nodes`: the name served on both, each request
going to a partition of either at random. In parentheses, over `this node` (the local serving,
`batch_size: 32`) in the same round. Both nodes share the machine's #{System.schedulers_online()} cores.

| clients | serving on | #{round_headers} |
| --- | --- | #{round_rules} |
#{Enum.join(dist_rows, "\n")}

#{String.trim_trailing(reading)}

This node's trace cache at the end (`NxJax.trace_cache_stats/0`): #{traces.traces} traces (the
batch sizes, and the checks' shapes), #{traces.hits} hits.
"""

# (section 14 replaced in place; the sections around it, written by other commands, stay)
BenchSection.replace!(14, section)
IO.puts(section)
