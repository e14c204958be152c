defmodule NxJax.RealNx.DifferentiationDocTest do
  # The ```elixir blocks of docs/DIFFERENTIATION.md under real Nx 0.7.2 with NxJax as the
  # compiler, run in order as pasted into one session (sharing their variables), each `#=>`
  # value compared with `inspect/1` of what the code before it gives, spaces aside. A block
  # whose first line starts with `# clean room only` is left out here (the clean room's
  # test_elixir/readme_test.exs runs every block).
  use ExUnit.Case, async: true
  import ExUnit.CaptureIO

  # (one test compiles the graphs of every block, one after another, on workers the async
  # suites share: ExUnit's default minute is not enough beside them on a 2-core machine)
  @moduletag timeout: 600_000

  @doc_path Path.expand("../docs/DIFFERENTIATION.md", __DIR__)
  @external_resource @doc_path

  setup do
    Nx.Defn.default_options(compiler: NxJax)
    :ok
  end

  # [{code, expected | nil}]: the code up to each `#=>` line and the value it shows (continued
  # on the `#` lines right below it)
  defp steps(block) do
    {steps, code, shown} =
      block
      |> String.split("\n")
      |> Enum.reduce({[], [], nil}, fn line, {steps, code, shown} ->
        cond do
          String.starts_with?(line, "#=>") ->
            {steps, code, [String.trim_leading(line, "#=>")]}

          shown != nil and String.starts_with?(line, "#") ->
            {steps, code, [String.trim_leading(line, "#") | shown]}

          shown != nil ->
            {[step(code, shown) | steps], [line], nil}

          true ->
            {steps, [line | code], nil}
        end
      end)

    Enum.reverse([step(code, shown) | steps])
  end

  defp step(code, nil), do: {code |> Enum.reverse() |> Enum.join("\n"), nil}

  defp step(code, shown),
    do: {code |> Enum.reverse() |> Enum.join("\n"), shown |> Enum.reverse() |> Enum.join(" ")}

  defp squeeze(text), do: text |> String.split() |> Enum.join(" ")

  test "the blocks of docs/DIFFERENTIATION.md that are not marked clean room only" do
    blocks =
      ~r/^```elixir\n(.*?)^```$/ms
      |> Regex.scan(File.read!(@doc_path), capture: :all_but_first)
      |> Enum.map(&hd/1)

    {run, left_out} = Enum.split_with(blocks, &(not String.starts_with?(&1, "# clean room only")))

    checked =
      for block <- run, {code, shown} <- steps(block), reduce: {0, []} do
        {checked, binding} ->
          {{value, binding}, _io} =
            with_io(fn -> Code.eval_string(code, binding, file: @doc_path) end)

          if shown do
            assert squeeze(inspect(value)) == squeeze(shown),
                   "#{String.slice(code, -80..-1)} gave #{inspect(value)}, the doc says #{shown}"

            {checked + 1, binding}
          else
            {checked, binding}
          end
      end
      |> elem(0)

    # (the counts the doc's table of blocks states)
    assert {length(run), length(left_out), checked} == {10, 0, 14}
  end
end
