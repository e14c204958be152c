defmodule NxJax.NxNamesTest do
  # Axis names as Nx 0.7.2 keeps them: given at creation (`names:`), changed by rename/2,
  # reshape/3 and broadcast/3, computed by each op beside its shape, accepted wherever an
  # axis is expected, printed (`s64[x: 2][y: 3]`), and raising Nx's errors when they clash.
  # The expected answers are real Nx 0.7.2's: test_elixir/reference/nx_0.7.2_names.tsv,
  # written by nx_names_reference.exs from the cases of nx_names_cases.exs.
  use ExUnit.Case, async: true

  @dir Path.join(__DIR__, "reference")
  @reference Path.join(@dir, "nx_0.7.2_names.tsv")
  @external_resource @reference
  @external_resource Path.join(@dir, "nx_names_cases.exs")

  # where we knowingly answer otherwise, with our answer
  @differs %{
    # Nx 0.7.2 crashes (FunctionClauseError in Enum.drop/2) on a float axis
    "sum_float_axis" => "error\tArgumentError: expected an integer axis, got: 1.0",
    # Nx 0.7.2 refuses a tensor as iota's shape when it has names (a deprecated form)
    "iota_tensor_shape" => "ok\t[:x, :y]"
  }

  @expected @reference
            |> File.read!()
            |> String.split("\n", trim: true)
            |> Enum.map(fn line ->
              [name, answer] = String.split(line, "\t", parts: 2)
              {name, answer}
            end)

  defp answer(fun), do: NxJax.ReferenceFormat.inspect_answer(fun)

  defp cases do
    {cases, _} = Code.eval_file(Path.join(@dir, "nx_names_cases.exs"))
    cases
  end

  test "the reference answers every case, in order" do
    assert Enum.map(cases(), &elem(&1, 0)) == Enum.map(@expected, &elem(&1, 0))
    assert Enum.all?(Map.keys(@differs), &List.keymember?(@expected, &1, 0))
  end

  test "every case answers as Nx 0.7.2 does (values, names, printing and errors)" do
    expected = Map.new(@expected)

    mismatches =
      for {name, fun} <- cases(),
          ours = answer(fun),
          ours != Map.get(@differs, name, expected[name]),
          do: {name, ours, expected[name]}

    assert mismatches == []
  end

  test "the listed differences still differ from Nx 0.7.2" do
    expected = Map.new(@expected)
    for {name, ours} <- @differs, do: refute(ours == expected[name], name)
  end

  describe "names are front-end metadata" do
    test "eager calls sharing one trace each get their own names" do
      a = Nx.add(Nx.tensor([1, 2], names: [:a]), 1)
      b = Nx.add(Nx.tensor([1, 2], names: [:b]), 1)
      c = Nx.add(Nx.tensor([1, 2]), 1)
      assert {Nx.names(a), Nx.names(b), Nx.names(c)} == {[:a], [:b], [nil]}
      assert a == Nx.rename(c, [:a])
    end

    test "a jit traced on one naming does not name the results of another" do
      f = Nx.Defn.jit(fn x -> Nx.sum(x, axes: [0]) end)
      assert Nx.names(f.(Nx.iota({2, 3}, names: [:x, :y]))) == [:y]
      assert Nx.names(f.(Nx.iota({2, 3}, names: [:p, :q]))) == [:q]
      assert Nx.names(f.(Nx.iota({2, 3}))) == [nil]
    end

    test "inside defn, named axes in options and names of results" do
      f = Nx.Defn.jit(fn x, y -> {Nx.sum(x, axes: [:y]), Nx.dot(x, [:y], y, [0])} end)
      x = Nx.iota({2, 3}, names: [:x, :y])
      y = Nx.iota({3, 4}, names: [nil, :z])
      {sum, dot} = f.(x, y)
      assert sum == Nx.tensor([3, 12], names: [:x])
      assert Nx.names(dot) == [:x, :z]
      assert dot == Nx.dot(x, y)
    end

    test "gradients are named as the variable" do
      x = Nx.tensor([[1.0, 2.0]], names: [:b, :f])
      grad = Nx.Defn.grad(x, fn x -> Nx.sum(Nx.multiply(x, x)) end)
      assert grad == Nx.tensor([[2.0, 4.0]], names: [:b, :f])
    end

    test "vectorized results keep the names of their inner axes" do
      v = Nx.vectorize(Nx.iota({2, 3}, names: [nil, :c]), :rows)
      assert Nx.names(Nx.multiply(v, 2)) == [:c]
      assert Nx.names(Nx.Defn.jit(&Nx.exp/1).(v)) == [:c]
      assert Nx.names(Nx.devectorize(Nx.multiply(v, 2))) == [:rows, :c]
    end

    test "ops that compute no names leave every axis unnamed" do
      t = Nx.iota({2, 3}, names: [:x, :y])
      assert Nx.names(Nx.gather(t, Nx.tensor([[0, 1]]))) == [nil]
      assert Nx.names(Nx.flatten(t)) == [nil]
    end
  end
end
