defmodule Nx.Defn.Composite do
  @moduledoc """
  Walks the containers that `defn` accepts and returns: tensors and numbers are the
  leaves; tuples and maps (not structs) hold leaves; any other term passes through
  untouched.

  Map values are visited in the order of their sorted keys, so every walk over the same
  container visits leaves in the same order.

  ## Examples

      iex> Nx.Defn.Composite.flatten_list([{1, %{b: 2.0, a: 3}}, :opt])
      [1, 3, 2.0]
      iex> Nx.Defn.Composite.traverse({1, [2], %{a: 3}}, &(&1 * 10))
      {10, [2], %{a: 30}}
  """

  @doc """
  Returns true for a leaf: a tensor or a number.
  """
  @spec leaf?(term) :: boolean
  def leaf?(%Nx.Tensor{}), do: true
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

      true ->
        {container, acc}
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
