defmodule Nx.CreationTest do
  use ExUnit.Case, async: true

  import Nx, only: [is_tensor: 1]

  # a regression (2026-12-06): a number as a shape raised "expected a shape", and a list or a
  # string next to a tensor in a binary op raised FunctionClauseError in Nx.Type.merge_number/2
  test "a number as a shape, and what is not a tensor where a tensor is expected, as in Nx 0.7.2" do
    compared = NxProgramsCases.compare(NxProgramsCases.inputs())
    assert length(compared) > 10
    for {ours, nx} <- compared, do: assert(ours == nx)
  end

  describe "tensor/2" do
    test "infers s64 for integers and f32 for floats or mixed lists" do
      assert Nx.type(Nx.tensor(1)) == {:s, 64}
      assert Nx.type(Nx.tensor(1.0)) == {:f, 32}
      assert Nx.type(Nx.tensor([1, 2.0])) == {:f, 32}
      assert Nx.type(Nx.tensor([[1], [:nan]])) == {:f, 32}
      assert Nx.type(Nx.tensor([true, false])) == {:u, 8}
    end

    test "nested lists give their shape and row-major data" do
      t = Nx.tensor([[[1, 2, 3], [4, 5, 6]]])
      assert Nx.shape(t) == {1, 2, 3}
      assert t.names == [nil, nil, nil]
      assert Nx.to_flat_list(t) == [1, 2, 3, 4, 5, 6]
      assert Nx.to_list(t) == [[[1, 2, 3], [4, 5, 6]]]
    end

    test "the :type option converts values" do
      assert Nx.to_flat_list(Nx.tensor([1, 2], type: :f64)) == [1.0, 2.0]
      assert Nx.to_flat_list(Nx.tensor([255, 256, -1], type: {:u, 8})) == [255, 0, 255]
      assert Nx.to_flat_list(Nx.tensor([1.7], type: :s8)) == [1]
      assert Nx.type(Nx.tensor(1, type: :bf16)) == {:bf, 16}
    end

    test "empty lists raise: Nx 0.7.2 has no empty tensors" do
      for data <- [[], [[], []], [[1], []], [1, []]] do
        assert_raise ArgumentError, "invalid value given to Nx.tensor/1, got: []", fn ->
          Nx.tensor(data)
        end
      end
    end

    test "an empty binary raises (Nx 0.7.2)" do
      for type <- [{:u, 32}, {:f, 64}] do
        assert_raise ArgumentError, "cannot build an empty tensor", fn ->
          Nx.from_binary(<<>>, type)
        end
      end
    end

    test "a dimension must be a positive integer (Nx 0.7.2's message)" do
      assert_raise ArgumentError,
                   "invalid dimension in axis 2 found in shape. Each dimension must be a " <>
                     "positive integer, got :blep in shape {1, 2, :blep}",
                   fn -> Nx.shape({1, 2, :blep}) end

      assert_raise ArgumentError,
                   "invalid dimension in axis 1 found in shape. Each dimension must be a " <>
                     "positive integer, got 0 in shape {2, 0}",
                   fn -> Nx.iota({2, 0}) end

      assert_raise ArgumentError, ~r/got -2 in shape \{1, -2\}/, fn ->
        Nx.broadcast(1, {1, -2})
      end
    end

    test "shape/1 of something that is not a shape, a tensor or a number raises" do
      for other <- ["something else", [1, 2]] do
        assert_raise ArgumentError,
                     "expected a shape. A shape is a n-element tuple with the size of each " <>
                       "dimension. Alternatively, you can pass a tensor (or a number) and the " <>
                       "shape will be retrieved from the tensor. Got: #{inspect(other)}",
                     fn -> Nx.shape(other) end
      end
    end

    test "ragged lists raise" do
      assert_raise ArgumentError, ~r/lists have different shapes, got \{\} at position 0/, fn ->
        Nx.tensor([1, [2]])
      end

      assert_raise ArgumentError, ~r/got \{2\} at position 0 and \{3\} at position 2/, fn ->
        Nx.tensor([[[1, 2], [1, 2], [1, 2, 3]]])
      end
    end

    test "invalid values raise" do
      assert_raise ArgumentError, ~r/got: "a"/, fn -> Nx.tensor(["a"]) end

      assert_raise ArgumentError, ~r/cannot store :nan in an integer/, fn ->
        Nx.tensor([:nan], type: :s64)
      end
    end

    test "equal tensors are ==" do
      assert Nx.tensor([1.0, 2.0]) == Nx.tensor([1, 2], type: :f32)
      refute Nx.tensor([1.0, 2.0]) == Nx.tensor([1.0, 2.0], type: :f64)
    end
  end

  # Nx 0.7.2's doc examples of eye/2 and the same calls on real Nx
  describe "eye/2" do
    test "vectorized_axes give every entry the identity; a rank-1 shape only then" do
      t = Nx.eye({2, 3}, vectorized_axes: [x: 2])
      assert {t.vectorized_axes, t.shape} == {[x: 2], {2, 3}}
      assert Nx.to_flat_list(t) == [1, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0]

      t = Nx.eye({3}, vectorized_axes: [x: 1, y: 2], names: [:a])
      assert {t.vectorized_axes, t.shape, t.names} == {[x: 1, y: 2], {3}, [:a]}
      assert Nx.to_flat_list(t) == [1, 0, 0, 1, 0, 0]

      for shape <- [{3}, {}] do
        assert_raise ArgumentError,
                     "eye/2 expects a shape with at least 2 dimensions or an integer, got: " <>
                       inspect(shape),
                     fn -> Nx.eye(shape) end
      end
    end
  end

  describe "conversion" do
    test "to_number returns non-finite atoms" do
      assert Nx.to_number(Nx.tensor(:infinity)) == :infinity
      assert Nx.to_number(Nx.tensor(:neg_infinity, type: :f64)) == :neg_infinity
      assert Nx.to_number(Nx.tensor(:nan, type: :bf16)) == :nan
      assert Nx.to_number(Nx.tensor(2.5, type: :f16)) == 2.5
      assert Nx.to_number(1) == 1
    end

    test "from_binary and to_binary are inverses" do
      bin = <<1.0::float-32-native, 2.0::float-32-native>>
      t = Nx.from_binary(bin, {:f, 32})
      assert Nx.shape(t) == {2}
      assert Nx.to_binary(t) == bin
      assert Nx.to_flat_list(t) == [1.0, 2.0]
    end

    test "to_list of a scalar is the number" do
      assert Nx.to_list(Nx.tensor(7)) == 7
    end

    test "reading data from a template raises with a hint" do
      assert_raise ArgumentError, ~r/return the tensor from the defn/, fn ->
        Nx.to_binary(Nx.template({2}, :f32))
      end
    end

    # (the fields, not the message: Elixir 1.18 words it otherwise)
    test "to_tensor rejects other terms with Nx 0.7.2's protocol error" do
      error = assert_raise Protocol.UndefinedError, fn -> Nx.to_tensor(:foo) end
      assert error.protocol == Nx.LazyContainer and error.value == :foo
    end
  end

  describe "introspection" do
    test "shape, rank, size, axis_size on tensors and numbers" do
      t = Nx.tensor([[1, 2, 3], [4, 5, 6]])
      assert {Nx.rank(t), Nx.size(t), Nx.axis_size(t, 0)} == {2, 6, 2}
      assert {Nx.shape(2.0), Nx.rank(2.0), Nx.size(2.0), Nx.type(2.0)} == {{}, 0, 1, {:f, 32}}
      assert Nx.size({2, 0}) == 0
      assert_raise ArgumentError, ~r/given axis \(2\)/, fn -> Nx.axis_size(t, 2) end
    end

    test "is_tensor guard" do
      assert is_tensor(Nx.tensor(1))
      refute is_tensor([1])
    end

    test "template has no data" do
      t = Nx.template({2, 3}, :s8)
      assert %Nx.Tensor{data: nil, type: {:s, 8}, shape: {2, 3}, names: [nil, nil]} = t
    end
  end

  describe "inspect" do
    test "vector" do
      assert inspect(Nx.tensor([1.0, 2.0, 3.0])) == "#Nx.Tensor<\n  f32[3]\n  [1.0, 2.0, 3.0]\n>"
    end

    # Nx 0.7.2 prints every float through its double (its outputs for these very tensors)
    test "floats print as the shortest decimal of their value as a double, as Nx 0.7.2" do
      assert inspect(Nx.tensor(3.0485873)) == "#Nx.Tensor<\n  f32\n  3.0485873222351074\n>"
      assert inspect(Nx.tensor(0.1)) =~ "\n  0.10000000149011612\n"
      assert inspect(Nx.tensor(0.1, type: :f64)) =~ "\n  0.1\n"
      assert inspect(Nx.tensor(1 / 3, type: :f64)) =~ "\n  0.3333333333333333\n"
      assert inspect(Nx.tensor(1 / 3)) =~ "\n  0.3333333432674408\n"
      assert inspect(Nx.tensor(1 / 3, type: :f16)) =~ "\n  0.333251953125\n"
      assert inspect(Nx.tensor(-0.0)) =~ "\n  -0.0\n"
      assert inspect(Nx.tensor(65504.0, type: :f16)) =~ "\n  65504.0\n"
    end

    # Nx 0.7.2 stores a bf16 as the top half of the f32 (truncation)
    test "a bf16 is created by truncating the f32, as Nx 0.7.2" do
      assert inspect(Nx.tensor(1 / 3, type: :bf16)) =~ "\n  0.33203125\n"
      assert Nx.to_binary(Nx.tensor(1 / 3, type: :bf16)) == <<0x3EAA::16-native>>
      assert Nx.to_number(Nx.tensor(:nan, type: :bf16)) == :nan
    end

    test "non-finite values" do
      assert inspect(Nx.tensor([:nan, :infinity, :neg_infinity])) =~ "[NaN, Inf, -Inf]"

      assert inspect(Nx.tensor([:nan, :infinity, :neg_infinity], type: :bf16)) =~
               "[NaN, Inf, -Inf]"
    end

    test "integers print plainly" do
      assert inspect(Nx.tensor([-1, 255], type: :s16)) == "#Nx.Tensor<\n  s16[2]\n  [-1, 255]\n>"
    end

    test "nested lists are indented two spaces per level" do
      expected = """
      #Nx.Tensor<
        s64[2][1][2]
        [
          [
            [1, 2]
          ],
          [
            [3, 4]
          ]
        ]
      >\
      """

      assert inspect(Nx.tensor([[[1, 2]], [[3, 4]]])) == expected
    end

    test "limit cuts the output with ..." do
      t = Nx.from_binary(for(i <- 0..8, into: <<>>, do: <<i>>), :u8)
      assert inspect(t, limit: 3) == "#Nx.Tensor<\n  u8[9]\n  [0, 1, 2, ...]\n>"

      t = %{t | shape: {3, 3}, names: [nil, nil]}

      assert inspect(t, limit: 4) ==
               "#Nx.Tensor<\n  u8[3][3]\n  [\n    [0, 1, 2],\n    [3, ...],\n    ...\n  ]\n>"

      assert inspect(t, limit: 3) ==
               "#Nx.Tensor<\n  u8[3][3]\n  [\n    [0, 1, 2],\n    ...\n  ]\n>"

      assert inspect(t, limit: :infinity) =~ "[6, 7, 8]"
    end

    test "default limit is 50 elements" do
      t = Nx.from_binary(:binary.copy(<<7>>, 60), :u8)
      assert inspect(t) =~ "7, ...]"
      assert length(String.split(inspect(t), "7")) == 51
    end

    test "templates" do
      assert inspect(Nx.template({2}, :f32)) == "#Nx.Tensor<\n  f32[2]\n  Nx.TemplateBackend\n>"
    end

    defmodule FakeExpr do
      defstruct []
      def inspect(%Nx.Tensor{}, _opts), do: "Nx.Defn.Expr\nparameter a:0   f32[2]"
    end

    test "expression data delegates its body" do
      t = %Nx.Tensor{data: %FakeExpr{}, type: {:f, 32}, shape: {2}, names: [nil]}

      assert inspect(t) ==
               "#Nx.Tensor<\n  f32[2]\n  Nx.Defn.Expr\n  parameter a:0   f32[2]\n>"
    end
  end
end
