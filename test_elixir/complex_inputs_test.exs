defmodule Nx.ComplexInputsTest do
  # Complex tensors as Nx 0.7.2 treats them: the ops it computes for complex inputs (cbrt,
  # atan2 of real-valued ones, windowed and running products), the ones it refuses, with its
  # messages word for word, Complex.phase/1, and the LinAlg errors. Every expected value and
  # message is real Nx 0.7.2's (its binary backend, through the `complex` 0.5 package).
  use ExUnit.Case, async: true

  import Nx.Defn

  @z Complex.new(2, 3)
  @w Complex.new(-2, 7)
  @inf3 Complex.new(:infinity, 3)
  @m24 Complex.new(-2, 4)

  defp c64(list), do: Nx.tensor(list, type: :c64)

  describe "Complex.phase/1" do
    test "finite numbers: atan2(im, re); real numbers: 0 or pi" do
      assert Complex.phase(@z) == 0.982793723247329
      assert Complex.phase(Complex.new(-1, -0.0)) == -:math.pi()
      assert Complex.phase(2.5) == 0
      assert Complex.phase(-1) == :math.pi()
      assert Complex.phase(:neg_infinity) == :math.pi()
      assert Complex.phase(:nan) == :nan
    end

    test "non-finite parts take the complex package's values" do
      assert Complex.phase(@inf3) == 0
      assert Complex.phase(Complex.new(:neg_infinity, 3)) == :math.pi()
      assert Complex.phase(Complex.new(:nan, :infinity)) == :math.pi() / 2
      assert Complex.phase(Complex.new(2, :neg_infinity)) == -:math.pi() / 2
      assert Complex.phase(Complex.new(:neg_infinity, :neg_infinity)) == 5 * :math.pi() / 4
      assert Complex.phase(Complex.new(:infinity, :nan)) == :nan
      assert Complex.phase(Complex.new(:nan, 3)) == :nan
    end

    test "is what Nx.phase/1 computes" do
      assert Nx.phase(@z) == Nx.tensor(Complex.phase(@z))
      assert Nx.phase(@inf3) == Nx.tensor(0.0)
    end
  end

  describe "cbrt" do
    test "the principal cube root, rounded once from doubles" do
      assert Nx.cbrt(@z) ==
               c64([Complex.new(1.4518566131591797, 0.49340352416038513)]) |> Nx.squeeze()

      assert Nx.cbrt(Complex.new(-8, 0)) == Nx.tensor(Complex.new(1.0, 1.7320507764816284))
      assert Nx.cbrt(Complex.new(0, 0)) == Nx.tensor(Complex.new(0.0, 0.0))

      assert Nx.cbrt(Complex.new(-1, -1)) ==
               Nx.tensor(Complex.new(0.7937005162239075, -0.7937005162239075))

      assert Nx.cbrt(Nx.tensor(@z, type: :c128)) ==
               Nx.tensor(Complex.new(1.4518566183526649, 0.49340353410400467), type: :c128)
    end

    test "a zero angle keeps the imaginary part zero" do
      assert Nx.cbrt(@inf3) == Nx.tensor(Complex.new(:infinity, 0.0))
    end
  end

  describe "atan2" do
    test "of real-valued complex tensors: atan2 of the real parts" do
      assert Nx.atan2(Complex.new(7, 0), Complex.new(2.0, 0.0)) ==
               Nx.tensor(Complex.new(1.292496681213379, 0.0))

      assert Nx.atan2(c64([1, 2]), Nx.tensor([3.0, 4.0])) ==
               c64([Complex.new(0.32175055146217346, 0.0), Complex.new(0.46364760398864746, 0.0)])
    end

    test "a nonzero imaginary part raises Nx's ArithmeticError" do
      for {left, right} <- [{7, @z}, {@z, 7}, {c64([Complex.new(1, 0), Complex.new(2, 1)]), 1}] do
        assert_raise ArithmeticError,
                     "Complex.atan2 only accepts real numbers as arguments",
                     fn ->
                       Nx.atan2(left, right)
                     end
      end
    end

    defn atan2_in_defn(a, b), do: Nx.atan2(a, b)

    test "inside defn, where values are unknown, such elements are NaN+NaNi" do
      got = atan2_in_defn(c64([Complex.new(1, 0), Complex.new(2, 1)]), c64([1, 1]))
      nan = Complex.new(:nan, :nan)
      assert Nx.to_flat_list(got) == [Complex.new(0.7853981852531433, 0.0), nan]
    end
  end

  describe "products never multiply by 1+0i" do
    test "product" do
      assert Nx.product(Nx.tensor([@inf3, @m24])) ==
               Nx.tensor(Complex.new(:neg_infinity, :infinity))

      assert Nx.product(Nx.tensor([@z, @w])) == Nx.tensor(Complex.new(-25.0, 8.0))

      assert Nx.product(c64([Complex.new(1, 0), Complex.new(:infinity, 0)])) ==
               Nx.tensor(Complex.new(:infinity, 0.0))

      t = Nx.tensor([[@inf3, Complex.new(1, 2)], [@m24, Complex.new(3, -1)]])

      assert Nx.product(t, axes: [0]) ==
               c64([Complex.new(:neg_infinity, :infinity), Complex.new(5.0, 5.0)])

      assert Nx.product(t, axes: [0], keep_axes: true) ==
               Nx.tensor([[Complex.new(:neg_infinity, :infinity), Complex.new(5.0, 5.0)]])
    end

    test "window_product (which Nx computes for complex inputs)" do
      assert Nx.window_product(Nx.tensor([@z, @w]), {2}) == c64([Complex.new(-25.0, 8.0)])

      assert Nx.window_product(Nx.tensor([@inf3, @m24]), {2}) ==
               c64([Complex.new(:neg_infinity, :infinity)])

      assert Nx.window_product(Nx.tensor([@inf3, @m24, Complex.new(1, 1)]), {2}) ==
               c64([Complex.new(:neg_infinity, :infinity), Complex.new(-6.0, 2.0)])

      assert Nx.window_product(Nx.tensor([@inf3, @m24]), {2}, padding: [{1, 0}]) ==
               c64([@inf3, Complex.new(:neg_infinity, :infinity)])
    end

    test "cumulative_product" do
      assert Nx.cumulative_product(Nx.tensor([@inf3, @m24])) ==
               c64([@inf3, Complex.new(:neg_infinity, :infinity)])
    end
  end

  describe "ops Nx refuses for complex inputs, with its messages" do
    test "does not support complex inputs" do
      for {fun, args, arity} <- [
            {:floor, [@z], 1},
            {:ceil, [@z], 1},
            {:round, [@z], 1},
            {:erf, [@z], 1},
            {:erfc, [@z], 1},
            {:erf_inv, [@z], 1},
            {:max, [@z, @w], 2},
            {:min, [@z, @w], 2},
            {:remainder, [@z, @w], 2},
            {:greater, [@z, 1], 2},
            {:less_equal, [1, @z], 2},
            {:reduce_max, [c64([1, 2])], 2},
            {:reduce_min, [c64([1, 2])], 2},
            {:sort, [c64([1, 2])], 2},
            {:argsort, [c64([1, 2])], 2},
            {:window_max, [c64([1, 2]), {1}], 3},
            {:clip, [@z, 0, 1], 2}
          ] do
        assert_raise ArgumentError, "Nx.#{fun}/#{arity} does not support complex inputs", fn ->
          apply(Nx, fun, args)
        end
      end
    end

    test "integer-only ops name the complex type" do
      assert_raise ArgumentError,
                   "quotient expects integer tensors as inputs and outputs an integer tensor, got: {:c, 64}",
                   fn -> Nx.quotient(@z, @w) end

      for fun <- [:bitwise_and, :bitwise_or, :bitwise_xor, :left_shift, :right_shift] do
        assert_raise ArgumentError,
                     "bitwise operators expect integer tensors as inputs and outputs an integer tensor, got: {:c, 64}",
                     fn -> apply(Nx, fun, [@z, @w]) end
      end
    end

    test "equality of complex numbers is defined" do
      assert Nx.equal(@z, @z) == Nx.tensor(1, type: :u8)
      assert Nx.not_equal(@z, @w) == Nx.tensor(1, type: :u8)
    end
  end

  describe "LinAlg" do
    test "svd (and pinv, built on it) is not implemented for complex inputs" do
      t = Nx.broadcast(Nx.tensor(1, type: :c64), {3, 3})

      for fun <- [&Nx.LinAlg.svd/1, &Nx.LinAlg.pinv/1] do
        assert_raise ArgumentError,
                     "Nx.LinAlg.svd/2 is not yet implemented for complex inputs",
                     fn ->
                       fun.(t)
                     end
      end
    end

    test "triangular_solve of a matrix with a zero on its diagonal raises" do
      zeros = Nx.broadcast(Nx.tensor(0, type: :c64), {3, 3})

      singular = [
        {zeros, zeros, []},
        {Nx.broadcast(0.0, {3, 3}), Nx.broadcast(0.0, {3, 3}), []},
        {Nx.tensor([[1.0, 2.0], [0.0, 0.0]]), Nx.tensor([1.0, 2.0]), [lower: false]},
        {Nx.tensor([[2.0, 0.0], [1.0, 0.0]]), Nx.tensor([[2.0, 3.0]]), [left_side: false]},
        {Nx.tensor([[0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]]),
         Nx.tensor([4, 2, 4, 2]), []},
        {Nx.tensor([[[1.0, 0.0], [1.0, 1.0]], [[1.0, 0.0], [1.0, -0.0]]]),
         Nx.tensor([[1.0, 1.0], [1.0, 1.0]]), []}
      ]

      for {a, b, opts} <- singular do
        assert_raise ArgumentError, "can't solve for singular matrix", fn ->
          Nx.LinAlg.triangular_solve(a, b, opts)
        end
      end

      assert Nx.LinAlg.triangular_solve(
               Nx.tensor([[2.0, 0.0], [1.0, 1.0]]),
               Nx.tensor([2.0, 3.0])
             ) ==
               Nx.tensor([1.0, 2.0])
    end

    defn solve_in_defn(a, b), do: Nx.LinAlg.triangular_solve(a, b)

    test "inside defn the values are unknown: no error, non-finite results" do
      x = solve_in_defn(Nx.tensor([[0.0, 0.0], [1.0, 1.0]]), Nx.tensor([1.0, 1.0]))
      assert Nx.to_flat_list(Nx.is_infinity(x)) |> hd() == 1
    end
  end
end
