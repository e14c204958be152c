# A channels-last CNN with dropout and running statistics, trained on nx_jax as any Nx 0.7.2
# program: the model (examples/convnet_dropout/model.exs) is plain Nx.Defn, and the training
# loop a plain Elixir loop over a jitted step that differentiates the whole state map (float
# parameters, the u32 dropout key, an s64 step count). Run: mix run examples/convnet_dropout.exs
Code.require_file("convnet_dropout/model.exs", __DIR__)

size = 8
steps = 300
state = ConvnetDropout.init(42, size)
{train_x, train_y} = ConvnetDropout.data(7, 64, size)
{test_x, test_y} = ConvnetDropout.data(8, 64, size)
step = Nx.Defn.jit(&ConvnetDropout.step/3)

IO.puts("step  loss (a batch of 64, with dropout)")

{state, losses} =
  Enum.reduce(1..steps, {state, []}, fn i, {state, losses} ->
    {state, loss} = step.(state, train_x, train_y)
    loss = Nx.to_number(loss)
    if rem(i, 50) == 0 or i == 1, do: IO.puts(String.pad_leading("#{i}", 4) <> "  #{loss}")
    {state, [loss | losses]}
  end)

[last | _] = losses
first = List.last(losses)
IO.puts("loss fell from #{first} to #{last}")
IO.puts("steps counted in the state: #{Nx.to_number(state.count)}")
IO.puts("held-out accuracy: #{Nx.to_number(ConvnetDropout.accuracy(state, test_x, test_y))}")
