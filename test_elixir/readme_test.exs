defmodule NxJax.ReadmeTest do
  # Every ```elixir block of README.md (and of docs/DIFFERENTIATION.md), run in order as pasted
  # into one `iex -S mix` session (the blocks of a file share their variables, as in one
  # session). A `#=> value` comment (continued on the `#` lines below it) is the value the code
  # before it gives: it is compared with `inspect/1` of that value, spaces aside. So the docs
  # cannot rot.
  use ExUnit.Case, async: true
  import ExUnit.CaptureIO

  @readme Path.expand("../README.md", __DIR__)
  @external_resource @readme
  @differentiation Path.expand("../docs/DIFFERENTIATION.md", __DIR__)
  @external_resource @differentiation

  # [{code, expected | nil}] of one block: the code up to each `#=>` and what it says
  defp chunks(block) do
    {chunks, code, expected} =
      block
      |> String.split("\n")
      |> Enum.reduce({[], [], nil}, fn line, {chunks, code, expected} ->
        cond do
          String.starts_with?(line, "#=>") ->
            {chunks, code, [String.trim_leading(line, "#=>")]}

          expected != nil and String.starts_with?(line, "#") ->
            {chunks, code, [String.trim_leading(line, "#") | expected]}

          expected != nil ->
            chunk =
              {Enum.join(Enum.reverse(code), "\n"), expected |> Enum.reverse() |> Enum.join(" ")}

            {[chunk | chunks], [line], nil}

          true ->
            {chunks, [line | code], nil}
        end
      end)

    last =
      if expected,
        do: {Enum.join(Enum.reverse(code), "\n"), expected |> Enum.reverse() |> Enum.join(" ")},
        else: {Enum.join(Enum.reverse(code), "\n"), nil}

    Enum.reverse([last | chunks])
  end

  defp squeeze(text), do: text |> String.split() |> Enum.join(" ")

  # runs the blocks of `path` in order; returns how many `#=>` values were compared
  defp run_blocks(path) do
    blocks = Regex.scan(~r/^```elixir\n(.*?)^```$/ms, File.read!(path), capture: :all_but_first)
    name = Path.relative_to(path, Path.expand("..", __DIR__))

    {checked, _binding} =
      for [block] <- blocks, {code, expected} <- chunks(block), reduce: {0, []} do
        {checked, binding} ->
          {value, binding} =
            with_io(fn -> Code.eval_string(code, binding, file: path) end)
            |> elem(0)

          if expected do
            assert squeeze(inspect(value)) == squeeze(expected),
                   "#{name}: #{String.slice(code, -80..-1)} gave #{inspect(value)}, " <>
                     "it says #{expected}"

            {checked + 1, binding}
          else
            {checked, binding}
          end
      end

    {length(blocks), checked}
  end

  test "every elixir block of README.md runs as pasted and gives the values it shows" do
    {blocks, checked} = run_blocks(@readme)
    assert blocks >= 4
    # (the values shown by the blocks of the custom gradient, control flow and resident weights)
    assert checked >= 8
  end

  test "every elixir block of docs/DIFFERENTIATION.md runs as pasted and gives its values" do
    {blocks, checked} = run_blocks(@differentiation)
    assert blocks >= 5
    assert checked >= 8
  end
end
