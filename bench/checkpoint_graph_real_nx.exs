# The wire graph that NxJax's compiler sends under real Nx 0.7.2 for the gradient of the tanh
# chain of bench/checkpoint_memory.py (x <- tanh(x . w_i), the gradient of sum(chain(x)) with
# respect to every w_i), with NxJax.Autodiff.checkpoint/3 around each group of layers or without.
# bench/checkpoint_memory.py runs it (its variants real_nx_*) and has the worker's lowering
# compile the graph, to read XLA's memory analysis as it does for the clean room's graphs.
#
#   NX_JAX_NX=_build/real-nx-src mix run --no-start bench/checkpoint_graph_real_nx.exs \
#     VARIANT LAYERS BATCH WIDTH GROUP OUT
#
# VARIANT: unrolled, unrolled_checkpoint (the groups one after the other), while,
# while_checkpoint (a while over the groups, the weights in its state and read by index, as
# real Nx 0.7.2's loop body reads only its state). Writes the graph (external term format) to
# OUT and prints `parameters: I,J` (which of ws (0) and x (1) the graph's parameters are).

defmodule CheckpointChainRealNx do
  import Nx.Defn
  import NxJax.Autodiff

  # `size` layers from the weight `first` (a number, or a scalar tensor inside the loop)
  deftransform group(x, ws, first, size) do
    Enum.reduce(0..(size - 1), x, fn j, x -> Nx.tanh(Nx.dot(x, ws[Nx.add(first, j)])) end)
  end

  deftransform step(x, ws, first, size, checkpoint?) do
    if checkpoint? do
      checkpoint(&group(&1, ws, first, size), [x], policy: :nothing_saveable, prevent_cse: false)
    else
      group(x, ws, first, size)
    end
  end

  deftransform unrolled(ws, x, size, checkpoint?) do
    groups = div(elem(Nx.shape(ws), 0), size)

    0..(groups - 1)
    |> Enum.reduce(x, fn g, x -> step(x, ws, g * size, size, checkpoint?) end)
    |> Nx.sum()
  end

  defn looped(ws, x, opts \\ []) do
    size = opts[:size]

    {x, _ws} =
      while {x, ws}, i <- 0..opts[:last] do
        {step(x, ws, i * size, size, opts[:checkpoint]), ws}
      end

    Nx.sum(x)
  end
end

[variant, layers, batch, width, group, out] = System.argv()
[layers, batch, width, group] = Enum.map([layers, batch, width, group], &String.to_integer/1)
checkpoint? = String.ends_with?(variant, "_checkpoint")

loss =
  case String.trim_trailing(variant, "_checkpoint") do
    "unrolled" ->
      &CheckpointChainRealNx.unrolled(&1, &2, group, checkpoint?)

    "while" ->
      opts = [size: group, last: div(layers, group) - 1, checkpoint: checkpoint?]
      &CheckpointChainRealNx.looped(&1, &2, opts)
  end

ws = Nx.template({layers, width, width}, :f32)
x = Nx.template({batch, width}, :f32)
expr = Nx.Defn.debug_expr(fn ws, x -> Nx.Defn.grad(ws, &loss.(&1, x)) end).(ws, x)
{graph, parameters, _hooks} = NxJax.WireEncoder.encode(expr)
File.write!(out, :erlang.term_to_binary(graph))
IO.puts("parameters: " <> Enum.map_join(parameters, ",", &Integer.to_string/1))
