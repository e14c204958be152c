defmodule NxJax.AutodiffOldNameTest do
  # NxJax.Defn, the toolbox's old name (deprecated): every public function of NxJax.Autodiff
  # has its twin there, and the twin answers what the new one does, from plain Elixir and
  # inside a defn. Under both front ends (test_real_nx/ runs this file too).
  use ExUnit.Case, async: true

  import Nx.Defn

  # `apply/3` (a direct call of a deprecated function would warn at compile time), in a
  # transform: defn itself has no apply/3
  deftransformp(old_hessian_of(x), do: apply(NxJax.Defn, :hessian, [&Nx.sum(Nx.pow(&1, 3)), x]))
  defn old_hessian(x), do: old_hessian_of(x) * 1

  test "NxJax.Defn has every public function of NxJax.Autodiff, each marked deprecated" do
    {:docs_v1, _, _, _, _, _, docs} = Code.fetch_docs(NxJax.Defn)
    new = NxJax.Autodiff.__info__(:functions) -- [__info__: 1]
    old = NxJax.Defn.__info__(:functions)

    assert new -- old == []

    # (the transforms' generated helpers are named __..__)
    for {{:function, name, arity}, _, _, _, meta} <- docs,
        not String.starts_with?(Atom.to_string(name), "__") do
      assert meta[:deprecated] =~ "NxJax.Autodiff.#{name}/", "#{name}/#{arity}"
      name
    end
    |> Enum.uniq()
    |> then(&assert length(&1) == 11)
  end

  test "the old name's functions give the new ones' values" do
    x = Nx.tensor([1.0, 2.0])
    cube = &Nx.sum(Nx.pow(&1, 3))

    assert apply(NxJax.Defn, :hessian, [cube, x]) == NxJax.Autodiff.hessian(cube, x)
    assert old_hessian(x) == Nx.tensor([[6.0, 0.0], [0.0, 12.0]])

    {value, tangent} = apply(NxJax.Defn, :jvp, [&Nx.sin/1, 0.0, 2.0])
    assert {Nx.to_number(value), Nx.to_number(tangent)} == {0.0, 2.0}

    assert apply(NxJax.Defn, :jacrev, [&Nx.exp/1, Nx.tensor([0.0, 1.0])]) ==
             NxJax.Autodiff.jacrev(&Nx.exp/1, Nx.tensor([0.0, 1.0]))
  end
end
