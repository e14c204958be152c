# Nx.mode/2 and Nx.reflect/2: values eagerly, inside defn, on vectorized tensors and (reflect)
# through grad, and the errors for bad options. Every expected value is what real Nx 0.7.2
# answers for the same call.
defmodule Nx.ModeReflectTest do
  use ExUnit.Case, async: true

  import Nx.Defn

  defn mode_rows(t), do: Nx.mode(t, axis: 1)
  defn mode_all_kept(t), do: Nx.mode(t, keep_axis: true)
  defn reflect_2_2(t), do: Nx.reflect(t, padding_config: [{2, 2}])

  defn grad_reflect(t),
    do: grad(t, fn t -> Nx.sum(Nx.reflect(t, padding_config: [{2, 2}]) * Nx.iota({7})) end)

  describe "mode/2" do
    test "over all elements: the most frequent value, the smallest among equally frequent" do
      assert Nx.mode(Nx.tensor([[1, 2, 2, 3, 5], [1, 1, 76, 8, 1]])) == Nx.tensor(1)
      assert Nx.mode(Nx.tensor([3, 1, 3, 1, 2])) == Nx.tensor(1)
      assert Nx.mode(Nx.tensor([9, 9, 4, 4, 6, 6, 6, 1, 1, 1])) == Nx.tensor(1)
      assert Nx.mode(Nx.tensor([-3, -3, 2, 2, -1], type: :s8)) == Nx.tensor(-3, type: :s8)

      assert Nx.mode(Nx.tensor([0.1, 0.2, 0.2, 0.1, 0.3], type: :f64)) ==
               Nx.tensor(0.1, type: :f64)

      assert Nx.mode(Nx.tensor([3.5, 1.0, 3.5, 1.0, 2.0])) == Nx.tensor(1.0)
      # NaN equals nothing, so each NaN is a value of its own
      assert Nx.mode(Nx.tensor([:nan, :nan, 1.0])) == Nx.tensor(1.0)
    end

    test "along an axis (negative or named), the type kept" do
      t = Nx.tensor([[1, 2, 2, 3, 5], [1, 1, 76, 8, 1]])
      assert Nx.mode(t, axis: 0) == Nx.tensor([1, 1, 2, 3, 1])
      assert Nx.mode(t, axis: 1) == Nx.tensor([2, 1])
      assert Nx.mode(t, axis: -1) == Nx.tensor([2, 1])

      named = Nx.tensor([[1, 2, 2], [3, 3, 1]], names: [:a, :b])
      assert Nx.mode(named, axis: :b) == Nx.tensor([2, 3], names: [:a])

      assert Nx.mode(Nx.tensor([[1, 2, 2], [3, 3, 1]], type: :u8), axis: 0) ==
               Nx.tensor([1, 2, 1], type: :u8)

      three = Nx.tensor([[[1, 1, 2, 2, 3], [7, 7, 7, 1, 1]], [[0, 5, 5, 9, 9], [4, 3, 2, 1, 0]]])
      assert Nx.mode(three, axis: 2) == Nx.tensor([[1, 7], [5, 0]])
      assert Nx.mode(Nx.tensor([[[1, 1]], [[2, 1]], [[2, 3]]]), axis: 0) == Nx.tensor([[2, 1]])
    end

    test "keep_axis keeps the aggregated axis (or, over all elements, every axis) with size 1" do
      named = Nx.tensor([[1, 2, 2], [3, 3, 1]], names: [:a, :b])

      assert Nx.mode(named, axis: :b, keep_axis: true) ==
               Nx.tensor([[2], [3]], names: [:a, :b])

      assert Nx.mode(Nx.tensor([[1, 2], [2, 3]], names: [:a, :b]), keep_axis: true) ==
               Nx.tensor([[2]])

      assert Nx.mode(Nx.tensor(1), keep_axis: true) == Nx.tensor([1])
      assert Nx.mode(Nx.tensor(7)) == Nx.tensor(7)
      assert Nx.mode(Nx.tensor([[[1]]]), keep_axis: true) == Nx.tensor([[[1]]])
      assert Nx.mode(Nx.tensor([[[1]]]), axis: 1) == Nx.tensor([[1]])

      assert Nx.mode(Nx.tensor([[4], [5]], names: [:a, :b]), axis: :b) ==
               Nx.tensor([4, 5], names: [:a])
    end

    test "vectorized tensors: :axis counts in the non-vectorized shape" do
      t =
        Nx.tensor([[[1, 2, 2, 3, 5], [1, 1, 76, 8, 1]], [[1, 2, 2, 2, 5], [5, 2, 2, 2, 1]]])
        |> Nx.vectorize(:x)

      assert Nx.mode(t, axis: 0) ==
               Nx.vectorize(Nx.tensor([[1, 1, 2, 3, 1], [1, 2, 2, 2, 1]]), :x)

      assert Nx.mode(t, axis: 1) == Nx.vectorize(Nx.tensor([[2, 1], [2, 2]]), :x)
      assert Nx.mode(t) == Nx.vectorize(Nx.tensor([1, 2]), :x)

      u = Nx.tensor([[[1, 2, 2], [4, 4, 3]], [[9, 8, 8], [0, 1, 1]]]) |> Nx.vectorize(:v)

      assert Nx.mode(u, axis: 0, keep_axis: true) ==
               Nx.vectorize(Nx.tensor([[[1, 2, 2]], [[0, 1, 1]]]), :v)

      assert Nx.mode(Nx.vectorize(Nx.tensor([[1, 2, 2], [3, 3, 1]]), :x), keep_axis: true) ==
               Nx.vectorize(Nx.tensor([[2], [3]]), :x)
    end

    test "inside defn" do
      assert mode_rows(Nx.tensor([[5, 1, 5, 1], [2.5, 2.5, 0.5, 7.0]])) == Nx.tensor([1.0, 2.5])
      assert mode_all_kept(Nx.tensor([[3, 3, 1], [1, 2, 1]])) == Nx.tensor([[1]])

      v = Nx.tensor([[[1, 2, 2], [4, 4, 3]], [[9, 8, 8], [0, 1, 1]]]) |> Nx.vectorize(:v)
      assert mode_rows(v) == Nx.vectorize(Nx.tensor([[2, 4], [8, 1]]), :v)
    end

    test "bad options raise Nx's errors" do
      assert_raise ArgumentError, "given axis (3) invalid for shape with rank 1", fn ->
        Nx.mode(Nx.tensor([1, 2]), axis: 3)
      end

      assert_raise ArgumentError,
                   "unknown key :axes in [axes: [0]], expected one of [:axis, :keep_axis]",
                   fn -> Nx.mode(Nx.tensor([1, 2]), axes: [0]) end
    end
  end

  describe "reflect/2" do
    test "mirrors about the first and last element, as often as the padding needs" do
      assert Nx.reflect(Nx.tensor([0, 1, 2]), padding_config: [{3, 1}]) ==
               Nx.tensor([1, 2, 1, 0, 1, 2, 1])

      assert Nx.reflect(Nx.tensor([0, 1, 2]), padding_config: [{7, 8}]) ==
               Nx.tensor([1, 2, 1, 0, 1, 2, 1, 0, 1, 2, 1, 0, 1, 2, 1, 0, 1, 2])

      assert Nx.reflect(Nx.tensor([0, 1]), padding_config: [{5, 4}]) ==
               Nx.tensor([1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1])

      assert Nx.reflect(Nx.tensor([1.5, 2.5], type: :bf16), padding_config: [{1, 3}]) ==
               Nx.tensor([2.5, 1.5, 2.5, 1.5, 2.5, 1.5], type: :bf16)
    end

    test "several axes, axis names kept; an axis of size 1 repeats its element" do
      t = Nx.tensor([[0, 1, 2], [3, 4, 5]], names: [:x, :y])

      assert Nx.reflect(t, padding_config: [{2, 0}, {2, 1}]) ==
               Nx.tensor(
                 [
                   [2, 1, 0, 1, 2, 1],
                   [5, 4, 3, 4, 5, 4],
                   [2, 1, 0, 1, 2, 1],
                   [5, 4, 3, 4, 5, 4]
                 ],
                 names: [:x, :y]
               )

      row = [3, 4, 5, 4, 3, 4, 5]
      other = [0, 1, 2, 1, 0, 1, 2]

      assert Nx.reflect(Nx.iota({2, 1, 3}), padding_config: [{1, 0}, {1, 1}, {0, 4}]) ==
               Nx.tensor([[row, row, row], [other, other, other], [row, row, row]])

      assert Nx.reflect(Nx.tensor([[1, 2]], names: [:a, :b]), padding_config: [{0, 0}, {0, 0}]) ==
               Nx.tensor([[1, 2]], names: [:a, :b])

      assert Nx.reflect(Nx.tensor([[0.5, 1.5]], names: [:x, :y]), padding_config: [{1, 1}, {0, 2}]) ==
               Nx.tensor([[0.5, 1.5, 0.5, 1.5], [0.5, 1.5, 0.5, 1.5], [0.5, 1.5, 0.5, 1.5]],
                 names: [:x, :y]
               )
    end

    test "inside defn, vectorized, and through grad" do
      assert reflect_2_2(Nx.tensor([1, 2, 3])) == Nx.tensor([3, 2, 1, 2, 3, 2, 1])

      assert reflect_2_2(Nx.vectorize(Nx.tensor([[1, 2, 3], [4, 5, 6]]), :v)) ==
               Nx.vectorize(Nx.tensor([[3, 2, 1, 2, 3, 2, 1], [6, 5, 4, 5, 6, 5, 4]]), :v)

      # output positions 0..6 read elements [2, 1, 0, 1, 2, 1, 0]
      assert grad_reflect(Nx.tensor([1.0, 2.0, 3.0])) == Nx.tensor([8.0, 9.0, 4.0])
    end

    test "bad options raise Nx's errors" do
      t = Nx.tensor([0, 1])

      assert_raise ArgumentError, "missing mandatory option :padding_config", fn ->
        Nx.reflect(t)
      end

      assert_raise ArgumentError, "expected tensor to have rank greater than 0", fn ->
        Nx.reflect(Nx.tensor(1), padding_config: [])
      end

      assert_raise ArgumentError,
                   "expected to have one padding_config entry each tensor axis",
                   fn ->
                     Nx.reflect(t, padding_config: [{0, 0}, {1, 1}])
                   end

      assert_raise ArgumentError,
                   "unknown key :padding in [padding: [{0, 0}]], expected one of [:padding_config]",
                   fn -> Nx.reflect(t, padding: [{0, 0}]) end

      for bad <- [{0}, {-1, 0}, [1, 0], {1.0, 0}] do
        assert_raise ArgumentError,
                     "expected padding config for axis 0 to be of the format {left, right}, " <>
                       "with left and right as non-negative integers, got: #{inspect(bad)}",
                     fn -> Nx.reflect(t, padding_config: [bad]) end
      end

      assert_raise ArgumentError, ~r/for axis 2 to be of the format.*got: \{-1, 0\}/, fn ->
        Nx.reflect(Nx.tensor([[[0]]]), padding_config: [{0, 0}, {0, 0}, {-1, 0}])
      end
    end
  end
end
