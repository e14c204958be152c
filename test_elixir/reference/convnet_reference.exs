# Writes nx_0.7.2_convnet_step.tsv: one step of examples/convnet_dropout/model.exs on REAL Nx
# 0.7.2 (its binary backend and evaluator): the loss, the gradient of every leaf of the state
# and the state after one training step. test_elixir/examples_test.exs compares nx_jax's with
# it. Not run by our suites; run against a build of Nx 0.7.2
# (../shared/reference/build-real-nx.sh DIR):
#
#     cd DIR/nx-0.7.2/nx && mix run /ABSOLUTE/PATH/TO/test_elixir/reference/convnet_reference.exs
#
# One line per value: a name, then its type, shape and flat values (Elixir floats, as
# inspect/1 prints them: enough digits to read the f32 back exactly).
"0.7.2" = to_string(Application.spec(:nx, :vsn))
Code.require_file("../../examples/convnet_dropout/model.exs", __DIR__)

defmodule ConvnetReference do
  def lines(prefix, %Nx.Tensor{} = t),
    do: [
      "#{prefix}\t#{Nx.Type.to_string(t.type)}\t#{inspect(t.shape)}\t#{inspect(Nx.to_flat_list(t), limit: :infinity)}"
    ]

  def lines(prefix, %{} = map),
    do: map |> Enum.sort() |> Enum.flat_map(fn {k, v} -> lines("#{prefix}.#{k}", v) end)
end

state = ConvnetDropout.init(42, 8)
{images, labels} = ConvnetDropout.data(7, 16, 8)
{loss, grads} = ConvnetDropout.loss_and_grad(state, images, labels)
{next, _loss} = ConvnetDropout.step(state, images, labels)

lines =
  ConvnetReference.lines("loss", loss) ++
    ConvnetReference.lines("grad", grads) ++ ConvnetReference.lines("next", next)

path = Path.join(__DIR__, "nx_0.7.2_convnet_step.tsv")
File.write!(path, Enum.join(lines, "\n") <> "\n")
IO.puts("wrote #{length(lines)} values to #{path}")
