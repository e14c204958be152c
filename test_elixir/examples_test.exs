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
end
