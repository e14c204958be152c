# The structs Nx 0.7.2's test files build (its test/support defines them, deriving
# Nx.Container). nx_jax has no Nx.Container protocol yet (docs/COMPATIBILITY.md), so here they
# are plain structs: the files compile, and the tests that pass them to defn fail honestly.
for {name, fields} <- [
      {Container, [:a, :b, c: %{}, d: %{}]},
      {EmptyContainer, [:var, :fun, :acc]},
      {UnderscoredContainer, [:__special__]},
      {LazyWrapped, [:a, :b, :c]},
      {LazyOnly, [:a, :b, :c]},
      {MagicNumber, [value: 0]}
    ] do
  defmodule name do
    @moduledoc false
    defstruct fields
  end
end

defmodule Nx.Shared do
  @moduledoc false
  # Nx 0.7.2's test files iterate over the names of its unary math functions through this
  # internal function; the names are those of Nx 0.7.2 (the values are not used there)
  def unary_math_funs do
    for name <- ~w(exp expm1 log log1p sigmoid cos sin tan cosh sinh tanh acos asin atan acosh
                   asinh atanh sqrt rsqrt cbrt erf erfc erf_inv)a,
        do: {name, nil}
  end
end
