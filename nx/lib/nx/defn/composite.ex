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

  @doc """
  The same walk as `map_reduce/3` (the name Nx 0.7.2 gives it): each leaf becomes the first
  element of `fun.(leaf, acc)`.

  ## Examples

      iex> Nx.Defn.Composite.traverse({1, %{a: 2}}, 0, fn leaf, acc -> {leaf * 2, acc + leaf} end)
      {{2, %{a: 4}}, 3}
  """
  @spec traverse(term, acc, (term, acc -> {term, acc})) :: {term, acc} when acc: term
  def traverse(container, acc, fun) when is_function(fun, 2), do: map_reduce(container, acc, fun)

  @doc """
  Folds `fun.(leaf, acc)` over the leaves of `container`, in order.

  ## Examples

      iex> Nx.Defn.Composite.reduce({1, %{b: 2, a: 3}}, [], &[&1 | &2])
      [2, 3, 1]
  """
  @spec reduce(term, acc, (term, acc -> acc)) :: acc when acc: term
  def reduce(container, acc, fun) when is_function(fun, 2) do
    {_, acc} = map_reduce(container, acc, fn leaf, acc -> {leaf, fun.(leaf, acc)} end)
    acc
  end

  @doc """
  The number of leaves of `container`.

  ## Examples

      iex> Nx.Defn.Composite.count({1, {Nx.tensor([1, 2]), %{a: 3.0}}, :not_a_leaf})
      3
  """
  @spec count(term) :: non_neg_integer
  def count(container), do: reduce(container, 0, fn _leaf, count -> count + 1 end)

  @doc """
  Whether `left` and `right` have the same structure (tuples of the same size, maps with the
  same keys, structs of the same module whose containers match; the fields a struct keeps out
  of its container are not compared) and `fun.(left_leaf, right_leaf)` holds for every pair
  of leaves. Terms that are neither leaves nor containers are compared with `==`.

  ## Examples

      iex> same_shape = fn l, r -> Nx.shape(l) == Nx.shape(r) end
      iex> Nx.Defn.Composite.compatible?({1, %{a: Nx.iota({2})}}, {2.0, %{a: Nx.tensor([5, 6])}}, same_shape)
      true
      iex> Nx.Defn.Composite.compatible?({1, 2}, {1}, same_shape)
      false
  """
  @spec compatible?(term, term, (term, term -> boolean)) :: boolean
  def compatible?(left, right, fun) when is_function(fun, 2) do
    cond do
      leaf?(left) and leaf?(right) ->
        fun.(left, right)

      leaf?(left) or leaf?(right) ->
        false

      is_tuple(left) and is_tuple(right) ->
        tuple_size(left) == tuple_size(right) and
          all_compatible?(Tuple.to_list(left), Tuple.to_list(right), fun)

      is_struct(left) or is_struct(right) ->
        is_struct(right, left.__struct__) and is_struct(left, right.__struct__) and
          structs_compatible?(left, right, fun)

      is_map(left) and is_map(right) ->
        map_size(left) == map_size(right) and
          Enum.all?(left, fn {key, value} ->
            is_map_key(right, key) and compatible?(value, Map.fetch!(right, key), fun)
          end)

      true ->
        left == right
    end
  end

  defp all_compatible?(left, right, fun) do
    length(left) == length(right) and
      Enum.all?(Enum.zip(left, right), fn {l, r} -> compatible?(l, r, fun) end)
  end

  # the children of a container struct (or the templates a lazy container stands for)
  defp structs_compatible?(left, right, fun) do
    case {Nx.Container.impl_for(left), Nx.LazyContainer.impl_for(left)} do
      {nil, Nx.LazyContainer.Any} ->
        left == right

      {nil, lazy} ->
        all_compatible?(lazy_templates(lazy, left), lazy_templates(lazy, right), fun)

      {impl, _} ->
        all_compatible?(children(impl, left), children(impl, right), fun)
    end
  end

  defp children(impl, struct) do
    {_, children} = impl.traverse(struct, [], fn child, acc -> {child, [child | acc]} end)
    Enum.reverse(children)
  end

  defp lazy_templates(lazy, struct) do
    {_, templates} =
      lazy.traverse(struct, [], fn template, _make, acc -> {template, [template | acc]} end)

    Enum.reverse(templates)
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
  The leaves of every container in `containers`, in order, followed by `tail`.

  ## Examples

      iex> Nx.Defn.Composite.flatten_list([{1, 2}, %{a: 3}], [:end])
      [1, 2, 3, :end]
  """
  @spec flatten_list([term], list) :: list
  def flatten_list(containers, tail \\ []) when is_list(containers) and is_list(tail) do
    containers
    |> Enum.reduce([], fn container, acc ->
      {_, acc} = map_reduce(container, acc, fn leaf, acc -> {leaf, [leaf | acc]} end)
      acc
    end)
    |> Enum.reverse(tail)
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
