defmodule Mix.Tasks.NxJax.Picture do
  @shortdoc "Draws the traced graph of a defn function (Graphviz)"
  @moduledoc """
  Traces `Module.function` on the given numbers (each a scalar tensor: `1.0` is f32, `2` is
  s64) and draws its graph (`NxJax.Picture.render/3`):

      mix nx_jax.picture GradHelpers.grad_custom_log1pexp 1.0 --require examples/grad_helpers.exs \\
        --output docs/log1pexp_grad.svg

  Options: `--output` (default `graph.svg`; `.png`, `.pdf`, or `.dot` for the DOT text),
  `--require FILE` (files that define the module, loaded first; may repeat), `--title`,
  `--dot` (the Graphviz executable). Drawing needs Graphviz (`sudo apt-get install graphviz`).
  """
  use Mix.Task

  @impl true
  def run(argv) do
    {opts, positional} =
      OptionParser.parse!(argv,
        strict: [output: :string, require: :keep, title: :string, dot: :string]
      )

    {target, numbers} =
      case positional do
        [target | numbers] -> {target, numbers}
        [] -> Mix.raise("usage: mix nx_jax.picture Module.function [number ...] [--output file]")
      end

    Mix.Task.run("app.start")
    for file <- Keyword.get_values(opts, :require), do: Code.require_file(file)
    fun = function!(target, length(numbers))
    args = Enum.map(numbers, &number!/1)
    expr = apply(Nx.Defn.debug_expr(fun), args)
    output = Keyword.get(opts, :output, "graph.svg")
    title = Keyword.get(opts, :title, "#{target}(#{Enum.join(numbers, ", ")})")
    render_opts = [title: title] ++ if(opts[:dot], do: [dot: opts[:dot]], else: [])

    try do
      NxJax.Picture.render(expr, output, render_opts)
    rescue
      error in ArgumentError -> Mix.raise(Exception.message(error))
    end

    Mix.shell().info("wrote #{output}")
  end

  defp function!(target, arity) do
    case target |> String.split(".") |> Enum.split(-1) do
      {[_ | _] = module, [name]} ->
        module = Module.concat(module)
        name = String.to_atom(name)

        unless Code.ensure_loaded?(module) and function_exported?(module, name, arity) do
          Mix.raise(
            "#{inspect(module)}.#{name}/#{arity} is not defined (give --require FILE for a " <>
              "module defined in a script)"
          )
        end

        Function.capture(module, name, arity)

      _ ->
        Mix.raise("expected Module.function, got: #{target}")
    end
  end

  defp number!(text) do
    case {Integer.parse(text), Float.parse(text)} do
      {{i, ""}, _} -> Nx.tensor(i)
      {_, {f, ""}} -> Nx.tensor(f)
      _ -> Mix.raise("expected numbers as arguments, got: #{text}")
    end
  end
end
