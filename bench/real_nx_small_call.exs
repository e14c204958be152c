# The small call (`x * 2 + 1` on a scalar f32) under whichever Nx this build has: the
# clean room (`mix run bench/real_nx_small_call.exs`) or real Nx 0.7.2 with NxJax as its
# compiler (`NX_JAX_NX=_build/real-nx-src mix run bench/real_nx_small_call.exs`). Beside it,
# in the same VM and interleaved rounds, the worker's ping (no JAX) and, under real Nx, real
# Nx's evaluator: the ratio to the ping is what compares across the two builds on a noisy
# machine. Prints p50s in microseconds; nothing asserts a timing.
defmodule RealNxSmallCall do
  import Nx.Defn
  defn small(x), do: x * 2 + 1

  def rounds(rows, rounds, per_round) do
    for {_name, fun} <- rows, _ <- 1..50, do: fun.()

    samples =
      for _ <- 1..rounds, {name, fun} <- rows, _ <- 1..per_round, reduce: %{} do
        acc ->
          t0 = System.monotonic_time(:nanosecond)
          fun.()

          Map.update(
            acc,
            name,
            [System.monotonic_time(:nanosecond) - t0],
            &[System.monotonic_time(:nanosecond) - t0 | &1]
          )
      end

    for {name, _} <- rows do
      sorted = Enum.sort(samples[name])
      {name, Enum.at(sorted, div(length(sorted), 2)) / 1000}
    end
  end
end

real? =
  Code.ensure_loaded?(Nx.Defn.Compiler) and
    function_exported?(Nx.Defn.Compiler, :to_lazy_params, 2)

x = Nx.tensor(1.5)

rows =
  if real? do
    Nx.Defn.default_options(compiler: NxJax)
    evaluator = Nx.Defn.jit(&RealNxSmallCall.small/1, compiler: Nx.Defn.Evaluator)
    resident = Nx.backend_copy(x, NxJax.Backend)

    [
      {"small call, real Nx + NxJax", fn -> RealNxSmallCall.small(x) end},
      {"the same, resident in and out", fn -> RealNxSmallCall.small(resident) end},
      {"ping", fn -> NxJax.Worker.call(:ping, []) end},
      {"small call, real Nx's evaluator", fn -> evaluator.(x) end}
    ]
  else
    resident = Nx.backend_copy(x, NxJax.Backend)

    [
      {"small call, clean room", fn -> RealNxSmallCall.small(x) end},
      {"the same, resident in and out", fn -> RealNxSmallCall.small(resident) end},
      {"ping", fn -> NxJax.Worker.call(:ping, []) end}
    ]
  end

results = RealNxSmallCall.rounds(rows, 20, 100)
ping = Enum.find_value(results, fn {name, us} -> name == "ping" && us end)

for {name, us} <- results do
  IO.puts(
    String.pad_trailing(name, 34) <>
      "p50 #{Float.round(us, 1)} us  (#{Float.round(us / ping, 2)}x ping)"
  )
end
