# The structs Nx 0.7.2's test files build; its test/support declares them with these fields,
# derivations and lazy implementations (the behaviour its tests assert), written here anew.
defmodule Container do
  @moduledoc false
  @derive {Nx.Container, containers: [:a, :b], keep: [:d]}
  defstruct [:a, :b, c: %{}, d: %{}]
end

defmodule EmptyContainer do
  @moduledoc false
  @derive {Nx.Container, containers: []}
  defstruct [:var, :fun, :acc]
end

defmodule UnderscoredContainer do
  @moduledoc false
  @derive {Nx.Container, containers: [], keep: [:__special__]}
  defstruct [:__special__]
end

defmodule LazyWrapped do
  @moduledoc false
  @derive {Nx.Container, containers: [:a, :b, :c]}
  defstruct [:a, :b, :c]
end

# stands for a LazyWrapped; the tensor of :b must never be made (its maker raises)
defmodule LazyOnly do
  @moduledoc false
  defstruct [:a, :b, :c]

  defimpl Nx.LazyContainer do
    def traverse(%LazyOnly{a: a, b: b, c: c}, acc, fun) do
      {a, acc} = fun.(Nx.to_template(a), fn -> Nx.tensor(a) end, acc)

      {b, acc} =
        if b, do: fun.(Nx.to_template(b), fn -> raise "don't call b" end, acc), else: {b, acc}

      {c, acc} = Nx.LazyContainer.traverse(c, acc, fun)
      {%LazyWrapped{a: a, b: b, c: c}, acc}
    end
  end
end

defmodule MagicNumber do
  @moduledoc false
  defstruct value: 0

  defimpl Nx.LazyContainer do
    def traverse(%MagicNumber{value: value}, acc, fun),
      do: fun.(Nx.to_template(value), fn -> Nx.tensor(value) end, acc)
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
