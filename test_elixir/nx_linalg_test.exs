# Issue #3 part B: Nx.LinAlg on the real worker; gradients checked against central finite
# differences in f64.
defmodule Nx.LinAlgTest do
  use ExUnit.Case, async: true
  doctest Nx.LinAlg

  defp f64(list), do: Nx.tensor(list, type: :f64)

  defp check(x, loss),
    do: assert(:ok = NxJax.GradCheck.check_grads!(loss, &Nx.Defn.grad(&1, loss), x))

  defp weighted(t) do
    w = Nx.iota(t.shape, type: :f64) |> Nx.add(1.0) |> Nx.sin()
    Nx.sum(Nx.multiply(t, w))
  end

  defp close?(a, b),
    do: Nx.all_close(a, b, atol: 1.0e-10, rtol: 1.0e-10) == Nx.tensor(1, type: :u8)

  @a [[4.0, 2.0, 0.4], [2.0, 5.0, 1.0], [0.4, 1.0, 3.0]]

  describe "solvers" do
    test "triangular_solve: lower/upper, left/right side, transposed a" do
      l = f64([[2.0, 0.0], [1.0, 4.0]])
      b = f64([[2.0, 4.0], [9.0, 6.0]])
      x = Nx.LinAlg.triangular_solve(l, b)
      assert close?(Nx.dot(l, x), b)

      x = Nx.LinAlg.triangular_solve(l, b, left_side: false)
      assert close?(Nx.dot(x, l), b)

      x = Nx.LinAlg.triangular_solve(l, b, transform_a: :transpose)
      assert close?(Nx.dot(Nx.transpose(l), x), b)

      u = Nx.transpose(l)
      x = Nx.LinAlg.triangular_solve(u, f64([1.0, 8.0]), lower: false)
      assert close?(Nx.dot(u, x), f64([1.0, 8.0]))
    end

    test "solve and invert, batched" do
      a = f64([@a, Nx.to_list(Nx.multiply(f64(@a), 2.0))])
      b = f64([[1.0, 2.0, 3.0], [0.5, -1.0, 0.0]])
      x = Nx.LinAlg.solve(a, b)
      assert close?(Nx.dot(a, [2], [0], Nx.new_axis(x, -1), [1], [0]) |> Nx.squeeze(axes: [2]), b)
      inv = Nx.LinAlg.invert(a)
      assert close?(Nx.dot(a, [2], [0], inv, [1], [0]), Nx.eye({2, 3, 3}, type: :f64))
    end

    test "shape errors at trace time" do
      assert_raise ArgumentError, ~r/solve expects a square matrix/, fn ->
        Nx.LinAlg.solve(Nx.iota({2, 3}), Nx.iota({2}))
      end

      assert_raise ArgumentError, ~r/triangular_solve expects b to have the shape \{2\}/, fn ->
        Nx.LinAlg.triangular_solve(Nx.eye(2), Nx.iota({3}))
      end

      assert_raise ArgumentError, ~r/transform_a/, fn ->
        Nx.LinAlg.triangular_solve(Nx.eye(2), Nx.iota({2}), transform_a: :conjugate)
      end
    end

    test "gradients of triangular_solve, solve and invert" do
      l = f64([[2.0, 0.0], [1.0, 4.0]])
      b = f64([[2.0, 4.0], [9.0, 6.0]])
      check(b, fn b -> Nx.LinAlg.triangular_solve(l, b, left_side: false) |> weighted() end)
      # the gradient for a only reads its lower triangle, as the solve does
      check(l, fn l ->
        Nx.LinAlg.triangular_solve(Nx.multiply(l, f64([[1.0, 0.0], [1.0, 1.0]])), b) |> weighted()
      end)

      check(f64(@a), fn a -> Nx.LinAlg.solve(a, f64([1.0, -2.0, 0.5])) |> weighted() end)
      check(f64(@a), fn a -> a |> Nx.LinAlg.invert() |> weighted() end)
    end
  end

  describe "decompositions" do
    test "cholesky and determinant" do
      l = Nx.LinAlg.cholesky(f64(@a))
      assert close?(Nx.dot(l, Nx.transpose(l)), f64(@a))

      assert Nx.to_number(Nx.LinAlg.determinant(f64([[1.0, 2.0], [3.0, 4.0]]))) |> Float.round(10) ==
               -2.0
    end

    test "qr reduced and complete" do
      a = f64([[1.0, 2.0], [3.0, 4.0], [5.0, 7.0]])
      {q, r} = Nx.LinAlg.qr(a)
      assert {q.shape, r.shape} == {{3, 2}, {2, 2}}
      assert close?(Nx.dot(q, r), a)
      {q, r} = Nx.LinAlg.qr(a, mode: :complete)
      assert {q.shape, r.shape} == {{3, 3}, {3, 2}}
      assert close?(Nx.dot(Nx.transpose(q), q), Nx.eye(3, type: :f64))
    end

    test "lu and svd reconstruct their input" do
      {p, l, u} = Nx.LinAlg.lu(f64(@a))
      assert close?(p |> Nx.dot(l) |> Nx.dot(u), f64(@a))

      a = f64([[1.0, 2.0, 0.0], [3.0, 4.0, 1.0]])
      {u, s, vt} = Nx.LinAlg.svd(a)
      assert {u.shape, s.shape, vt.shape} == {{2, 2}, {2}, {3, 3}}
      {u, s, vt} = Nx.LinAlg.svd(a, full_matrices?: false)
      assert {u.shape, s.shape, vt.shape} == {{2, 2}, {2}, {2, 3}}
      assert close?(u |> Nx.multiply(s) |> Nx.dot(vt), a)
    end

    test "decompositions inside defn: one tuple-valued node" do
      fun = fn a -> Nx.LinAlg.qr(a) end
      {q, r} = Nx.Defn.jit_apply(fun, [f64(@a)])
      assert close?(Nx.dot(q, r), f64(@a))
    end

    test "gradients of cholesky, determinant, qr, lu and svd" do
      spd = fn x -> x |> Nx.dot(Nx.transpose(x)) |> Nx.add(Nx.eye(3, type: :f64)) end
      x = f64([[1.0, 0.2, -0.3], [0.5, 1.5, 0.1], [-0.2, 0.4, 0.9]])
      check(x, fn x -> x |> spd.() |> Nx.LinAlg.cholesky() |> weighted() end)
      check(x, fn x -> Nx.LinAlg.determinant(x) end)

      check(x, fn x ->
        {q, r} = Nx.LinAlg.qr(x)
        Nx.add(weighted(q), weighted(r))
      end)

      # a matrix whose pivots do not change under the finite-difference steps
      check(f64(@a), fn a ->
        {_p, l, u} = Nx.LinAlg.lu(a)
        Nx.add(weighted(l), weighted(u))
      end)

      check(x, fn x ->
        {_u, s, _vt} = Nx.LinAlg.svd(x)
        weighted(s)
      end)
    end
  end
end
