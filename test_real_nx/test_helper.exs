# nx_jax's tests under real Nx 0.7.2 (`make test-real-nx`): mix.exs builds nx_jax against real
# Nx with NX_JAX_NX=DIR and points test_paths here.
ExUnit.start()

defmodule NxJax.RealNxCase do
  @moduledoc """
  Compares a function jitted with `compiler: NxJax` against the same function under real Nx's
  own evaluator (`Nx.Defn.Evaluator`, in the same process): the same container, the same
  types and shapes, the same values (floats within a tolerance).
  """

  import ExUnit.Assertions

  @doc "Runs `fun` on `args` under both compilers and asserts the results agree."
  def assert_same(fun, args, opts \\ []) do
    ours = Nx.Defn.jit_apply(fun, args, compiler: NxJax)
    theirs = Nx.Defn.jit_apply(fun, args, compiler: Nx.Defn.Evaluator)
    assert_close(ours, theirs, opts)
    ours
  end

  @doc "Asserts two containers of tensors agree (floats within `:atol`/`:rtol`)."
  def assert_close(ours, theirs, opts \\ []) do
    ours_leaves = Nx.Defn.Composite.flatten_list([ours])
    theirs_leaves = Nx.Defn.Composite.flatten_list([theirs])
    assert length(ours_leaves) == length(theirs_leaves)

    assert same_structure?(ours, theirs),
           "containers differ: #{inspect(ours)} vs #{inspect(theirs)}"

    Enum.zip_with(ours_leaves, theirs_leaves, fn a, b ->
      assert a.data.__struct__ == Nx.BinaryBackend

      assert {a.type, a.shape, a.names, a.vectorized_axes} ==
               {b.type, b.shape, b.names, b.vectorized_axes}

      a = Nx.devectorize(a, keep_names: false)
      b = Nx.devectorize(b, keep_names: false)

      case a.type do
        {kind, _} when kind in [:f, :bf, :c] ->
          atol = Keyword.get(opts, :atol, 1.0e-5)
          rtol = Keyword.get(opts, :rtol, 1.0e-4)

          assert Nx.all_close(a, b, atol: atol, rtol: rtol, equal_nan: true) |> Nx.to_number() ==
                   1,
                 "values differ:\n#{inspect(a)}\n#{inspect(b)}"

        _ ->
          assert a == b
      end
    end)
  end

  defp same_structure?(a, b) do
    Nx.Defn.Composite.traverse(a, fn _ -> 0 end) == Nx.Defn.Composite.traverse(b, fn _ -> 0 end)
  end
end
