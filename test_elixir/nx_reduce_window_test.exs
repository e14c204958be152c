# Issue #3 part A: predicate/arg reductions, statistics, scans and window ops, run on the real
# worker; gradients checked against central differences in f64.
defmodule Nx.ReduceWindowTest do
  use ExUnit.Case, async: true

  import NxJax.TestAssertions

  # a regression (2026-12-06): window_reduce/5 of `fn a, b -> a + b end` raised ArithmeticError
  # (Nx's binary backend calls it on numbers), and map/3 inside defn computed in the input's
  # type (Nx gives the function's parameter the output type). Real Nx 0.7.2's answers.
  test "reduce, window_reduce and map with functions of numbers or of tensors, as in Nx 0.7.2" do
    compared = NxProgramsCases.compare(NxProgramsCases.functions())
    assert length(compared) > 8
    for {ours, nx} <- compared, do: assert(ours == nx)
  end

  defp f64(values), do: Nx.tensor(values, type: :f64)

  defp traced(fun) do
    %Nx.Tensor{data: %Nx.Defn.Expr{op: op, opts: opts}} = t = Nx.Defn.Expr.with_tracing(fun)
    {op, opts, t.type, t.shape}
  end

  @m [[3.0, -1.0, 4.0], [1.5, 5.0, -9.0]]

  describe "all and any" do
    test "over axes, with keep_axes, in any type" do
      x = Nx.tensor([[1, 0, 2], [3, 4, 5]], type: :s8)
      assert Nx.all(x) == Nx.tensor(0, type: :u8)
      assert Nx.all(x, axes: [1]) == Nx.tensor([0, 1], type: :u8)
      assert Nx.any(x, axes: [0], keep_axes: true) == Nx.tensor([[1, 1, 1]], type: :u8)
      assert Nx.any(Nx.tensor([0.0, -0.0])) == Nx.tensor(0, type: :u8)
      assert Nx.all(Nx.tensor([:nan, 1.0])) == Nx.tensor(1, type: :u8)
    end
  end

  describe "argmax and argmin" do
    test "over the flattened tensor and along an axis, with keep_axis" do
      x = Nx.tensor(@m)
      assert Nx.argmax(x) == Nx.tensor(4)
      assert Nx.argmin(x) == Nx.tensor(5)
      assert Nx.argmax(x, axis: 0) == Nx.tensor([0, 1, 0])
      assert Nx.argmin(x, axis: -1, keep_axis: true) == Nx.tensor([[1], [2]])
      assert Nx.argmax(x, axis: 1, type: :u8) == Nx.tensor([2, 1], type: :u8)
    end

    test "tie_break picks the first (:low) or the last (:high) of equal values" do
      x = Nx.tensor([[2, 7, 7, 1], [1, 1, 0, 0]], type: :u16)
      assert Nx.argmax(x, axis: 1) == Nx.tensor([1, 0])
      assert Nx.argmax(x, axis: 1, tie_break: :high) == Nx.tensor([2, 1])
      assert Nx.argmin(x, axis: 1, tie_break: :high) == Nx.tensor([3, 3])
      assert Nx.argmin(x, tie_break: :high) == Nx.tensor(7)
    end

    # Nx 0.7.2's answers: a NaN never replaces the value held; a leading NaN is never replaced
    # (except, with :high, by a later NaN); NumPy would pick the first NaN instead
    test "NaN is skipped, as Nx scans an axis" do
      x = Nx.tensor([1.0, :nan, 3.0, :nan])
      assert Nx.argmax(x) == Nx.tensor(2)
      assert Nx.argmin(x) == Nx.tensor(0)

      t =
        Nx.tensor([
          [:neg_infinity, :nan, :neg_infinity],
          [:nan, 1, 2],
          [2, 2, :nan],
          [:nan, 0, :nan]
        ])

      assert Nx.argmax(t, axis: 1) == Nx.tensor([0, 0, 0, 0])
      assert Nx.argmax(t, axis: 1, tie_break: :high) == Nx.tensor([2, 0, 1, 2])
      assert Nx.argmin(t, axis: 1, tie_break: :high) == Nx.tensor([2, 0, 1, 2])

      assert Nx.argmin(Nx.tensor([[1, :nan, 3], [:nan, 2, 0]]), axis: 0, tie_break: :high) ==
               Nx.tensor([0, 0, 1])
    end

    test "options are checked at call time" do
      assert_raise ArgumentError,
                   "unknown value for :tie_break, expected :high or :low, got: :mid",
                   fn ->
                     Nx.argmax(Nx.tensor([1]), tie_break: :mid)
                   end

      assert_raise ArgumentError, "given axis (2) invalid for shape with rank 2", fn ->
        Nx.argmin(Nx.tensor(@m), axis: 2)
      end

      assert {:argmax, %{axis: 1, keep_axis: true, tie_break: :high}, {:s, 32}, {2, 1}} =
               traced(fn ->
                 Nx.argmax(Nx.tensor(@m), axis: -1, keep_axis: true, tie_break: :high, type: :s32)
               end)
    end
  end

  describe "variance, standard_deviation and logsumexp" do
    test "values against direct formulas, with axes, ddof and keep_axes" do
      xs = [1.0, 2.0, 4.0, 7.0, 11.0]
      mean = Enum.sum(xs) / 5
      ss = xs |> Enum.map(&((&1 - mean) ** 2)) |> Enum.sum()
      assert_close(Nx.variance(f64(xs)), [ss / 5])
      assert_close(Nx.variance(f64(xs), ddof: 1), [ss / 4])
      assert_close(Nx.standard_deviation(f64(xs), ddof: 1), [:math.sqrt(ss / 4)])

      x = f64(@m)

      row_variance = fn row ->
        m = Enum.sum(row) / 3
        (row |> Enum.map(&((&1 - m) ** 2)) |> Enum.sum()) / 3
      end

      assert_close(Nx.variance(x, axes: [1], keep_axes: true), Enum.map(@m, row_variance))
      assert Nx.variance(x, axes: [1], keep_axes: true) |> Nx.shape() == {2, 1}
      assert Nx.variance(Nx.tensor([1, 2, 3], type: :u8)) |> Nx.type() == {:f, 32}
      assert Nx.variance(Nx.tensor([Complex.new(0, 1), Complex.new(0, -1)])) == Nx.tensor(1.0)

      lse = :math.log(Enum.sum(Enum.map(xs, &:math.exp/1)))
      assert_close(Nx.logsumexp(f64(xs)), [lse])

      assert_close(
        Nx.logsumexp(x, axes: [0]),
        Enum.zip_with(hd(@m), List.last(@m), &:math.log(:math.exp(&1) + :math.exp(&2)))
      )

      assert Nx.logsumexp(Nx.tensor([:neg_infinity, :neg_infinity])) ==
               Nx.tensor(:neg_infinity)

      assert Nx.logsumexp(Nx.tensor([1.0e30, 0.0]), keep_axes: true) == Nx.tensor([1.0e30])
    end

    test "gradients" do
      check_grad(&Nx.variance(&1, axes: [1]), f64(@m))
      check_grad(&Nx.standard_deviation(&1, ddof: 1), f64(@m))
      check_grad(&Nx.logsumexp(&1, axes: [0]), f64(@m))

      # the gradient of logsumexp is softmax, also where exp overflows
      big = f64([1000.0, 1000.0])
      assert Nx.Defn.grad(big, &Nx.logsumexp/1) == f64([0.5, 0.5])
    end

    test "composite ops trace into one graph inside defn" do
      expr =
        Nx.Defn.Expr.with_tracing(fn -> Nx.variance(Nx.Defn.Expr.parameter(0, {:f, 32}, {3})) end)

      assert %Nx.Tensor{type: {:f, 32}, shape: {}, data: %Nx.Defn.Expr{op: :divide}} = expr
    end
  end

  describe "cumulative ops" do
    test "along axes, reversed, in several types" do
      x = Nx.tensor([[1, 2, 3], [4, 5, 6]], type: :s32)
      assert Nx.cumulative_sum(x, axis: 1) == Nx.tensor([[1, 3, 6], [4, 9, 15]], type: :s32)
      assert Nx.cumulative_sum(x) == Nx.tensor([[1, 2, 3], [5, 7, 9]], type: :s32)

      assert Nx.cumulative_product(x, axis: 1, reverse: true) ==
               Nx.tensor([[6, 6, 3], [120, 30, 6]], type: :s32)

      y = Nx.tensor([3.0, 1.0, 4.0, 1.0, 5.0], type: :bf16)
      assert Nx.cumulative_max(y) == Nx.tensor([3.0, 3.0, 4.0, 4.0, 5.0], type: :bf16)

      assert Nx.cumulative_min(y, reverse: true) ==
               Nx.tensor([1.0, 1.0, 1.0, 1.0, 5.0], type: :bf16)

      # u8 sums wrap around, as Nx keeps the input type
      assert Nx.cumulative_sum(Nx.tensor([200, 100], type: :u8)) ==
               Nx.tensor([200, 44], type: :u8)

      z = Nx.tensor([Complex.new(1, 1), Complex.new(0, 2)])
      assert Nx.cumulative_sum(z) == Nx.tensor([Complex.new(1, 1), Complex.new(1, 3)])
    end

    test "gradients" do
      x = f64([[0.5, -1.2, 2.0], [1.1, 0.3, -0.7]])

      for op <- [:cumulative_sum, :cumulative_product, :cumulative_max, :cumulative_min],
          reverse <- [false, true] do
        check_grad(
          &Nx.multiply(apply(Nx, op, [&1, [axis: 1, reverse: reverse]]), f64([1.0, 2.0, 3.0])),
          x
        )
      end
    end

    test "wire opts" do
      assert {:cumulative_max, %{axis: 1, reverse: true}, {:f, 32}, {2, 3}} =
               traced(fn -> Nx.cumulative_max(Nx.tensor(@m), axis: -1, reverse: true) end)
    end
  end

  # window reductions by brute force over explicit windows (padding: the identity)
  defp reference_window(rows, {wr, wc}, {sr, sc}, {{pt, pb}, {pl, pr}}, {dr, dc}, pad, fun) do
    h = length(rows)
    w = length(hd(rows))

    at = fn i, j ->
      if i in 0..(h - 1) and j in 0..(w - 1), do: Enum.at(Enum.at(rows, i), j), else: pad
    end

    out_h = div(h + pt + pb - ((wr - 1) * dr + 1), sr) + 1
    out_w = div(w + pl + pr - ((wc - 1) * dc + 1), sc) + 1

    for oi <- 0..(out_h - 1) do
      for oj <- 0..(out_w - 1) do
        for(
          a <- 0..(wr - 1),
          b <- 0..(wc - 1),
          do: at.(oi * sr - pt + a * dr, oj * sc - pl + b * dc)
        )
        |> fun.()
      end
    end
  end

  @rows [
    [0.5, 1.0, -2.0, 3.0, 0.25],
    [4.0, -1.5, 2.5, 0.75, -3.0],
    [1.25, 2.0, -0.5, 5.0, 1.5],
    [-2.5, 0.1, 3.5, -1.0, 2.25]
  ]

  describe "window reductions" do
    @windows [
      window_sum: {0.0, &Enum.sum/1},
      window_product: {1.0, &Enum.product/1},
      window_max: {-1.0e300, &Enum.max/1},
      window_min: {1.0e300, &Enum.min/1}
    ]

    test "match brute force with strides, padding and dilations" do
      x = f64(@rows)

      configs = [
        {{2, 2}, [strides: 1], {1, 1}, {{0, 0}, {0, 0}}, {1, 1}},
        {{2, 3}, [strides: [2, 1], padding: [{1, 0}, {0, 2}]], {2, 1}, {{1, 0}, {0, 2}}, {1, 1}},
        {{2, 2}, [strides: 2, padding: :same, window_dilations: [1, 2]], {2, 2}, {{0, 0}, {1, 1}},
         {1, 2}},
        {{3, 1}, [padding: :same], {1, 1}, {{1, 1}, {0, 0}}, {1, 1}}
      ]

      for {op, {pad, fun}} <- @windows, {window, opts, strides, padding, dilations} <- configs do
        expected = reference_window(@rows, window, strides, padding, dilations, pad, fun)
        result = apply(Nx, op, [x, window, opts])

        assert Nx.shape(result) == {length(expected), length(hd(expected))},
               "#{op} #{inspect(opts)}"

        assert_close(result, expected)
      end
    end

    test "types: integers and bf16 keep their type, padding holds the identity" do
      x = Nx.tensor([[1, 2], [3, 4]], type: :u8)
      assert Nx.window_max(x, {2, 2}, padding: :same) == Nx.tensor([[4, 4], [4, 4]], type: :u8)

      assert Nx.window_min(x, {2, 2}, padding: [{1, 0}, {1, 0}]) ==
               Nx.tensor([[1, 1], [1, 1]], type: :u8)

      assert Nx.window_product(x, {1, 2}, padding: [{0, 0}, {0, 1}]) ==
               Nx.tensor([[2, 2], [12, 4]], type: :u8)

      assert Nx.window_sum(Nx.tensor([[1.5, 2.5]], type: :bf16), {1, 2}) ==
               Nx.tensor([[4.0]], type: :bf16)
    end

    test "gradients" do
      x = f64(@rows)

      for op <- [:window_sum, :window_product, :window_max, :window_min] do
        check_grad(&apply(Nx, op, [&1, {2, 2}, [strides: [1, 2], padding: :same]]), x)
        check_grad(&apply(Nx, op, [&1, {2, 2}, [window_dilations: [2, 1]]]), x)
      end
    end

    test "shape errors are raised at call time with Nx's messages" do
      x = Nx.tensor([[1, 2], [3, 4]])

      assert_raise ArgumentError,
                   "invalid window dimensions, rank of shape (2) does not match rank of window (1)",
                   fn -> Nx.window_sum(x, {2}) end

      assert_raise ArgumentError, ~r/invalid strides, rank of shape \(2\)/, fn ->
        Nx.window_max(x, {1, 1}, strides: [1])
      end

      assert_raise ArgumentError, ~r/window dimensions would result in empty tensor/, fn ->
        Nx.window_min(x, {3, 1})
      end

      assert_raise ArgumentError,
                   "invalid padding configuration, rank of padding configuration and shape " <>
                     "must match",
                   fn -> Nx.window_product(x, {1, 1}, padding: [{0, 0}]) end
    end

    test "a bad :padding raises with Nx 0.7.2's messages" do
      t = Nx.tensor([1, 2, 3])

      assert_raise ArgumentError,
                   "invalid padding mode specified, padding must be one of :valid, :same, or a " <>
                     "padding configuration, got: :whatever",
                   fn -> Nx.window_max(t, {2}, padding: :whatever) end

      assert_raise ArgumentError, ~r/^invalid padding mode specified/, fn ->
        Nx.window_reduce(t, 0, {2}, [padding: :whatever], fn x, acc -> max(x, acc) end)
      end

      assert_raise ArgumentError, ~r/^invalid padding mode specified/, fn ->
        Nx.window_scatter_max(t, Nx.tensor([1, 1]), 0, {2}, padding: :bad)
      end

      for bad <- [[1], [{1.0, 0}], [{1, 0, 0}]] do
        assert_raise ArgumentError,
                     "padding must be a list of {high, low} tuples, where each element is an " <>
                       "integer. Got: #{inspect(bad)}",
                     fn -> Nx.window_sum(t, {2}, padding: bad) end
      end
    end

    test "wire opts carry the resolved padding" do
      assert {:window_sum, opts, {:s, 64}, {2, 2}} =
               traced(fn ->
                 Nx.window_sum(Nx.iota({4, 4}), {2, 2}, strides: [2, 3], padding: :same)
               end)

      assert opts == %{
               window_dimensions: [2, 2],
               strides: [2, 3],
               padding: [{0, 0}, {0, 1}],
               window_dilations: [1, 1]
             }
    end
  end

  describe "window scatter" do
    @t [[7, 2, 5, 3], [3, 8, 9, 3], [1, 5, 7, 5], [0, 6, 2, 8]]

    test "scatter_max and scatter_min add each source value at its window's last max/min" do
      t = Nx.tensor(@t)
      source = Nx.tensor([[2, 6], [3, 1]])
      opts = [strides: [2, 2], padding: [{0, 0}, {0, 1}]]

      assert Nx.window_scatter_max(t, source, 0, {2, 3}, opts) ==
               Nx.tensor([[0, 0, 0, 0], [0, 0, 8, 0], [0, 0, 3, 0], [0, 0, 0, 1]])

      # two minima (3) in the window of rows 0-1, columns 2-4: the last gets 6 (Nx 0.7.2:
      # Nx.window_scatter_min(t, source, 10, {2, 3}, opts) in a build of real Nx)
      assert Nx.window_scatter_min(t, source, 10, {2, 3}, opts) ==
               Nx.tensor([[10, 12, 10, 10], [10, 10, 10, 16], [10, 10, 10, 10], [13, 10, 11, 10]])

      # overlapping windows add up; types merge source and init_value
      r =
        Nx.window_scatter_max(
          Nx.tensor([1.0, 3.0, 2.0]),
          Nx.tensor([1.0, 2.0], type: :f64),
          0.5,
          {2}
        )

      assert r == f64([0.5, 3.5, 0.5])
    end

    test "the gradient with respect to the source" do
      t = f64([[0.7, 0.2, 0.5, 0.3], [0.3, 0.8, 0.9, 0.1]])

      for op <- [:window_scatter_max, :window_scatter_min] do
        check_grad(
          fn s ->
            Nx.multiply(apply(Nx, op, [t, s, 0.0, {2, 2}, [strides: [1, 2]]]), Nx.iota({2, 4}))
          end,
          f64([[0.5, -1.5]])
        )
      end
    end

    test "the source must have the windowed shape" do
      assert_raise ArgumentError,
                   ~r/the source must have the shape of the windowed tensor, \{2\}/,
                   fn ->
                     Nx.window_scatter_max(Nx.tensor([1, 2, 3]), Nx.tensor([1, 2, 3]), 0, {2})
                   end
    end
  end
end
