# The tensor[index] syntax (the Access behaviour of Nx.Tensor): integers, ranges, the full range
# `..`, per-axis lists, scalar tensor indices (dynamic inside defn), eagerly and through the
# worker, gradients through an index, and the errors for what it does not take.
defmodule Nx.AccessTest do
  use ExUnit.Case, async: true

  doctest Nx.Tensor

  defmodule Indexing do
    import Nx.Defn

    defn pick(t, i), do: t[i]
    defn column(t), do: t[[.., 1]]
    defn corner(t), do: t[[1..2, 0..-1//2]]
    defn last_row_first(t), do: t[-1][0]
    defn sum_of_middle(x), do: Nx.sum(x[1..2] * x[1..2])
    defn grad_middle(x), do: grad(x, &sum_of_middle/1)
    defn square_at(x, i), do: x[i] * x[i]
    defn grad_at(x, i), do: grad(x, &square_at(&1, i))
    defn window(t, start), do: Nx.slice_along_axis(t, start, 2, axis: -1)
  end

  # 0..11 in a 4x3 matrix: row r is [3r, 3r + 1, 3r + 2]
  defp grid(type \\ :s64), do: Nx.iota({4, 3}, type: type)

  defp values(t), do: Nx.to_flat_list(t)

  describe "eagerly" do
    test "an integer takes one position of the first axis and removes that axis" do
      assert grid()[1].shape == {3}
      assert values(grid()[1]) == [3, 4, 5]
      assert values(grid()[0]) == [0, 1, 2]
      assert values(grid()[-1]) == [9, 10, 11]
      assert values(grid()[-4]) == [0, 1, 2]
      assert values(Nx.tensor([7, 8, 9])[2]) == [9]
      assert Nx.tensor([7, 8, 9])[2].shape == {}
    end

    test "chained indices read one element" do
      assert Nx.to_number(grid()[2][1]) == 7
      assert Nx.to_number(grid()[-1][-1]) == 11
    end

    test "a range keeps the axis; negative ends count from the end" do
      assert grid()[1..2].shape == {2, 3}
      assert values(grid()[1..2]) == [3, 4, 5, 6, 7, 8]
      assert values(grid()[2..-1//1]) == [6, 7, 8, 9, 10, 11]
      assert values(grid()[-2..-1//1]) == [6, 7, 8, 9, 10, 11]
      assert values(grid()[0..0]) == [0, 1, 2]
      assert grid()[0..0].shape == {1, 3}
      assert values(Nx.tensor([1, 2, 3, 4])[1..-1//1]) == [2, 3, 4]
    end

    test "a range with a step takes every step-th position" do
      assert values(Nx.tensor([0, 1, 2, 3, 4, 5, 6])[0..6//3]) == [0, 3, 6]
      assert values(Nx.tensor([0, 1, 2, 3, 4, 5, 6])[1..-1//2]) == [1, 3, 5]
      assert values(grid()[0..3//2]) == [0, 1, 2, 6, 7, 8]
    end

    test "a list indexes the leading axes in order, the rest whole" do
      assert values(grid()[[1, 2]]) == [5]
      assert grid()[[1, 2]].shape == {}
      assert values(grid()[[.., 1]]) == [1, 4, 7, 10]
      assert values(grid()[[1..2, 0..-1//2]]) == [3, 5, 6, 8]
      assert grid()[[1..2, 0..-1//2]].shape == {2, 2}
      assert grid()[[1]] == grid()[1]

      cube = Nx.iota({2, 3, 4})
      assert cube[[1, .., 3]].shape == {3}
      assert values(cube[[1, .., 3]]) == [15, 19, 23]
      assert cube[[0, 1]].shape == {4}
      assert values(cube[[0, 1]]) == [4, 5, 6, 7]
    end

    test "each index is the same as Nx.slice/4 and Nx.squeeze/2" do
      t = Nx.iota({5, 4, 3}, type: :f32)
      assert t[[2, 1..3, -1]] == Nx.squeeze(Nx.slice(t, [2, 1, 2], [1, 3, 1]), axes: [0, 2])
      assert t[1..3] == Nx.slice_along_axis(t, 1, 3, axis: 0)
      assert t[[.., .., 0..2//2]] == Nx.slice(t, [0, 0, 0], [5, 4, 3], strides: [1, 1, 2])
    end

    test "a scalar integer tensor index is a position (clamped, as a dynamic start)" do
      assert values(grid()[Nx.tensor(2)]) == [6, 7, 8]
      assert values(grid()[[Nx.tensor(1), Nx.tensor(2, type: :u8)]]) == [5]
      assert values(grid()[Nx.tensor(9)]) == [9, 10, 11]
    end

    test "types and vectorized axes are kept" do
      t = Nx.iota({2, 3}, type: :f32)
      assert t[1].type == {:f, 32}
      assert values(t[1]) == [3.0, 4.0, 5.0]

      v = Nx.vectorize(grid(), :rows)
      assert v[2].vectorized_axes == [rows: 4]
      assert values(Nx.devectorize(v[2])) == [2, 5, 8, 11]
    end
  end

  describe "inside defn, on the worker" do
    test "integer, range and list indices" do
      t = grid(:f32)
      assert values(Indexing.column(t)) == [1.0, 4.0, 7.0, 10.0]
      assert values(Indexing.corner(t)) == [3.0, 5.0, 6.0, 8.0]
      assert Nx.to_number(Indexing.last_row_first(t)) == 9.0
    end

    test "an argument as the index is a dynamic position, clamped into bounds" do
      t = grid(:f32)
      assert values(Indexing.pick(t, 2)) == [6.0, 7.0, 8.0]
      assert values(Indexing.pick(t, Nx.tensor(3))) == [9.0, 10.0, 11.0]
      assert values(Indexing.pick(t, Nx.tensor(0))) == [0.0, 1.0, 2.0]
      assert values(Indexing.pick(t, Nx.tensor(40))) == [9.0, 10.0, 11.0]
    end

    test "gradients flow back to the indexed positions only" do
      x = Nx.tensor([1.0, 2.0, 3.0, 4.0], type: :f64)
      assert values(Indexing.grad_middle(x)) == [0.0, 4.0, 6.0, 0.0]
      assert values(Indexing.grad_at(x, 2)) == [0.0, 0.0, 6.0, 0.0]

      :ok =
        NxJax.GradCheck.check_grads!(
          &Indexing.sum_of_middle/1,
          &Indexing.grad_middle/1,
          Nx.tensor([0.5, -1.25, 2.0, 3.5], type: :f64)
        )
    end
  end

  describe "Nx.slice_along_axis/4" do
    test "slices one axis, the others whole, with strides" do
      assert values(Nx.slice_along_axis(grid(), 1, 2)) == [3, 4, 5, 6, 7, 8]
      assert values(Nx.slice_along_axis(grid(), 1, 2, axis: 1)) == [1, 2, 4, 5, 7, 8, 10, 11]

      assert values(Nx.slice_along_axis(grid(), 0, 3, axis: -1, strides: 2)) ==
               [0, 2, 3, 5, 6, 8, 9, 11]

      assert Nx.slice_along_axis(grid(), 0, 3, axis: 1, strides: 2).shape == {4, 2}
    end

    test "a dynamic start inside defn, clamped into bounds" do
      t = grid(:f32)
      assert values(Indexing.window(t, 1)) == [1.0, 2.0, 4.0, 5.0, 7.0, 8.0, 10.0, 11.0]
      assert values(Indexing.window(t, Nx.tensor(5))) == values(Indexing.window(t, 1))
    end

    test "bad options and axes raise" do
      assert_raise ArgumentError, ~r/unknown key :axes in \[axes: 1\], expected one of/, fn ->
        Nx.slice_along_axis(grid(), 0, 1, axes: 1)
      end

      assert_raise ArgumentError, ~r/given axis \(2\) invalid for shape with rank 2/, fn ->
        Nx.slice_along_axis(grid(), 0, 1, axis: 2)
      end
    end
  end

  # values of real Nx 0.7.2 (which raises for two vectorized indices of different names:
  # here each index keeps its vectorized axis, in the indices' order)
  describe "vectorized indices" do
    test "one position per entry" do
      i = Nx.vectorize(Nx.tensor([0, 2, 4]), :i)
      assert Nx.iota({6})[i] == Nx.vectorize(Nx.tensor([0, 2, 4]), i: 3)
      assert Nx.iota({6, 2})[[i, 0..1]] == Nx.vectorize(Nx.tensor([[0, 1], [4, 5], [8, 9]]), i: 3)
      assert Nx.vectorize(Nx.iota({3, 6}), i: 3)[i] == Nx.vectorize(Nx.tensor([0, 8, 16]), i: 3)
      assert Nx.iota({2, 6, 3})[[1, i, 2]] == Nx.vectorize(Nx.tensor([20, 26, 32]), i: 3)

      j = Nx.vectorize(Nx.tensor([5, 1]), :j)

      assert Nx.iota({2, 6, 6})[[1, i, j]] ==
               Nx.vectorize(Nx.tensor([[41, 37], [53, 49], [65, 61]]), i: 3, j: 2)
    end
  end

  describe "errors" do
    test "a scalar tensor cannot be indexed" do
      assert_raise ArgumentError, ~r/cannot use tensor\[index\] on a scalar tensor/, fn ->
        Nx.tensor(1.0)[0]
      end
    end

    test "integers and ranges out of bounds raise" do
      # Nx 0.7.2's messages
      assert_raise ArgumentError, "index 4 is out of bounds for axis 0 in shape {4, 3}", fn ->
        grid()[4]
      end

      assert_raise ArgumentError, "index -5 is out of bounds for axis 0 in shape {4, 3}", fn ->
        grid()[-5]
      end

      assert_raise ArgumentError, "index 3 is out of bounds for axis 1 in shape {4, 3}", fn ->
        grid()[[0, 3]]
      end

      assert_raise ArgumentError, "index 5 is out of bounds for axis 0 in shape {4, 3}", fn ->
        grid()[2..5]
      end
    end

    test "an empty range raises, its ends read from the end first (Nx 0.7.2)" do
      assert_raise ArgumentError,
                   "slicing a tensor requires a non-empty range, got: 3..1//1",
                   fn -> grid()[3..1//1] end

      assert_raise ArgumentError,
                   "slicing a tensor requires a non-empty range, got: 3..0//1",
                   fn -> grid()[-1..0//1] end

      t = Nx.tensor([[1, 2, 3]], names: [:x, :y])

      assert_raise ArgumentError,
                   "slicing a tensor requires a non-empty range, got: 2..1//1",
                   fn -> t[[y: 2..1//1]] end
    end

    test "a range with a negative step raises (Nx 0.7.2, with its hint for step -1)" do
      assert_raise ArgumentError,
                   "range step must be positive, got range: 3..1//-1. " <>
                     "Did you mean to pass the range 3..1//1 instead?",
                   fn -> grid()[3..1//-1] end

      assert_raise ArgumentError,
                   "range step must be positive, got range: 1..-1//-1. " <>
                     "Did you mean to pass the range 1..-1//1 instead?",
                   fn -> grid()[1..-1//-1] end

      assert_raise ArgumentError, "range step must be positive, got range: 3..0//-2", fn ->
        grid()[3..0//-2]
      end
    end

    test "an empty list reads the whole tensor (Nx 0.7.2)" do
      assert grid()[[]] == grid()
    end

    test "an axis given twice, or past the rank, raises (Nx 0.7.2)" do
      t = Nx.tensor([[1, 2, 3]], names: [:x, :y])

      assert_raise ArgumentError,
                   "unknown or duplicate axis 1 found when slicing shape {1, 3}",
                   fn -> t[[y: 1, y: 2]] end

      assert_raise ArgumentError,
                   "unknown or duplicate axis 0 found when slicing shape {1, 3}",
                   fn -> t[[x: 0, y: 0, x: 0]] end

      assert_raise ArgumentError,
                   "unknown or duplicate axis 2 found when slicing shape {4, 3}",
                   fn -> grid()[[0, 1, 2]] end
    end

    test "other index terms raise" do
      assert_raise ArgumentError, ~r/takes integers, ranges and scalar integer tensors/, fn ->
        grid()[1.5]
      end
    end

    test "axes are indexed by name, the others whole (Nx 0.7.2)" do
      t = Nx.rename(grid(), [:x, :y])
      assert t[y: 1] == t[[.., 1]]
      assert Nx.names(t[y: 1]) == [:x]
      assert t[x: 0..0, y: 1] == Nx.tensor([grid()[0][1] |> Nx.to_number()], names: [:x])

      assert_raise ArgumentError, ~r/name :z not found in tensor with names \[:x, :y\]/, fn ->
        t[z: 1]
      end
    end

    # a regression (2026-12-06): a tensor of indices alone raised "a tensor index must be a
    # scalar". Values and messages of real Nx 0.7.2, printed by
    # test_elixir/reference/nx_access_reference.exs.
    test "a tensor of indices alone takes those rows; in a list each index is a scalar" do
      t = Nx.iota({4, 2})
      assert t[Nx.tensor([3, 0])] == Nx.tensor([[6, 7], [0, 1]])
      assert t[Nx.tensor([[3, 0], [1, 1]])] == Nx.tensor([[[6, 7], [0, 1]], [[2, 3], [2, 3]]])
      assert t[Nx.tensor([2, 1], type: :u8)] == Nx.tensor([[4, 5], [2, 3]])

      assert Nx.Defn.jit(fn t, i -> t[i] end).(t, Nx.tensor([1, 2])) ==
               Nx.tensor([[2, 3], [4, 5]])

      v = Nx.vectorize(Nx.tensor([[0, 1], [2, 3]]), :x)
      taken = Nx.devectorize(t[v])
      assert {taken.shape, Nx.to_flat_list(taken)} == {{2, 2, 2}, Enum.to_list(0..7)}

      for index <- [[Nx.tensor([3, 0]), 0], [a: Nx.tensor([3, 0])]] do
        message = ~r/^tensor must be a scalar when accessing a list\/keyword of dimensions, got: /

        assert_raise ArgumentError, message, fn -> Nx.rename(t, [:a, :b])[index] end
      end

      assert_raise ArgumentError, "indices must be an integer tensor, got {:f, 32}", fn ->
        t[Nx.tensor([1.0])]
      end

      assert_raise ArgumentError, ~r/index 7 is out of bounds for axis 0 in shape \{4, 2\}/, fn ->
        t[Nx.tensor([7])]
      end

      assert_raise ArgumentError, ~r/must have an integer type, got f32/, fn ->
        grid()[Nx.tensor(1.0)]
      end
    end

    test "writing through Access raises and says what to use" do
      assert_raise ArgumentError, ~r/Nx.put_slice/, fn ->
        put_in(grid()[0], Nx.tensor([1, 1, 1]))
      end

      assert_raise ArgumentError, ~r/Nx.slice/, fn -> pop_in(grid()[0]) end
    end
  end
end
