# Issue #3: Nx.vectorize/devectorize/revectorize through ops, defn and grad (lowered with
# jax.vmap on the worker), and the ~V/~M sigils; run on the real worker.
defmodule Nx.VectorizeTest do
  use ExUnit.Case, async: true

  import Nx, only: :sigils
  import Nx.Defn

  defp f64(list), do: Nx.tensor(list, type: :f64)

  # a regression (2026-12-06): a vectorized operand whose axes come in another order than the
  # first operand's was transposed into that order; Nx 0.7.2 reshapes it (its data is read in
  # the first operand's order). Real Nx 0.7.2's answers.
  test "vectorized axes shared in another order are reshaped into the first operand's, as Nx 0.7.2" do
    compared = NxProgramsCases.compare(NxProgramsCases.vectorized())
    assert length(compared) > 8
    for {ours, nx} <- compared, do: assert(ours == nx)
  end

  defn cube_sum(x), do: Nx.sum(x * x * x)
  defn grad_cube_sum(x), do: grad(x, &cube_sum/1)
  defn affine(x, w, b), do: Nx.dot(w, x) + b
  defn loss(w, x), do: Nx.sum(Nx.sin(Nx.dot(x, w))) + Nx.sum(w * Nx.exp(-w))
  defn abs_if(x), do: if(Nx.sum(x) > 0, do: x, else: -x)
  defn scale_if(flag, x, y), do: if(flag, do: x * 2, else: x + Nx.sum(y))
  defn pick_if(flag, x, y), do: if(flag, do: {x[0], y}, else: {y, x})

  defn add_twice(x, y) do
    while {x, i = 0}, i < 2 do
      {x + Nx.sum(y), i + 1}
    end
  end

  defn until_big(x, opts \\ []) do
    while x, Nx.sum(x) < 10, max_iterations: opts[:max_iterations] do
      x * 2
    end
  end

  defn three_way(p1, p2, x) do
    cond do
      p1 -> hook(x + 1, &send(self(), {:first, &1}))
      p2 -> hook(x + 2, &send(self(), {:second, &1}))
      true -> hook(x + 3, &send(self(), {:third, &1}))
    end
  end

  defn double_n_times(x, n) do
    {_i, v} =
      while {i = n, v = x}, i > 0 do
        {i - 1, v * 2}
      end

    v
  end

  defn sum_each(x, y) do
    while y, t <- x do
      y + Nx.sum(t)
    end
  end

  describe "vectorize, devectorize, revectorize" do
    test "vectorize moves leading axes into vectorized_axes and keeps the data" do
      t = Nx.iota({2, 3, 4})
      v = Nx.vectorize(t, :x)
      assert v.vectorized_axes == [x: 2]
      assert Nx.shape(v) == {3, 4}
      assert Nx.rank(v) == 2
      assert Nx.size(v) == 12
      assert Nx.to_binary(v) == Nx.to_binary(t)

      assert Nx.vectorize(t, [:x, :y]).vectorized_axes == [x: 2, y: 3]
      assert Nx.vectorize(t, x: 2, y: 3).shape == {4}
      # vectorizing again appends inner vectorized axes
      assert Nx.vectorize(v, :y).vectorized_axes == [x: 2, y: 3]
    end

    test "devectorize round trips, with or without names" do
      t = Nx.iota({2, 3})
      v = Nx.vectorize(t, :rows)
      assert Nx.devectorize(v, keep_names: false) == t
      named = Nx.devectorize(v)
      assert named.names == [:rows, nil]
      assert named.shape == {2, 3}
      assert Nx.vectorize(Nx.devectorize(v), :rows) == v
      # a tensor without vectorized axes is unchanged
      assert Nx.devectorize(t) == t
    end

    test "revectorize reshapes the vectorized axes and the shape together" do
      v = Nx.vectorize(Nx.iota({2, 3, 2}), :x)
      r = Nx.revectorize(v, [a: 3, b: 2], target_shape: {2})
      assert r.vectorized_axes == [a: 3, b: 2]
      assert r.shape == {2}
      assert Nx.to_flat_list(r) == Enum.to_list(0..11)
      assert Nx.revectorize(r, [x: 2], target_shape: {3, 2}) == v
    end

    # the answers of Nx 0.7.2 (its doc examples of revectorize/3 and vectorize/2)
    test "revectorize keeps the shape without :target_shape, takes :auto and containers" do
      t = Nx.iota({2, 3, 1}) |> Nx.vectorize(x: 2, y: 3)
      r = Nx.revectorize(t, x: 6, y: :auto)
      assert {r.vectorized_axes, r.shape} == {[x: 6, y: 1], {1}}
      assert Nx.revectorize(t, a: :auto).vectorized_axes == [a: 6]

      named = Nx.iota({2, 3}, names: [:p, :q])
      r = Nx.revectorize(named, a: :auto)
      assert {r.vectorized_axes, r.shape, r.names} == {[a: 1], {2, 3}, [:p, :q]}

      r = Nx.revectorize(Nx.iota({8}), [temp: :auto, x: 2], target_shape: {})
      assert {r.vectorized_axes, r.shape} == {[temp: 4, x: 2], {}}

      r = Nx.revectorize(r, [new_vec: 2], target_shape: {1, 4}, target_names: [:x, :last])
      assert {r.vectorized_axes, r.shape, r.names} == {[new_vec: 2], {1, 4}, [:x, :last]}
      assert Nx.to_flat_list(r) == Enum.to_list(0..7)

      {r1, r2} = Nx.revectorize({t, Nx.iota({2, 1}) |> Nx.vectorize(:x)}, a: :auto)
      assert {r1.vectorized_axes, r2.vectorized_axes} == {[a: 6], [a: 2]}

      # an empty list of axes: vectorize leaves the tensor alone, revectorize devectorizes
      assert Nx.vectorize(Nx.iota({2}), []) == Nx.iota({2})
      assert Nx.revectorize(t, [], target_shape: {6}) == Nx.iota({6})
    end

    test "revectorize inside defn reshapes the data" do
      fun = fn t -> Nx.revectorize(Nx.vectorize(t, :x), [y: 4], target_shape: {}) |> Nx.add(1) end
      r = Nx.Defn.jit_apply(fun, [Nx.iota({2, 2})])
      assert r.vectorized_axes == [y: 4]
      assert Nx.to_flat_list(r) == [1, 2, 3, 4]
    end

    test "errors say what to do" do
      t = Nx.iota({2, 3})

      # Nx 0.7.2's messages
      assert_raise ArgumentError,
                   "number of vectorized axes must not be greater than the shape size",
                   fn -> Nx.vectorize(t, [:a, :b, :c]) end

      assert_raise ArgumentError, "cannot vectorize tensor of rank 0", fn ->
        Nx.vectorize(Nx.tensor(1), :x)
      end

      assert_raise ArgumentError, "expected vectorized axis :x to have size 3, got 2", fn ->
        Nx.vectorize(t, x: 3)
      end

      assert_raise ArgumentError,
                   "expected vectorized axis specification to be an atom or a tuple of " <>
                     "{atom, pos_integer}, got: \"y\"",
                   fn -> Nx.vectorize(t, [:x, "y"]) end

      assert_raise ArgumentError, ~r/got: \{:x, 2.0\}/, fn -> Nx.vectorize(t, x: 2.0) end

      assert_raise ArgumentError,
                   "cannot use name :x for new vectorized axes because there's already a " <>
                     "vectorized axis with the same name",
                   fn -> t |> Nx.vectorize(:x) |> Nx.vectorize(:x) end

      # Nx 0.7.2 accepts a name twice in one call; we refuse it
      assert_raise ArgumentError, ~r/names must be unique/, fn ->
        Nx.vectorize(t, [:x, :x])
      end

      assert_raise ArgumentError,
                   "cannot reshape, current shape {2, 3} is not compatible with new shape {4}",
                   fn -> Nx.revectorize(Nx.vectorize(t, :x), [y: 4], target_shape: {}) end

      assert_raise ArgumentError,
                   "cannot have more than one `:auto` occurrence between target_axes and " <>
                     "the :target_shape option",
                   fn -> Nx.revectorize(t, [y: :auto], target_shape: {:auto}) end

      assert_raise ArgumentError,
                   "cannot convert vectorized tensor with axes [x: 2, y: 3] and shape {} to number",
                   fn -> t |> Nx.vectorize([:x, :y]) |> Nx.to_number() end
    end
  end

  describe "element-wise ops" do
    test "apply per entry" do
      v = Nx.vectorize(Nx.tensor([[1.0, 2.0], [3.0, 4.0]]), :x)
      assert Nx.multiply(v, 10) == Nx.vectorize(Nx.tensor([[10.0, 20.0], [30.0, 40.0]]), :x)

      assert Nx.exp(v) |> Nx.devectorize(keep_names: false) ==
               Nx.exp(Nx.tensor([[1.0, 2.0], [3.0, 4.0]]))
    end

    test "a non-vectorized operand is shared by every entry and broadcasts as usual" do
      v = Nx.vectorize(Nx.tensor([[1, 2, 3], [4, 5, 6]]), :x)
      r = Nx.add(v, Nx.tensor([[100], [200]]))
      assert r.vectorized_axes == [x: 2]
      assert r.shape == {2, 3}

      assert Nx.devectorize(r, keep_names: false) ==
               Nx.tensor([
                 [[101, 102, 103], [201, 202, 203]],
                 [[104, 105, 106], [204, 205, 206]]
               ])
    end

    test "vectorized axes broadcast by name: x with y gives x, y" do
      x = Nx.vectorize(Nx.tensor([1, 2]), :x)
      y = Nx.vectorize(Nx.tensor([10, 20, 30]), :y)
      r = Nx.add(x, y)
      assert r.vectorized_axes == [x: 2, y: 3]
      assert r.shape == {}
      assert Nx.devectorize(r, keep_names: false) == Nx.tensor([[11, 21, 31], [12, 22, 32]])

      # order of appearance decides the order of the result's axes
      s = Nx.subtract(y, x)
      assert s.vectorized_axes == [y: 3, x: 2]
      assert Nx.devectorize(s, keep_names: false) == Nx.tensor([[9, 8], [19, 18], [29, 28]])
    end

    # (until 2026-12-06 the second was transposed; Nx 0.7.2 reshapes it, values of real Nx)
    test "inputs with the same axes in another order are reshaped into the first's order" do
      t = Nx.iota({2, 3})
      xy = Nx.vectorize(t, [:x, :y])
      yx = Nx.vectorize(Nx.transpose(t), [:y, :x])
      r = Nx.subtract(xy, yx)
      assert r.vectorized_axes == [x: 2, y: 3]
      assert Nx.to_flat_list(r) == [0, -2, 1, -1, 2, 0]
    end

    test "an input missing one of the axes is broadcast along it" do
      xy = Nx.vectorize(Nx.iota({2, 3}), [:x, :y])
      y = Nx.vectorize(Nx.tensor([100, 200, 300]), :y)
      r = Nx.add(y, xy)
      assert r.vectorized_axes == [y: 3, x: 2]

      # (xy's entries read in the order [y: 3, x: 2], as Nx 0.7.2 reshapes them)
      assert Nx.devectorize(r, keep_names: false) ==
               Nx.tensor([[100, 101], [202, 203], [304, 305]])
    end

    test "the same name with different sizes raises" do
      a = Nx.vectorize(Nx.iota({2}), :x)
      b = Nx.vectorize(Nx.iota({3}), :x)

      assert_raise ArgumentError, ~r/vectorized axis :x: it has size 2 in one input and 3/, fn ->
        Nx.add(a, b)
      end
    end

    test "a size-1 vectorized axis broadcasts against a larger one of its name (Nx 0.7)" do
      c = Nx.vectorize(Nx.tensor([[1]]), x: 1, y: 1)
      d = Nx.vectorize(Nx.tensor([[1, 2]]), x: 1, y: 2)
      assert Nx.add(c, d) == Nx.vectorize(Nx.tensor([[2, 3]]), x: 1, y: 2)
      assert Nx.add(d, c) == Nx.vectorize(Nx.tensor([[2, 3]]), x: 1, y: 2)
      # the larger size, at the place of the first input's axis
      e = Nx.vectorize(Nx.tensor([[10], [20]]), y: 2, x: 1)
      assert Nx.add(c, e) == Nx.vectorize(Nx.tensor([[11, 21]]), x: 1, y: 2)

      # the gradient of the size-1 input sums over the entries it was broadcast to
      g = Nx.Defn.grad(Nx.vectorize(Nx.tensor([[3.0]]), x: 1, y: 1), &Nx.multiply(&1, d))
      assert g == Nx.vectorize(Nx.tensor([[3.0]]), x: 1, y: 1)
    end

    test "broadcast_vectors/2 gives a list of tensors the union of their vectorized axes" do
      x = Nx.vectorize(Nx.tensor([1, 2]), :x)
      xy = Nx.vectorize(Nx.tensor([[[5], [6]]]), x: 1, y: 2)

      assert [bxy, bx] = Nx.broadcast_vectors([xy, x])
      assert bxy == Nx.vectorize(Nx.tensor([[[5], [6]], [[5], [6]]]), x: 2, y: 2)
      assert bx == Nx.vectorize(Nx.tensor([[1, 1], [2, 2]]), x: 2, y: 2)

      assert [bx, _] = Nx.broadcast_vectors([x, xy], align_ranks: true)
      assert bx == Nx.vectorize(Nx.tensor([[[1], [1]], [[2], [2]]]), x: 2, y: 2)
      assert Nx.broadcast_vectors([x]) == [x]
      assert Nx.broadcast_vectors([1, Nx.tensor(2)]) == [Nx.tensor(1), Nx.tensor(2)]

      assert_raise ArgumentError, ~r/unknown key :align/, fn ->
        Nx.broadcast_vectors([x, xy], align: true)
      end
    end

    test "select and clip with mixed vectorized inputs" do
      pred = Nx.vectorize(Nx.tensor([[1, 0], [0, 1]], type: :u8), :x)
      r = Nx.select(pred, Nx.tensor([1, 2]), Nx.vectorize(Nx.tensor([10, 20, 30]), :y))
      assert r.vectorized_axes == [x: 2, y: 3]

      assert Nx.devectorize(r, keep_names: false) ==
               Nx.tensor([[[1, 10], [1, 20], [1, 30]], [[10, 2], [20, 2], [30, 2]]])
    end
  end

  describe "reductions, dot, shape ops" do
    test "reductions and axes options refer to the inner shape" do
      v = Nx.vectorize(Nx.iota({2, 2, 3}), :x)
      assert Nx.sum(v) == Nx.vectorize(Nx.tensor([15, 51]), :x)
      assert Nx.sum(v, axes: [0]) == Nx.vectorize(Nx.tensor([[3, 5, 7], [15, 17, 19]]), :x)

      assert Nx.reduce_max(v, axes: [1], keep_axes: true) ==
               Nx.vectorize(Nx.tensor([[[2], [5]], [[8], [11]]]), :x)

      assert Nx.argmax(v, axis: -1) == Nx.vectorize(Nx.tensor([[2, 2], [2, 2]]), :x)

      assert Nx.mean(Nx.vectorize(Nx.tensor([[1.0, 3.0], [5.0, 9.0]]), :x)) ==
               Nx.vectorize(Nx.tensor([2.0, 7.0]), :x)
    end

    test "dot per entry, with a shared or a vectorized right side" do
      m = Nx.vectorize(Nx.tensor([[[1, 2], [3, 4]], [[0, 1], [1, 0]]]), :b)
      assert Nx.dot(m, Nx.tensor([1, 10])) == Nx.vectorize(Nx.tensor([[21, 43], [10, 1]]), :b)

      vs = Nx.vectorize(Nx.tensor([[1, 0], [0, 1]]), :b)
      assert Nx.dot(m, vs) == Nx.vectorize(Nx.tensor([[1, 3], [1, 0]]), :b)

      # both vectorized over different names: every pair
      us = Nx.vectorize(Nx.tensor([[1, 0], [0, 1], [1, 1]]), :u)
      r = Nx.dot(m, us)
      assert r.vectorized_axes == [b: 2, u: 3]

      assert Nx.devectorize(r, keep_names: false) ==
               Nx.tensor([[[1, 3], [2, 4], [3, 7]], [[0, 1], [1, 0], [1, 1]]])
    end

    test "shape ops work on the inner shape" do
      v = Nx.vectorize(Nx.iota({2, 2, 3}), :x)
      assert Nx.transpose(v).shape == {3, 2}

      assert Nx.devectorize(Nx.transpose(v), keep_names: false) ==
               Nx.transpose(Nx.iota({2, 2, 3}), axes: [0, 2, 1])

      assert Nx.reshape(v, {6}) == Nx.vectorize(Nx.iota({2, 6}), :x)

      assert Nx.slice(v, [0, 1], [2, 2]) ==
               Nx.vectorize(Nx.tensor([[[1, 2], [4, 5]], [[7, 8], [10, 11]]]), :x)

      assert Nx.concatenate([v, v], axis: 1).shape == {2, 6}

      assert Nx.broadcast(Nx.vectorize(Nx.tensor([1, 2]), :x), {2}) ==
               Nx.vectorize(Nx.tensor([[1, 1], [2, 2]]), :x)

      assert Nx.sort(Nx.vectorize(Nx.tensor([[3, 1, 2], [0, 9, 5]]), :x)) ==
               Nx.vectorize(Nx.tensor([[1, 2, 3], [0, 5, 9]]), :x)
    end

    test "linear algebra per entry (tuple-valued nodes too)" do
      a = Nx.vectorize(f64([[[4.0, 2.0], [2.0, 3.0]], [[1.0, 0.0], [0.0, 9.0]]]), :b)
      assert Nx.LinAlg.determinant(a) == Nx.vectorize(f64([8.0, 9.0]), :b)
      {q, r} = Nx.LinAlg.qr(a)
      assert q.vectorized_axes == [b: 2] and r.vectorized_axes == [b: 2]
      assert Nx.all_close(Nx.dot(q, r), a) |> Nx.devectorize() |> Nx.to_flat_list() == [1, 1]
    end

    test "reduce with a function raises a clear error for vectorized tensors" do
      v = Nx.vectorize(Nx.iota({2, 3}), :x)

      assert_raise ArgumentError,
                   ~r/reduce with a function is not supported with vectorized/,
                   fn ->
                     Nx.reduce(v, 0, &Nx.add/2)
                   end

      assert_raise ArgumentError, ~r/window_reduce with a function is not supported/, fn ->
        Nx.window_reduce(v, 0, {2}, &Nx.add/2)
      end
    end

    test "iota with :vectorized_axes gives every entry the same iota" do
      t = Nx.iota({2, 3}, axis: 0, vectorized_axes: [x: 1, y: 2])
      assert t.vectorized_axes == [x: 1, y: 2] and t.shape == {2, 3}

      assert Nx.devectorize(t, keep_names: false) ==
               Nx.broadcast(Nx.iota({2, 3}, axis: 0), {1, 2, 2, 3})

      assert Nx.iota({2}, vectorized_axes: []) == Nx.iota({2})
    end

    test "an if on a vectorized condition selects entry by entry" do
      x = Nx.vectorize(Nx.tensor([[1, 2], [-3, 1]]), :x)
      assert abs_if(x) == Nx.vectorize(Nx.tensor([[1, 2], [3, -1]]), :x)
    end

    test "an if on a plain condition runs one branch over vectorized values" do
      x = Nx.vectorize(Nx.tensor([[1, 2], [-3, 1]]), :x)
      y = Nx.vectorize(Nx.tensor([10, 20, 30]), :y)

      assert scale_if(1, x, Nx.tensor([10, 20, 30])) ==
               Nx.vectorize(Nx.tensor([[2, 4], [-6, 2]]), :x)

      assert scale_if(0, x, Nx.tensor([10, 20, 30])) ==
               Nx.vectorize(Nx.tensor([[61, 62], [57, 61]]), :x)

      # per leaf, the branches' vectorized axes are united (the else branch's first, as in
      # Nx 0.7.2, which folds the branches from the last) and the taken leaf is broadcast to
      # them; real Nx 0.7.2 gives these axes and values (Nx.Defn.Evaluator)
      {left, right} = pick_if(0, x, y)
      assert left.vectorized_axes == [y: 3, x: 2] and right.vectorized_axes == [x: 2, y: 3]
      assert Nx.devectorize(left, keep_names: false) == Nx.tensor([[10, 10], [20, 20], [30, 30]])

      assert Nx.devectorize(right, keep_names: false) ==
               Nx.tensor([[[1, 2], [1, 2], [1, 2]], [[-3, 1], [-3, 1], [-3, 1]]])
    end

    test "a loop over vectorized state runs on every entry at once" do
      x = Nx.vectorize(Nx.tensor([[1, 2], [-3, 1]]), :x)
      assert {result, i} = add_twice(x, 5)
      assert result == Nx.vectorize(Nx.tensor([[11, 12], [7, 11]]), :x) and i == Nx.tensor(2)
      # a captured value vectorized like the state
      assert {result, _} = add_twice(x, Nx.vectorize(Nx.tensor([100, 200]), :x))
      assert result == Nx.vectorize(Nx.tensor([[201, 202], [397, 401]]), :x)
    end

    # Nx 0.7.2: a condition with one scalar per entry runs each entry until its own condition
    # fails (the loop stops when none holds); the state gains the condition's axes, first
    # as in Nx 0.7.2: a branch that no entry takes does not run (its hooks stay quiet)
    test "a cond on vectorized conditions runs only the branches some entry takes" do
      p1 = Nx.vectorize(Nx.tensor([1, 0, 0]), :p)
      none = Nx.vectorize(Nx.tensor([0, 0, 0]), :p)
      assert three_way(p1, none, 10) == Nx.vectorize(Nx.tensor([11, 13, 13]), :p)
      assert_received {:first, first}
      assert first == Nx.tensor(11)
      assert_received {:third, _}
      refute_received {:second, _}

      assert three_way(p1, Nx.vectorize(Nx.tensor([0, 1, 1]), :p), 10) ==
               Nx.vectorize(Nx.tensor([11, 12, 12]), :p)

      assert_received {:first, _}
      assert_received {:second, _}
      refute_received {:third, _}
    end

    test "a vectorized condition stops each entry on its own" do
      x = Nx.vectorize(Nx.tensor([[1, 2], [-3, 1]]), :x)
      # [1, 2] sums to 3: doubled twice (sum 12); [3, 4] once (14); [-3, 1] sums to -2:
      # doubling never ends it, so it runs as long as the iterations allow
      assert until_big(Nx.vectorize(Nx.tensor([[1, 2], [3, 4]]), :x)) ==
               Nx.vectorize(Nx.tensor([[4, 8], [6, 8]]), :x)

      assert until_big(x, max_iterations: 3) ==
               Nx.vectorize(Nx.tensor([[4, 8], [-24, 8]]), :x)

      # state without the condition's axes gets them: pred axes first, then its own
      x = Nx.vectorize(Nx.tensor([1, 2, 3]), :init)
      n = Nx.vectorize(Nx.tensor([4, 5]), :pred)
      doubled = double_n_times(x, n)
      assert doubled.vectorized_axes == [pred: 2, init: 3]
      assert Nx.devectorize(doubled, keep_names: false) == Nx.tensor([[16, 32, 48], [32, 64, 96]])

      # axes in another order are reinterpreted, as Nx 0.7.2 (and its own test) reads the
      # entries of [other: 3, pred: 2] as [pred: 2, other: 3], without a transpose
      x = Nx.vectorize(Nx.tensor([[1, 2], [3, 4], [5, 6]]), other: 3, pred: 2)
      doubled = double_n_times(x, Nx.vectorize(Nx.tensor([3, 4]), :pred))
      assert Nx.devectorize(doubled, keep_names: false) == Nx.tensor([[8, 16, 24], [64, 80, 96]])
    end

    test "a vectorized generator gives the state its axes" do
      x = Nx.vectorize(Nx.iota({3, 4}), x: 3)
      y = Nx.vectorize(Nx.tensor([[10, 20, 30, 40], [-10, -20, -30, -40]]), y: 2)
      result = sum_each(x, y)
      assert result.vectorized_axes == [x: 3, y: 2]
      # entry {i, j}: y_j plus the four numbers of row i of x, 4i + 0 ... 4i + 3
      rows = [[10, 20, 30, 40], [-10, -20, -30, -40]]
      want = for i <- 0..2, do: Enum.map(rows, fn row -> Enum.map(row, &(&1 + 16 * i + 6)) end)
      assert Nx.devectorize(result, keep_names: false) == Nx.tensor(want)
    end

    test "a loop state that the body vectorizes raises" do
      assert_raise CompileError, ~r/must keep the vectorized axes of state leaf 0/, fn ->
        add_twice(Nx.tensor([1, 2]), Nx.vectorize(Nx.tensor([10, 20, 30]), :y))
      end
    end
  end

  describe "defn" do
    test "vectorized arguments and results" do
      x = Nx.vectorize(f64([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), :batch)
      w = f64([[1.0, 0.0], [1.0, 1.0]])
      r = affine(x, w, 0.5)
      assert r.vectorized_axes == [batch: 3]
      assert r == Nx.vectorize(f64([[1.5, 3.5], [3.5, 7.5], [5.5, 11.5]]), :batch)
    end

    test "a defn is traced once per vectorized signature" do
      x = Nx.vectorize(f64([[1.0, 2.0]]), :batch)
      assert cube_sum(x) == Nx.vectorize(f64([9.0]), :batch)
      # same shapes, different vectorization: a different signature and result
      assert cube_sum(Nx.devectorize(x, keep_names: false)) == f64(9.0)
    end

    test "all_close per entry" do
      a = Nx.vectorize(Nx.tensor([[1.0, 2.0], [1.0, 2.5]]), :x)

      assert Nx.all_close(a, Nx.tensor([1.0, 2.0])) ==
               Nx.vectorize(Nx.tensor([1, 0], type: :u8), :x)
    end
  end

  describe "grad" do
    test "grad with respect to a vectorized tensor is per entry and keeps its axes" do
      x = Nx.vectorize(f64([[1.0, 2.0], [3.0, -1.0]]), :x)
      g = grad_cube_sum(x)
      assert g.vectorized_axes == [x: 2]
      assert g == Nx.vectorize(f64([[3.0, 12.0], [27.0, 3.0]]), :x)
    end

    test "per-entry gradients match central differences in f64" do
      ws = f64([[0.3, -0.7, 1.1], [1.5, 0.2, -0.4]])
      xs = f64([[1.0, 2.0, 0.5], [-1.0, 0.3, 2.0]])
      v = Nx.vectorize(ws, :entry)
      g = Nx.Defn.grad(v, &loss(&1, xs))
      assert g.vectorized_axes == [entry: 2]
      rows = g |> Nx.devectorize(keep_names: false) |> Nx.to_list()

      for {row, i} <- Enum.with_index(rows) do
        w = f64(Enum.at(Nx.to_list(ws), i))
        fun = &loss(&1, xs)
        # the gradient of entry i is the gradient of the non-vectorized function at w_i
        assert :ok = NxJax.GradCheck.check_grads!(fun, fn _ -> f64(row) end, w)

        assert Nx.all_close(f64(row), Nx.Defn.grad(w, fun), rtol: 1.0e-12) ==
                 Nx.tensor(1, type: :u8)
      end
    end

    test "value_and_grad of a vectorized computation" do
      x = Nx.vectorize(f64([1.0, 2.0, 3.0]), :x)
      {value, g} = Nx.Defn.value_and_grad(x, fn x -> Nx.multiply(x, Nx.sin(x)) end)
      assert value.vectorized_axes == [x: 3]
      expected = Enum.map([1.0, 2.0, 3.0], &(:math.sin(&1) + &1 * :math.cos(&1)))

      assert Nx.all_close(Nx.devectorize(g, keep_names: false), f64(expected), rtol: 1.0e-12) ==
               Nx.tensor(1, type: :u8)
    end

    test "grad with respect to a non-vectorized tensor sums over the entries (Nx 0.7)" do
      v = Nx.vectorize(f64([[1.0, 2.0], [3.0, 4.0]]), :x)
      g = Nx.Defn.grad(f64([0.5, 0.5]), fn w -> Nx.sum(Nx.multiply(w, v)) end)
      assert g.vectorized_axes == []
      assert g == f64([4.0, 6.0])
    end

    test "custom_grad on a vectorized value gives each input the input's axes" do
      fun = fn x, w ->
        y = Nx.multiply(x, w)

        Nx.Defn.Kernel.custom_grad(y, [x, w], fn g ->
          [Nx.multiply(g, 2.0), Nx.multiply(g, 3.0)]
        end)
      end

      x = Nx.vectorize(f64([1.0, 2.0, 3.0]), :x)
      w = f64(5.0)
      {gx, gw} = Nx.Defn.grad({x, w}, fn {x, w} -> fun.(x, w) end)
      assert gx == Nx.vectorize(f64([2.0, 2.0, 2.0]), :x)
      # three entries of g summed into the non-vectorized w
      assert gw == f64(9.0)
    end
  end

  describe "inspect" do
    test "prints the vectorized axes before the type and shape" do
      v = Nx.vectorize(Nx.tensor([[1, 2], [3, 4], [5, 6]]), [:x, :y])

      assert inspect(v) == """
             #Nx.Tensor<
               vectorized[x: 3][y: 2]
               s64
               [
                 [1, 2],
                 [3, 4],
                 [5, 6]
               ]
             >\
             """
    end

    test "devectorized names print with their axes" do
      v = Nx.devectorize(Nx.vectorize(Nx.tensor([[1, 2]]), :x))
      assert inspect(v) =~ "s64[x: 1][2]"
    end

    test "expressions print their vectorized axes" do
      fun = fn x ->
        assert inspect(x) =~ "vectorized[x: 2]\n  f32[3]"
        x
      end

      Nx.Defn.jit_apply(fun, [Nx.vectorize(Nx.iota({2, 3}, type: :f32), :x)])
    end
  end

  describe "sigils" do
    test "~V builds vectors with types" do
      assert ~V[1 2 3] == Nx.tensor([1, 2, 3])
      assert ~V[1 2 3]f32 == Nx.tensor([1.0, 2.0, 3.0])
      assert ~V[1.5 -2]f64 == Nx.tensor([1.5, -2.0], type: :f64)
      assert ~V[0.5 1]bf16 |> Nx.type() == {:bf, 16}
      assert ~V[1 255]u8 == Nx.tensor([1, 255], type: :u8)

      assert ~V[1+2i 3-1.5i]c64 |> Nx.to_flat_list() == [
               Complex.new(1.0, 2.0),
               Complex.new(3.0, -1.5)
             ]

      assert ~V[Inf -Inf NaN] |> Nx.to_flat_list() == [:infinity, :neg_infinity, :nan]
    end

    # the forms Nx 0.7.2's tests write (they were refused); values as real Nx gives them
    test "complex words: 2i, -1i, 1+i, 1-i, Inf-Infi, NaNi, exponents" do
      assert ~V[2i -1i 1+i 1-i] |> Nx.to_flat_list() == [
               Complex.new(0.0, 2.0),
               Complex.new(0.0, -1.0),
               Complex.new(1.0, 1.0),
               Complex.new(1.0, -1.0)
             ]

      assert ~V[Inf-Infi NaNi 1.5+2.0e3i -2-3i] |> Nx.to_flat_list() == [
               Complex.new(:infinity, :neg_infinity),
               Complex.new(0.0, :nan),
               Complex.new(1.5, 2.0e3),
               Complex.new(-2.0, -3.0)
             ]

      assert ~V[1 2i] |> Nx.type() == {:c, 64}
      assert ~V[1+i]c128 |> Nx.type() == {:c, 128}

      assert ~M[1i Inf+2i NaN-Infi] |> Nx.to_flat_list() == [
               Complex.new(0.0, 1.0),
               Complex.new(:infinity, 2.0),
               Complex.new(:nan, :neg_infinity)
             ]

      assert_raise ArgumentError, "expected a numerical value for tensor, got 1++i", fn ->
        Code.eval_string("import Nx, only: :sigils; ~V[1++i]")
      end
    end

    test "~M builds matrices, rows by newlines or semicolons" do
      assert ~M[1 2; 3 4] == Nx.tensor([[1, 2], [3, 4]])

      assert ~M"""
             1 2 3
             4 5 6
             """s32 == Nx.tensor([[1, 2, 3], [4, 5, 6]], type: :s32)

      assert ~M[1 2.5]f64 == Nx.tensor([[1.0, 2.5]], type: :f64)
    end

    test "errors at compile time" do
      assert_raise ArgumentError,
                   "invalid numerical type: {:f, 8} (see Nx.Type docs for all supported types)",
                   fn ->
                     Code.eval_string("import Nx, only: :sigils; ~V[1 2]f8")
                   end

      assert_raise ArgumentError, "expected a numerical value for tensor, got x", fn ->
        Code.eval_string("import Nx, only: :sigils; ~V[1 x]")
      end

      assert_raise ArgumentError, "must be one-dimensional", fn ->
        Code.eval_string("import Nx, only: :sigils; ~V[1; 2]")
      end

      assert_raise ArgumentError, ~r/~M expects rows of the same length/, fn ->
        Code.eval_string("import Nx, only: :sigils; ~M[1 2; 3]")
      end
    end
  end
end
