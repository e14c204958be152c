# What a jitted closure's captured values cost each call: closures of the same small graph
# capturing a tensor of 1, 1M and 10M f32 values that the graph does not use, and one whose
# graph uses a 1M-value capture. No section of docs/BENCHMARKS.md regenerates it (the runs of
# 2026-12-05 are in git: `git show 19d163f:docs/BENCHMARKS.md`, "A jitted closure's captured values, hashed
# at every call").
#
#   mix run bench/closure_capture.exs [calls]
Code.require_file("lib.exs", __DIR__)

n = with [a] <- System.argv(), do: String.to_integer(a), else: (_ -> 2000)
Bench.restart_pool(1)
x = Nx.tensor(1.5)

rows =
  for size <- [1, 1_000_000, 10_000_000] do
    big = Nx.iota({size}, type: :f32)
    # (the graph reads only the shape: the tensor stays a captured value)
    {"a capture of #{size} f32 values the graph does not use",
     Nx.Defn.jit(fn x -> if(big.shape == {0}, do: x, else: Nx.multiply(x, 2)) end)}
  end ++
    [
      {"a capture of 1000000 f32 values the graph uses (a constant of the graph)",
       (fn big -> Nx.Defn.jit(fn x -> Nx.add(x, Nx.sum(big)) end) end).(
         Nx.iota({1_000_000}, type: :f32)
       )}
    ]

got =
  Bench.interleaved(
    for({label, f} <- rows, do: {label, &Bench.samples(&1, fn -> f.(x) end)}),
    n,
    4
  )

IO.puts(
  "`mix run bench/closure_capture.exs #{n}`, #{Bench.cpu_model()}: p50 / p99 per call in us\n"
)

IO.puts("| jitted closure | p50 | p99 |\n| --- | --- | --- |")

for {label, _} <- rows,
    do:
      IO.puts(
        "| #{label} | #{Float.round(got[label].p50, 1)} | #{Float.round(got[label].p99, 1)} |"
      )
