# Structs of test_elixir/nx_container_test.exs, compiled with the project in the test
# environment (mix.exs), so the consolidated Nx.Container and Nx.LazyContainer protocols know
# their implementations.
defmodule NxJax.ContainerTest.Layer do
  @derive {Nx.Container, containers: [:w, :b], keep: [:activation]}
  defstruct [:w, :b, activation: :tanh, cache: %{}]
end

defmodule NxJax.ContainerTest.Pair do
  @derive {Nx.Container, containers: [:left, :right]}
  defstruct [:left, :right]
end

# stands for a Pair; the maker of :right sends a message when called, so tests see which
# tensors were made
defmodule NxJax.ContainerTest.Lazy do
  defstruct [:left, :right, :owner]

  defimpl Nx.LazyContainer do
    def traverse(%{left: left, right: right, owner: owner}, acc, fun) do
      {left, acc} = fun.(Nx.to_template(left), fn -> made(owner, :left, left) end, acc)

      {right, acc} = fun.(Nx.to_template(right), fn -> made(owner, :right, right) end, acc)

      {%NxJax.ContainerTest.Pair{left: left, right: right}, acc}
    end

    defp made(owner, name, value) do
      send(owner, {:made, name})
      Nx.tensor(value)
    end
  end
end

defmodule NxJax.ContainerTest.One do
  defstruct [:value]

  defimpl Nx.LazyContainer do
    def traverse(%{value: v}, acc, fun),
      do: fun.(Nx.to_template(v), fn -> Nx.tensor(v) end, acc)
  end
end

defmodule NxJax.ContainerTest.Plain do
  defstruct [:x]
end
