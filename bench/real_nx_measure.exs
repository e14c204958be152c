# One build's measurements for bench/real_nx.exs (`make bench-real-nx`), under whichever Nx
# this build has: the clean room (`mix run bench/real_nx_measure.exs`) or real Nx 0.7.2
# with NxJax as its compiler (`NX_JAX_NX=_build/real-nx-src mix run ...`), with the arguments
# STEPS (training steps) and ROUND (bench/real_nx.exs's round). Prints one line,
# `RESULT <base64 of a term>`, that bench/real_nx.exs reads:
#
#   - the small call (section 1's `x * 2 + 1` on a scalar f32, Bench.small/1) and the worker's
#     ping, p50 us over 20 interleaved rounds of 100 calls each;
#   - under real Nx, the compiler's own work per call (real Nx's `__jit__` with no argument
#     list: the signature walk, the trace lookup, the options; no run), for the small call and
#     for the training step's 15 arguments, mean us over 20,000 calls, median of 5 rounds;
#   - the training loop of bench/train_step.exs, STEPS steps after 20 uncounted, through
#     `Nx.Defn.jit/2`, through `Nx.Defn.compile/3`, and through the jit donating its state,
#     each in blocks of 20 steps alternating with its Python twin's (bench/train_loop.py
#     serve, TrainLoop.interleaved/3): both medians and the median of the blocks' ratios;
#   - that step's graph, as this front end wrote it, run in-process (bench/step_handling.py).
#
# Not a test: nothing here asserts a timing.
Code.require_file("lib.exs", __DIR__)
Code.require_file("train_step.exs", __DIR__)

defmodule RealNxMeasure do
  def p50(list), do: Enum.at(Enum.sort(list), div(length(list), 2))

  # `rows`: [{name, fun}], called in turn, `per_round` calls each, `rounds` times
  def interleaved(rows, rounds, per_round) do
    for {_name, fun} <- rows, _ <- 1..50, do: fun.()

    samples =
      for _ <- 1..rounds, {name, fun} <- rows, _ <- 1..per_round, reduce: %{} do
        acc -> Map.update(acc, name, [Bench.time_us(fun)], &[Bench.time_us(fun) | &1])
      end

    Map.new(samples, fn {name, list} -> {name, p50(list)} end)
  end

  # the mean time of `fun` over `n` calls, median of 5 rounds, in us
  def mean_us(fun, n) do
    for _ <- 1..div(n, 10), do: fun.()

    rounds =
      for _ <- 1..5 do
        t0 = System.monotonic_time(:nanosecond)
        for _ <- 1..n, do: fun.()
        (System.monotonic_time(:nanosecond) - t0) / n / 1000
      end

    p50(rounds)
  end

  # real Nx's jit of `fun` on `args` up to the compiler, with nothing to run (real Nx's
  # functions, called by apply/3: the clean room has no to_lazy_params/2)
  def front(fun, args) do
    {key, params, _templates, _flatten} = apply(Nx.Defn.Compiler, :to_lazy_params, [fun, args])

    Nx.Defn.Compiler.__jit__(key, params, [], compiler: NxJax)
    mean_us(fn -> Nx.Defn.Compiler.__jit__(key, params, [], compiler: NxJax) end, 20_000)
  end
end

{steps, round} =
  case Enum.map(System.argv(), &String.to_integer/1) do
    [n, r] -> {n, r}
    [n] -> {n, 1}
    [] -> {500, 1}
  end

# (real Nx's own compiler module has to_lazy_params/2; both Nx now have Nx.Defn.Evaluator's
# __jit__/5)
real? =
  Code.ensure_loaded?(Nx.Defn.Compiler) and
    function_exported?(Nx.Defn.Compiler, :to_lazy_params, 2)

jit_opts = if real?, do: [compiler: NxJax], else: []
if real?, do: Nx.Defn.default_options(compiler: NxJax)

x = Nx.tensor(1.5)

small =
  RealNxMeasure.interleaved(
    [{:small, fn -> Bench.small(x) end}, {:ping, fn -> NxJax.Worker.call(:ping, []) end}],
    20,
    100
  )

front =
  if real? do
    {state, [{bx, by} | _]} = TrainLoop.initial()

    %{
      small: RealNxMeasure.front(&Bench.small/1, [x]),
      step: RealNxMeasure.front(&TrainLoop.step/3, [state, bx, by])
    }
  end

# (each way's loop alternating with its twin, `TrainLoop.interleaved/3`: blocks of 20 steps
# of each, so that a ratio compares steps run in the same seconds; an uncounted run first, and
# the three in an order that turns with the round, so that none is always the first after the
# worker started)
TrainLoop.run(100, jit_opts)
ways = [jit: [], compile: [compile: true], donate: [donate: [0]]]
{first, last} = Enum.split(ways, rem(round - 1, 3))

train =
  for {name, opts} <- last ++ first, into: %{} do
    run = TrainLoop.interleaved(max(div(steps, 20), 1), 20, jit_opts ++ opts)

    {name,
     %{
       p50: RealNxMeasure.p50(run.ours),
       jax_p50: RealNxMeasure.p50(run.twin),
       ratio: RealNxMeasure.p50(run.ratios),
       losses: run.losses,
       jax_losses: run.twin_losses
     }}
  end

# The training step's graph as this front end wrote it (real Nx differentiates in Elixir, the
# clean room leaves the gradient to JAX), run in-process in a worker made by
# bench/step_handling.py: its `run` is the XLA step alone, to set beside the twin's.
graph =
  if real?,
    do:
      for({_key, {entry, _, _, _}} <- :ets.tab2list(NxJax.TraceCache), do: entry.graph)
      |> Enum.max_by(&byte_size/1),
    else: TrainLoop.step_graph()

graph_file = Path.join(System.tmp_dir!(), "nx_jax_bench_real_nx_step_#{System.pid()}.etf")
File.write!(graph_file, graph)

handling =
  Bench.sh(Bench.python(), [
    Path.join(__DIR__, "step_handling.py"),
    graph_file,
    "1",
    "#{NxJax.Worker.Server.default_numerics()}"
  ])

File.rm(graph_file)
[_, graph_run] = Regex.run(~r/"run": \[([\d.]+)/, handling)

result = %{
  build: if(real?, do: :real, else: :clean),
  small: small,
  front: front,
  train: train,
  graph_run: String.to_float(graph_run),
  trace_cache: if(real?, do: apply(NxJax, :trace_cache_stats, []))
}

IO.puts("RESULT " <> Base.encode64(:erlang.term_to_binary(result)))
