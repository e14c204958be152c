# The contract between the Nx op functions and the defn layer: each op hands
# Nx.Defn.Expr.apply_op/4 the op, its inputs, its wire opts and the output template.
# Every call here runs while tracing, so the node built is returned instead of computed.
defmodule Nx.OpsTest do
  use ExUnit.Case, async: true

  # {op, [{type, shape} of each input], opts, {type, shape} of out}
  defmacrop recorded(call) do
    quote do
      recorded_node(Nx.Defn.Expr.with_tracing(fn -> unquote(call) end))
    end
  end

  defp recorded_node(%Nx.Tensor{data: %Nx.Defn.Expr{op: op, args: inputs, opts: opts}} = out) do
    assert out.names == List.duplicate(nil, tuple_size(out.shape))
    {op, Enum.map(inputs, &{&1.type, &1.shape}), opts, {out.type, out.shape}}
  end

  defp t(shape, type \\ :s64), do: Nx.template(shape, type) |> concrete()

  # a concrete zero tensor of the given shape and type
  defp concrete(%Nx.Tensor{type: type, shape: shape} = t) do
    size = Nx.Shape.size(shape)
    data = Nx.BinaryBackend.from_list(List.duplicate(0, size), type)
    %{t | data: %Nx.BinaryBackend{state: data}}
  end

  describe "element-wise binary ops" do
    test "merge types and broadcast shapes" do
      assert recorded(Nx.add(t({2, 3}), t({3}, :f32))) ==
               {:add, [{{:s, 64}, {2, 3}}, {{:f, 32}, {3}}], %{}, {{:f, 32}, {2, 3}}}

      assert recorded(Nx.subtract(t({4, 1}, :u8), t({1, 5}, :s8))) ==
               {:subtract, [{{:u, 8}, {4, 1}}, {{:s, 8}, {1, 5}}], %{}, {{:s, 16}, {4, 5}}}

      for op <- [:multiply, :pow, :max, :min] do
        assert {^op, _, %{}, {{:f, 64}, {2}}} =
                 recorded(apply(Nx, op, [t({2}, :f64), t({2}, :f32)]))
      end
    end

    test "divide is floating" do
      assert {:divide, _, %{}, {{:f, 32}, {2}}} = recorded(Nx.divide(t({2}), t({2})))
      assert {:divide, _, %{}, {{:f, 16}, {2}}} = recorded(Nx.divide(t({2}, :f16), 2))
    end

    test "numbers take the tensor's type (weak typing)" do
      assert {:add, [{{:u, 8}, {2}}, {{:u, 8}, {}}], _, {{:u, 8}, {2}}} =
               recorded(Nx.add(t({2}, :u8), 1))

      assert {:add, [{{:f, 32}, {}}, {{:s, 32}, {2}}], _, {{:f, 32}, {2}}} =
               recorded(Nx.add(1.5, t({2}, :s32)))

      assert {:multiply, [{{:bf, 16}, {2}}, {{:bf, 16}, {}}], _, {{:bf, 16}, {2}}} =
               recorded(Nx.multiply(t({2}, :bf16), 0.5))

      # the number itself is converted to the tensor's type
      %Nx.Tensor{data: %{args: [_, number]}} =
        Nx.Defn.Expr.with_tracing(fn -> Nx.add(t({2}, :f16), 3) end)

      assert %Nx.Tensor{type: {:f, 16}, shape: {}, data: %{op: :constant, opts: %{value: 3.0}}} =
               number
    end

    test "two numbers use their default types" do
      assert {:add, [{{:s, 64}, {}}, {{:f, 32}, {}}], _, {{:f, 32}, {}}} =
               recorded(Nx.add(1, 2.0))

      assert {:pow, _, _, {{:s, 64}, {}}} = recorded(Nx.pow(2, 3))
    end

    test "incompatible shapes raise at call time" do
      assert_raise ArgumentError, "cannot broadcast tensor of dimensions {2, 3} to {4}", fn ->
        Nx.add(t({2, 3}), t({4}))
      end
    end
  end

  describe "comparisons" do
    test "return u8" do
      for op <- [:equal, :not_equal, :less, :less_equal, :greater, :greater_equal] do
        assert {^op, [{{:f, 32}, {2, 2}}, {{:s, 64}, {2}}], %{}, {{:u, 8}, {2, 2}}} =
                 recorded(apply(Nx, op, [t({2, 2}, :f32), t({2})]))
      end
    end

    test "an integer number next to an integer tensor is not narrowed" do
      assert {:less, [{{:u, 8}, {2}}, {{:s, 64}, {}}], _, {{:u, 8}, {2}}} =
               recorded(Nx.less(t({2}, :u8), 300))

      assert {:less, [{{:u, 8}, {2}}, {{:f, 32}, {}}], _, _} = recorded(Nx.less(t({2}, :u8), 0.5))
      assert {:less, [{{:f, 16}, {2}}, {{:f, 16}, {}}], _, _} = recorded(Nx.less(t({2}, :f16), 1))
    end
  end

  describe "unary ops" do
    test "floating ops turn integers into f32 and keep float types" do
      for op <- [:exp, :expm1, :log, :log1p, :sqrt, :rsqrt, :sin, :cos, :tan, :tanh, :sigmoid] do
        assert {^op, [{{:s, 64}, {3}}], %{}, {{:f, 32}, {3}}} = recorded(apply(Nx, op, [t({3})]))
        assert {^op, _, %{}, {{:f, 64}, {}}} = recorded(apply(Nx, op, [t({}, :f64)]))
      end
    end

    test "negate and abs keep the type" do
      assert {:negate, _, %{}, {{:s, 8}, {2}}} = recorded(Nx.negate(t({2}, :s8)))
      assert {:abs, [{{:s, 64}, {}}], %{}, {{:s, 64}, {}}} = recorded(Nx.abs(-3))
    end
  end

  test "select merges on_true and on_false, which broadcast to the predicate's shape" do
    assert recorded(Nx.select(t({2, 3}, :u8), t({3}, :s32), 1.0)) ==
             {:select, [{{:u, 8}, {2, 3}}, {{:s, 32}, {3}}, {{:f, 32}, {}}], %{},
              {{:f, 32}, {2, 3}}}

    # a scalar predicate: the branches' broadcast shape
    assert recorded(Nx.select(t({}, :u8), t({3}, :s32), t({2, 1}))) ==
             {:select, [{{:u, 8}, {}}, {{:s, 32}, {3}}, {{:s, 64}, {2, 1}}], %{},
              {{:s, 64}, {2, 3}}}

    # (Nx 0.7.2 does not broadcast the predicate: its message)
    assert_raise ArgumentError,
                 "cannot broadcast tensor of dimensions {3} to {2, 1} with axes [1]",
                 fn ->
                   Nx.select(t({2, 1}, :u8), t({3}, :s32), 1.0)
                 end
  end

  test "as_type" do
    assert recorded(Nx.as_type(t({2}), :f16)) ==
             {:as_type, [{{:s, 64}, {2}}], %{}, {{:f, 16}, {2}}}

    tensor = t({2}, :f16)
    assert Nx.as_type(tensor, {:f, 16}) == tensor
  end

  describe "reductions" do
    test "sum and product aggregate integer types" do
      assert recorded(Nx.sum(t({2, 3}, :s8))) ==
               {:sum, [{{:s, 8}, {2, 3}}], %{axes: nil, keep_axes: false}, {{:s, 64}, {}}}

      assert recorded(Nx.product(t({2, 3}, :u8), axes: [-1], keep_axes: true)) ==
               {:product, [{{:u, 8}, {2, 3}}], %{axes: [1], keep_axes: true}, {{:u, 64}, {2, 1}}}
    end

    test "reduce_max and reduce_min keep the type; mean is floating" do
      assert {:reduce_max, _, %{axes: [0]}, {{:u, 8}, {3}}} =
               recorded(Nx.reduce_max(t({2, 3}, :u8), axes: [0]))

      assert {:reduce_min, _, _, {{:f, 16}, {}}} = recorded(Nx.reduce_min(t({2}, :f16)))

      assert {:mean, _, %{axes: [0, 1], keep_axes: false}, {{:f, 32}, {4}}} =
               recorded(Nx.mean(t({2, 3, 4}), axes: [1, 0]))
    end

    test "bad axes raise" do
      assert_raise ArgumentError, "given axis (2) invalid for shape with rank 2", fn ->
        Nx.sum(t({2, 3}), axes: [2])
      end
    end
  end

  describe "dot" do
    test "dot/2 matrix-matrix, matrix-vector and vector-vector" do
      assert recorded(Nx.dot(t({2, 3}), t({3, 4}, :f32))) ==
               {:dot, [{{:s, 64}, {2, 3}}, {{:f, 32}, {3, 4}}],
                %{contract_axes: {[1], [0]}, batch_axes: {[], []}}, {{:f, 32}, {2, 4}}}

      assert {:dot, _, %{contract_axes: {[1], [0]}}, {_, {2}}} =
               recorded(Nx.dot(t({2, 3}), t({3})))

      assert {:dot, _, %{contract_axes: {[0], [0]}}, {_, {}}} = recorded(Nx.dot(t({3}), t({3})))

      assert {:dot, _, %{contract_axes: {[2], [1]}}, {_, {5, 2, 7, 4}}} =
               recorded(Nx.dot(t({5, 2, 3}), t({7, 3, 4})))
    end

    test "dot/2 with a scalar multiplies" do
      assert {:multiply, _, %{}, {{:f, 32}, {3}}} = recorded(Nx.dot(t({3}), 2.0))
    end

    test "dot/4 and dot/6" do
      assert {:dot, _, %{contract_axes: {[0], [0]}, batch_axes: {[], []}}, {_, {3, 4}}} =
               recorded(Nx.dot(t({2, 3}), [0], t({2, 4}), [-2]))

      assert recorded(Nx.dot(t({5, 2, 3}), [2], [0], t({5, 3, 4}), [1], [0])) ==
               {:dot, [{{:s, 64}, {5, 2, 3}}, {{:s, 64}, {5, 3, 4}}],
                %{contract_axes: {[2], [1]}, batch_axes: {[0], [0]}}, {{:s, 64}, {5, 2, 4}}}
    end

    test "mismatched contraction raises" do
      assert_raise ArgumentError,
                   "dot/zip expects shapes to be compatible, dimension 1 of left-side (3) does not equal dimension 0 of right-side (4)",
                   fn -> Nx.dot(t({2, 3}), t({4, 5})) end
    end
  end

  describe "shape ops" do
    test "reshape" do
      assert recorded(Nx.reshape(t({2, 3}), {3, :auto})) ==
               {:reshape, [{{:s, 64}, {2, 3}}], %{}, {{:s, 64}, {3, 2}}}

      assert {:reshape, _, %{}, {_, {6}}} = recorded(Nx.reshape(t({2, 3}), t({6})))
      tensor = t({2})
      assert Nx.reshape(tensor, {2}) == tensor
    end

    test "transpose defaults to reversed axes" do
      assert recorded(Nx.transpose(t({2, 3, 4}))) ==
               {:transpose, [{{:s, 64}, {2, 3, 4}}], %{axes: [2, 1, 0]}, {{:s, 64}, {4, 3, 2}}}

      assert {:transpose, _, %{axes: [0, 2, 1]}, {_, {2, 4, 3}}} =
               recorded(Nx.transpose(t({2, 3, 4}), axes: [0, -1, 1]))
    end

    test "broadcast with default and explicit axes" do
      assert recorded(Nx.broadcast(t({3}), {2, 3})) ==
               {:broadcast, [{{:s, 64}, {3}}], %{axes: [1]}, {{:s, 64}, {2, 3}}}

      assert {:broadcast, [{{:f, 32}, {}}], %{axes: []}, {{:f, 32}, {2}}} =
               recorded(Nx.broadcast(1.0, {2}))

      assert {:broadcast, _, %{axes: [0]}, {_, {2, 4}}} =
               recorded(Nx.broadcast(t({2}), t({2, 4}), axes: [0]))

      assert_raise ArgumentError,
                   ~r/cannot broadcast tensor of dimensions \{3\} to \{2, 4\}/,
                   fn ->
                     Nx.broadcast(t({3}), {2, 4})
                   end
    end

    test "iota" do
      assert recorded(Nx.iota({2, 3})) == {:iota, [], %{axis: nil}, {{:s, 64}, {2, 3}}}

      assert recorded(Nx.iota({2, 3}, axis: -1, type: :f32)) ==
               {:iota, [], %{axis: 1}, {{:f, 32}, {2, 3}}}
    end

    test "slice" do
      assert recorded(Nx.slice(t({5, 6}), [1, 5], [2, 3], strides: [1, 2])) ==
               {:slice, [{{:s, 64}, {5, 6}}],
                %{start_indices: [1, 3], lengths: [2, 3], strides: [1, 2]}, {{:s, 64}, {2, 2}}}

      assert {:slice, _, %{strides: [1]}, {_, {2}}} =
               recorded(Nx.slice(t({5}), [Nx.tensor(1)], [2]))

      assert_raise ArgumentError, ~r/length at axis 0 must be less than or equal/, fn ->
        Nx.slice(t({2}), [0], [3])
      end
    end

    test "concatenate" do
      assert recorded(Nx.concatenate([t({2, 3}), t({2, 1}, :f32)], axis: -1)) ==
               {:concatenate, [{{:s, 64}, {2, 3}}, {{:f, 32}, {2, 1}}], %{axis: 1},
                {{:f, 32}, {2, 4}}}

      assert_raise ArgumentError, "no tensors were given to concatenate", fn ->
        Nx.concatenate([])
      end
    end

    test "new_axis and squeeze are reshapes" do
      assert recorded(Nx.new_axis(t({2, 3}), 1)) ==
               {:reshape, [{{:s, 64}, {2, 3}}], %{}, {{:s, 64}, {2, 1, 3}}}

      assert {:reshape, _, %{}, {_, {3}}} = recorded(Nx.squeeze(t({1, 3, 1})))
      assert {:reshape, _, %{}, {_, {3, 1}}} = recorded(Nx.squeeze(t({1, 3, 1}), axes: [0]))

      assert_raise ArgumentError, ~r/cannot squeeze dimensions whose sizes are not 1/, fn ->
        Nx.squeeze(t({1, 3}), axes: [1])
      end
    end
  end

  test "expression results inspect through their data module" do
    x = Nx.Defn.Expr.parameter(0, {:s, 64}, {2})

    assert inspect(Nx.add(x, 1)) ==
             "#Nx.Tensor<\n  s64[2]\n  Nx.Defn.Expr\n  parameter a:0  s64[2]\n  b = add a, 1   s64[2]\n>"
  end
end
