defmodule NxJax.RealNx.CoverageTest do
  # more of real Nx's ops and types under `compiler: NxJax`, against real Nx's evaluator
  use ExUnit.Case, async: true

  import NxJax.RealNxCase
  import Nx.Defn

  @unary ~w(exp expm1 log log1p sigmoid cos sin tan cosh sinh tanh asinh sqrt rsqrt cbrt
            negate sign abs floor ceil round erf erfc atan is_nan is_infinity)a

  for op <- @unary do
    test "#{op} in f32 and f64" do
      x = Nx.tensor([0.25, 1.5, 3.0, 0.9])
      assert_same(&(Nx.unquote(op) / 1), [x])
      assert_same(&(Nx.unquote(op) / 1), [Nx.as_type(x, :f64)], atol: 1.0e-12, rtol: 1.0e-10)
    end
  end

  test "acos, asin, atanh, acosh and erf_inv in their domains" do
    x = Nx.tensor([0.1, -0.5, 0.75])
    for op <- [&Nx.acos/1, &Nx.asin/1, &Nx.atanh/1, &Nx.erf_inv/1], do: assert_same(op, [x])
    assert_same(&Nx.acosh/1, [Nx.tensor([1.5, 2.0, 10.0])])
  end

  test "integer ops and unsigned types" do
    a = Nx.tensor([7, -3, 12, 0], type: :s32)
    b = Nx.tensor([2, 5, -4, 3], type: :s32)

    for op <- [
          &Nx.quotient/2,
          &Nx.remainder/2,
          &Nx.bitwise_or/2,
          &Nx.bitwise_xor/2,
          &Nx.right_shift/2,
          &Nx.min/2,
          &Nx.logical_and/2,
          &Nx.logical_xor/2
        ] do
      assert_same(op, [a, Nx.abs(b)])
    end

    u = Nx.tensor([1, 200, 255], type: :u8)
    assert_same(&Nx.population_count/1, [u])
    assert_same(&Nx.count_leading_zeros/1, [u])
    assert_same(&Nx.bitwise_not/1, [u])
    assert_same(fn u -> Nx.add(u, 100) end, [u])
  end

  test "bf16, f16 and as_type between them" do
    x = Nx.tensor([0.3, 1.7, -2.5])
    assert_same(fn x -> Nx.multiply(Nx.as_type(x, :bf16), 3) end, [x], atol: 1.0e-2)
    assert_same(fn x -> Nx.exp(Nx.as_type(x, :f16)) end, [x], atol: 1.0e-2)
    assert_same(fn x -> Nx.as_type(Nx.multiply(x, 10), :s8) end, [x])
  end

  test "complex numbers, fft and ifft" do
    z = Nx.complex(Nx.tensor([1.0, -2.0, 0.5, 3.0]), Nx.tensor([0.5, 1.0, -1.0, 0.0]))

    assert_same(
      fn z -> {Nx.multiply(z, z), Nx.abs(z), Nx.real(z), Nx.imag(z), Nx.conjugate(z)} end,
      [z]
    )

    assert_same(&Nx.fft/1, [z], atol: 1.0e-4)
    assert_same(fn z -> Nx.ifft(z, length: 6) end, [z], atol: 1.0e-4)
    assert_same(fn x -> Nx.fft2(x) end, [Nx.reshape(z, {2, 2})], atol: 1.0e-4)
    assert_same(fn x -> Nx.ifft(x, axis: 0, length: 3) end, [Nx.reshape(z, {2, 2})], atol: 1.0e-4)
  end

  test "argsort and top_k keep Nx's order on ties" do
    x = Nx.tensor([3, 1, 2, 1, 3, 0], type: :s64)
    assert_same(fn x -> {Nx.argsort(x), Nx.argsort(x, direction: :desc)} end, [x])
  end

  test "Nx.LinAlg's iterative fallbacks: eigh and svd, and lu and triangular_solve" do
    a = Nx.tensor([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])
    # eigh's fallback iterates QR steps until they move less than its eps (1.0e-4): rounding
    # in the last bits (and qr, JAX's here as EXLA's is XLA's) ends it elsewhere, so the
    # eigenvectors differ from the evaluator's by up to a few hundredths and in sign (the
    # exact ones lie between the two); both decompose `a` as closely
    {w, v} = Nx.Defn.jit_apply(fn a -> Nx.LinAlg.eigh(a) end, [a], compiler: NxJax)
    {w_nx, _v_nx} = Nx.LinAlg.eigh(a)
    assert_close(w, w_nx, atol: 1.0e-3)
    residual = Nx.subtract(Nx.dot(a, v), Nx.multiply(v, w)) |> Nx.abs() |> Nx.reduce_max()
    assert Nx.to_number(residual) < 1.0e-2
    {u, s, vt} = Nx.Defn.jit_apply(fn a -> Nx.LinAlg.svd(a) end, [a], compiler: NxJax)
    {_u, s_nx, _vt} = Nx.LinAlg.svd(a)
    assert_close(s, s_nx, atol: 1.0e-3)
    back = Nx.dot(Nx.multiply(u, s), vt)
    assert Nx.to_number(Nx.reduce_max(Nx.abs(Nx.subtract(back, a)))) < 1.0e-2
    assert_same(fn a -> Nx.LinAlg.lu(a) end, [a], atol: 1.0e-4)
    assert_same(fn a -> Nx.LinAlg.invert(a) end, [a], atol: 1.0e-4)
  end

  test "Nx.Random inside a jit (threefry: while loops of integer ops)" do
    key = Nx.Random.key(7)
    assert_same(fn key -> Nx.Random.uniform(key, shape: {3}) end, [key])
    assert_same(fn key -> Nx.Random.normal(key, shape: {2, 2}) end, [key], atol: 1.0e-4)
  end

  defn softplus_ratio(t), do: t / (1 + Nx.sqrt(t))

  defn custom_ratio(t) do
    custom_grad(softplus_ratio(t), [t], fn g ->
      [g * (1 + Nx.sqrt(t) / 2) / (1 + Nx.sqrt(t)) ** 2]
    end)
  end

  test "custom_grad of t / (1 + sqrt t) at 0 is 1.0, as under the clean room" do
    grad = assert_same(fn t -> Nx.Defn.grad(t, &custom_ratio/1) end, [Nx.tensor(0.0)])
    assert grad == Nx.tensor(1.0)
  end

  defn grad_through_cond_and_while(x) do
    grad(x, fn x ->
      y = if Nx.sum(x) > 0, do: x * x, else: -x

      {y, _} =
        while {y, i = 0}, i < 3 do
          {Nx.sin(y) + y, i + 1}
        end

      Nx.sum(y)
    end)
  end

  test "real Nx's gradients through cond and while" do
    assert_same(&grad_through_cond_and_while/1, [Nx.tensor([0.5, 1.0])])
    assert_same(&grad_through_cond_and_while/1, [Nx.tensor([-0.5, -1.0])])
  end

  defn vectorized_cond(x), do: if(Nx.sum(x) > 0, do: x * 2, else: -x)

  defn vectorized_while(x) do
    {x, _} = while({x, i = 0}, Nx.sum(x) < 20 and i < 10, do: {x + 3, i + 1})
    x
  end

  test "vectorized conds and whiles (real Nx rewrites them)" do
    x = Nx.tensor([[1.0, -2.0], [-3.0, 4.0]]) |> Nx.vectorize(:rows)

    assert_same(&vectorized_cond/1, [x])
    assert_same(&vectorized_while/1, [x])
  end

  defn reduced(x) do
    {Nx.reduce(x, 1, fn a, b -> a * b end), Nx.window_reduce(x, 0, {2}, fn a, b -> a + b end)}
  end

  test "reducers of mixed types" do
    assert_same(&reduced/1, [Nx.tensor([1.0, 2.5, 3.0, -1.0])], atol: 1.0e-5)
    assert_same(&reduced/1, [Nx.tensor([1, 2, 3, 4], type: :s32)])
  end

  # (Nx 0.9 has no Nx.map)
  if Code.ensure_loaded?(Nx) and function_exported?(Nx, :map, 3) do
    defn mapped(x) do
      {Nx.map(x, fn v -> v * 2 + 1 end),
       Nx.map(x, [type: :f64], fn v -> if v > 2, do: Nx.exp(v), else: -v end)}
    end

    test "Nx.map (a loop over the elements, a cond in the function)" do
      assert_same(&mapped/1, [Nx.tensor([1.0, 2.5, 3.0, -1.0])], atol: 1.0e-5)
      assert_same(&mapped/1, [Nx.tensor([1, 2, 3, 4], type: :s32)])
    end
  end
end
