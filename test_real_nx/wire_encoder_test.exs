defmodule NxJax.RealNx.WireEncoderTest do
  # the graphs NxJax.WireEncoder writes for real Nx's expressions (no worker)
  use ExUnit.Case, async: true

  import Nx.Defn

  defn branchy(x, y) do
    shared = Nx.exp(y)

    if Nx.sum(x) > 0 do
      Nx.sqrt(x) * shared
    else
      Nx.cos(x) - shared
    end
  end

  defp trace(fun, args), do: NxJax.WireEncoder.encode(Nx.Defn.debug_expr_apply(fun, args))

  defp ops({:nx_jax_graph, 1, nodes, _outputs}), do: for({_, op, _, _, _} <- nodes, do: op)

  test "a cond's branches are closed sub-graphs: what only a branch reads is computed there" do
    x = Nx.tensor([1.0, 2.0])
    {graph, [0, 1], hooks} = trace(&branchy/2, [x, x])
    assert hooks == %{}
    {:nx_jax_graph, 1, nodes, [out]} = graph

    root = ops(graph)
    refute :sqrt in root
    refute :cos in root
    # exp(y), read by both branches, is computed once before the cond
    assert :exp in root

    [{cond_id, :cond, [_pred | captures], %{branches: [on_true, on_false]}, [{{:f, 32}, {2}}]}] =
      for {_, :cond, _, _, _} = node <- nodes, do: node

    assert {^out, :elem, [^cond_id], %{index: 0}, _} = Enum.at(nodes, out)
    assert length(captures) == 2
    assert :sqrt in ops(on_true) and :parameter in ops(on_true)
    assert :cos in ops(on_false)
    NxJax.Ops.check_graph!(graph)
  end

  test "the parameters a graph reads, renumbered in order" do
    x = Nx.tensor(1.0)
    {graph, [1], _hooks} = trace(fn _a, b -> Nx.add(b, 1) end, [x, x])
    {:nx_jax_graph, 1, nodes, _outputs} = graph
    assert [%{index: 0}] = for({_, :parameter, [], opts, _} <- nodes, do: opts)
  end
end
