# Checkpointing a deep tanh chain: the same gradient, and the worker's peak memory with and
# without `NxJax.Autodiff.checkpoint/3` (each group of 4 layers keeps only its input; the layers
# inside are recomputed in the backward pass). On CPU the saving is real inside a loop, as
# here; see docs/CHECKPOINTING.md for why an unrolled checkpoint saves nothing there.
#
#     mix run examples/checkpointing.exs
defmodule Chain do
  import Nx.Defn
  import NxJax.Autodiff

  @groups 8
  @per_group 4

  defn layer(x, w), do: Nx.tanh(Nx.dot(x, w))

  defn group(x, ws, g) do
    {x, _ws, _g} =
      while {x, ws, g}, j <- 0..(@per_group - 1) do
        {layer(x, ws[g * @per_group + j]), ws, g}
      end

    x
  end

  defn plain_loss(ws, x) do
    {x, _ws} = while({x, ws}, g <- 0..(@groups - 1), do: {group(x, ws, g), ws})
    Nx.sum(x)
  end

  defn checkpointed_loss(ws, x) do
    {x, _ws} =
      while {x, ws}, g <- 0..(@groups - 1) do
        {checkpoint(&group(&1, ws, g), x, policy: :nothing_saveable), ws}
      end

    Nx.sum(x)
  end

  def layers, do: @groups * @per_group
end

key = Nx.Random.key(0)
{ws, key} = Nx.Random.normal(key, 0.0, 0.05, shape: {Chain.layers(), 256, 256})
{x, _key} = Nx.Random.normal(key, shape: {4096, 256})

measure = fn loss ->
  grad = fn -> Nx.Defn.grad(ws, &loss.(&1, x)) end
  # (compiled first: the second run's peak is the computation's, not the compiler's)
  grad.()
  %{rss: before} = NxJax.Worker.call(:memory, [true])
  result = grad.()
  %{peak_rss: peak} = NxJax.Worker.call(:memory, [false])
  {result, (peak - before) / 1_048_576}
end

{plain, plain_mib} = measure.(&Chain.plain_loss/2)
{checkpointed, checkpointed_mib} = measure.(&Chain.checkpointed_loss/2)
diff = Nx.subtract(plain, checkpointed) |> Nx.abs() |> Nx.reduce_max() |> Nx.to_number()

IO.puts("#{Chain.layers()} tanh layers, batch 4096, width 256 (activations 4 MiB per layer)")
IO.puts("gradients equal within: #{diff}")
IO.puts("worker peak memory over the gradient, plain:        #{Float.round(plain_mib, 1)} MiB")

IO.puts(
  "worker peak memory over the gradient, checkpointed: #{Float.round(checkpointed_mib, 1)} MiB"
)
