# Issue #3 part B: Nx.LinAlg on the real worker; gradients checked against central finite
# differences in f64.
defmodule Nx.LinAlgTest do
  use ExUnit.Case, async: true
  import Nx.Defn
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

  # Nx.Random.multivariate_normal's use: a factor f with f . transpose(f) = covariance
  defn eigh_factor(covariance) do
    {s, u} = Nx.LinAlg.eigh(covariance)
    u * Nx.sqrt(s)
  end

  # a . v = v * w, v orthonormal, within tol
  defp assert_eigh(a, {w, v}, tol) do
    close = fn x, y -> Nx.all_close(x, y, atol: tol, rtol: tol) == Nx.tensor(1, type: :u8) end
    assert close.(Nx.dot(a, v), Nx.multiply(v, w))
    assert close.(Nx.dot(Nx.transpose(v), v), Nx.eye(elem(a.shape, 0), type: v.type))
    assert close.(v |> Nx.multiply(w) |> Nx.dot(Nx.transpose(v)), a)
  end

  # each column's entry of largest magnitude (the first within 1e-6 of it)
  defp pivots(v) do
    v
    |> Nx.transpose()
    |> Nx.to_list()
    |> Enum.map(fn col ->
      top = col |> Enum.map(&abs/1) |> Enum.max()
      Enum.find(col, &(abs(&1) >= top - 1.0e-6))
    end)
  end

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

  describe "eigh" do
    test "reconstructs the matrix; eigenvalues in decreasing magnitude, as Nx's" do
      # Nx 0.7.2's own test matrix: it gives [16.394, -9.738, 5.901, 4.334, -0.892]
      a =
        f64([
          [5, -1, 0, 1, 2],
          [-1, 5, 0, 5, 3],
          [0, 0, 4, 7, 2],
          [1, 5, 7, 0, 9],
          [2, 3, 2, 9, 2]
        ])

      {w, v} = Nx.LinAlg.eigh(a)
      assert {w.type, w.shape, v.shape} == {{:f, 64}, {5}, {5, 5}}
      assert_eigh(a, {w, v}, 1.0e-12)

      assert Nx.all_close(w, f64([16.394, -9.738, 5.901, 4.334, -0.892]), atol: 5.0e-4) ==
               Nx.tensor(1, type: :u8)

      assert Enum.all?(pivots(v), &(&1 > 0))
    end

    test "known eigenvalues and eigenvectors of 2x2 matrices" do
      {w, v} = Nx.LinAlg.eigh(f64([[2.0, 1.0], [1.0, 2.0]]))
      s = :math.sqrt(0.5)
      assert close?(w, f64([3.0, 1.0]))
      # an exact tie of magnitudes: the first entry is the positive one
      assert close?(v, f64([[s, s], [s, -s]]))

      # 1 and -1 have the same magnitude: increasing order
      {w, v} = Nx.LinAlg.eigh(f64([[0.0, 1.0], [1.0, 0.0]]))
      assert close?(w, f64([-1.0, 1.0]))
      assert close?(v, f64([[s, s], [-s, s]]))
    end

    test "a diagonal matrix keeps its order, with the identity as eigenvectors (as Nx)" do
      {w, v} = Nx.LinAlg.eigh(Nx.tensor([[3, 0, 0], [0, -5, 0], [0, 0, 1]]))
      assert w == Nx.tensor([3.0, -5.0, 1.0])
      assert v == Nx.eye(3, type: :f32)
    end

    test "integers give f32; f64, f16 and complex types are kept" do
      m = [[4, 1], [1, 3]]

      for {input, type} <- [
            {Nx.tensor(m), {:f, 32}},
            {Nx.tensor(m, type: :u8), {:f, 32}},
            {Nx.tensor(m, type: :f16), {:f, 16}},
            {Nx.tensor(m, type: :f64), {:f, 64}}
          ] do
        {w, v} = Nx.LinAlg.eigh(input)
        assert {w.type, v.type} == {type, type}
        expected = [(7 + :math.sqrt(5)) / 2, (7 - :math.sqrt(5)) / 2]

        assert Nx.all_close(w, Nx.tensor(expected, type: type), rtol: 2.0e-3) ==
                 Nx.tensor(1, type: :u8)
      end
    end

    test "a complex Hermitian matrix: real eigenvalues of the complex type" do
      # Nx 0.7.2's own test matrix: eigenvalues -5, 3, 1 (in that order there too)
      a =
        Nx.tensor(
          [
            [1, Complex.new(0, 2), 2],
            [Complex.new(0, -2), -3, Complex.new(0, 2)],
            [2, Complex.new(0, -2), 1]
          ],
          type: :c128
        )

      {w, v} = Nx.LinAlg.eigh(a)
      assert {w.type, v.type} == {{:c, 128}, {:c, 128}}

      assert Nx.all_close(w, Nx.tensor([-5.0, 3.0, 1.0], type: :c128), atol: 1.0e-12) ==
               Nx.tensor(1, type: :u8)

      vh = v |> Nx.transpose() |> Nx.conjugate()
      reconstructed = v |> Nx.multiply(w) |> Nx.dot(vh)
      assert Nx.all_close(reconstructed, a, atol: 1.0e-12) == Nx.tensor(1, type: :u8)
    end

    test "a batch and a vectorized tensor are decomposed matrix by matrix" do
      a = f64([@a, [[1.0, 0.0, 0.0], [0.0, 4.0, 0.0], [0.0, 0.0, 2.0]]])
      {w, v} = Nx.LinAlg.eigh(a)
      assert {w.shape, v.shape} == {{2, 3}, {2, 3, 3}}
      assert_eigh(f64(@a), {w[0], v[0]}, 1.0e-12)
      assert w[1] == f64([1.0, 4.0, 2.0])

      {wv, vv} = Nx.LinAlg.eigh(Nx.vectorize(a, :x))
      assert wv.vectorized_axes == [x: 2] and vv.shape == {3, 3}
      assert Nx.devectorize(wv, keep_names: false) == w
      assert Nx.devectorize(vv, keep_names: false) == v
    end

    test "shape and option errors, as Nx 0.7.2's" do
      assert_raise ArgumentError,
                   "tensor must be a square matrix or a batch of square matrices, got shape: {2, 2, 3}",
                   fn -> Nx.LinAlg.eigh(Nx.iota({2, 2, 3})) end

      assert_raise ArgumentError,
                   "tensor must have at least rank 2, got rank 1 with shape {3}",
                   fn ->
                     Nx.LinAlg.eigh(Nx.iota({3}))
                   end

      assert_raise ArgumentError,
                   "unknown key :max_iters in [max_iters: 5], expected one of [:max_iter, :eps]",
                   fn -> Nx.LinAlg.eigh(Nx.eye(2), max_iters: 5) end

      {w, _} = Nx.LinAlg.eigh(f64([[2.0, 1.0], [1.0, 2.0]]), max_iter: 5, eps: 1.0e-3)
      assert close?(w, f64([3.0, 1.0]))
    end

    test "inside defn: one tuple-valued node" do
      f = eigh_factor(f64(@a))
      assert close?(Nx.dot(f, Nx.transpose(f)), f64(@a))

      fun = fn a ->
        {w, v} = Nx.LinAlg.eigh(a)
        v |> Nx.multiply(w) |> Nx.dot(Nx.transpose(v))
      end

      assert close?(Nx.Defn.jit_apply(fun, [f64(@a)]), f64(@a))

      {w, v} =
        Nx.Defn.Expr.with_tracing(fn ->
          Nx.LinAlg.eigh(Nx.Defn.Expr.parameter(0, {:f, 32}, {3, 3}))
        end)

      assert %{op: :elem, args: [node]} = w.data
      assert %{op: :elem, args: [^node]} = v.data
      assert node.data.op == :eigh
    end

    test "gradients of eigenvalues and eigenvectors match finite differences" do
      # distinct eigenvalues of distinct magnitudes: order and signs stay put under the steps
      x = f64([[4.0, 1.0, 0.5], [1.2, 3.0, 0.2], [0.4, 0.2, 2.0]])
      # the sum of the eigenvalues is the trace: its gradient is the identity
      assert close?(
               Nx.Defn.grad(x, fn x -> x |> Nx.LinAlg.eigh() |> elem(0) |> Nx.sum() end),
               Nx.eye(3, type: :f64)
             )

      check(x, fn x -> x |> Nx.LinAlg.eigh() |> elem(0) |> weighted() end)
      check(x, fn x -> x |> Nx.LinAlg.eigh() |> elem(0) |> Nx.exp() |> Nx.sum() end)

      check(x, fn x ->
        {w, v} = Nx.LinAlg.eigh(x)
        Nx.add(weighted(w), weighted(v))
      end)
    end
  end
end
