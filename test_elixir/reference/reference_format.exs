# How the reference files of this folder write a result, in one place: the generators
# (nx_random_reference.exs, nx_names_reference.exs), run inside a build of Nx 0.7.2, and our
# tests, which compare with what they wrote, both load this file (the tests through
# test_helper.exs), so the two sides cannot drift apart.
defmodule NxJax.ReferenceFormat do
  @moduledoc false

  @doc "The rows of a reference file: each line's tab-separated fields, `#` comment lines left out."
  def rows(path) do
    for line <- path |> File.read!() |> String.split("\n", trim: true),
        not String.starts_with?(line, "#"),
        do: String.split(line, "\t")
  end

  @doc "The tensors of a result (a tensor, or tuples of them), depth-first."
  def leaves(%Nx.Tensor{vectorized_axes: []} = t), do: [t]

  def leaves(%Nx.Tensor{}),
    do: raise(ArgumentError, "vectorized result; devectorize it in the case's code")

  def leaves(tuple) when is_tuple(tuple),
    do: tuple |> Tuple.to_list() |> Enum.flat_map(&leaves/1)

  def leaves(other),
    do: raise(ArgumentError, "result is not a tensor or tuple of tensors: #{inspect(other)}")

  @doc "`TYPE SHAPE HEX`: `f32 {3,2} 0ad7...`, the hex of `Nx.to_binary/1` in lower case."
  def leaf(%Nx.Tensor{type: {kind, bits}, shape: shape} = t) do
    dims = shape |> Tuple.to_list() |> Enum.map_join(",", &Integer.to_string/1)
    "#{kind}#{bits} {#{dims}} #{Base.encode16(Nx.to_binary(t), case: :lower)}"
  end

  @doc "The leaves of a result joined by ` ; `."
  def leaves_line(value), do: value |> leaves() |> Enum.map_join(" ; ", &leaf/1)

  @doc "An exception as `Module: message`, the message escaped (`escape/1`)."
  def exception(e), do: "#{inspect(e.__struct__)}: #{escape(Exception.message(e))}"

  @doc "A text on one line: backslash, newline, tab and carriage return escaped."
  def escape(text) do
    text
    |> String.replace("\\", "\\\\")
    |> String.replace("\n", "\\n")
    |> String.replace("\t", "\\t")
    |> String.replace("\r", "\\r")
  end

  @doc """
  `ok <TAB> inspect(result)` or `error <TAB> Module: message` of calling `fun`, newlines
  written as `\\n` (the format of nx_0.7.2_names.tsv).
  """
  def inspect_answer(fun) do
    result =
      try do
        "ok\t" <> inspect(fun.())
      rescue
        e -> "error\t" <> inspect(e.__struct__) <> ": " <> Exception.message(e)
      end

    String.replace(result, "\n", "\\n")
  end
end
