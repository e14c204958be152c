defmodule Nx.DoctestTest do
  # Every example in the docs of `Nx`, run on the real worker. One module for all of them, so
  # the examples of a new function run without anyone having to list it.
  use ExUnit.Case, async: true

  import Nx, only: [is_tensor: 1, sigil_V: 2, sigil_M: 2]

  doctest Nx
  # the one example of the expression layer that makes tensors (its others: nx/test/)
  doctest Nx.Defn.Composite, only: [compatible?: 3]

  # the groups of Nx 0.7.2's API (its docs sidebar), which its own test holds every
  # documented function of Nx to
  @doc_types [
    :aggregation,
    :backend,
    :conversion,
    :creation,
    :cumulative,
    :element,
    :indexed,
    :ndim,
    :shape,
    :type,
    :window,
    :vectorization
  ]

  test "every documented function of Nx names its group in @doc type (as Nx 0.7.2)" do
    {:docs_v1, _, :elixir, "text/markdown", _, _, entries} = Code.fetch_docs(Nx)

    untyped =
      for {{:function, name, arity}, _, _, docs, meta} <- entries,
          is_map(docs) and map_size(docs) > 0,
          meta[:type] not in @doc_types,
          do: {"#{name}/#{arity}", meta[:type]}

    assert untyped == []

    types =
      for {{_, name, arity}, _, _, _, meta} <- entries,
          into: %{},
          do: {{name, arity}, meta[:type]}

    assert types[{:add, 2}] == :element
    assert types[{:sum, 2}] == :aggregation
    assert types[{:gather, 3}] == :indexed
    assert types[{:tensor, 2}] == :creation
    assert types[{:window_sum, 3}] == :window
  end
end
