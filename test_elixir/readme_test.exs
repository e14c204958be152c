defmodule NxJax.ReadmeTest do
  # Every ```elixir block of README.md, run in order as pasted into one `iex -S mix` session
  # (the blocks share their variables, as in one session). A `#=> value` comment (continued on
  # the `#` lines below it) is the value the code before it gives: it is compared with
  # `inspect/1` of that value, spaces aside. So the README cannot rot.
  use ExUnit.Case, async: true
  import ExUnit.CaptureIO

  @readme Path.expand("../README.md", __DIR__)
  @external_resource @readme

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

  test "every elixir block of README.md runs as pasted and gives the values it shows" do
    blocks =
      Regex.scan(~r/^```elixir\n(.*?)^```$/ms, File.read!(@readme), capture: :all_but_first)

    assert length(blocks) >= 4

    {checked, _binding} =
      for [block] <- blocks, {code, expected} <- chunks(block), reduce: {0, []} do
        {checked, binding} ->
          {value, binding} =
            with_io(fn -> Code.eval_string(code, binding, file: @readme) end)
            |> elem(0)

          if expected do
            assert squeeze(inspect(value)) == squeeze(expected),
                   "README.md: #{String.slice(code, -80..-1)} gave #{inspect(value)}, " <>
                     "the README says #{expected}"

            {checked + 1, binding}
          else
            {checked, binding}
          end
      end

    # (the values shown by the blocks of the custom gradient, control flow and resident weights)
    assert checked >= 8
  end
end
