# Splits the tests of Nx 0.7.2's test/nx/defn_test.exs into those that match the structure or
# printing of Nx's own Nx.Defn.Expr (Nx's internal representation, out of scope for issue 16)
# and those that assert behaviour (values, errors, compile errors), and counts how many of the
# latter pass, given the failures file that `nx/nx_suite/run.exs` writes (NX_SUITE_FAILURES).
#
#     elixir nx/nx_suite/defn_behaviour.exs $NX_SRC/test/nx/defn_test.exs failures.tsv
#
# A test is counted as structural when its body names the Expr struct (`%Expr{...}`,
# `%Nx.Defn.Expr{...}`), calls `debug_expr`/`debug_expr_apply`, or compares with a string that
# contains "Nx.Defn.Expr" (an inspected expression). Every other test asserts behaviour.

defmodule NxSuite.DefnBehaviour do
  @moduledoc false

  def main([test_file, failures_file]) do
    ast = test_file |> File.read!() |> Code.string_to_quoted!()
    tests = collect(ast, nil, [])
    failed = failed_names(failures_file)

    # the file did not compile: none of its tests passes
    failed = if MapSet.member?(failed, "*"), do: MapSet.new(tests, &elem(&1, 0)), else: failed

    {structural, behaviour} = Enum.split_with(tests, fn {_name, body} -> structural?(body) end)
    passing = Enum.reject(behaviour, fn {name, _} -> MapSet.member?(failed, name) end)

    for {name, _body} <- behaviour, MapSet.member?(failed, name) do
      IO.puts("behaviour, failing: #{name}")
    end

    IO.puts(
      "#{length(tests)} tests: #{length(structural)} match Nx.Defn.Expr's structure or printing, " <>
        "#{length(behaviour)} assert behaviour; #{length(passing)} of those pass " <>
        "(#{round(100 * length(passing) / max(length(behaviour), 1))}%)"
    )
  end

  defp failed_names(path) do
    path
    |> File.stream!()
    |> Stream.map(&String.split(&1, "\t"))
    |> Stream.filter(fn [file | _] -> String.ends_with?(file, "defn_test.exs") end)
    |> Stream.map(fn [_, name | _] -> name end)
    |> MapSet.new()
  end

  # walks describe/test blocks; test names are "test <describe> <name>" as ExUnit writes them
  defp collect({:describe, _, [name, [do: body]]}, _describe, acc) when is_binary(name),
    do: collect(body, name, acc)

  defp collect({:test, _, [name | rest]}, describe, acc) when is_binary(name) do
    full = if describe, do: "test #{describe} #{name}", else: "test #{name}"
    [{full, rest} | acc]
  end

  defp collect({:__block__, _, items}, describe, acc),
    do: Enum.reduce(items, acc, &collect(&1, describe, &2))

  defp collect({:defmodule, _, [_, [do: body]]}, describe, acc), do: collect(body, describe, acc)
  defp collect(_other, _describe, acc), do: acc

  defp structural?(body) do
    {_, found} =
      Macro.prewalk(body, false, fn
        {:%, _, [{:__aliases__, _, alias}, _]} = node, acc ->
          {node, acc or List.last(alias) == :Expr}

        {name, _, _} = node, _acc when name in [:debug_expr, :debug_expr_apply] ->
          {node, true}

        {{:., _, [_, name]}, _, _} = node, _acc when name in [:debug_expr, :debug_expr_apply] ->
          {node, true}

        text, acc when is_binary(text) ->
          {text, acc or String.contains?(text, "Nx.Defn.Expr")}

        node, acc ->
          {node, acc}
      end)

    found
  end
end

NxSuite.DefnBehaviour.main(System.argv())
