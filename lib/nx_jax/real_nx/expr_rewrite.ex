defmodule NxJax.RealNx.ExprRewrite do
  @moduledoc false
  # Two walks over real Nx's expressions that the toolbox (NxJax.Autodiff under real Nx) builds on:
  # the values an expression reads from outside a set of nodes, and the same expression with
  # some nodes replaced. Sub-graphs that read only their own parameters (while, fun, optional)
  # are not entered; cond's branches, which read their parents' nodes, are.

  alias Nx.Defn.{Expr, Tree}

  @doc """
  The nodes `expr` reads from outside: those that do not depend on the nodes of `ids` (a
  `MapSet` of expression ids) but are read by nodes that do, in the order met, each once.
  Returns `{depends?, nodes}`, `depends?` whether `expr` depends on `ids` at all.
  """
  def outside(expr, ids) do
    {depends, {found, _seen}} = depends?(expr, ids, {[], %{}})
    {depends, found |> Enum.reverse() |> Enum.uniq_by(& &1.data.id)}
  end

  defp depends?(%Nx.Tensor{data: %Expr{id: id}} = node, ids, {_found, seen} = acc) do
    cond do
      MapSet.member?(ids, id) ->
        {true, acc}

      Map.has_key?(seen, id) ->
        {seen[id], acc}

      true ->
        {_args, read} = Tree.apply_args(node, :scope, [], fn arg, read -> {arg, [arg | read]} end)
        args = Enum.reverse(read)
        {flags, {found, seen}} = Enum.map_reduce(args, acc, &depends?(&1, ids, &2))
        depends = Enum.any?(flags)

        found =
          if depends,
            do:
              for({arg, false} <- Enum.zip(args, flags), reduce: found, do: (acc -> [arg | acc])),
            else: found

        {depends, {found, Map.put(seen, id, depends)}}
    end
  end

  @doc """
  Whether a node of `expr` (sub-graphs included) satisfies `pred`.
  """
  def any?(expr, pred), do: expr |> any?(pred, MapSet.new()) |> elem(0)

  defp any?(%Nx.Tensor{data: %Expr{id: id}} = node, pred, seen) do
    cond do
      MapSet.member?(seen, id) ->
        {false, seen}

      pred.(node) ->
        {true, seen}

      true ->
        {_args, {found, seen}} =
          Tree.apply_args(node, :all, {false, MapSet.put(seen, id)}, fn
            arg, {true, seen} -> {arg, {true, seen}}
            arg, {false, seen} -> {arg, any?(arg, pred, seen)}
          end)

        {found, seen}
    end
  end

  @doc """
  `expr` with the nodes of `replace` (a map of expression ids to tensors) replaced; a node
  whose arguments change becomes a new node (a new id), the others are kept. A
  `custom_grad/3`'s rule is kept as written (a closure over the nodes it was given): the
  gradients it gives are those at the replaced values only where those equal the old ones,
  as they do where the toolbox replaces (a root by the same root, a value by a parameter of
  the same value).
  """
  def replace(expr, replace) do
    {new, _cache} = rewrite(expr, replace, %{})
    new
  end

  defp rewrite(%Nx.Tensor{data: %Expr{id: id} = expr} = node, replace, cache) do
    cond do
      Map.has_key?(replace, id) ->
        {Map.fetch!(replace, id), cache}

      Map.has_key?(cache, id) ->
        {Map.fetch!(cache, id), cache}

      true ->
        {args, cache} = Tree.apply_args(node, :scope, cache, &rewrite(&1, replace, &2))
        {args, cache} = custom_grad_inputs(expr.op, args, replace, cache)

        new =
          if args == expr.args,
            do: node,
            else: %{node | data: %{expr | id: Expr.id(), args: args}}

        {new, Map.put(cache, id, new)}
    end
  end

  # a custom_grad's inputs are where its rule sends gradients: they are replaced too (its rule
  # itself, a closure, still reads the nodes it was written with, whose values the
  # replacements share)
  defp custom_grad_inputs(
         :metadata,
         [value, %{custom_grad: {inputs, fun}} = meta],
         replace,
         cache
       ) do
    {inputs, cache} = Enum.map_reduce(inputs, cache, &rewrite(&1, replace, &2))
    {[value, %{meta | custom_grad: {inputs, fun}}], cache}
  end

  defp custom_grad_inputs(_op, args, _replace, cache), do: {args, cache}
end
