# Nx 0.7.2's doc examples of the `Nx` module, run on both sides (see nx/nx_suite/README.md).
#
#   run DOCS_DIR OUT [REGEX | all] [MODULE ...]
#                              evaluate the examples found in DOCS_DIR/Elixir.MODULE.beam (the
#                              docs of Nx 0.7.2's build; MODULE is Nx unless named, e.g.
#                              `Nx Nx.LinAlg`) whose group matches REGEX (by default: axis
#                              names; `all` takes every example), in the project this runs in;
#                              write the answers to OUT (an Erlang term file)
#   compare NX_OUT OURS_OUT    count the examples answered alike and list the others
#
# An example group is a run of `iex>` lines not separated by a blank line (their bindings are
# shared, as in a doctest); each answer is `inspect` of the value or the exception's message.
defmodule NxSuite.DocExamples do
  @default ~S"names|rename|\[[a-z_]+: \d+\]"

  def main(["run", docs_dir, out | rest]) do
    {selector, modules} =
      case rest do
        [] -> {@default, ["Nx"]}
        [selector] -> {selector, ["Nx"]}
        [selector | modules] -> {selector, modules}
      end

    pattern = if selector == "all", do: ~r//, else: Regex.compile!(selector)

    groups =
      for module <- modules,
          {:docs_v1, _, _, _, _, _, entries} =
            Code.fetch_docs(Path.join(docs_dir, "Elixir.#{module}.beam")),
          {{kind, fun, arity}, _, _, %{"en" => doc}, _} <- entries,
          kind in [:function, :macro],
          {group, index} <- Enum.with_index(String.split(doc, ~r/\n\s*\n/)),
          String.contains?(group, "iex>") and Regex.match?(pattern, group),
          do: {{key_prefix(module, fun), arity, index}, expressions(group)}

    answers = for {key, exprs} <- groups, do: {key, answer_all(exprs)}
    File.write!(out, :erlang.term_to_binary(answers))

    IO.puts(
      "#{length(answers)} groups, #{answers |> Enum.map(&length(elem(&1, 1))) |> Enum.sum()} examples"
    )
  end

  def main(["compare", nx_out, ours_out]) do
    [nx, ours] = Enum.map([nx_out, ours_out], &(&1 |> File.read!() |> :erlang.binary_to_term()))
    ours = Map.new(ours)

    rows =
      for {key, pairs} <- nx,
          {{expr, answer}, i} <- Enum.with_index(pairs),
          do: {key, expr, answer, ours |> Map.fetch!(key) |> Enum.at(i) |> elem(1)}

    different = Enum.reject(rows, fn {_, _, nx, ours} -> nx == ours end)

    for {{fun, arity, group}, expr, nx, ours} <- different do
      IO.puts("== #{fun}/#{arity} (group #{group}): #{one_line(expr)}")
      IO.puts("   Nx:   #{one_line(nx)}\n   ours: #{one_line(ours)}")
    end

    IO.puts("#{length(rows) - length(different)} of #{length(rows)} examples answer alike")
  end

  # Nx's own functions keep their bare name, so the default report reads as before
  defp key_prefix("Nx", fun), do: fun
  defp key_prefix(module, fun), do: :"#{module}.#{fun}"

  defp expressions(group) do
    group
    |> String.split("\n")
    |> Enum.map(&String.trim/1)
    |> Enum.reduce([], fn
      "iex>" <> code, acc -> [String.trim_leading(code) | acc]
      "...>" <> code, [last | acc] -> [last <> "\n" <> String.trim_leading(code) | acc]
      _, acc -> acc
    end)
    |> Enum.reverse()
  end

  defp answer_all(exprs) do
    {answers, _binding} =
      Enum.map_reduce(exprs, [], fn expr, binding ->
        try do
          {value, binding} = Code.eval_string(expr, binding)
          {{expr, "ok " <> inspect(value)}, binding}
        rescue
          e ->
            {{expr, "error " <> inspect(e.__struct__) <> ": " <> Exception.message(e)}, binding}
        catch
          kind, _ -> {{expr, "caught #{kind}"}, binding}
        end
      end)

    answers
  end

  defp one_line(text), do: text |> String.replace(~r/\s*\n\s*/, " ") |> String.slice(0, 240)
end

NxSuite.DocExamples.main(System.argv())
