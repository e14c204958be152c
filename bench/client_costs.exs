# What the primitive steps of one borrowed small call cost the BEAM, each alone, quiet, in ns
# (no worker involved). No section of docs/BENCHMARKS.md regenerates it (the runs of 2026-12-05
# are in git: `git show 19d163f:docs/BENCHMARKS.md`, "What the Elixir client's layers are made of").
#
#   mix run bench/client_costs.exs [iterations]
n = with [a] <- System.argv(), do: String.to_integer(a), else: (_ -> 200_000)

# a port whose process writes nothing unless written to (`cat`, which exits when the port
# closes), owned (as a worker's port at rest) by a suspended keeper
port = Port.open({:spawn_executable, System.find_executable("cat")}, [:binary])
keeper = spawn(fn -> Process.sleep(:infinity) end)
:erlang.port_connect(port, keeper)
Process.unlink(port)
:erlang.suspend_process(keeper)

lend = :atomics.new(6, [])
known = :ets.new(:known, [:set, :public, read_concurrency: true])
key = :binary.copy(<<7>>, 24)
:ets.insert(known, {key})

time = fn fun ->
  for _ <- 1..1000, do: fun.()
  t0 = System.monotonic_time(:nanosecond)
  for _ <- 1..n, do: fun.()
  (System.monotonic_time(:nanosecond) - t0) / n
end

rows = [
  {"an empty function call (the loop's own cost)", fn -> :ok end},
  {"borrow and give back the port (a `{:connect, pid}` port message, then `:erlang.port_connect/2`)",
   fn ->
     send(port, {keeper, {:connect, self()}})
     :erlang.port_connect(port, keeper)
   end},
  {"the lock's five atomics operations",
   fn ->
     :atomics.get(lend, 3)
     :atomics.compare_exchange(lend, 1, 0, 7)
     :atomics.add_get(lend, 2, 1)
     :atomics.put(lend, 5, 1)
     :atomics.compare_exchange(lend, 1, 7, 0)
   end},
  {"`:ets.member/2` of a 24-byte graph key", fn -> :ets.member(known, key) end},
  {"two `System.monotonic_time(:microsecond)`",
   fn ->
     System.monotonic_time(:microsecond)
     System.monotonic_time(:microsecond)
   end},
  {"`GenServer.whereis/1` of a name", fn -> GenServer.whereis(NxJax.Worker) end},
  {"`Application.get_env/3`", fn -> Application.get_env(:nx_jax, :default_defn_options, []) end},
  {"`:persistent_term.get/2`", fn -> :persistent_term.get({Nx.Defn.Compiler, :runtime}, nil) end}
]

IO.puts("| step | ns per call |\n| --- | --- |")

for {label, fun} <- rows,
    do: IO.puts("| #{label} | #{:erlang.float_to_binary(time.(fun), decimals: 0)} |")

Port.close(port)
