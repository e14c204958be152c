# Issue #3: Nx.fft/2 and Nx.ifft/2 on the real worker (values against hand-computed and
# NumPy-derived numbers, :length padding/truncating, batches, types, trace-time errors, the
# wire node) and their gradients against central finite differences in f64.
defmodule Nx.FftTest do
  use ExUnit.Case, async: true

  import NxJax.TestAssertions

  defmodule Spectrum do
    import Nx.Defn

    defn power(x), do: Nx.sum(Nx.pow(Nx.abs(Nx.fft(x, length: 8)), 2))

    defn grad_power(x), do: grad(x, &power/1)

    defn round_trip(x), do: Nx.real(Nx.ifft(Nx.fft(x)))
  end

  defp f64(list), do: Nx.tensor(list, type: :f64)

  # `expected` is a flat list of {re, im} pairs
  defp assert_complex(%Nx.Tensor{} = t, expected, tol \\ 1.0e-12) do
    actual = Enum.map(Nx.to_flat_list(t), &{Complex.real(&1), Complex.imag(&1)})
    assert length(actual) == length(expected), "got #{inspect(actual)}"

    for {{re, im}, {want_re, want_im}} <- Enum.zip(actual, expected) do
      close? =
        abs(re - want_re) <= tol * max(1.0, abs(want_re)) and
          abs(im - want_im) <= tol * max(1.0, abs(want_im))

      assert close?, "expected #{inspect(expected)}, got #{inspect(actual)}"
    end
  end

  defp check(x, loss),
    do: assert(:ok = NxJax.GradCheck.check_grads!(loss, &Nx.Defn.grad(&1, loss), x))

  @x [1.0, 2.0, 3.0, 4.0, 5.0]
  @s3 :math.sqrt(3) / 2

  describe "values" do
    test "fft of [1, 2, 3] by hand: 6 and -3/2 +- (sqrt(3)/2) i" do
      assert_complex(Nx.fft(f64([1.0, 2.0, 3.0])), [{6.0, 0.0}, {-1.5, @s3}, {-1.5, -@s3}])

      assert_complex(
        Nx.fft(Nx.tensor([1, 2, 3])),
        [{6.0, 0.0}, {-1.5, @s3}, {-1.5, -@s3}],
        1.0e-6
      )
    end

    test "fft of a length-5 f64 signal (numpy.fft.fft)" do
      assert_complex(Nx.fft(f64(@x)), [
        {15.0, 0.0},
        {-2.5, 3.4409548011779334},
        {-2.5, 0.8122992405822659},
        {-2.5, -0.8122992405822659},
        {-2.5, -3.4409548011779334}
      ])
    end

    test ":length shorter than the axis truncates it, longer pads it with zeros" do
      truncated = Nx.fft(f64(@x), length: 3)
      assert Nx.shape(truncated) == {3}
      assert_complex(truncated, [{6.0, 0.0}, {-1.5, @s3}, {-1.5, -@s3}])

      padded = Nx.fft(f64(@x), length: 8)
      assert Nx.shape(padded) == {8}

      assert_complex(padded, [
        {15.0, 0.0},
        {-5.414213562373095, -7.242640687119286},
        {3.0, 2.0},
        {-2.585786437626905, -1.2426406871192857},
        {3.0, 0.0},
        {-2.585786437626905, 1.2426406871192857},
        {3.0, -2.0},
        {-5.414213562373095, 7.242640687119286}
      ])

      assert Nx.fft(f64(@x), length: :power_of_two) == padded
      assert Nx.fft(f64(@x), length: 5) == Nx.fft(f64(@x))
    end

    test "ifft: 1/n normalization, :length and the inverse of fft" do
      assert_complex(Nx.ifft(f64([1.0, 2.0, 3.0, 4.0])), [
        {2.5, 0.0},
        {-0.5, -0.5},
        {-0.5, 0.0},
        {-0.5, 0.5}
      ])

      assert_complex(Nx.ifft(f64(@x), length: 2), [{1.5, 0.0}, {-0.5, 0.0}])
      assert Nx.shape(Nx.ifft(f64(@x), length: 7)) == {7}

      z = Nx.tensor([Complex.new(1, 2), Complex.new(-0.5, 3), Complex.new(0, -1)], type: :c128)
      back = Nx.ifft(Nx.fft(z))
      assert_complex(back, [{1.0, 2.0}, {-0.5, 3.0}, {0.0, -1.0}])
      assert_close(Spectrum.round_trip(f64(@x)), @x)
    end

    test "leading axes are a batch: each row is transformed on its own" do
      x = Nx.tensor([[0, 1, 0, 0], [1, 0, 0, 0]])
      out = Nx.fft(x)
      assert Nx.shape(out) == {2, 4}

      assert_complex(out, [
        {1.0, 0.0},
        {0.0, -1.0},
        {-1.0, 0.0},
        {0.0, 1.0},
        {1.0, 0.0},
        {1.0, 0.0},
        {1.0, 0.0},
        {1.0, 0.0}
      ])

      batch = Nx.iota({2, 3, 5}, type: :f64) |> Nx.sin()
      out = Nx.fft(batch, length: 4)
      assert Nx.shape(out) == {2, 3, 4}

      for i <- 0..1, j <- 0..2 do
        row = batch |> Nx.slice([i, j, 0], [1, 1, 5]) |> Nx.reshape({5})
        expected = Nx.fft(row, length: 4) |> Nx.to_flat_list() |> Enum.map(&{&1.re, &1.im})
        assert_complex(Nx.slice(out, [i, j, 0], [1, 1, 4]), expected)
      end

      assert Nx.shape(Nx.ifft(batch, length: 6)) == {2, 3, 6}
    end
  end

  describe "types" do
    test "real inputs become complex: f64 gives c128, everything else c64" do
      for {type, out} <- [
            s64: {:c, 64},
            u8: {:c, 64},
            s8: {:c, 64},
            f16: {:c, 64},
            bf16: {:c, 64},
            f32: {:c, 64},
            f64: {:c, 128},
            c64: {:c, 64},
            c128: {:c, 128}
          ] do
        x = Nx.tensor([1, 1, 0, 0], type: type)
        assert Nx.type(Nx.fft(x)) == out
        assert Nx.type(Nx.ifft(x)) == out
        assert_complex(Nx.fft(x), [{2.0, 0.0}, {1.0, -1.0}, {0.0, 0.0}, {1.0, 1.0}])
      end
    end

    test "the wire node: one :fft/:ifft with the resolved length and the complex out type" do
      x = Nx.Defn.Expr.parameter(0, {:f, 32}, {2, 5})

      for {op, fun} <- [fft: &Nx.fft/2, ifft: &Nx.ifft/2] do
        t = Nx.Defn.Expr.with_tracing(fn -> fun.(x, length: :power_of_two) end)
        %Nx.Tensor{data: %Nx.Defn.Expr{op: ^op, args: [^x], opts: opts}} = t
        assert opts == %{length: 8}
        assert {t.type, t.shape} == {{:c, 64}, {2, 8}}
      end
    end
  end

  describe "errors at trace time" do
    test "scalars, bad :length, empty axes and unknown options" do
      assert_raise ArgumentError, ~r/fft expects a tensor with at least one axis/, fn ->
        Nx.fft(1.0)
      end

      assert_raise ArgumentError, ~r/ifft expects a tensor with at least one axis/, fn ->
        Nx.ifft(Nx.tensor(Complex.new(1, 1)))
      end

      for bad <- [0, -3, 2.5, :next] do
        assert_raise ArgumentError,
                     ~r/fft expects :length to be a positive integer or :power_of_two, got: /,
                     fn -> Nx.fft(Nx.iota({4}), length: bad) end
      end

      # an empty axis cannot reach fft: Nx 0.7.2 builds no tensor with one
      assert_raise ArgumentError, ~r/invalid dimension in axis 1 found in shape/, fn ->
        Nx.fft(Nx.iota({2, 0}))
      end

      assert_raise ArgumentError, ~r/unknown keys \[:axes\]/, fn ->
        Nx.fft(Nx.iota({4}), axes: [0])
      end

      assert Nx.fft(Nx.iota({4}), eps: 1.0e-6) == Nx.fft(Nx.iota({4}))
    end
  end

  describe "gradients (f64, central differences)" do
    test "sum of |fft(x)|^2, full length, padded and truncated" do
      x = f64([0.3, -1.2, 0.7, 2.0, -0.4])

      for length <- [5, 3, 8] do
        check(x, fn x -> Nx.sum(Nx.pow(Nx.abs(Nx.fft(x, length: length)), 2)) end)
        check(x, fn x -> Nx.sum(Nx.pow(Nx.abs(Nx.ifft(x, length: length)), 2)) end)
      end
    end

    test "weighted real and imaginary parts, batched" do
      x = Nx.iota({2, 5}, type: :f64) |> Nx.multiply(0.37) |> Nx.cos()
      w = Nx.iota({2, 4}, type: :f64) |> Nx.add(1.0) |> Nx.sin()

      check(x, fn x -> Nx.sum(Nx.multiply(Nx.real(Nx.fft(x, length: 4)), w)) end)
      check(x, fn x -> Nx.sum(Nx.multiply(Nx.imag(Nx.fft(x, length: 4)), w)) end)
      check(x, fn x -> Nx.sum(Nx.multiply(Nx.imag(Nx.ifft(x, length: 4)), w)) end)
    end

    test "Parseval: the gradient of sum |fft(x, length: n)|^2 is 2 n x on the kept samples" do
      x = f64([0.3, -1.2, 0.7, 2.0, -0.4])
      # zero padding to 8 keeps every sample: 16 x; as in Nx 0.7.2 the gradient is complex
      # (its backward pass goes through complex values), with a zero imaginary part
      grad = Spectrum.grad_power(x)
      assert grad.type == {:c, 128}
      assert_close(Nx.real(grad), Enum.map([0.3, -1.2, 0.7, 2.0, -0.4], &(16 * &1)))
      assert_close(Nx.imag(grad), [0.0, 0.0, 0.0, 0.0, 0.0])

      truncated = Nx.Defn.grad(x, fn x -> Nx.sum(Nx.pow(Nx.abs(Nx.fft(x, length: 3)), 2)) end)
      assert_close(Nx.real(truncated), [1.8, -7.2, 4.2, 0.0, 0.0])
      assert_close(Nx.imag(truncated), [0.0, 0.0, 0.0, 0.0, 0.0])
    end
  end

  describe ":axis, fft2 and ifft2" do
    # Nx 0.7.2 gives the same for these
    test "fft along another axis, with a length" do
      t = Nx.tensor([[1, 2], [3, 4], [5, 7]])

      assert Nx.fft(t, axis: 0, length: 4) ==
               Nx.tensor([
                 [Complex.new(9.0, 0.0), Complex.new(13.0, 0.0)],
                 [Complex.new(-4.0, -3.0), Complex.new(-5.0, -4.0)],
                 [Complex.new(3.0, 0.0), Complex.new(5.0, 0.0)],
                 [Complex.new(-4.0, 3.0), Complex.new(-5.0, 4.0)]
               ])

      assert Nx.ifft(Nx.fft(Nx.tensor([[1.0, 2.0], [3.0, 5.0]]), axis: 0), axis: 0) ==
               Nx.tensor([[1.0, 2.0], [3.0, 5.0]]) |> Nx.as_type(:c64)
    end

    test "fft2 with lengths, vectorized, and back with ifft2" do
      t = Nx.tensor([[1, 0, 1, 0, 10, 10], [1, 1, 1, 1, 10, 10]])

      assert Nx.fft2(t, lengths: [2, 4]) ==
               Nx.tensor([[6, 0, 2, 0], [-2, 0, 2, 0]]) |> Nx.as_type(:c64)

      x = Nx.tensor([[1.0, 2.0], [3.0, 4.0]])
      assert Nx.ifft2(Nx.fft2(x)) == Nx.as_type(x, :c64)
      assert Nx.fft2(Nx.vectorize(Nx.stack([x, x]), :v)).vectorized_axes == [v: 2]
    end

    # Nx 0.7.2 returns wrong numbers here (its entries come out of order); these are NumPy's
    # np.fft.fft2(np.arange(12).reshape(2, 3, 2), axes=(0, 2))
    test "fft2 over axes that are not the last two transforms those axes" do
      got = Nx.fft2(Nx.iota({2, 3, 2}), axes: [0, 2])

      assert Nx.real(got) ==
               Nx.tensor([[[14, -2], [22, -2], [30, -2]], [[-12, 0], [-12, 0], [-12, 0]]])
               |> Nx.as_type(:f32)

      assert Nx.imag(got) == Nx.broadcast(0.0, {2, 3, 2})
    end

    test "errors as Nx 0.7.2's" do
      assert_raise ArgumentError,
                   "expected :lengths to be a list of lengths or :power_of_two, got: [:invalid, 2]",
                   fn -> Nx.fft2(Nx.tensor([[1, 1]]), lengths: [:invalid, 2]) end

      assert_raise ArgumentError, "expected a tensor with rank > 1, got tensor with rank 1", fn ->
        Nx.fft2(Nx.tensor([1, 1]))
      end
    end
  end
end
