# Nx.Constants and the type limits in Nx.Type behind it: values against IEEE 754 and integer
# limits, types, how they behave on the worker (the limits are the last finite values: one
# more ulp overflows), and the errors for types a constant does not have.
defmodule Nx.ConstantsTest do
  use ExUnit.Case, async: true

  doctest Nx.Constants

  defmodule Fns do
    import Nx.Defn

    defn circle_area(r), do: Nx.Constants.pi() * r * r
    defn overflow(t), do: t * 2
  end

  defp number(t), do: Nx.to_number(t)

  test "mathematical constants in each floating-point type" do
    assert number(Nx.Constants.pi({:f, 64})) == :math.pi()
    assert number(Nx.Constants.e({:f, 64})) == :math.exp(1)
    assert_in_delta number(Nx.Constants.euler_gamma({:f, 64})), 0.5772156649015329, 1.0e-16
    assert Nx.Constants.pi().type == {:f, 32}
    assert number(Nx.Constants.pi()) == number(Nx.tensor(:math.pi(), type: :f32))
    assert Nx.Constants.pi({:bf, 16}).type == {:bf, 16}
    assert number(Nx.Constants.pi({:bf, 16})) == 3.140625
    assert Nx.Constants.e({:c, 64}) == Nx.tensor(Complex.new(:math.exp(1), 0.0), type: :c64)
    assert Nx.Constants.i() == Nx.tensor(Complex.new(0.0, 1.0))
    assert Nx.Constants.i({:c, 128}).type == {:c, 128}
  end

  test "special values" do
    assert number(Nx.Constants.nan()) == :nan
    assert number(Nx.Constants.infinity({:f, 16})) == :infinity
    assert number(Nx.Constants.neg_infinity({:f, 64})) == :neg_infinity
    assert number(Nx.Constants.max({:f, 32})) == :infinity
    assert number(Nx.Constants.min({:bf, 16})) == :neg_infinity
    assert number(Nx.Constants.max({:s, 16})) == 32_767
    assert number(Nx.Constants.min({:u, 32})) == 0
  end

  test "the limits of integer types" do
    for {type, max, min} <- [
          {{:u, 8}, 255, 0},
          {{:u, 64}, 18_446_744_073_709_551_615, 0},
          {{:s, 8}, 127, -128},
          {{:s, 32}, 2_147_483_647, -2_147_483_648},
          {{:s, 64}, 9_223_372_036_854_775_807, -9_223_372_036_854_775_808}
        ] do
      assert number(Nx.Constants.max_finite(type)) == max
      assert number(Nx.Constants.min_finite(type)) == min
      assert Nx.Constants.max_finite(type).type == type
    end
  end

  test "the limits of floating-point types are IEEE 754's" do
    for {type, max, eps, normal} <- [
          {{:f, 16}, 65_504.0, 9.765625e-4, 6.103515625e-5},
          {{:bf, 16}, 3.3895313892515355e38, 0.0078125, 1.1754943508222875e-38},
          {{:f, 32}, 3.4028234663852886e38, 1.1920928955078125e-7, 1.1754943508222875e-38},
          {{:f, 64}, 1.7976931348623157e308, 2.220446049250313e-16, 2.2250738585072014e-308}
        ] do
      assert number(Nx.Constants.max_finite(type)) == max
      assert number(Nx.Constants.min_finite(type)) == -max
      assert number(Nx.Constants.epsilon(type)) == eps
      assert number(Nx.Constants.smallest_positive_normal(type)) == normal
    end

    # f64's come from Erlang's own floats
    assert Nx.Type.max_finite({:f, 64}) == 1.7976931348623157e308
    assert 1.0 + Nx.Type.epsilon({:f, 64}) > 1.0
    assert 1.0 + Nx.Type.epsilon({:f, 64}) / 2 == 1.0
  end

  test "on the worker: the largest finite value doubles to infinity, 1 + epsilon is not 1" do
    for type <- [{:f, 16}, {:bf, 16}, {:f, 32}] do
      assert number(Fns.overflow(Nx.Constants.max_finite(type))) == :infinity
      assert number(Fns.overflow(Nx.Constants.min_finite(type))) == :neg_infinity
      one = Nx.tensor(1.0, type: type)
      assert number(Nx.greater(Nx.add(one, Nx.Constants.epsilon(type)), one)) == 1
      half = Nx.divide(Nx.Constants.epsilon(type), 2)
      assert number(Nx.equal(Nx.add(one, half), one)) == 1
    end
  end

  test "inside defn and with :backend" do
    assert_in_delta number(Fns.circle_area(Nx.tensor(2.0))), 4 * :math.pi(), 1.0e-5
    r = Nx.Constants.e({:f, 32}, backend: NxJax.Backend)
    assert %NxJax.Backend{} = r.data
    assert number(r) == number(Nx.Constants.e())
    assert Nx.backend_deallocate(r) == :ok
  end

  test "types a constant does not have raise" do
    assert_raise ArgumentError,
                 ~r/pi expects a floating-point or complex type, got: \{:s, 64\}/,
                 fn ->
                   Nx.Constants.pi({:s, 64})
                 end

    assert_raise ArgumentError, ~r/epsilon expects a floating-point type/, fn ->
      Nx.Constants.epsilon({:u, 8})
    end

    # Nx 0.7.2's message for the limits of a complex type
    assert_raise ArgumentError, "only floating types are supported, got: {:c, 64}", fn ->
      Nx.Constants.epsilon({:c, 64})
    end

    assert_raise ArgumentError, "only floating types are supported, got: {:c, 128}", fn ->
      Nx.Constants.smallest_positive_normal({:c, 128})
    end

    assert_raise ArgumentError, ~r/expects a complex type/, fn -> Nx.Constants.i({:f, 32}) end

    assert_raise ArgumentError, ~r/expected a real type/, fn ->
      Nx.Constants.max_finite({:c, 64})
    end

    assert_raise ArgumentError, ~r/unknown keys \[:device\]/, fn ->
      Nx.Constants.pi({:f, 32}, device: 0)
    end
  end
end
