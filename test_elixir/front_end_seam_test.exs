defmodule NxJax.FrontEndSeamTest do
  # The front end (the clean-room Nx, the :nx application of nx/) reaches the runtime only
  # through Nx.Defn.Compiler's callbacks (the default compiler of its application environment)
  # and Nx.Backend's; its compiled code names no NxJax module (docs may; a consolidated
  # protocol lists the implementations of every module, the tests' structs included, so
  # protocols are left out).
  use ExUnit.Case, async: true

  @root Path.expand("../nx", __DIR__)

  defp front_end_modules do
    {:ok, modules} = :application.get_key(:nx, :modules)

    for module <- modules,
        source = module.module_info(:compile)[:source],
        String.starts_with?(Path.expand(List.to_string(source)), @root <> "/lib/"),
        not function_exported?(module, :__protocol__, 1),
        do: module
  end

  test "no front-end module's code names an NxJax module" do
    modules = front_end_modules()
    assert Nx in modules and Nx.Defn.Compiler in modules and Nx.Defn.WireEncoder in modules
    assert length(modules) > 20

    named =
      for module <- modules,
          {:ok, {_, [atoms: atoms]}} = :beam_lib.chunks(:code.which(module), [:atoms]),
          {_, atom} <- atoms,
          String.starts_with?(Atom.to_string(atom), "Elixir.NxJax"),
          do: {module, atom}

    assert named == []
  end

  test "the default compiler comes from the application environment and runs the graphs" do
    assert Application.fetch_env!(:nx, :default_compiler) == NxJax
    assert Nx.Defn.Compiler in Keyword.get(NxJax.module_info(:attributes), :behaviour, [])
    assert Nx.Backend in Keyword.get(NxJax.Backend.module_info(:attributes), :behaviour, [])

    parent = self()

    Nx.Defn.jit(fn x ->
      send(parent, {:compiler, Nx.Defn.Compiler.current()})
      x
    end).(Nx.tensor(2.0))

    assert_received {:compiler, NxJax}
  end

  test "tracing and printing need no worker" do
    expr = Nx.Defn.debug_expr(fn x, y -> Nx.sum(Nx.multiply(Nx.exp(x), y)) end)
    printed = inspect(expr.(Nx.iota({2, 3}, type: :f32), 2.0))
    assert printed =~ "exp a" and printed =~ "f32[2][3]"
    {graph, [0, 1], _} = Nx.Defn.WireEncoder.encode(expr.(Nx.iota({2}, type: :f32), 1.0))
    assert {:nx_jax_graph, 1, [_ | _], [_]} = graph
  end
end
