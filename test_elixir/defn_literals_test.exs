defmodule NxJax.DefnLiteralsTest do
  # Values known at trace time and number literals inside defn (issue 46, items 4 and 6),
  # against what real Nx 0.7.2 returns: test_elixir/reference/nx_0.7.2_defn_literals.tsv,
  # printed by test_elixir/reference/defn_literals_reference.exs (which also defines the
  # defns and the cases run here).
  use ExUnit.Case, async: true
  # the tests tagged :seam run under NxJax.Test.SeamCompiler too (make test-seam)
  setup context, do: NxJax.Test.SeamRun.watch(context)

  @dir Path.join(__DIR__, "reference")
  @script Path.join(@dir, "defn_literals_reference.exs")
  @reference_file Path.join(@dir, "nx_0.7.2_defn_literals.tsv")
  @external_resource @script
  @external_resource @reference_file

  Code.require_file(@script)

  @reference Map.new(NxJax.ReferenceFormat.rows(@reference_file), fn [name, expected] ->
               {String.to_atom(name), expected}
             end)

  test "every case has a reference value" do
    assert Enum.sort(Keyword.keys(DefnLiteralsReference.cases())) ==
             Enum.sort(Map.keys(@reference))
  end

  for {name, _fun} <- DefnLiteralsReference.cases() do
    @name name
    @tag :seam
    test "#{name} as in Nx 0.7.2" do
      fun = Keyword.fetch!(DefnLiteralsReference.cases(), @name)
      assert DefnLiteralsReference.describe(fun.()) == Map.fetch!(@reference, @name)
    end
  end

  # regression (issue 46): `n == 1 and n != 2` on a shape became a tensor, so the cond traced
  # every branch and raised "cannot broadcast"; Nx 0.7.2 keeps it known and picks the branch
  test "and/or of known values stay known at trace time" do
    known = Nx.Defn.Kernel.__and__(Nx.tensor(1, type: :u8), true)
    assert %Nx.Tensor{data: %Nx.BinaryBackend{}, type: {:u, 8}} = known
    assert Nx.to_number(known) == 1

    assert Nx.Defn.Kernel.__or__(0, Nx.tensor(0.0)) |> Nx.to_number() == 0
    assert Nx.Defn.Kernel.__not__(false) |> Nx.to_number() == 1

    # a tensor (even a known one) under `not` is the operation, as Nx 0.7.2 does not fold it
    traced = Nx.Defn.Expr.with_tracing(fn -> Nx.Defn.Kernel.__not__(Nx.tensor(1, type: :u8)) end)

    assert Nx.Defn.Expr.expr?(traced)
  end

  @tag :seam
  test "the branches of a cond known to be false are not traced" do
    f =
      Nx.Defn.jit(fn x ->
        Nx.Defn.ControlFlow.cond_clauses([
          {Nx.Defn.Kernel.__equal__(1, 2), fn -> raise "traced" end},
          {Nx.greater(x, 0), fn -> x end},
          {true, fn -> 0 end}
        ])
      end)

    assert f.(Nx.tensor(3, type: :u8)) == Nx.tensor(3, type: :u8)
    assert f.(Nx.tensor(-2, type: :s8)) == Nx.tensor(0, type: :s8)
  end
end
