defmodule Nx.Defn.Composite do
  @moduledoc """
  Walks the containers that `defn` accepts and returns: tensors and numbers are the
  leaves; tuples, maps and structs deriving `Nx.Container` hold leaves; any other term
  passes through untouched.

  Map values are visited in the order of their sorted keys, so every walk over the same
  container visits leaves in the same order.

  ## Examples

      iex> Nx.Defn.Composite.flatten_list([{1, %{b: 2.0, a: 3}}, :opt])
      [1, 3, 2.0]
      iex> Nx.Defn.Composite.traverse({1, [2], %{a: 3}}, &(&1 * 10))
      {10, [2], %{a: 30}}
  """

  @doc """
  Returns true for a leaf: a tensor or a number (`Complex` included).
  """
  @spec leaf?(term) :: boolean
  def leaf?(%Nx.Tensor{}), do: true
  def leaf?(%Complex{}), do: true
  def leaf?(number) when is_number(number), do: true
  def leaf?(_), do: false

  @doc """
  Replaces every leaf of `container` with `fun.(leaf)`.
  """
  @spec traverse(term, (term -> term)) :: term
  def traverse(container, fun) do
    {result, :ok} = map_reduce(container, :ok, fn leaf, :ok -> {fun.(leaf), :ok} end)
    result
  end

  @doc """
  Replaces every leaf of `container` with the first element of `fun.(leaf, acc)`,
  threading the accumulator through the leaves in order.
  """
  @spec map_reduce(term, acc, (term, acc -> {term, acc})) :: {term, acc} when acc: term
  def map_reduce(container, acc, fun) do
    cond do
      leaf?(container) ->
        fun.(container, acc)

      is_tuple(container) ->
        {list, acc} =
          container |> Tuple.to_list() |> Enum.map_reduce(acc, &map_reduce(&1, &2, fun))

        {List.to_tuple(list), acc}

      is_map(container) and not is_struct(container) ->
        {pairs, acc} =
          container
          |> Enum.sort()
          |> Enum.map_reduce(acc, fn {key, value}, acc ->
            {value, acc} = map_reduce(value, acc, fun)
            {{key, value}, acc}
          end)

        {Map.new(pairs), acc}

      impl = is_struct(container) && Nx.Container.impl_for(container) ->
        impl.traverse(container, acc, &map_reduce(&1, &2, fun))

      true ->
        {container, acc}
    end
  end

  @doc false
  # `data` when it is a tensor, a number or an Nx.Container; else Protocol.UndefinedError (as
  # Nx raises where it walks data), `description` saying what was expected
  def container!(data, description) do
    unless leaf?(data) or Nx.Container.impl_for(data) do
      raise Protocol.UndefinedError, protocol: Nx.Container, value: data, description: description
    end

    data
  end

  @doc false
  # `container` with each struct that implements Nx.LazyContainer itself (not through
  # Nx.Container) replaced by the container its traverse/3 returns, where each tensor it
  # stands for is `fun.(template, make_tensor)`
  @spec expand_lazy(term, (Nx.Tensor.t(), (() -> term) -> term)) :: term
  def expand_lazy(container, fun) do
    cond do
      leaf?(container) ->
        container

      is_tuple(container) ->
        container |> Tuple.to_list() |> Enum.map(&expand_lazy(&1, fun)) |> List.to_tuple()

      is_map(container) and not is_struct(container) ->
        Map.new(container, fn {key, value} -> {key, expand_lazy(value, fun)} end)

      is_struct(container) ->
        case {Nx.Container.impl_for(container), Nx.LazyContainer.impl_for(container)} do
          {nil, Nx.LazyContainer.Any} ->
            container

          {nil, lazy} ->
            {result, :ok} =
              lazy.traverse(container, :ok, fn template, make, :ok ->
                {fun.(template, make), :ok}
              end)

            result

          {impl, _} ->
            {result, :ok} = impl.traverse(container, :ok, &{expand_lazy(&1, fun), &2})
            result
        end

      true ->
        container
    end
  end

  @doc """
  The leaves of every container in `containers`, in order.
  """
  @spec flatten_list([term]) :: [term]
  def flatten_list(containers) when is_list(containers) do
    containers
    |> Enum.reduce([], fn container, acc ->
      {_, acc} = map_reduce(container, acc, fn leaf, acc -> {leaf, [leaf | acc]} end)
      acc
    end)
    |> Enum.reverse()
  end

  @doc """
  Replaces the leaves of `container`, in order, with `leaves` (one per leaf).

  ## Examples

      iex> Nx.Defn.Composite.fill({0, %{a: 0}}, [1, 2])
      {1, %{a: 2}}
  """
  @spec fill(term, [term]) :: term
  def fill(container, leaves) do
    {result, []} = map_reduce(container, leaves, fn _leaf, [new | rest] -> {new, rest} end)
    result
  end
end
