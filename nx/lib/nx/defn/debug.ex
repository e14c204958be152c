defmodule Nx.Defn.Debug do
  @moduledoc """
  A `:compiler` for `Nx.Defn.jit/2` and `Nx.Defn.default_options/1` that does not run
  anything: a `defn` call (or a jitted function) returns the expression it traced, as
  `Nx.Defn.debug_expr/2` does. Nx 0.7.2 has a compiler of this name; code and tests
  written for it work unchanged.

  ## Examples

      iex> expr = Nx.Defn.jit(&Nx.add(&1, 1), compiler: Nx.Defn.Debug).(Nx.tensor([1, 2]))
      iex> {expr.data.op, expr.shape}
      {:add, {2}}
  """
end
