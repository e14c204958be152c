defmodule Nx.Defn.Dot do
  @moduledoc """
  A traced expression as a Graphviz (DOT) picture: one box per node of its wire graph
  (`Nx.Defn.WireEncoder.nodes/1`), labelled with its op, type and shape, an arrow from each
  input; the outputs have a double border.

    * the function a `grad` differentiates (the nodes between its `x` and its `y`) is a blue
      cluster, and the `grad` node, where JAX runs the backward pass, is red;
    * the gradient function of a `custom_grad/3` (the nodes computed from its incoming
      gradient) is an orange cluster, its arrows into the `custom_grad` node dashed;
    * a `stop_grad` (dashed grey) and any other metadata node (a note) is a cluster with the
      nodes computed only for it: what it wraps, and for `stop_grad` what no gradient
      reaches through it;
    * clusters nest where one holds all of another (a `stop_grad` inside what a `grad`
      differentiates sits inside its cluster);
    * nodes carrying sub-graphs (`while`, `cond`, solvers, ...) say how many nodes each holds.

  `mix nx_jax.picture` renders it with Graphviz; `NxJax.Picture.to_dot/1` is the same function.
  """

  @backward "#f4a6a6"
  @custom "#fbd9a8"
  @forward "#dce9f9"
  @stopped "#eeeeee"
  @metadata "#f6f3d7"
  # (nodes that compute nothing: a cluster holding them still nests in one that does not)
  @leaves [:parameter, :constant, :tensor, :iota, :cotangent]

  @doc """
  The DOT text of the graph of `outputs` (a traced expression, or a container of them: what
  `Nx.Defn.debug_expr/2` returns). Options: `:title` (the graph's label).

  ## Examples

      iex> x = Nx.Defn.Expr.parameter(0, {:f, 32}, {3})
      iex> dot = Nx.Defn.Dot.to_dot(Nx.exp(x))
      iex> dot =~ ~S(n1 [label="exp\\nf32[3]", peripheries=2]) and dot =~ "n0 -> n1"
      true
  """
  @spec to_dot(term, keyword) :: String.t()
  def to_dot(outputs, opts \\ []) do
    {nodes, output_ids} = Nx.Defn.WireEncoder.nodes(outputs)
    by_id = Map.new(nodes, fn {id, _, _, _, _} = node -> {id, node} end)
    users = users(nodes)
    outputs = MapSet.new(output_ids)

    clusters =
      (custom_grad_clusters(nodes, by_id) ++
         wrapper_clusters(nodes, by_id, users, outputs) ++ grad_clusters(nodes, by_id, users))
      |> Enum.reject(&match?({_, _, []}, &1))
      |> Enum.with_index(fn {title, color, ids}, i -> {i, title, color, MapSet.new(ids)} end)

    # each node is drawn in the smallest cluster that holds it, each cluster inside the
    # smallest other cluster that holds all of its computed nodes (its constants and
    # parameters may lie outside; see smallest/2 and holds?/4 for ties)
    home =
      Map.new(nodes, fn {id, _, _, _, _} ->
        {id, smallest(clusters, fn {_, _, _, set} -> MapSet.member?(set, id) end)}
      end)

    parent =
      Map.new(clusters, fn {i, _, _, set} ->
        computed = MapSet.reject(set, &(elem(by_id[&1], 1) in @leaves))
        {i, smallest(clusters, fn {j, _, _, other} -> holds?(other, j, computed, i) end)}
      end)

    members = Enum.group_by(Enum.sort(Map.keys(home)), &home[&1])
    children = Enum.group_by(Enum.map(clusters, &elem(&1, 0)), &parent[&1])
    draw = %{by_id: by_id, outputs: outputs, members: members, children: children}
    by_index = Map.new(clusters, &{elem(&1, 0), &1})

    body =
      Enum.map(Map.get(children, nil, []), &cluster_text(by_index[&1], by_index, draw, "  ")) ++
        for id <- Map.get(members, nil, []), do: "  " <> node_line(by_id[id], outputs)

    edges =
      for {id, op, inputs, opts, _out} <- nodes,
          {input, style} <- edges_of(op, inputs, opts),
          do: "  n#{input} -> n#{id}#{style}"

    title = Keyword.get(opts, :title)
    header = if title, do: ["  label=#{quote_dot(title)}; labelloc=t;"], else: []

    Enum.join(
      ["digraph nx {", "  node [shape=box, fontname=\"Helvetica\", fontsize=10];"] ++
        header ++ body ++ edges ++ ["}"],
      "\n"
    ) <> "\n"
  end

  # the DOT text of cluster `i`: the nodes drawn in it, then the clusters nested in it
  defp cluster_text({i, title, color, _set}, by_index, draw, indent) do
    inner = indent <> "  "

    nodes =
      for id <- Map.get(draw.members, i, []),
          do: inner <> node_line(draw.by_id[id], draw.outputs)

    nested =
      for j <- Map.get(draw.children, i, []),
          do: cluster_text(by_index[j], by_index, draw, inner)

    Enum.join(
      [
        "#{indent}subgraph cluster_#{i} {",
        "#{inner}label=#{quote_dot(title)}; style=filled; color=#{quote_dot(color)};"
      ] ++
        nodes ++ nested ++ ["#{indent}}"],
      "\n"
    )
  end

  # the index of the smallest cluster for which `fun` holds (of two the same size, the one
  # listed later: it is the inner one), nil when there is none
  defp smallest(clusters, fun) do
    case Enum.filter(clusters, fun) do
      [] -> nil
      found -> found |> Enum.min_by(fn {i, _, _, set} -> {MapSet.size(set), -i} end) |> elem(0)
    end
  end

  # whether cluster j (its node set `other`) holds all of cluster i (`set`): of two with the
  # same nodes, the one listed first holds the other
  defp holds?(other, j, set, i) do
    j != i and MapSet.subset?(set, other) and (MapSet.size(other) > MapSet.size(set) or j < i)
  end

  ## Nodes

  defp node_line({id, op, _inputs, opts, out}, outputs) do
    label = "#{label(op, opts)}\\n#{out_label(out)}"
    attrs = [~s(label="#{escape(label)}") | style(op, MapSet.member?(outputs, id))]
    "n#{id} [#{Enum.join(attrs, ", ")}]"
  end

  defp label(:parameter, %{index: i}), do: "parameter #{i}"
  defp label(:constant, %{value: v}), do: "constant #{inspect(v)}"
  defp label(:elem, %{index: i}), do: "elem #{i}"
  defp label(:metadata, %{keys: keys}), do: "metadata #{Enum.map_join(keys, ", ", &inspect/1)}"

  defp label(op, opts) do
    subgraphs =
      for {key, value} <- Enum.sort(opts),
          count = subgraph_size(value),
          count != nil,
          do: "#{key}: #{count} nodes"

    Enum.join([Atom.to_string(op) | subgraphs], "\\n")
  end

  defp subgraph_size({:nx_jax_graph, _, nodes, _}), do: length(nodes)

  defp subgraph_size([{:nx_jax_graph, _, _, _} | _] = graphs),
    do: graphs |> Enum.map(&subgraph_size/1) |> Enum.join("+")

  defp subgraph_size(_), do: nil

  defp out_label({type, shape}) when is_tuple(shape),
    do: "#{Nx.Type.to_string(type)}#{shape_label(shape)}"

  defp out_label(outs) when is_list(outs),
    do: "(" <> Enum.map_join(outs, ", ", &out_label/1) <> ")"

  defp shape_label(shape), do: shape |> Tuple.to_list() |> Enum.map_join(&"[#{&1}]")

  defp style(op, output?) do
    base =
      case op do
        :grad -> [~s(style=filled), ~s(fillcolor="#{@backward}")]
        :custom_grad -> [~s(style=filled), ~s(fillcolor="#{@custom}")]
        :stop_grad -> [~s(style=dashed), ~s(color="grey40"), ~s(fontcolor="grey40")]
        :metadata -> [~s(shape=note)]
        :parameter -> [~s(shape=ellipse)]
        _ -> []
      end

    if output?, do: [~s(peripheries=2) | base], else: base
  end

  # {input, edge attributes}: a custom_grad's gradient expressions come in dashed
  defp edges_of(:custom_grad, inputs, %{grads: grads}) do
    Enum.map(inputs, &{&1, ""}) ++ Enum.map(grads, &{&1, " [style=dashed]"})
  end

  defp edges_of(_op, inputs, _opts), do: Enum.map(inputs, &{&1, ""})

  ## Clusters

  # id -> the ids of the nodes that read it (inputs, and a custom_grad's option ids)
  defp users(nodes) do
    Enum.reduce(nodes, %{}, fn {id, op, inputs, opts, _}, acc ->
      refs =
        inputs ++ if(op == :custom_grad, do: opts.wrt ++ opts.cotangents ++ opts.grads, else: [])

      Enum.reduce(refs, acc, fn r, acc -> Map.update(acc, r, [id], &[id | &1]) end)
    end)
  end

  # the nodes a grad differentiates: those depending on one of its x that its y depends on
  defp grad_clusters(nodes, by_id, users) do
    for {id, :grad, [y | xs], _opts, _out} <- nodes do
      region = MapSet.intersection(reach(xs, &Map.get(users, &1, [])), ancestors([y], by_id))

      {"differentiated by grad (node #{id})", @forward,
       region |> MapSet.delete(id) |> MapSet.to_list()}
    end
  end

  # a stop_grad or metadata node and the nodes computed only for it (neither parameters nor
  # outputs): walking down from it in reverse topological order (ids are), a node joins when
  # every node that reads it has joined. A node that wraps nothing of its own (the copies of
  # x that grad marks, for one) is no cluster.
  defp wrapper_clusters(nodes, by_id, users, outputs) do
    for {id, op, inputs, opts, _out} <- nodes, op in [:stop_grad, :metadata] do
      region =
        inputs
        |> ancestors(by_id)
        |> Enum.sort(:desc)
        |> Enum.reduce(MapSet.new([id]), fn n, region ->
          only_here? =
            elem(by_id[n], 1) != :parameter and not MapSet.member?(outputs, n) and
              Enum.all?(Map.get(users, n, []), &MapSet.member?(region, &1))

          if only_here?, do: MapSet.put(region, n), else: region
        end)

      {title, color} =
        if op == :stop_grad,
          do: {"stop_grad (node #{id}): no gradient flows back", @stopped},
          else: {"#{label(op, opts)} (node #{id})", @metadata}

      {title, color, MapSet.to_list(region)}
    end
    |> Enum.reject(&match?({_title, _color, [_wrapper_only]}, &1))
  end

  # a custom_grad's gradient function: the nodes its grads need that its value does not
  defp custom_grad_clusters(nodes, by_id) do
    for {id, :custom_grad, inputs, %{wrt: wrt, grads: grads}, _out} <- nodes do
      region = MapSet.difference(ancestors(grads, by_id), ancestors(inputs ++ wrt, by_id))
      {"custom_grad's gradient (node #{id})", @custom, MapSet.to_list(region)}
    end
  end

  defp ancestors(ids, by_id) do
    reach(ids, fn id ->
      case by_id[id] do
        {_, :custom_grad, inputs, opts, _} -> inputs ++ opts.grads
        {_, _, inputs, _, _} -> inputs
      end
    end)
  end

  defp reach(start, next) do
    Enum.reduce(start, MapSet.new(), &walk(&1, &2, next))
  end

  defp walk(id, seen, next) do
    if MapSet.member?(seen, id),
      do: seen,
      else: Enum.reduce(next.(id), MapSet.put(seen, id), &walk(&1, &2, next))
  end

  defp quote_dot(text), do: ~s("#{escape(text)}")
  defp escape(text), do: String.replace(text, "\"", "\\\"")
end
