# The training step of bench/train_loop.exs against its twin in-process in JAX, in alternating
# blocks (TrainLoop.interleaved/3), for each of several worker `spin_us` settings in turn:
#
#     mix run bench/train_interleaved.exs [PAIRS] [SPIN_US,SPIN_US,...]     (default 3 100,400)
#
# Each setting gets a fresh single-worker pool and 40 blocks of 20 steps alternated with the
# twin's; the settings alternate PAIRS times. Prints, per run, the median of the 40 blocks'
# ratios (ours / twin) and the two step medians; writes nothing to docs/BENCHMARKS.md. It
# answers whether a worker that polls longer after its reply (`:spin_us`, default 100) makes
# the step faster against JAX (docs/BENCHMARKS.md section 15: the caller's and the GenServer's
# turn between two steps takes about 200 us, during which a worker polling 100 us falls asleep).
Code.require_file("lib.exs", __DIR__)
Code.require_file("train_step.exs", __DIR__)

{pairs, spins} =
  case System.argv() do
    [pairs, spins] -> {String.to_integer(pairs), spins}
    [pairs] -> {String.to_integer(pairs), "100,400"}
    [] -> {3, "100,400"}
  end

spins = spins |> String.split(",") |> Enum.map(&String.to_integer/1)

for pair <- 1..pairs, spin <- spins do
  Application.put_env(:nx_jax, :spin_us, spin)
  Bench.restart_pool(1, [[]])
  result = TrainLoop.interleaved(40, 20)
  ratios = Enum.sort(result.ratios)
  median = Enum.at(ratios, div(length(ratios), 2))

  IO.puts(
    "pair #{pair}, spin_us #{spin}: ratio #{Float.round(median, 2)} (blocks' median), " <>
      "step #{round(TrainLoop.p50(result.ours))} us, twin #{round(TrainLoop.p50(result.twin))} us"
  )
end
