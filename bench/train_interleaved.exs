# The training step of bench/train_loop.exs against its twin in-process in JAX, in alternating
# blocks (TrainLoop.interleaved/3), for each of several polling settings in turn:
#
#     mix run bench/train_interleaved.exs [PAIRS] [SETTINGS]     (default: 3 100/100,0/0)
#
# A setting is `SPIN/REPLY_SPIN`: the worker's `:spin_us` (how long it polls for the next
# request after a reply) and the caller's `:reply_spin_us` (how long it polls for its reply),
# in microseconds. Each setting gets a fresh single-worker pool and 40 blocks of 20 steps
# alternated with the twin's; the settings alternate PAIRS times. Prints, per run, the median
# of the 40 blocks' ratios (ours / twin) and the two step medians; writes nothing to
# docs/BENCHMARKS.md.
Code.require_file("lib.exs", __DIR__)
Code.require_file("train_step.exs", __DIR__)

{pairs, settings} =
  case System.argv() do
    [pairs, settings] -> {String.to_integer(pairs), settings}
    [pairs] -> {String.to_integer(pairs), "100/100,0/0"}
    [] -> {3, "100/100,0/0"}
  end

settings =
  for setting <- String.split(settings, ",") do
    [spin, reply_spin] = setting |> String.split("/") |> Enum.map(&String.to_integer/1)
    {spin, reply_spin}
  end

for pair <- 1..pairs, {spin, reply_spin} <- settings do
  Application.put_env(:nx_jax, :spin_us, spin)
  Application.put_env(:nx_jax, :reply_spin_us, reply_spin)
  NxJax.Pool.reload_config()
  Bench.restart_pool(1, [[]])
  result = TrainLoop.interleaved(40, 20)
  ratios = Enum.sort(result.ratios)
  median = Enum.at(ratios, div(length(ratios), 2))

  IO.puts(
    "pair #{pair}, spin_us #{spin}, reply_spin_us #{reply_spin}: ratio #{Float.round(median, 2)} (blocks' median), " <>
      "step #{round(TrainLoop.p50(result.ours))} us, twin #{round(TrainLoop.p50(result.twin))} us"
  )
end
