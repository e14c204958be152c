# Writes one section of docs/BENCHMARKS.md, for the scripts that each regenerate one
# (bench/train_loop.exs, real_nx.exs, serving.exs, mechanisms.exs). Plain Elixir: real_nx.exs
# runs under `elixir` alone.
defmodule BenchSection do
  @moduledoc false

  @doc """
  Puts `section` (its text starts with `## number. `) in docs/BENCHMARKS.md in place of the
  section of that number, or at the end when there is none; the sections around it stay, one
  blank line apart (a run writes the same file as the one before it).
  """
  def replace!(number, section) do
    path = Path.expand("../docs/BENCHMARKS.md", __DIR__)
    old = File.read!(path)

    {before, after_} =
      case :binary.match(old, "\n## #{number}. ") do
        {at, _} ->
          rest = binary_part(old, at + 1, byte_size(old) - at - 1)

          case :binary.match(rest, "\n## ") do
            {next, _} ->
              {binary_part(old, 0, at), binary_part(rest, next + 1, byte_size(rest) - next - 1)}

            :nomatch ->
              {binary_part(old, 0, at), ""}
          end

        :nomatch ->
          {old, ""}
      end

    tail = if after_ == "", do: "", else: "\n" <> after_

    File.write!(
      path,
      String.trim_trailing(before) <> "\n\n" <> String.trim(section) <> "\n" <> tail
    )
  end
end
