# Elixir-side breakdown of the small cached call (issue #4): `mix run bench/profile_small.exs`.
# Times each piece of the call path in isolation (mean over 10,000 iterations, best of 5) and
# the whole call against the ping. Not a test; nothing asserts a timing.
defmodule ProfileSmall do
  import Nx.Defn
  defn small(x), do: x * 2 + 1

  def mean_us(n \\ 10_000, fun) do
    for _ <- 1..200, do: fun.()

    Enum.min(
      for _ <- 1..5 do
        {t, _} = :timer.tc(fn -> for _ <- 1..n, do: fun.() end)
        t / n
      end
    )
  end

  def p50_us(n, fun) do
    for _ <- 1..200, do: fun.()

    samples =
      for _ <- 1..n do
        t0 = System.monotonic_time(:nanosecond)
        fun.()
        System.monotonic_time(:nanosecond) - t0
      end

    Enum.at(Enum.sort(samples), div(n, 2)) / 1000
  end
end

alias Nx.Defn.{Composite, Compiler}
x = Nx.tensor(1.5)
ProfileSmall.small(x)
args = [x]
{params, _} = Compiler.parameters(args)
wire = [NxJax.Backend.to_wire(x, NxJax.Worker)]

pieces = [
  {"Compiler.parameters/1 (to_concrete + Expr.parameter)", fn -> Compiler.parameters(args) end},
  {"signature key (Composite.traverse over params)",
   fn -> Composite.traverse(List.to_tuple(params), &{&1.type, &1.shape, &1.vectorized_axes}) end},
  {"signature walk (one map_reduce: to_concrete + {type, shape, axes})",
   fn ->
     Composite.map_reduce(List.to_tuple(args), [], fn leaf, acc ->
       t = Compiler.to_concrete(leaf)
       {{t.type, t.shape, t.vectorized_axes}, [t | acc]}
     end)
   end},
  {":persistent_term.get (miss key)", fn -> :persistent_term.get({Compiler, :nope}, nil) end},
  {"Nx.default_backend/0", fn -> Nx.default_backend() end},
  {"Pool.with_worker (no-op fun)", fn -> NxJax.Pool.with_worker(nil, fn s -> s end, []) end},
  {"to_wire(devectorize(x))",
   fn -> NxJax.Backend.to_wire(Nx.devectorize(x, keep_names: false), NxJax.Worker) end},
  {"Worker.encode_iodata(wire args)", fn -> NxJax.Wire.encode_iodata(wire) end},
  {"Composite.flatten_list + fill (rebuild)",
   fn -> Composite.fill(x, Composite.flatten_list([x])) end},
  {"Compiler.counters/0", fn -> Compiler.counters() end}
]

for {name, fun} <- pieces do
  us = :io_lib.format("~8.3f us", [ProfileSmall.mean_us(fun)])
  IO.puts(String.pad_trailing(name, 56) <> to_string(us))
end

for round <- 1..3 do
  small = ProfileSmall.p50_us(4000, fn -> ProfileSmall.small(x) end)
  ping = ProfileSmall.p50_us(4000, fn -> NxJax.Worker.call(:ping, []) end)

  IO.puts(
    "round #{round}: small p50 #{small} us, ping p50 #{ping} us, small - ping #{Float.round(small - ping, 1)} us"
  )
end

if System.get_env("EPROF") do
  :eprof.start()
  :eprof.profile([], fn -> for _ <- 1..2000, do: ProfileSmall.small(x) end)
  :eprof.analyze(:total)
  :eprof.stop()
end

if System.get_env("EPROF_SERVER") do
  server = Process.whereis(NxJax.Worker)
  :eprof.start()
  :eprof.start_profiling([server])
  for _ <- 1..2000, do: ProfileSmall.small(x)
  :eprof.stop_profiling()
  :eprof.analyze(:total)
  :eprof.start_profiling([server])
  for _ <- 1..2000, do: NxJax.Worker.call(:ping, [])
  :eprof.stop_profiling()
  :eprof.analyze(:total)
  :eprof.stop()
end

# Port-level split: time from the frame entering the worker's port to the reply leaving it
# (pipe + Python), per call, p50 over 2000 calls, for the ping and the small call.
if System.get_env("PORT_TRACE") do
  port = :sys.get_state(NxJax.Worker).port

  measure = fn fun ->
    :erlang.trace(port, true, [:send, :receive, {:tracer, self()}, :monotonic_timestamp])

    samples =
      for _ <- 1..2000 do
        fun.()

        t_in =
          receive do
            {:trace_ts, ^port, :receive, {_, {:command, _}}, t} -> t
          end

        receive do
          {:trace_ts, ^port, :send, {^port, {:data, _}}, _, t} -> t - t_in
        end
      end

    :erlang.trace(port, false, [:send, :receive])
    Enum.at(Enum.sort(samples), 1000) / 1000
  end

  IO.puts(
    "port in -> port out p50: small #{measure.(fn -> ProfileSmall.small(x) end)} us, " <>
      "ping #{measure.(fn -> NxJax.Worker.call(:ping, []) end)} us"
  )
end
