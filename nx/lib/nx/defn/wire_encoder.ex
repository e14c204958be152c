defmodule Nx.Defn.WireEncoder do
  @moduledoc """
  Turns the result of a trace (a container of expression tensors) into its canonical
  graph, the form a compiler (`Nx.Defn.Compiler`) receives, and the one `docs/PROTOCOL.md`
  (section 4) sends to the worker:

      {:nx_jax_graph, 1, nodes, output_ids}

  Only the nodes reachable from the outputs are kept (for a `custom_grad/3` node that
  includes its `wrt`, `cotangents` and `grads` expressions). They are numbered
  `0..n-1` in depth-first post-order, so every node comes after everything it refers to.
  The numbering depends only on the structure of the expression, never on the node
  references, so tracing the same function on the same signature twice gives
  byte-identical `:erlang.term_to_binary/1` output (the worker caches by its hash).

  Metadata nodes become wire ops: `%{stop_grad: true}` becomes `:stop_grad`,
  `%{custom_grad: ...}` becomes `:custom_grad`, any other map becomes `:metadata`
  listing its keys.

  ## Examples

      iex> x = Nx.Defn.Expr.parameter(0, {:f, 32}, {})
      iex> y = Nx.Defn.Expr.expr(:exp, [x], %{}, x)
      iex> {graph, [0], _container} = Nx.Defn.WireEncoder.encode(y)
      iex> graph
      {:nx_jax_graph, 1,
       [{0, :parameter, [], %{index: 0}, {{:f, 32}, {}}}, {1, :exp, [0], %{}, {{:f, 32}, {}}}],
       [1]}
  """

  alias Nx.Defn.{Composite, Expr}

  @version 1
  @comparison_ops ~w(equal not_equal less less_equal greater greater_equal)a

  @typedoc "A wire node: `{id, op, input_ids, opts, out}`."
  @type wire_node :: {non_neg_integer, atom, [non_neg_integer], map, term}

  @doc """
  Encodes the container `outputs` (a tensor, number, or tuple/map of them).

  Returns `{graph, parameters, container}`:

    * `graph` - the wire graph term; send `:erlang.term_to_binary(graph)`
    * `parameters` - the original indices of the parameters the graph uses, in order:
      the graph's parameters are renumbered `0..k-1`, so the `i`-th argument of the
      run is the argument whose original index is `Enum.at(parameters, i)`
    * `container` - `outputs` with each leaf replaced by a template tensor (`data: nil`);
      `rebuild/2` fills it with the results, one per graph output, in order
  """
  @spec encode(term) :: {tuple, [non_neg_integer], term}
  def encode(outputs) do
    {nodes, output_ids} = nodes(outputs)

    parameters =
      for({_, :parameter, _, %{index: index}, _} <- nodes, do: index)
      |> Enum.uniq()
      |> Enum.sort()

    renumber = parameters |> Enum.with_index() |> Map.new()

    nodes =
      Enum.map(nodes, fn
        {id, :parameter, [], %{index: index}, out} ->
          {id, :parameter, [], %{index: Map.fetch!(renumber, index)}, out}

        node ->
          node
      end)

    container = Composite.traverse(outputs, &template/1)
    {{:nx_jax_graph, @version, nodes, output_ids}, parameters, container}
  end

  @doc """
  The wire nodes reachable from `outputs` and the ids of the outputs, in the order of
  `encode/1` but with the parameters' original indices (used for printing).
  """
  @spec nodes(term) :: {[wire_node], [non_neg_integer]}
  def nodes(outputs) do
    leaves = outputs |> List.wrap() |> Composite.flatten_list() |> Enum.map(&Expr.to_expr/1)
    state = %{ids: %{}, nodes: [], params: %{}}
    {output_ids, state} = Enum.map_reduce(leaves, state, &visit/2)
    {Enum.reverse(state.nodes), output_ids}
  end

  @doc """
  The wire id of every node of `encode/1`'s graph (not those of sub-graphs), by the id of
  its expression: `%{expression_id => wire_id}`.
  """
  @spec ids(term) :: %{reference => non_neg_integer}
  def ids(outputs) do
    leaves = outputs |> List.wrap() |> Composite.flatten_list() |> Enum.map(&Expr.to_expr/1)
    {_output_ids, state} = Enum.map_reduce(leaves, %{ids: %{}, nodes: [], params: %{}}, &visit/2)
    state.ids
  end

  @doc """
  Fills the template `container` returned by `encode/1` with `tensors`, in order.
  """
  @spec rebuild(term, [Nx.Tensor.t()]) :: term
  def rebuild(container, tensors), do: Composite.fill(container, tensors)

  defp template(leaf), do: leaf |> Expr.to_expr() |> Expr.template_of()

  # inside a sub-graph (PROTOCOL 4.3): its own parameters and the captured values
  defp visit(%Nx.Tensor{data: %Expr{id: ref}} = tensor, %{ids: ids, params: params} = state)
       when is_map_key(params, ref) and not is_map_key(ids, ref) do
    id = map_size(ids)
    node = {id, :parameter, [], %{index: Map.fetch!(params, ref)}, out(tensor)}
    {id, %{state | ids: Map.put(ids, ref, id), nodes: [node | state.nodes]}}
  end

  defp visit(%Nx.Tensor{data: %Expr{id: ref} = expr} = tensor, state) do
    case state.ids do
      %{^ref => id} ->
        {id, state}

      %{} ->
        {arg_ids, state} = Enum.map_reduce(expr.args, state, &visit/2)
        {op, opts, state} = wire_op(tensor, state)
        id = map_size(state.ids)
        node = {id, op, arg_ids, opts, out(tensor)}
        {id, %{state | ids: Map.put(state.ids, ref, id), nodes: [node | state.nodes]}}
    end
  end

  defp visit(other, _state) do
    raise ArgumentError, "expected an expression tensor in the graph, got: #{inspect(other)}"
  end

  defp wire_op(
         %Nx.Tensor{data: %Expr{op: :metadata, opts: %{metadata: metadata}}} = tensor,
         state
       ) do
    cond do
      Map.get(metadata, :stop_grad) ->
        {:stop_grad, %{}, state}

      match?(%{custom_grad: {_, _, _}}, metadata) ->
        {wrt, cotangents, grads} = metadata.custom_grad
        {wrt, state} = Enum.map_reduce(wrt, state, &visit/2)
        {cotangents, state} = Enum.map_reduce(cotangents, state, &visit/2)
        {grads, state} = Enum.map_reduce(grads, state, &visit/2)
        tuple? = match?({:tuple, _}, tensor.type)
        opts = %{wrt: wrt, cotangents: cotangents, grads: grads, tuple: tuple?}
        {:custom_grad, opts, state}

      true ->
        {:metadata, %{keys: metadata |> Map.keys() |> Enum.sort()}, state}
    end
  end

  # the hook's function and name stay in Elixir (Nx.Defn.Compiler keeps them by index)
  defp wire_op(%Nx.Tensor{data: %Expr{op: :hook, opts: %{index: index}}}, state),
    do: {:hook, %{index: index}, state}

  # types are decided here once: the worker is told the type two inputs are compared in
  # rather than re-deriving Nx's promotion
  defp wire_op(%Nx.Tensor{data: %Expr{op: op, args: [a, b], opts: opts}}, state)
       when op in @comparison_ops do
    {op, Map.put(opts, :operand_type, Nx.Type.merge(a.type, b.type)), state}
  end

  # an integer constant travels as the value its type holds: Nx keeps the low bits of one
  # that does not fit (2 ** 200 as s64 is 0), and the worker refuses integers over 1024 bytes
  defp wire_op(%Nx.Tensor{data: %Expr{op: :constant, opts: %{value: v} = opts}} = t, state)
       when is_integer(v) do
    value =
      case t.type do
        {:s, bits} -> <<v::signed-size(bits)>> |> then(fn <<w::signed-size(bits)>> -> w end)
        {:u, bits} -> <<v::size(bits)>> |> then(fn <<w::size(bits)>> -> w end)
        _ -> v
      end

    {:constant, %{opts | value: value}, state}
  end

  # an op carrying sub-graphs (control flow, reductions with a function, solvers): each
  # becomes a graph term of its own
  defp wire_op(%Nx.Tensor{data: %Expr{op: op, opts: opts}}, state) do
    if Enum.any?(opts, fn {_key, value} -> subgraph?(value) end),
      do: {op, Map.new(opts, fn {key, value} -> {key, subgraph(value)} end), state},
      else: {op, opts, state}
  end

  defp subgraph?({:subgraph, _outputs, _params}), do: true
  defp subgraph?([{:subgraph, _outputs, _params} | _]), do: true
  defp subgraph?(_value), do: false

  # {:subgraph, outputs, params} (Nx.Defn.ControlFlow) -> a graph term of its own, whose
  # parameter i is params[i]
  defp subgraph({:subgraph, outputs, params}) do
    params = params |> Enum.with_index() |> Map.new(fn {param, i} -> {param.data.id, i} end)
    state = %{ids: %{}, nodes: [], params: params}
    {output_ids, state} = Enum.map_reduce(outputs, state, &visit/2)
    {:nx_jax_graph, @version, Enum.reverse(state.nodes), output_ids}
  end

  defp subgraph(list) when is_list(list), do: Enum.map(list, &subgraph/1)
  defp subgraph(other), do: other

  defp out(%Nx.Tensor{type: {:tuple, _}, data: %Expr{op: :grad, args: [_y | xs]}}) do
    Enum.map(xs, &out/1)
  end

  defp out(%Nx.Tensor{type: {:tuple, _}, data: %Expr{op: :metadata, args: args}}) do
    Enum.map(args, &out/1)
  end

  # any other tuple-valued node (Nx.Defn.Expr.tuple/4: qr, lu, svd, ...)
  defp out(%Nx.Tensor{type: {:tuple, _}, data: %Expr{outs: outs}}) when is_list(outs) do
    Enum.map(outs, &out/1)
  end

  # a vectorized tensor travels devectorized: its vectorized sizes lead its shape
  defp out(%Nx.Tensor{type: type} = tensor), do: {type, Nx.full_shape(tensor)}
end
