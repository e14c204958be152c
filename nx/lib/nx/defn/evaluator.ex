defmodule Nx.Defn.Evaluator do
  @moduledoc """
  Nx 0.7.2's default `defn` compiler, by name: an `Nx.Defn.Compiler` that runs every call on
  the clean room's default compiler (`config :nx, :default_compiler`). Code and libraries
  written for Nx pass it as `compiler: Nx.Defn.Evaluator`, and a compiler of a user's may
  wrap it (call its `__jit__/5`); both run on the default compiler, with the same results.
  `Nx.Defn.stream/3` with no compiler named is its stream, Nx 0.7.2's evaluator's (each output
  checked against the accumulator's template, an exit after done).

  Of its own options, `:max_concurrency` sets the number of partitions
  (`__partitions_options__/1`), as in Nx; `:garbage_collect` (collect after each node of
  Nx's evaluator) has nothing to do here and is dropped.
  """

  @behaviour Nx.Defn.Compiler

  @own_options [:garbage_collect, :max_concurrency]

  @impl true
  def __jit__(key, vars, fun, args_list, opts),
    do: runtime().__jit__(key, vars, fun, args_list, Keyword.drop(opts, @own_options))

  @impl true
  def __compile__(key, vars, fun, opts),
    do: runtime().__compile__(key, vars, fun, Keyword.drop(opts, @own_options))

  # (compiled by the default compiler; a stream of Nx's evaluator: each output is checked
  # against the accumulator's template, as Nx 0.7.2's evaluator checks it)
  @impl true
  def __stream__(key, input, acc, vars, fun, [args], opts) do
    compiled = runtime().__compile__(key, vars, fun, Keyword.drop(opts, @own_options))
    rest = Enum.drop(args, Nx.Defn.Composite.count(input) + Nx.Defn.Composite.count(acc))

    step = fn data, acc ->
      [result] = compiled.([Nx.Defn.Stream.step_args(data, acc, rest)])
      result
    end

    [Nx.Defn.Stream.start_link(input, acc, step)]
  end

  @impl true
  def __partitions_options__(opts),
    do: List.duplicate(opts, Keyword.get(opts, :max_concurrency, 1))

  @impl true
  def __to_backend__(opts), do: runtime().__to_backend__(Keyword.drop(opts, @own_options))

  defp runtime, do: Nx.Defn.Compiler.runtime()
end
