defmodule NxJax.ExamplesTest do
  # The scripts of examples/ run as `mix run` runs them, and print what they say they print.
  use ExUnit.Case, async: true
  import ExUnit.CaptureIO

  @root Path.expand("..", __DIR__)

  defp run(name), do: capture_io(fn -> Code.eval_file(Path.join(@root, "examples/#{name}")) end)

  defp number_after(output, label) do
    [_, value] = Regex.run(~r/#{Regex.escape(label)}\s*([-0-9.e]+)/, output)
    String.to_float(value)
  end

  test "implicit_layer.exs: the implicit gradient is the unrolled one" do
    output = run("implicit_layer.exs")
    assert number_after(output, "residual at z (max):") < 1.0e-6
    assert [_, dw, dx] = Regex.run(~r/max difference, d\/dW: (\S+), d\/dx: (\S+)/, output)
    assert String.to_float(dw) < 1.0e-5 and String.to_float(dx) < 1.0e-5
  end

  test "nan_hunting.exs: each NaN named at its line, and the fixed one clean" do
    output = run("nan_hunting.exs")
    assert output =~ "in the value of exp at examples/nan_hunting.exs:10"
    assert output =~ "the gradient rule of sqrt at examples/nan_hunting.exs:13"

    assert output =~
             "grad of stable_r1psqrt at 0.0: 1.0 without debug_nans\n  debug_nans: nothing"
  end

  test "checkpointing.exs: the checkpointed gradient is the plain one; both peaks reported" do
    output = run("checkpointing.exs")
    assert number_after(output, "gradients equal within:") < 1.0e-6
    # (the figures depend on what else the shared worker holds: printed, not compared here)
    assert output =~ ~r/peak memory over the gradient, plain: +[0-9.]+ MiB/
    assert output =~ ~r/peak memory over the gradient, checkpointed: [0-9.]+ MiB/
  end

  test "convnet_dropout.exs: the loss falls over 300 steps, the state counts them" do
    output = run("convnet_dropout.exs")
    [_, first, last] = Regex.run(~r/loss fell from (\S+) to (\S+)/, output)
    assert String.to_float(last) < 0.2 * String.to_float(first)
    assert output =~ "steps counted in the state: 300"
    assert number_after(output, "held-out accuracy:") >= 0.9
  end

  # defined by examples/convnet_dropout/model.exs, loaded when the test runs
  @compile {:no_warn_undefined, ConvnetDropout}

  @convnet_reference Path.join(__DIR__, "reference/nx_0.7.2_convnet_step.tsv")
  @external_resource @convnet_reference

  # one step of the model of examples/convnet_dropout.exs against real Nx 0.7.2's (written by
  # test_elixir/reference/convnet_reference.exs): the loss, the gradient of every leaf of the
  # state (zeros for the u32 key and the s64 count) and the state after the step (the key
  # split by Nx.Random, bit for bit), in numerics mode :nx, within 1.0e-4
  test "convnet_dropout: one step's loss, gradients and next state are real Nx 0.7.2's" do
    Code.require_file("examples/convnet_dropout/model.exs", @root)
    state = ConvnetDropout.init(42, 8)
    {images, labels} = ConvnetDropout.data(7, 16, 8)
    {loss, grads} = ConvnetDropout.loss_and_grad(state, images, labels)
    {next, _loss} = ConvnetDropout.step(state, images, labels)
    ours = Map.new(leaves("loss", loss) ++ leaves("grad", grads) ++ leaves("next", next))

    expected =
      for line <- @convnet_reference |> File.read!() |> String.split("\n", trim: true) do
        [name, type, shape, values] = String.split(line, "\t")
        {values, []} = Code.eval_string(values)
        {name, {type, shape, values}}
      end

    assert length(expected) == 19 and map_size(ours) == 19

    for {name, {type, shape, values}} <- expected do
      assert %Nx.Tensor{} = t = ours[name], "#{name} missing"
      assert {Nx.Type.to_string(t.type), inspect(t.shape)} == {type, shape}, name

      if Nx.Type.float?(t.type),
        do: assert_all_close(Nx.to_flat_list(t), values, name),
        else: assert(Nx.to_flat_list(t) == values, name)
    end
  end

  defp leaves(prefix, %Nx.Tensor{} = t), do: [{prefix, t}]

  defp leaves(prefix, %{} = map),
    do: Enum.flat_map(Enum.sort(map), fn {k, v} -> leaves("#{prefix}.#{k}", v) end)

  defp assert_all_close(actual, expected, name) do
    assert length(actual) == length(expected), name

    for {a, e} <- Enum.zip(actual, expected) do
      assert abs(a - e) <= 1.0e-4 + 1.0e-4 * abs(e), "#{name}: #{a} against Nx's #{e}"
    end
  end
end
