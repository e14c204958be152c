# Issue #3 part B: shape, indexing and sorting ops, run on the real worker; gradients
# checked against central finite differences in f64.
defmodule Nx.ShapeOpsTest do
  use ExUnit.Case, async: true

  defp f64(list), do: Nx.tensor(list, type: :f64)

  defp check(x, loss),
    do: assert(:ok = NxJax.GradCheck.check_grads!(loss, &Nx.Defn.grad(&1, loss), x))

  # a weighted sum, so every element of the output matters differently
  defp weighted(t) do
    w = Nx.iota(t.shape, type: :f64) |> Nx.add(1.0) |> Nx.sin()
    Nx.sum(Nx.multiply(t, w))
  end

  describe "pad and reverse" do
    test "pad with low, high, interior and negative padding per axis" do
      t = Nx.tensor([[1, 2, 3], [4, 5, 6]])

      assert Nx.pad(t, 0, [{1, 0, 1}, {-1, 2, 0}]) ==
               Nx.tensor([[0, 0, 0, 0], [2, 3, 0, 0], [0, 0, 0, 0], [5, 6, 0, 0]])

      assert Nx.pad(Nx.tensor([1, 2], type: :u8), 0.5, [{1, 0, 0}]) ==
               Nx.tensor([0.5, 1.0, 2.0])
    end

    test "pad raises at trace time for bad configurations" do
      assert_raise ArgumentError, ~r/invalid padding configuration/, fn ->
        Nx.pad(Nx.tensor([1, 2]), 0, [{-2, -1, 0}])
      end

      assert_raise ArgumentError, ~r/padding value must be a scalar/, fn ->
        Nx.pad(Nx.tensor([1, 2]), Nx.tensor([0]), [{0, 0, 0}])
      end
    end

    test "reverse all axes by default or the given ones" do
      t = Nx.tensor([[1, 2], [3, 4]])
      assert Nx.reverse(t) == Nx.tensor([[4, 3], [2, 1]])
      assert Nx.reverse(t, axes: [-2]) == Nx.tensor([[3, 4], [1, 2]])
    end

    test "gradients of pad and reverse" do
      check(f64([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]]), fn x ->
        x |> Nx.pad(1.0, [{1, -1, 2}, {0, 1, 1}]) |> Nx.reverse(axes: [1]) |> weighted()
      end)
    end
  end

  describe "slices" do
    defmodule Slicing do
      import Nx.Defn
      defn dyn(t, i, j), do: Nx.slice(t, [i, j], [2, 2])
      defn dyn_strided(t, i), do: Nx.slice(t, [i], [4], strides: 2)
      defn put(t, i, s), do: Nx.put_slice(t, [i, 1], s)
    end

    test "slice with tensor start indices clamps them as Nx does" do
      t = Nx.iota({3, 4})
      assert Slicing.dyn(t, 1, 2) == Nx.tensor([[6, 7], [10, 11]])
      assert Slicing.dyn(t, 9, -4) == Nx.tensor([[4, 5], [8, 9]])
      assert Slicing.dyn_strided(Nx.iota({6}), 1) == Nx.tensor([1, 3])
      # the static path gives the same clamped result
      assert Nx.slice(t, [9, -4], [2, 2]) == Nx.tensor([[4, 5], [8, 9]])
    end

    test "put_slice writes at clamped start indices, static or dynamic" do
      t = Nx.broadcast(0, {3, 3})
      s = Nx.tensor([[1, 2]])
      assert Nx.put_slice(t, [1, 5], s) == Nx.tensor([[0, 0, 0], [0, 1, 2], [0, 0, 0]])
      assert Slicing.put(t, 7, s) == Nx.tensor([[0, 0, 0], [0, 0, 0], [0, 1, 2]])

      assert_raise ArgumentError, ~r/slice shape \{1, 4\} must fit/, fn ->
        Nx.put_slice(t, [0, 0], Nx.iota({1, 4}))
      end
    end

    test "gradients of a dynamic slice and of put_slice (tensor and slice)" do
      x = f64([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75], [3.0, 0.1, 0.2]])
      check(x, fn x -> x |> Nx.slice([Nx.tensor(1), Nx.tensor(0)], [2, 2]) |> weighted() end)
      check(x, fn x -> x |> Nx.put_slice([1, 1], f64([[9.0, 8.0]])) |> weighted() end)
      check(f64([[9.0, 8.0]]), fn s -> Nx.put_slice(x, [2, 1], s) |> Nx.sin() |> weighted() end)
    end

    test "stack along new axes, negative too" do
      a = Nx.tensor([1, 2])
      b = Nx.tensor([3.0, 4.0])
      assert Nx.stack([a, b]) == Nx.tensor([[1.0, 2.0], [3.0, 4.0]])
      assert Nx.stack([a, a], axis: -1) == Nx.tensor([[1, 1], [2, 2]])
      check(f64([0.5, 2.0]), fn x -> Nx.stack([x, Nx.exp(x)], axis: 1) |> weighted() end)
    end
  end

  describe "gather, take and indexed updates" do
    test "gather elements, slices and explicit axes" do
      t = Nx.iota({2, 3})
      assert Nx.gather(t, Nx.tensor([[1, 2], [0, 0]])) == Nx.tensor([5, 0])
      assert Nx.gather(t, Nx.tensor([[1]])) == Nx.tensor([[3, 4, 5]])
      assert Nx.gather(t, Nx.tensor([[2, 1]]), axes: [1, 0]) == Nx.tensor([5])

      assert_raise ArgumentError, ~r/integer tensor/, fn ->
        Nx.gather(t, Nx.tensor([[1.0]]))
      end
    end

    test "take and take_along_axis" do
      t = Nx.tensor([[10, 20, 30], [40, 50, 60]])
      assert Nx.take(t, Nx.tensor([[2, 0]]), axis: 1) == Nx.tensor([[[30, 10]], [[60, 40]]])
      assert Nx.take(t, Nx.tensor(1)) == Nx.tensor([40, 50, 60])

      assert Nx.take_along_axis(t, Nx.tensor([[1, 0, 1]]), axis: 0) ==
               Nx.tensor([[40, 20, 60]])

      assert_raise ArgumentError, ~r/must have the shape of the tensor/, fn ->
        Nx.take_along_axis(t, Nx.tensor([[1, 0]]), axis: 0)
      end
    end

    test "indexed_add accumulates repeated indices; indexed_put with axes" do
      t = Nx.broadcast(0.0, {2, 3})
      idx = Nx.tensor([[0, 1], [1, 2], [0, 1]])

      assert Nx.indexed_add(t, idx, Nx.tensor([1.0, 2.0, 3.0])) ==
               Nx.tensor([[0.0, 4.0, 0.0], [0.0, 0.0, 2.0]])

      assert Nx.indexed_put(t, Nx.tensor([[2]]), Nx.tensor([[7.0, 8.0]]), axes: [1]) ==
               Nx.tensor([[0.0, 0.0, 7.0], [0.0, 0.0, 8.0]])

      assert_raise ArgumentError, ~r/expected updates of shape \{3\}/, fn ->
        Nx.indexed_add(t, idx, Nx.tensor([1.0, 2.0]))
      end
    end

    test "concrete indices out of bounds raise with Nx 0.7.2's messages" do
      t = Nx.tensor([[1, 2], [3, 4]])

      for {indices, message} <- [
            {[[3, -10]], "index 3 is out of bounds for axis 0 in shape {2, 2}"},
            {[[0, -1]], "index -1 is out of bounds for axis 1 in shape {2, 2}"},
            {[[0, 0], [7, 9]], "index 7 is out of bounds for axis 0 in shape {2, 2}"}
          ] do
        indices = Nx.tensor(indices)
        updates = Nx.broadcast(1, {elem(indices.shape, 0)})
        assert_raise ArgumentError, message, fn -> Nx.gather(t, indices) end
        assert_raise ArgumentError, message, fn -> Nx.indexed_add(t, indices, updates) end
        assert_raise ArgumentError, message, fn -> Nx.indexed_put(t, indices, updates) end
      end

      # with :axes, Nx names the axis by its position in :axes, in the shape with the
      # indexed axes moved to the front
      assert_raise ArgumentError, "index 5 is out of bounds for axis 0 in shape {3, 2}", fn ->
        Nx.gather(Nx.iota({2, 3}), Nx.tensor([[5]]), axes: [1])
      end

      assert_raise ArgumentError, "index 5 is out of bounds for axis 0 in shape {3, 2}", fn ->
        Nx.indexed_add(Nx.iota({2, 3}), Nx.tensor([[5]]), Nx.tensor([[1, 1]]), axes: [1])
      end

      assert_raise ArgumentError, "index 5 is out of bounds for axis 1 in shape {2, 3}", fn ->
        Nx.take(Nx.iota({2, 3}), Nx.tensor([5]), axis: 1)
      end

      assert_raise ArgumentError, "index -1 is out of bounds for axis 0 in shape {3}", fn ->
        Nx.take(Nx.iota({3}), Nx.tensor([-1]))
      end

      assert_raise ArgumentError, "index 5 is out of bounds for axis 1 in shape {2, 3}", fn ->
        Nx.take_along_axis(Nx.iota({2, 3}), Nx.tensor([[5], [0]]), axis: 1)
      end
    end

    test "traced indices are not known at trace time: JAX clamps them into range" do
      gather = Nx.Defn.jit(&Nx.gather/2)
      assert gather.(Nx.tensor([[1, 2], [3, 4]]), Nx.tensor([[3, -10]])) == Nx.tensor([3])
    end

    test "indices must have an integer type (Nx 0.7.2's messages)" do
      t = Nx.broadcast(0, {2, 2})

      for type <- [f: 16, bf: 16, f: 32, f: 64, c: 64, c: 128] do
        indices = Nx.tensor([[0, 0], [1, 1]], type: type)
        message = "indices must be an integer tensor, got type: #{inspect(type)}"

        assert_raise ArgumentError, message, fn ->
          Nx.indexed_add(t, indices, Nx.tensor([1, 2]))
        end

        assert_raise ArgumentError, message, fn ->
          Nx.indexed_put(t, indices, Nx.tensor([1, 2]))
        end
      end

      message = "indices must be an integer tensor, got {:f, 32}"
      assert_raise ArgumentError, message, fn -> Nx.gather(t, Nx.tensor([[0, 0]], type: :f32)) end
      assert_raise ArgumentError, message, fn -> Nx.take(t, Nx.tensor([0.0])) end

      assert_raise ArgumentError, message, fn ->
        Nx.take_along_axis(Nx.iota({3}), Nx.tensor([0.0]), axis: 0)
      end
    end

    test "gradients of gather, take, take_along_axis, indexed_add and indexed_put" do
      x = f64([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
      idx = Nx.tensor([[1, 2], [0, 0], [1, 2]])
      check(x, fn x -> x |> Nx.gather(idx) |> Nx.exp() |> weighted() end)
      check(x, fn x -> x |> Nx.take(Nx.tensor([2, 2, 0]), axis: 1) |> Nx.sin() |> weighted() end)

      check(x, fn x ->
        x |> Nx.take_along_axis(Nx.tensor([[1, 1, 0], [0, 1, 1]]), axis: 0) |> weighted()
      end)

      upd = f64([1.0, 2.0, 3.0])
      check(x, fn x -> x |> Nx.indexed_add(idx, upd) |> Nx.multiply(x) |> weighted() end)
      check(upd, fn u -> x |> Nx.indexed_add(idx, u) |> Nx.sin() |> weighted() end)

      distinct = Nx.tensor([[1, 2], [0, 0]])
      check(x, fn x -> x |> Nx.indexed_put(distinct, f64([4.0, 5.0])) |> weighted() end)
      check(f64([4.0, 5.0]), fn u -> x |> Nx.indexed_put(distinct, u) |> weighted() end)
    end
  end

  describe "sort and argsort" do
    test "default axis 0, both directions, stable argsort" do
      t = Nx.tensor([[3, 1], [1, 1], [2, 0]])
      assert Nx.sort(t) == Nx.tensor([[1, 0], [2, 1], [3, 1]])
      assert Nx.sort(t, direction: :desc) == Nx.tensor([[3, 1], [2, 1], [1, 0]])
      assert Nx.argsort(t) == Nx.tensor([[1, 2], [2, 0], [0, 1]])
      assert Nx.argsort(t, direction: :desc) == Nx.tensor([[0, 0], [2, 1], [1, 2]])
      assert Nx.argsort(t, axis: 1, type: :u32) == Nx.tensor([[1, 0], [0, 1], [1, 0]], type: :u32)
    end

    test "sort raises for a bad direction" do
      assert_raise ArgumentError, ~r/expected :asc or :desc/, fn ->
        Nx.sort(Nx.tensor([1, 2]), direction: :up)
      end
    end

    test "gradient of sort" do
      check(f64([[0.3, -1.0, 2.0], [1.5, 0.25, -0.75]]), fn x ->
        x |> Nx.sort(axis: 1, direction: :desc) |> weighted()
      end)
    end
  end

  describe "eye, make_diagonal, outer" do
    test "eye for a batch shape and a type" do
      assert Nx.eye({2, 2, 3}, type: :f32) ==
               Nx.tensor([[[1, 0, 0], [0, 1, 0]], [[1, 0, 0], [0, 1, 0]]], type: :f32)
    end

    test "make_diagonal with positive offset, and its gradient" do
      assert Nx.make_diagonal(Nx.tensor([1, 2]), offset: 1) ==
               Nx.tensor([[0, 1, 0], [0, 0, 2], [0, 0, 0]])

      check(f64([0.5, -2.0]), fn x -> x |> Nx.make_diagonal(offset: -1) |> weighted() end)
    end

    test "outer flattens its arguments, and its gradient" do
      assert Nx.outer(Nx.tensor([[1, 2]]), Nx.tensor(3)) == Nx.tensor([[3], [6]])
      check(f64([0.5, -2.0]), fn x -> x |> Nx.outer(Nx.exp(x)) |> weighted() end)
    end
  end

  describe "dot" do
    # the examples of Nx.dot/6 in the Nx docs, including batched ones
    test "contraction and batch axes" do
      u = Nx.tensor([[[1, 2], [3, 4]], [[5, 6], [7, 8]]])

      assert Nx.dot(u, [2], [0], u, [1], [0]) ==
               Nx.tensor([[[7, 10], [15, 22]], [[67, 78], [91, 106]]])

      assert Nx.dot(u, [1], [0], u, [1], [0]) ==
               Nx.tensor([[[10, 14], [14, 20]], [[74, 86], [86, 100]]])

      v = Nx.iota({3, 2, 4})
      w = Nx.iota({4, 3})
      assert Nx.shape(Nx.dot(v, [2], w, [0])) == {3, 2, 3}
    end

    test "gradient of a batched dot" do
      y = f64([[[1.0, 2.0], [0.5, -1.0]], [[0.0, 3.0], [1.5, 2.5]]])

      check(f64([[[0.5, -1.0], [2.0, 0.1]], [[1.0, 1.0], [-0.3, 0.7]]]), fn x ->
        x |> Nx.dot([2], [0], y, [1], [0]) |> weighted()
      end)
    end
  end

  describe "conv" do
    test "2-d conv with padding :same, strides and channels-last permutations" do
      input = Nx.iota({1, 4, 4, 1}, type: :f32)
      kernel = Nx.broadcast(1.0, {1, 1, 3, 3})

      out =
        Nx.conv(input, kernel,
          padding: :same,
          strides: [2, 2],
          input_permutation: [0, 3, 1, 2],
          output_permutation: [0, 3, 1, 2]
        )

      # sums of the 3x3 windows (zero padded) centred on (0,0), (0,2), (2,0), (2,2) of iota({4, 4})
      assert out == Nx.tensor([[[[10.0], [24.0]], [[51.0], [90.0]]]])
    end

    # the messages Nx 0.7.2's nx_test.exs expects, in the order Nx checks
    test "conv's errors are Nx 0.7.2's" do
      t = Nx.iota({4, 2, 4})
      k = Nx.broadcast(1.0, {1, 2, 1})

      for {opts, message} <- [
            {[input_dilation: {1.0}],
             "input dilation must be a positive integer or list of positive integers, got {1.0}"},
            {[input_dilation: [-1]],
             "input dilation of each dimension must be a positive integer, got [-1]"},
            {[kernel_dilation: [1.0]],
             "kernel dilation of each dimension must be a positive integer, got [1.0]"},
            {[kernel_dilation: [1, 1, 1]],
             "must specify dilation for each spatial dimension of the kernel or specify an " <>
               "integer dilation factor"},
            {[feature_group_size: 2, batch_group_size: 2],
             "either batch groups or feature groups must be 1, got batch_groups = 2 and " <>
               "feature_groups = 2"}
          ] do
        assert_raise ArgumentError, message, fn -> Nx.conv(t, k, opts) end
      end

      assert_raise ArgumentError, ~r/invalid padding/, fn -> Nx.conv(t, k, padding: :bad) end

      assert_raise ArgumentError,
                   "input shape in conv requires at least rank 3, shape {2, 2} has rank 2",
                   fn -> Nx.conv(Nx.iota({2, 2}), k, strides: [1, 1, 1]) end

      assert_raise ArgumentError, ~r/rank of strides much match rank of spatial dimensions/, fn ->
        Nx.conv(t, k, strides: [1, 1, 1, 1])
      end
    end

    test "conv raises for mismatched channels" do
      assert_raise ArgumentError, ~r/input channels divided by feature groups/, fn ->
        Nx.conv(Nx.iota({1, 2, 4}), Nx.iota({1, 3, 2}))
      end
    end

    test "gradients of conv with respect to input and kernel" do
      kernel = f64([[[0.5, -1.0], [2.0, 0.1]]])
      input = f64([[[0.2, 0.4, -0.6, 1.0], [1.0, -2.0, 0.3, 0.5]]])
      opts = [padding: [{1, 0}], kernel_dilation: 2, input_dilation: 1]
      check(input, fn x -> x |> Nx.conv(kernel, opts) |> weighted() end)
      check(kernel, fn k -> input |> Nx.conv(k, opts) |> weighted() end)
    end
  end

  describe "all_close" do
    test "tolerances, infinities and NaNs" do
      assert Nx.all_close(Nx.tensor([1.0, 2.0]), Nx.tensor([1.0, 2.1])) == Nx.tensor(0, type: :u8)

      assert Nx.all_close(Nx.tensor([1.0, 2.0]), Nx.tensor([1.0, 2.1]), atol: 0.2) ==
               Nx.tensor(1, type: :u8)

      assert Nx.all_close(Nx.tensor([1.0, 2.0]), Nx.tensor([1.0, 2.1]), rtol: 0.1) ==
               Nx.tensor(1, type: :u8)

      assert Nx.all_close(Nx.tensor(:infinity), Nx.tensor(:infinity)) == Nx.tensor(1, type: :u8)
      assert Nx.all_close(Nx.tensor(:nan), Nx.tensor(:nan)) == Nx.tensor(0, type: :u8)
      assert Nx.all_close(Nx.tensor([1, 2]), 1) == Nx.tensor(0, type: :u8)
    end

    # it answered 1 for these: |inf - -inf| = inf is within atol + rtol * inf (Nx 0.7.2: 0)
    test "an infinity is close only to the same infinity" do
      assert Nx.all_close(Nx.tensor(:infinity), Nx.tensor(:neg_infinity)) ==
               Nx.tensor(0, type: :u8)

      assert Nx.all_close(Nx.tensor([:infinity, 1.0]), Nx.tensor([1.0e30, 1.0])) ==
               Nx.tensor(0, type: :u8)

      assert Nx.all_close(Nx.tensor([:neg_infinity, 1.0]), Nx.tensor([:neg_infinity, 1.0])) ==
               Nx.tensor(1, type: :u8)
    end
  end

  # it went through a default f32 tensor first, so 1.0e-128 came back as 0.0 (Nx 0.7.2: 1.0e-128)
  test "as_type/2 of a number builds the tensor in the target type directly" do
    assert Nx.to_number(Nx.as_type(1.0e-128, :f64)) == 1.0e-128
    assert Nx.as_type(3, :u8) == Nx.tensor(3, type: :u8)
  end

  describe "existing shape ops follow Nx" do
    test "reshape, squeeze, new_axis, transpose, broadcast, concatenate, iota" do
      t = Nx.iota({2, 1, 3})
      assert Nx.reshape(t, {3, :auto}) == Nx.tensor([[0, 1], [2, 3], [4, 5]])
      assert Nx.squeeze(t) == Nx.tensor([[0, 1, 2], [3, 4, 5]])
      assert Nx.squeeze(t, axes: [-2]) == Nx.tensor([[0, 1, 2], [3, 4, 5]])
      assert Nx.shape(Nx.new_axis(t, 1)) == {2, 1, 1, 3}
      assert Nx.transpose(t, axes: [2, 0, 1]) == Nx.tensor([[[0], [3]], [[1], [4]], [[2], [5]]])
      assert Nx.broadcast(1, {2}) == Nx.tensor([1, 1])

      assert Nx.concatenate([Nx.tensor([[1]], type: :u8), Nx.tensor([[2.5]])], axis: 1) ==
               Nx.tensor([[1.0, 2.5]])

      assert Nx.iota({2, 2}, type: :f32) == Nx.tensor([[0.0, 1.0], [2.0, 3.0]])
    end
  end
end
