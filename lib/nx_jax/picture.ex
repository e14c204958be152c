defmodule NxJax.Picture do
  @moduledoc """
  Pictures of traced graphs: `to_dot/2` (the DOT text, `Nx.Defn.Dot`) and `render/3` (an SVG
  or PNG file drawn by Graphviz's `dot`). `mix nx_jax.picture` does both from the command line;
  `print_expr(expr, dot: true)` prints the DOT text inside `defn`.
  """

  @doc "The DOT text of a traced expression (see `Nx.Defn.Dot.to_dot/2`)."
  defdelegate to_dot(outputs, opts \\ []), to: Nx.Defn.Dot

  @doc """
  Draws the graph of `outputs` into `path` with Graphviz, in the format its extension names
  (`.svg`, `.png`, `.pdf`; `.dot` writes the DOT text itself). Options: `:title`, `:dot` (the
  Graphviz executable, default `dot` on the `PATH`). Returns `:ok`, or raises
  `ArgumentError` saying how to install Graphviz when it is missing.
  """
  @spec render(term, Path.t(), keyword) :: :ok
  def render(outputs, path, opts \\ []) do
    text = to_dot(outputs, Keyword.take(opts, [:title]))

    case Path.extname(path) do
      ".dot" ->
        File.write!(path, text)

      "." <> format when format in ~w(svg png pdf) ->
        dot = Keyword.get_lazy(opts, :dot, fn -> System.find_executable("dot") end)

        unless dot && File.exists?(dot) do
          raise ArgumentError,
                "Graphviz's dot is needed to draw #{path}: install it (Debian/Ubuntu: " <>
                  "`sudo apt-get install graphviz`; macOS: `brew install graphviz`), or write " <>
                  "the DOT text with a .dot path"
        end

        source = path <> ".dot"
        File.write!(source, text)

        try do
          case System.cmd(dot, ["-T" <> format, "-o", path, source], stderr_to_stdout: true) do
            {_, 0} -> :ok
            {output, status} -> raise ArgumentError, "dot exited with #{status}: #{output}"
          end
        after
          File.rm(source)
        end

      other ->
        raise ArgumentError,
              "NxJax.Picture.render/3 writes .svg, .png, .pdf or .dot files, got #{inspect(other)}"
    end

    :ok
  end
end
