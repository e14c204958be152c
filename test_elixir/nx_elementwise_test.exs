# Issue #3 part A, element-wise: the new unary/binary ops, complex numbers and the full type set,
# run on the real worker; gradients checked against central differences in f64.
defmodule Nx.ElementwiseTest do
  use ExUnit.Case, async: true

  import NxJax.TestAssertions

  doctest Complex

  # a regression (2026-12-06): bf16 results were XLA's (computed in f32, rounded to bf16); Nx's
  # binary backend computes on doubles and truncates the f32 to a bf16 (f16: rounded from the
  # double). Real Nx 0.7.2's values, compared bit for bit in numerics mode :nx.
  # a regression (2026-12-06): a float number next to an f64 tensor kept its double; Nx 0.7.2
  # makes it an f32 first (eagerly and in defn), so `x * 0.1` multiplies by 0.10000000149...
  test "a float number next to a tensor is an f32 first, as in Nx 0.7.2" do
    compared = NxProgramsCases.compare(NxProgramsCases.float_numbers())
    assert length(compared) > 12
    for {ours, nx} <- compared, do: assert(ours == nx)
  end

  test "bf16 and f16 element-wise math, reductions and as_type give Nx 0.7.2's bits" do
    compared = NxProgramsCases.compare(NxProgramsCases.half_floats())
    assert length(compared) > 15
    for {ours, nx} <- compared, do: assert(ours == nx)
  end

  @xs [0.1, 0.35, 0.6, 0.85]

  defp f64(values), do: Nx.tensor(values, type: :f64)

  # the node an op call builds while tracing: {op, input types, opts, out type, out shape}
  defp traced(fun) do
    %Nx.Tensor{data: %Nx.Defn.Expr{op: op, args: args, opts: opts}} =
      t = Nx.Defn.Expr.with_tracing(fun)

    {op, Enum.map(args, & &1.type), opts, t.type, t.shape}
  end

  describe "unary floating ops" do
    @math [
      cosh: &:math.cosh/1,
      sinh: &:math.sinh/1,
      acos: &:math.acos/1,
      asin: &:math.asin/1,
      atan: &:math.atan/1,
      asinh: &:math.asinh/1,
      atanh: &:math.atanh/1,
      erf: &:math.erf/1,
      erfc: &:math.erfc/1
    ]

    test "match Erlang's :math in f64 and have the gradient of finite differences" do
      for {op, ref} <- @math do
        assert_close(apply(Nx, op, [f64(@xs)]), Enum.map(@xs, ref))
        check_grad(&apply(Nx, op, [&1]), f64(@xs))
      end
    end

    test "acosh, cbrt and erf_inv values and gradients" do
      ys = Enum.map(@xs, &(&1 + 1.5))
      assert_close(Nx.acosh(f64(ys)), Enum.map(ys, &:math.acosh/1))
      check_grad(&Nx.acosh/1, f64(ys))

      cubes = [-8.0, -0.125, 0.001, 27.0]
      assert_close(Nx.cbrt(f64(cubes)), [-2.0, -0.5, 0.1, 3.0])
      check_grad(&Nx.cbrt/1, f64([-2.0, 0.5, 3.0]))

      back = f64(@xs) |> Nx.erf_inv() |> Nx.to_flat_list() |> Enum.map(&:math.erf/1)
      assert_close(f64(back), @xs, 1.0e-10)
      check_grad(&Nx.erf_inv/1, f64(@xs))
    end

    test "integers give f32, floats keep their type, complex too" do
      for type <- [:u8, :s16, :s64],
          do: assert({:cosh, [_], %{}, {:f, 32}, {2}} = traced(fn -> Nx.cosh(t(type)) end))

      for type <- [:f16, :bf16, :f64, :c64, :c128],
          do: assert({:atan, _, _, ^type, _} = traced(fn -> Nx.atan(t(type)) end) |> norm())

      assert Nx.sinh(Nx.tensor([1, 2], type: :bf16)) |> Nx.type() == {:bf, 16}
      assert Nx.cosh(Nx.tensor([0.5], type: :f16)) |> Nx.to_flat_list() == [1.1279296875]
    end

    test "erf, erfc and erf_inv refuse complex inputs, with Nx's message" do
      for op <- [:erf, :erfc, :erf_inv] do
        assert_raise ArgumentError, "Nx.#{op}/1 does not support complex inputs", fn ->
          apply(Nx, op, [Nx.tensor([Complex.new(1, 1)])])
        end
      end
    end
  end

  defp t(type), do: Nx.template({2}, type) |> zeros()

  defp zeros(%Nx.Tensor{type: type, shape: shape} = t) do
    data = Nx.BinaryBackend.from_list(List.duplicate(0, Nx.Shape.size(shape)), type)
    %{t | data: %Nx.BinaryBackend{state: data}}
  end

  defp norm({op, args, opts, {class, bits}, shape}),
    do: {op, args, opts, String.to_atom("#{class}#{bits}"), shape}

  describe "rounding and sign" do
    test "floor, ceil, round (half away from zero) and sign on floats" do
      x = f64([-2.5, -1.5, -0.4, 0.0, 0.5, 1.5, 2.49])
      assert Nx.to_flat_list(Nx.floor(x)) == [-3.0, -2.0, -1.0, 0.0, 0.0, 1.0, 2.0]
      assert Nx.to_flat_list(Nx.ceil(x)) == [-2.0, -1.0, -0.0, 0.0, 1.0, 2.0, 3.0]
      assert Nx.to_flat_list(Nx.round(x)) == [-3.0, -2.0, -0.0, 0.0, 1.0, 2.0, 2.0]
      assert Nx.to_flat_list(Nx.sign(x)) == [-1.0, -1.0, -1.0, 0.0, 1.0, 1.0, 1.0]
    end

    test "integers pass through floor/ceil/round unchanged and keep their type" do
      x = Nx.tensor([-3, 0, 7], type: :s8)
      for op <- [:floor, :ceil, :round], do: assert(apply(Nx, op, [x]) == x)
      assert Nx.sign(x) == Nx.tensor([-1, 0, 1], type: :s8)
      assert Nx.sign(Nx.tensor([0, 5], type: :u32)) == Nx.tensor([0, 1], type: :u32)
    end

    test "sign of a complex number is z / |z|; the gradient of floor is zero" do
      assert_close(Nx.sign(Nx.tensor(Complex.new(3, 4), type: :c128)) |> Nx.real(), [0.6])
      assert_close(Nx.sign(Nx.tensor(Complex.new(3, 4), type: :c128)) |> Nx.imag(), [0.8])
      assert Nx.Defn.grad(f64([0.3, 1.7]), &Nx.sum(Nx.floor(&1))) == f64([0.0, 0.0])
    end
  end

  describe "bitwise and integer ops" do
    test "bitwise ops in several integer types" do
      a = Nx.tensor([0b1100, 0b1010, 255], type: :u8)
      b = Nx.tensor([0b1010, 0b0110, 1], type: :u8)
      assert Nx.bitwise_and(a, b) == Nx.tensor([8, 2, 1], type: :u8)
      assert Nx.bitwise_or(a, b) == Nx.tensor([14, 14, 255], type: :u8)
      assert Nx.bitwise_xor(a, b) == Nx.tensor([6, 12, 254], type: :u8)
      assert Nx.bitwise_not(a) == Nx.tensor([243, 245, 0], type: :u8)
      assert Nx.bitwise_not(Nx.tensor([0, -1], type: :s32)) == Nx.tensor([-1, 0], type: :s32)
      # u8 and s8 merge into s16
      assert Nx.bitwise_and(a, Nx.tensor([-1, -1, -1], type: :s8)) |> Nx.type() == {:s, 16}
    end

    test "shifts: arithmetic right shift for signed, logical for unsigned; left shift wraps" do
      assert Nx.right_shift(Nx.tensor([-16, 16], type: :s16), 2) ==
               Nx.tensor([-4, 4], type: :s16)

      assert Nx.right_shift(Nx.tensor([0xF0], type: :u8), 4) == Nx.tensor([0x0F], type: :u8)
      assert Nx.left_shift(Nx.tensor([0x81], type: :u8), 1) == Nx.tensor([2], type: :u8)
      assert Nx.left_shift(Nx.tensor([1]), 62) == Nx.tensor([4_611_686_018_427_387_904])
    end

    test "a negative shift amount raises, as a number or a concrete tensor (Nx 0.7.2)" do
      assert_raise ArgumentError, "cannot right shift by -1", fn ->
        Nx.right_shift(Nx.tensor(1), -1)
      end

      assert_raise ArgumentError, "cannot left shift by -1", fn ->
        Nx.left_shift(Nx.tensor(1), -1)
      end

      assert_raise ArgumentError, "cannot left shift by -3", fn ->
        Nx.left_shift(Nx.tensor([1, 2, 3]), Nx.tensor([1, -3, -1]))
      end

      assert_raise ArgumentError, "cannot right shift by -1", fn ->
        Nx.right_shift(Nx.tensor([1, 2]), Nx.tensor([[-1], [1]]))
      end

      # a negative left operand is fine, and so is an unsigned amount
      assert Nx.left_shift(-1, 1) == Nx.tensor(-2)

      assert Nx.right_shift(Nx.tensor(8, type: :u8), Nx.tensor(255, type: :u8)) ==
               Nx.tensor(0, type: :u8)
    end

    test "population_count and count_leading_zeros per type width" do
      x = [0, 1, 255]

      for {type, clz} <- [u8: [8, 7, 0], u16: [16, 15, 8], s32: [32, 31, 24], u64: [64, 63, 56]] do
        assert Nx.count_leading_zeros(Nx.tensor(x, type: type)) == Nx.tensor(clz, type: type)
        assert Nx.population_count(Nx.tensor(x, type: type)) == Nx.tensor([0, 1, 8], type: type)
      end

      assert Nx.population_count(Nx.tensor([-1], type: :s64)) == Nx.tensor([64])
    end

    test "quotient truncates toward zero and remainder takes the dividend's sign" do
      a = Nx.tensor([7, -7, 7, -7])
      b = Nx.tensor([2, 2, -2, -2])
      assert Nx.quotient(a, b) == Nx.tensor([3, -3, -3, 3])
      assert Nx.remainder(a, b) == Nx.tensor([1, -1, 1, -1])
      assert_close(Nx.remainder(f64([5.5, -5.5]), 2.0), [1.5, -1.5])
      assert Nx.remainder(Nx.tensor([250], type: :u8), 7) == Nx.tensor([5], type: :u8)
    end

    test "integer-only ops raise for floats, in Nx 0.7.2's words" do
      msg = ~r/^bitwise operators expect integer tensors .* got: \{:f, 32\}$/

      assert_raise ArgumentError, msg, fn -> Nx.bitwise_and(Nx.tensor([1.0]), 1) end

      assert_raise ArgumentError,
                   "quotient expects integer tensors as inputs and outputs an integer tensor, got: {:f, 32}",
                   fn -> Nx.quotient(Nx.tensor(1.5), 1) end

      for {op, args} <- [
            quotient: [Nx.tensor([1.0]), 2],
            left_shift: [Nx.tensor([1]), 0.5],
            bitwise_not: [Nx.tensor([1.0])],
            population_count: [Nx.tensor([1.0], type: :f64)],
            count_leading_zeros: [Nx.tensor([1.0], type: :bf16)]
          ] do
        assert_raise ArgumentError, ~r/expects? integer tensors/, fn -> apply(Nx, op, args) end
      end
    end
  end

  describe "binary floating ops" do
    test "atan2 covers all four quadrants and broadcasts" do
      y = f64([1.0, 1.0, -1.0, -1.0])
      x = f64([1.0, -1.0, -1.0, 1.0])
      assert_close(Nx.atan2(y, x), Enum.zip_with([1, 1, -1, -1], [1, -1, -1, 1], &:math.atan2/2))
      assert Nx.atan2(Nx.tensor([[1, 2]]), Nx.tensor([[1], [2]])) |> Nx.shape() == {2, 2}
      assert Nx.atan2(Nx.tensor([1]), Nx.tensor([1])) |> Nx.type() == {:f, 32}
    end

    test "gradients of atan2 (both sides), remainder and clip" do
      check_grad(&Nx.atan2(&1, f64([0.7, -1.2, 2.0])), f64([0.3, -0.8, 1.1]))
      check_grad(&Nx.atan2(f64([0.7, -1.2, 2.0]), &1), f64([0.3, -0.8, 1.1]))
      check_grad(&Nx.remainder(&1, 0.75), f64([0.3, 1.1, -1.9]))
      check_grad(&Nx.multiply(Nx.clip(&1, -0.5, 0.5), &1), f64([-0.9, -0.2, 0.3, 0.8]))
    end

    test "clip merges the types of tensor, min and max" do
      # numbers become tensors of their own type first, as in Nx 0.7.2 (which gives s64 here)
      assert Nx.clip(Nx.tensor([1, 5, 9], type: :u8), 2, 6) == Nx.tensor([2, 5, 6], type: :s64)
      assert Nx.clip(Nx.tensor([1.0, 5.0], type: :f16), 2.0, 3) == Nx.tensor([2.0, 3.0])
      assert Nx.clip(Nx.tensor([1, 5, 9]), 2.5, 6) == Nx.tensor([2.5, 5.0, 6.0])

      assert Nx.clip(Nx.tensor([1, 5], type: :s8), Nx.tensor(0, type: :f64), 3) ==
               Nx.tensor([1.0, 3.0], type: :f64)

      assert_raise ArgumentError,
                   "max value must be a non-vectorized scalar shape, got shape {1} and " <>
                     "vectorized axes []",
                   fn -> Nx.clip(Nx.tensor([1]), 0, Nx.tensor([2])) end

      assert_raise ArgumentError,
                   "min value must be a non-vectorized scalar shape, got shape {2} and " <>
                     "vectorized axes []",
                   fn -> Nx.clip(Nx.iota({4}), Nx.iota({2}), 3) end

      assert_raise ArgumentError,
                   "min value must be a non-vectorized scalar shape, got shape {} and " <>
                     "vectorized axes [v: 2]",
                   fn -> Nx.clip(Nx.iota({4}), Nx.vectorize(Nx.iota({2}), :v), 3) end
    end
  end

  describe "predicates and logical ops" do
    test "is_nan and is_infinity on floats, integers and complex" do
      x = Nx.tensor([1.0, :nan, :infinity, :neg_infinity], type: :bf16)
      assert Nx.is_nan(x) == Nx.tensor([0, 1, 0, 0], type: :u8)
      assert Nx.is_infinity(x) == Nx.tensor([0, 0, 1, 1], type: :u8)
      assert Nx.is_nan(Nx.tensor([1, 2])) == Nx.tensor([0, 0], type: :u8)
      z = Nx.tensor([Complex.new(:nan, 0), Complex.new(1, :infinity), Complex.new(1, 2)])
      assert Nx.is_nan(z) == Nx.tensor([1, 0, 0], type: :u8)
      assert Nx.is_infinity(z) == Nx.tensor([0, 1, 0], type: :u8)
    end

    test "logical ops treat nonzero as true in any type and broadcast" do
      a = Nx.tensor([[0.0, 0.5], [-2.0, 0.0]])
      b = Nx.tensor([1, 0], type: :u8)
      assert Nx.logical_and(a, b) == Nx.tensor([[0, 0], [1, 0]], type: :u8)
      assert Nx.logical_or(a, b) == Nx.tensor([[1, 1], [1, 0]], type: :u8)
      assert Nx.logical_xor(a, b) == Nx.tensor([[1, 1], [0, 0]], type: :u8)
      assert Nx.logical_not(Nx.tensor([0, 3], type: :s8)) == Nx.tensor([1, 0], type: :u8)
    end
  end

  describe "complex numbers" do
    test "tensors built from Complex numbers, printed as Nx does" do
      t = Nx.tensor([[Complex.new(1, 2), 3], [Complex.new(-0.5, -1.25), 0]])
      assert Nx.type(t) == {:c, 64}

      assert inspect(t) == """
             #Nx.Tensor<
               c64[2][2]
               [
                 [1.0+2.0i, 3.0+0.0i],
                 [-0.5-1.25i, 0.0+0.0i]
               ]
             >\
             """

      assert inspect(Nx.tensor(Complex.new(0.1, :nan), type: :c128)) ==
               "#Nx.Tensor<\n  c128\n  0.1+NaNi\n>"

      assert Nx.to_number(Nx.tensor(Complex.new(1, -1))) == Complex.new(1.0, -1.0)
    end

    test "complex round trips through the worker as c64 and c128" do
      for type <- [:c64, :c128] do
        z = Nx.tensor([Complex.new(1.5, -2), Complex.new(0, 0.25)], type: type)
        assert Nx.add(z, 0) == z

        assert Nx.negate(z) ==
                 Nx.tensor([Complex.new(-1.5, 2), Complex.new(-0.0, -0.25)], type: type)
      end
    end

    test "promotion: complex merges, numbers make the type complex" do
      assert Nx.Type.merge({:c, 64}, {:c, 128}) == {:c, 128}
      assert Nx.Type.merge({:bf, 16}, {:c, 64}) == {:c, 64}
      assert Nx.Type.merge({:f, 64}, {:c, 64}) == {:c, 64}
      assert Nx.Type.merge({:bf, 16}, {:f, 16}) == {:f, 16}
      assert Nx.add(Nx.tensor([1, 2]), Complex.new(0, 1)) |> Nx.type() == {:c, 64}

      assert Nx.multiply(Nx.tensor([1.0], type: :f64), Complex.new(0, 1)) |> Nx.type() ==
               {:c, 128}

      assert Nx.multiply(Nx.tensor([Complex.new(0, 1)]), 2.5) |> Nx.type() == {:c, 64}
      assert Nx.Type.to_floating({:c, 128}) == {:c, 128}
      assert Nx.exp(Nx.tensor([Complex.new(0, 1)], type: :c128)) |> Nx.type() == {:c, 128}
    end

    test "real, imag, conjugate and abs" do
      z = Nx.tensor([Complex.new(3, 4), Complex.new(-1, 0.5)], type: :c128)
      assert Nx.real(z) == f64([3.0, -1.0])
      assert Nx.imag(z) == f64([4.0, 0.5])

      assert Nx.conjugate(z) ==
               Nx.tensor([Complex.new(3, -4), Complex.new(-1, -0.5)], type: :c128)

      assert_close(Nx.abs(z), [5.0, :math.sqrt(1.25)])
      assert Nx.abs(Nx.tensor([Complex.new(3, 4)])) |> Nx.type() == {:f, 32}
      # on real tensors
      assert Nx.real(Nx.tensor([1, 2])) == Nx.tensor([1.0, 2.0])
      assert Nx.imag(Nx.tensor([1.5], type: :f64)) == f64([0.0])
      assert Nx.conjugate(Nx.tensor([1.5], type: :f64)) |> Nx.type() == {:c, 128}
    end

    test "complex arithmetic and functions" do
      z = Nx.tensor([Complex.new(1, 2)], type: :c128)
      w = Nx.tensor([Complex.new(3, -1)], type: :c128)
      assert Nx.multiply(z, w) == Nx.tensor([Complex.new(5, 5)], type: :c128)
      e = Nx.exp(Nx.multiply(Nx.tensor([Complex.new(0, 1)], type: :c128), :math.pi()))
      assert_close(Nx.real(e), [-1.0])
      # (as in Nx 0.7.2, the float :math.pi() next to a tensor is an f32 first: the imaginary
      # part is sin of that f32, real Nx's value)
      assert_close(Nx.imag(e), [-8.742278000372475e-8], 1.0e-15)

      assert_close(Nx.real(Nx.sqrt(Nx.tensor([-4.0], type: :f64) |> Nx.add(Complex.new(0, 0)))), [
        0.0
      ])

      assert_close(Nx.imag(Nx.sqrt(Nx.tensor([-4.0], type: :f64) |> Nx.add(Complex.new(0, 0)))), [
        2.0
      ])
    end

    test "gradients through complex intermediates" do
      # |x * (1 + 2i)| = sqrt(5) |x|
      check_grad(&Nx.abs(Nx.multiply(&1, Complex.new(1, 2))), f64([0.5, -1.5]))
      # imag(exp(i x)) = sin x; real(conjugate(x * (2 - i))) = 2x
      check_grad(&Nx.imag(Nx.exp(Nx.multiply(&1, Complex.new(0, 1)))), f64([0.2, 1.3]))
      check_grad(&Nx.real(Nx.conjugate(Nx.multiply(&1, Complex.new(2, -1)))), f64([0.2, 1.3]))

      # complex-typed as in Nx 0.7.2 (c128 here, c64 there), the derivative in its real part
      # (where Nx 0.7.2 gives 0: its imag rule drops the real seed)
      grad =
        Nx.Defn.grad(
          f64([0.2, 1.3]),
          &Nx.sum(Nx.imag(Nx.exp(Nx.multiply(&1, Complex.new(0, 1)))))
        )

      assert grad.type == {:c, 128}
      assert_close(Nx.real(grad), [:math.cos(0.2), :math.cos(1.3)])
      assert_close(Nx.imag(grad), [0.0, 0.0])
    end

    test "ops without complex support raise" do
      z = Nx.tensor([Complex.new(1, 1)])

      # (Nx 0.7.2's messages, word for word; clip's names clip/2)
      for {op, args, arity} <- [
            {:floor, [z], 1},
            {:round, [z], 1},
            {:remainder, [z, 2], 2},
            {:clip, [z, 0, 1], 2}
          ] do
        assert_raise ArgumentError, "Nx.#{op}/#{arity} does not support complex inputs", fn ->
          apply(Nx, op, args)
        end
      end

      assert_raise ArgumentError, ~r/cannot store the complex number 1.0\+1.0i/, fn ->
        Nx.tensor([Complex.new(1, 1)], type: :f32)
      end
    end
  end

  describe "types and conversions" do
    test "every type survives the worker: f16, bf16 and the integer types" do
      for type <- [:u8, :u16, :u32, :u64, :s8, :s16, :s32, :s64, :f16, :bf16, :f32, :f64] do
        x = Nx.tensor([1, 2, 3], type: type)
        assert Nx.add(x, x) == Nx.tensor([2, 4, 6], type: type)
        assert Nx.type(Nx.cosh(x)) == Nx.Type.to_floating(Nx.Type.normalize!(type))
      end
    end

    test "as_type saturates floats into integer types: NaN is 0, out of range clamps" do
      x = Nx.tensor([:nan, :infinity, :neg_infinity, 1.0e20, -1.0e20, -3.7, 3.7])

      assert Nx.to_flat_list(Nx.as_type(x, :s32)) ==
               [0, 2_147_483_647, -2_147_483_648, 2_147_483_647, -2_147_483_648, -3, 3]

      assert Nx.to_flat_list(Nx.as_type(x, :u8)) == [0, 255, 0, 255, 0, 0, 3]

      assert Nx.to_flat_list(Nx.as_type(x, :s64)) ==
               [0, 9_223_372_036_854_775_807, -9_223_372_036_854_775_808] ++
                 [9_223_372_036_854_775_807, -9_223_372_036_854_775_808, -3, 3]

      assert Nx.to_flat_list(Nx.as_type(Nx.tensor([300.0, -1.0], type: :bf16), :u8)) == [255, 0]
      assert Nx.to_flat_list(Nx.as_type(Nx.tensor([70000.0], type: :f64), :f16)) == [:infinity]
    end

    test "integers wrap around on conversion and on overflow" do
      assert Nx.as_type(Nx.tensor([300, -1]), :u8) == Nx.tensor([44, 255], type: :u8)
      assert Nx.as_type(Nx.tensor([200], type: :u8), :s8) == Nx.tensor([-56], type: :s8)
      assert Nx.add(Nx.tensor([250], type: :u8), 10) == Nx.tensor([4], type: :u8)
      assert Nx.multiply(Nx.tensor([2 ** 62]), 4) == Nx.tensor([0])
      assert Nx.subtract(Nx.tensor([-128], type: :s8), 1) == Nx.tensor([127], type: :s8)
    end

    test "as_type between real and complex types" do
      z = Nx.tensor([Complex.new(2.5, 7)])
      assert Nx.as_type(z, :f32) == Nx.tensor([2.5])
      assert Nx.as_type(z, :s8) == Nx.tensor([2], type: :s8)
      assert Nx.as_type(Nx.tensor([1.5]), :c128) == Nx.tensor([Complex.new(1.5, 0)], type: :c128)
    end

    test "bitcast reinterprets bits and checks widths" do
      assert Nx.bitcast(Nx.tensor([-1], type: :s16), :u16) == Nx.tensor([65535], type: :u16)
      assert Nx.bitcast(Nx.tensor([0x3F80], type: :u16), :bf16) == Nx.tensor([1.0], type: :bf16)

      assert Nx.bitcast(Nx.tensor([1.0], type: :f64), :s64) ==
               Nx.tensor([4_607_182_418_800_017_408])

      assert_raise ArgumentError, ~r/Nx.bitcast\/2 does not support complex/, fn ->
        Nx.bitcast(Nx.tensor([Complex.new(1, 0)]), :f64)
      end
    end
  end

  describe "wire contract" do
    test "each op builds one node with the documented out type" do
      assert {:remainder, [{:s, 64}, {:s, 64}], %{}, {:s, 64}, {2}} =
               traced(fn -> Nx.remainder(t(:s64), 3) end)

      assert {:logical_and, [{:f, 32}, {:s, 64}], %{}, {:u, 8}, {2}} =
               traced(fn -> Nx.logical_and(t(:f32), 1) end)

      assert {:real, [{:c, 128}], %{}, {:f, 64}, {2}} = traced(fn -> Nx.real(t(:c128)) end)

      assert {:conjugate, [{:f, 64}], %{}, {:c, 128}, {2}} =
               traced(fn -> Nx.conjugate(t(:f64)) end)

      assert {:abs, [{:c, 64}], %{}, {:f, 32}, {2}} = traced(fn -> Nx.abs(t(:c64)) end)

      assert {:bitcast, [{:f, 32}], %{}, {:s, 32}, {2}} =
               traced(fn -> Nx.bitcast(t(:f32), :s32) end)

      assert {:clip, [{:u, 8}, {:s, 64}, {:s, 64}], %{}, {:s, 64}, {2}} =
               traced(fn -> Nx.clip(t(:u8), 1, 2) end)
    end

    test "the worker refuses an integer-only op declared with a float type and keeps serving" do
      graph =
        {:nx_jax_graph, 1,
         [
           {0, :parameter, [], %{index: 0}, {{:f, 32}, {2}}},
           {1, :bitwise_not, [0], %{}, {{:f, 32}, {2}}}
         ], [1]}

      error =
        assert_raise NxJax.WorkerError, fn ->
          NxJax.Worker.run(:erlang.term_to_binary(graph), [{{:f, 32}, {2}, <<0::64>>}], [])
        end

      assert error.class == "GraphError"
      assert error.message =~ "integer types only"
      assert Nx.bitwise_not(Nx.tensor([0], type: :u8)) == Nx.tensor([255], type: :u8)
    end
  end
end
