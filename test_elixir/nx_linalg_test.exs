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

    # Nx 0.7.2's messages (its doc examples and the same calls run on real Nx)
    test "shape and option errors at trace time" do
      {v, r, sq} = {Nx.tensor([1.0, 2.0, 3.0]), Nx.iota({2, 3}, type: :f32), Nx.eye(2)}

      for {fun, message} <- [
            {fn -> Nx.LinAlg.triangular_solve(v, v) end,
             "incompatible dimensions for a and b on triangular solve"},
            {fn -> Nx.LinAlg.triangular_solve(r, v) end,
             "triangular_solve/3 expected a square matrix or a batch of square matrices, " <>
               "got tensor with shape: {2, 3}"},
            {fn -> Nx.LinAlg.triangular_solve(sq, Nx.iota({3, 2})) end,
             "incompatible dimensions for a and b on triangular solve"},
            {fn -> Nx.LinAlg.triangular_solve(sq, v, transform_a: :conjugate) end,
             "complex numbers not supported yet"},
            {fn -> Nx.LinAlg.triangular_solve(sq, v, transform_a: :other) end,
             "invalid value for :transform_a option, expected :none, :transpose, or " <>
               ":conjugate, got: :other"},
            {fn -> Nx.LinAlg.solve(r, v) end,
             "`a` tensor has incompatible dimensions, expected a square matrix or a batch of " <>
               "square matrices, got: {2, 3}"},
            {fn -> Nx.LinAlg.solve(sq, Nx.iota({3, 2})) end,
             "`b` tensor has incompatible dimensions, expected {2, 2} or {2}, got: {3, 2}"},
            {fn -> Nx.LinAlg.invert(v) end,
             "invert/1 expects a square matrix or a batch of square matrices, got tensor " <>
               "with shape: {3}"},
            {fn -> Nx.LinAlg.determinant(r) end,
             "determinant/1 expects a square tensor, got tensor with shape: [2, 3]"},
            {fn -> Nx.LinAlg.cholesky(v) end,
             "tensor must have at least rank 2, got rank 1 with shape {3}"},
            {fn -> Nx.LinAlg.lu(r) end,
             "tensor must be a square matrix or a batch of square matrices, got shape: {2, 3}"},
            {fn -> Nx.LinAlg.qr(v) end,
             "tensor must have at least rank 2, got rank 1 with shape {3}"},
            {fn -> Nx.LinAlg.qr(sq, mode: :x) end,
             "invalid :mode received. Expected one of [:reduced, :complete], received: :x"},
            {fn -> Nx.LinAlg.svd(v) end,
             "tensor must have at least rank 2, got rank 1 with shape {3}"}
          ] do
        assert_raise ArgumentError, message, fun
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

    # Nx 0.7.2's doc example: Nx orders the rows before eliminating (by each column of the
    # matrix as given), not as LAPACK's partial pivoting, and computes in double
    test "lu pivots as Nx 0.7.2" do
      {p, l, u} = Nx.LinAlg.lu(Nx.tensor([[1, 2, 3], [4, 5, 6], [7, 8, 9]]))
      assert Nx.to_list(p) == [[0, 0, 1], [0, 1, 0], [1, 0, 0]]

      assert Nx.to_list(l) == [
               [1.0, 0.0, 0.0],
               [0.5714285969734192, 1.0, 0.0],
               [0.1428571492433548, 2.0, 1.0]
             ]

      assert Nx.to_list(u) == [
               [7.0, 8.0, 9.0],
               [0.0, 0.4285714328289032, 0.8571428656578064],
               [0.0, 0.0, 0.0]
             ]

      {p, _l, _u} = Nx.LinAlg.lu(Nx.tensor([[[9, 8, 7], [6, 5, 4], [3, 2, 1]]]))
      assert Nx.to_list(p) == [[[1, 0, 0], [0, 1, 0], [0, 0, 1]]]
    end

    # Nx 0.7.2's doc examples: a column with nothing below its diagonal is not reflected (its
    # sign stays), entries within 1.0e-10 of zero are 0.0 (never -0.0), and the digits are
    # those of Nx's Householder steps
    test "qr of triangular matrices as Nx 0.7.2" do
      bits = &Nx.to_binary/1

      {q, r} = Nx.LinAlg.qr(Nx.tensor([[-3, 2, 1], [0, 1, 1], [0, 0, -1]]))
      assert bits.(q) == bits.(Nx.eye(3, type: :f32))
      assert bits.(r) == bits.(Nx.tensor([[-3.0, 2.0, 1.0], [0.0, 1.0, 1.0], [0.0, 0.0, -1.0]]))

      t = Nx.tensor([[3, 2, 1], [0, 1, 1], [0, 0, 1], [0, 0, 1]])
      {q, r} = Nx.LinAlg.qr(t)

      assert bits.(q) ==
               bits.(
                 Nx.tensor([
                   [1.0, 0.0, 0.0],
                   [0.0, 1.0, 0.0],
                   [0.0, 0.0, 0.7071068286895752],
                   [0.0, 0.0, 0.7071067690849304]
                 ])
               )

      assert bits.(r) ==
               bits.(
                 Nx.tensor([[3.0, 2.0, 1.0], [0.0, 1.0, 1.0], [0.0, 0.0, 1.4142136573791504]])
               )

      {q, _r} = Nx.LinAlg.qr(t, mode: :complete)

      assert Nx.to_flat_list(q) ==
               [1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.7071068286895752] ++
                 [0.7071067690849304, 0.0, 0.0, 0.7071067690849304, -0.7071068286895752]
    end

    # Nx 0.7.2's answers (run on real Nx): R's diagonal positive, except the last entry of a
    # matrix with no more rows than columns, which makes det(Q) that of Nx's reflections
    test "qr gives Nx's signs" do
      cases = [
        {[[0.0, 1], [2, 3], [4, 5]], [4.4721360206604, 5.81377649307251, 0.0, 1.0954453945159912],
         [
           0.0,
           0.9128709435462952,
           0.4472135901451111,
           0.3651483356952667,
           0.8944271802902222,
           -0.1825741082429886
         ]},
        {[[1.0, 2], [-3, 4]], [3.1622776985168457, -3.1622774600982666, 0.0, -3.1622772216796875],
         [0.3162277936935425, -0.9486832618713379, -0.9486832618713379, -0.31622767448425293]},
        {[[-1.0, 2, 3], [4, -5, 6]],
         [
           4.123106002807617,
           -5.335783958435059,
           5.09324836730957,
           0.0,
           0.7276074290275574,
           4.365640640258789
         ], [-0.24253559112548828, 0.9701425433158875, 0.9701425433158875, 0.2425355315208435]},
        {[[-3.0, 1, 2], [1, -4, 0.5], [2, 2, -1]],
         [
           3.7416577339172363,
           -0.8017838001251221,
           -2.0044593811035156,
           0.0,
           4.5118889808654785,
           -0.7994751334190369,
           0.0,
           0.0,
           0.7700537443161011
         ],
         [
           -0.8017838001251221,
           0.07915598154067993,
           0.5923489332199097,
           0.267261266708374,
           -0.8390530347824097,
           0.4738791286945343,
           0.534522533416748,
           0.5382605195045471,
           0.651583731174469
         ]}
      ]

      for {a, r_nx, q_nx} <- cases do
        {q, r} = Nx.LinAlg.qr(Nx.tensor(a))
        assert_close_list(Nx.to_flat_list(r), r_nx)
        assert_close_list(Nx.to_flat_list(q), q_nx)
      end
    end

    # Nx 0.7.2's grad_test values: Nx does not symmetrize the gradient of cholesky (the
    # upper triangle gets what JAX's rule splits between the two)
    test "the gradients of cholesky and qr follow Nx's conventions" do
      t = Nx.tensor([[1.0, 2.0], [2.0, 5.0]])

      assert Nx.Defn.grad(t, &Nx.sum(Nx.LinAlg.cholesky(&1))) ==
               Nx.tensor([[1.5, -1.0], [0.0, 0.5]])

      cos_grad = Nx.Defn.grad(t, &(&1 |> Nx.LinAlg.cholesky() |> Nx.cos() |> Nx.sum()))

      assert_close_list(Nx.to_flat_list(cos_grad), [
        -1.1943799,
        0.84147096,
        -0.06782645,
        -0.42073548
      ])

      c =
        Nx.tensor([
          [Complex.new(1, 0), Complex.new(0, -2)],
          [Complex.new(0, 2), Complex.new(5, 0)]
        ])

      assert Nx.Defn.grad(c, &Nx.sum(Nx.LinAlg.cholesky(&1))) ==
               Nx.tensor([
                 [Complex.new(2.5, -1.0), Complex.new(0.0, -1.0)],
                 [Complex.new(1.0, 1.0), Complex.new(0.5, 0.0)]
               ])

      qr_grad =
        Nx.Defn.grad(Nx.tensor([[1.0, 2.0], [1.0, -1.0]]), fn x ->
          {q, r} = Nx.LinAlg.qr(x)
          Nx.sum(Nx.add(q, r))
        end)

      assert_close_list(Nx.to_flat_list(qr_grad), [0.70709, 1.4142, 0.70709, 0.0], 1.0e-4)
    end

    test "lu and svd reconstruct their input" do
      {p, l, u} = Nx.LinAlg.lu(f64(@a))
      assert close?(p |> Nx.dot(l) |> Nx.dot(u), f64(@a))

      a = f64([[1.0, 2.0, 0.0], [3.0, 4.0, 1.0]])
      {u, s, vt} = Nx.LinAlg.svd(a)
      assert {u.shape, s.shape, vt.shape} == {{2, 2}, {2}, {3, 3}}
      {u, s, vt} = Nx.LinAlg.svd(a, full_matrices?: false)
      assert {u.shape, s.shape, vt.shape} == {{2, 2}, {2}, {2, 3}}
      # Nx 0.7.2's SVD reconstructs within about 1e-3 (its eigh stops early); real Nx's product
      nx =
        [1.0003545492271384, 2.00099364451358, -1.4227302965164057e-4] ++
          [2.999290146005413, 4.0001415174828825, 0.9992193872639712]

      assert close?(u |> Nx.multiply(s) |> Nx.dot(vt), f64(nx) |> Nx.reshape({2, 3}))
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

      # the gradient is that of the exact decomposition, the values are Nx's (about 1e-4 from
      # it), so finite differences of the values agree to 1e-3
      assert :ok =
               NxJax.GradCheck.check_grads!(
                 fn x -> x |> Nx.LinAlg.svd() |> elem(1) |> weighted() end,
                 [x],
                 rtol: 1.0e-3
               )
    end
  end

  describe "eigh" do
    test "the values of Nx's own iteration: real Nx 0.7.2's, to the last bits" do
      # Nx 0.7.2's own test matrix, f64; real Nx printed these (its default eps 1.0e-4 stops
      # the iteration about 1e-4 away from the exact decomposition)
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
      assert_eigh(a, {w, v}, 2.0e-2)

      nx_w = [16.394095751822213, -9.737915095022883, 5.901451237179783, 4.334058850914665]
      assert close?(w, f64(nx_w ++ [-0.8916907045443621]))

      nx_v0 = [0.11221971239916512, 0.3952523722472298, 0.42671245567659816, 0.6031083405526857]
      assert close?(v[[.., 0]], f64(nx_v0 ++ [0.5341901422791441]))

      # its order and signs are those of the iteration, not of LAPACK's conventions
      assert pivots(v) |> Enum.map(&(&1 > 0)) == [true, false, false, true, true]

      # f32: the same iteration in double, rounded once (real Nx's f32 values)
      {w32, _} = Nx.LinAlg.eigh(Nx.as_type(a, :f32))

      assert w32 ==
               Nx.tensor(
                 [16.39409637451172, -9.7379150390625, 5.901451110839844] ++
                   [4.33405876159668, -0.891690731048584]
               )
    end

    test "2x2 matrices: Nx's values, and LAPACK's where Nx's are no decomposition" do
      # real Nx 0.7.2: [2.99997, 1.00003] (the iteration stops at eps 1.0e-4)
      {w, v} = Nx.LinAlg.eigh(f64([[2.0, 1.0], [1.0, 2.0]]))
      assert close?(w, f64([2.999966130397967, 1.0000338696052031]))

      assert close?(
               v,
               f64([
                 [0.7100106736147788, 0.7041909139960933],
                 [0.7041909139949817, -0.7100106736159093]
               ])
             )

      # tighter options converge further (Nx's :eps and :max_iter)
      {w, _} = Nx.LinAlg.eigh(f64([[2.0, 1.0], [1.0, 2.0]]), eps: 1.0e-8, max_iter: 10_000)
      assert Nx.all_close(w, f64([3.0, 1.0]), atol: 1.0e-7) == Nx.tensor(1, type: :u8)

      # 1 and -1 have one magnitude: Nx's iteration never converges and real Nx returns
      # eigenvalues [0.0, 0.0] with the identity, which is no decomposition; nx_jax returns
      # LAPACK's (increasing order, each eigenvector's first largest entry positive)
      {w, v} = Nx.LinAlg.eigh(f64([[0.0, 1.0], [1.0, 0.0]]))
      s = :math.sqrt(0.5)
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

      # real Nx 0.7.2's values (c64: exactly -5, 3, 1)
      assert close?(Nx.real(w), f64([-4.99999998648972, 2.999999981676297, 0.9999999958230816]))
      assert Nx.real(v[[.., 0]]) |> close?(f64([-0.40822194253992233, 0.0, 0.40827567698998607]))
      {w64, _} = Nx.LinAlg.eigh(Nx.as_type(a, :c64), max_iter: 10_000)
      assert w64 == Nx.tensor([-5.0, 3.0, 1.0], type: :c64)

      vh = v |> Nx.transpose() |> Nx.conjugate()
      reconstructed = v |> Nx.multiply(w) |> Nx.dot(vh)
      assert Nx.all_close(reconstructed, a, atol: 1.0e-3) == Nx.tensor(1, type: :u8)
    end

    test "a batch and a vectorized tensor are decomposed matrix by matrix" do
      a = f64([@a, [[1.0, 0.0, 0.0], [0.0, 4.0, 0.0], [0.0, 0.0, 2.0]]])
      {w, v} = Nx.LinAlg.eigh(a)
      assert {w.shape, v.shape} == {{2, 3}, {2, 3, 3}}
      assert_eigh(f64(@a), {w[0], v[0]}, 2.0e-2)
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

      # the options reach the iteration (real Nx's values for these)
      {w, _} = Nx.LinAlg.eigh(f64([[2.0, 1.0], [1.0, 2.0]]), max_iter: 5, eps: 1.0e-3)
      assert close?(w, f64([2.9996952148735136, 1.0003047851259819]))
    end

    test "inside defn: one tuple-valued node" do
      near? = &(Nx.all_close(&1, &2, atol: 2.0e-2) == Nx.tensor(1, type: :u8))
      f = eigh_factor(f64(@a))
      assert near?.(Nx.dot(f, Nx.transpose(f)), f64(@a))

      fun = fn a ->
        {w, v} = Nx.LinAlg.eigh(a)
        v |> Nx.multiply(w) |> Nx.dot(Nx.transpose(v))
      end

      assert near?.(Nx.Defn.jit_apply(fun, [f64(@a)]), f64(@a))
      assert Nx.Defn.jit_apply(fun, [f64(@a)]) == fun.(f64(@a))

      {w, v} =
        Nx.Defn.Expr.with_tracing(fn ->
          Nx.LinAlg.eigh(Nx.Defn.Expr.parameter(0, {:f, 32}, {3, 3}))
        end)

      assert %{op: :elem, args: [node]} = w.data
      assert %{op: :elem, args: [^node]} = v.data
      assert node.data.op == :eigh
    end

    test "gradients of eigenvalues and eigenvectors match finite differences" do
      # distinct eigenvalues of distinct magnitudes: order and signs stay put under the steps.
      # The gradient is the exact decomposition's (LAPACK's); the values are Nx's iteration's,
      # which stops within eps of them, so the differences are taken with a tight eps and
      # steps much larger than the values' error
      x = f64([[4.0, 1.0, 0.5], [1.2, 3.0, 0.2], [0.4, 0.2, 2.0]])
      tight = [eps: 1.0e-8, max_iter: 10_000]
      # the sum of the eigenvalues is the trace: its gradient is the identity
      assert close?(
               Nx.Defn.grad(x, fn x -> x |> Nx.LinAlg.eigh() |> elem(0) |> Nx.sum() end),
               Nx.eye(3, type: :f64)
             )

      loose = fn loss ->
        assert :ok =
                 NxJax.GradCheck.check_grads!(loss, &Nx.Defn.grad(&1, loss), x,
                   step: 1.0e-2,
                   rtol: 2.0e-3,
                   atol: 1.0e-4
                 )
      end

      loose.(fn x -> x |> Nx.LinAlg.eigh(tight) |> elem(0) |> Nx.exp() |> weighted() end)

      # (the signs of the eigenvectors follow the iteration and may flip between the steps:
      # squares do not; tests/test_lower_eigh.py checks the eigenvectors' own gradient)
      loose.(fn x ->
        {w, v} = Nx.LinAlg.eigh(x, tight)
        Nx.add(weighted(w), weighted(Nx.multiply(v, v)))
      end)
    end
  end

  test "lu of a batch of matrices (the worker maps over the batch)" do
    a = Nx.iota({3, 4, 4}, type: :f64) |> Nx.add(Nx.multiply(5.0, Nx.eye({3, 4, 4}, type: :f64)))
    {p, l, u} = Nx.LinAlg.lu(a)
    product = p |> Nx.dot([2], [0], l, [1], [0]) |> Nx.dot([2], [0], u, [1], [0])
    assert Nx.all_close(product, a, atol: 1.0e-10) == Nx.tensor(1, type: :u8)
  end

  test "pinv of a rank-deficient matrix drops the singular value that is rounding noise" do
    # LAPACK's f32 SVD gives [[1..9]]'s zero singular value as about 2.4e-7; inverted, it
    # swamped the result (entries near 1.0e6). Real Nx 0.7.2, whose SVD returns 0.0 there,
    # answers [-0.63879, -0.16677, 0.30526, -0.05538, 3.74e-5, 0.05545, 0.52804, 0.16684,
    # -0.19435]; the exact pseudo-inverse is below (Nx's, and so ours, is within 1e-3 of it)
    t = Nx.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
    exact = Nx.divide(Nx.tensor([[-23, -6, 11], [-2, 0, 2], [19, 6, -7]]), 36)
    assert Nx.all_close(Nx.LinAlg.pinv(t), exact, atol: 1.0e-3) == Nx.tensor(1, type: :u8)

    nx_values = [
      -0.63879,
      -0.16677,
      0.30526,
      -0.05538,
      3.74e-5,
      0.05545,
      0.52804,
      0.16684,
      -0.19435
    ]

    nx = Nx.tensor(nx_values) |> Nx.reshape({3, 3})
    assert Nx.all_close(Nx.LinAlg.pinv(t), nx, atol: 2.0e-5) == Nx.tensor(1, type: :u8)

    # a rank-one tall matrix: real Nx 0.7.2 gives [1, 2, 3; 2, 4, 6] / 70
    t = Nx.tensor([[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]])
    expected = Nx.divide(Nx.tensor([[1, 2, 3], [2, 4, 6]]), 70)
    assert Nx.all_close(Nx.LinAlg.pinv(t), expected, atol: 1.0e-6) == Nx.tensor(1, type: :u8)
  end

  describe "adjoint, matrix_power, norm, pinv, matrix_rank, least_squares (built from the ops)" do
    @reference Path.join(__DIR__, "reference/nx_0.7.2_linalg_composites.tsv")
    @external_resource @reference

    # Where we differ from Nx 0.7.2, and why (docs/COMPATIBILITY.md, linear algebra)
    @differ %{
      # Nx's `ord: 2` of a matrix is its element-wise 2-norm (Frobenius, 5.0); ours the
      # largest singular value, as documented (and as -2 is the smallest)
      "norm_mat_2" => "{:f, 32} {} [4.0]",
      # Nx scales each row by the maxima of the other axis (a broadcasting slip):
      # [3.6055, 14.422] where the rows' norms are [5, 10]
      "norm_axes" => "{:f, 32} {2} [5.0, 10.0]",
      # the conjugate of a real 1 is 1 - 0i (IEEE negation); Nx's binary backend writes +0.0
      "adjoint" => "{:c, 64} {2, 2} [1.0-0.0i, 3.0-0.0i, 0.0-2.0i, 0.0+4.0i]"
    }

    test "the same results and errors as real Nx 0.7.2" do
      calls = [
        {"norm_vec", fn -> Nx.LinAlg.norm(Nx.tensor([3, 4])) end},
        {"norm_vec_f", fn -> Nx.LinAlg.norm(Nx.tensor([3.0, 4.0])) end},
        {"norm_vec_1", fn -> Nx.LinAlg.norm(Nx.tensor([3, -4]), ord: 1) end},
        {"norm_vec_3", fn -> Nx.LinAlg.norm(Nx.tensor([1.0, 2.0, 3.0]), ord: 3) end},
        {"norm_vec_0", fn -> Nx.LinAlg.norm(Nx.tensor([1, 0, 3]), ord: 0) end},
        {"norm_vec_inf", fn -> Nx.LinAlg.norm(Nx.tensor([1, -5, 3]), ord: :inf) end},
        {"norm_vec_neginf", fn -> Nx.LinAlg.norm(Nx.tensor([1.0, -5.0, 3.0]), ord: :neg_inf) end},
        {"norm_mat", fn -> Nx.LinAlg.norm(Nx.tensor([[1, 2], [3, 4]])) end},
        {"norm_mat_fro",
         fn -> Nx.LinAlg.norm(Nx.tensor([[1.0, 2.0], [3.0, 4.0]]), ord: :frobenius) end},
        {"norm_mat_nuc",
         fn -> Nx.LinAlg.norm(Nx.tensor([[3.0, 0.0], [0.0, 4.0]]), ord: :nuclear) end},
        {"norm_mat_1", fn -> Nx.LinAlg.norm(Nx.tensor([[1, -2], [3, -4]]), ord: 1) end},
        {"norm_mat_m1", fn -> Nx.LinAlg.norm(Nx.tensor([[1, -2], [3, -4]]), ord: -1) end},
        {"norm_mat_inf", fn -> Nx.LinAlg.norm(Nx.tensor([[1, -2], [3, -4]]), ord: :inf) end},
        {"norm_mat_2", fn -> Nx.LinAlg.norm(Nx.tensor([[3.0, 0.0], [0.0, 4.0]]), ord: 2) end},
        {"norm_mat_m2", fn -> Nx.LinAlg.norm(Nx.tensor([[3.0, 0.0], [0.0, 4.0]]), ord: -2) end},
        {"norm_axes", fn -> Nx.LinAlg.norm(Nx.tensor([[3.0, 4.0], [6.0, 8.0]]), axes: [1]) end},
        {"norm_axes_keep",
         fn -> Nx.LinAlg.norm(Nx.tensor([[3.0, 4.0], [6.0, 8.0]]), axes: [0], keep_axes: true) end},
        {"norm_complex", fn -> Nx.LinAlg.norm(Nx.tensor([Complex.new(3, 4), 0])) end},
        {"norm_err_rank", fn -> Nx.LinAlg.norm(Nx.tensor([[[1]]])) end},
        {"norm_err_ord", fn -> Nx.LinAlg.norm(Nx.tensor([[1]]), ord: 3) end},
        {"norm_err_unknown", fn -> Nx.LinAlg.norm(Nx.tensor([1]), ord: :foo) end},
        {"norm_err_fro", fn -> Nx.LinAlg.norm(Nx.tensor([1]), ord: :frobenius) end},
        {"norm_err_nuc", fn -> Nx.LinAlg.norm(Nx.tensor([1]), ord: :nuclear) end},
        {"adjoint",
         fn -> Nx.LinAlg.adjoint(Nx.tensor([[1, Complex.new(0, 2)], [3, Complex.new(0, -4)]])) end},
        {"adjoint_b", fn -> Nx.LinAlg.adjoint(Nx.iota({2, 2, 3})) end},
        {"mp3", fn -> Nx.LinAlg.matrix_power(Nx.iota({2, 2, 2}), 3) end},
        {"mp0", fn -> Nx.LinAlg.matrix_power(Nx.tensor([[1, 2], [3, 4]]), 0) end},
        {"mp_neg", fn -> Nx.LinAlg.matrix_power(Nx.tensor([[1.0, 2.0], [3.0, 4.0]]), -1) end},
        {"mp6", fn -> Nx.LinAlg.matrix_power(Nx.tensor([[1, 1], [1, 0]]), 6) end},
        {"pinv0", fn -> Nx.LinAlg.pinv(0) end},
        {"pinv_vec", fn -> Nx.LinAlg.pinv(Nx.tensor([0, 1, 2])) end},
        {"pinv_mat", fn -> Nx.LinAlg.pinv(Nx.tensor([[2.0, 0.0], [0.0, 4.0], [0.0, 0.0]])) end},
        {"pinv_zero_mat", fn -> Nx.LinAlg.pinv(Nx.tensor([[0, 0], [0, 0]])) end},
        {"rank",
         fn ->
           Nx.LinAlg.matrix_rank(Nx.tensor([[1, 1, 1], [2, 2, 2], [8, 9, 10], [-2, 1, 5]]))
         end},
        {"ls",
         fn ->
           Nx.LinAlg.least_squares(
             Nx.tensor([[2.0, 0.0], [0.0, 1.0], [0.0, 0.0]]),
             Nx.tensor([2.0, 3.0, 5.0])
           )
         end},
        {"ls_err",
         fn -> Nx.LinAlg.least_squares(Nx.tensor([[1, 2], [2, 3]]), Nx.tensor([1, 2, 3])) end}
      ]

      reference =
        for line <- File.read!(@reference) |> String.split("\n", trim: true),
            not String.starts_with?(line, "#"),
            into: %{} do
          [name, out] = String.split(line, "\t", parts: 2)
          {name, out}
        end

      assert Enum.sort(Enum.map(calls, &elem(&1, 0))) == Enum.sort(Map.keys(reference))

      # the inverse comes from LAPACK, Nx's from its own LU: the same to 1e-6
      {inverse_cases, exact_cases} = Enum.split_with(calls, &(elem(&1, 0) == "mp_neg"))

      mismatches =
        for {name, f} <- exact_cases,
            expected = Map.get(@differ, name, reference[name]),
            (got = outcome(f)) != expected,
            do: {name, got, expected}

      assert mismatches == []

      for {"mp_neg", f} <- inverse_cases do
        nx =
          Nx.tensor([
            [-2.000000476837158, 1.0000003576278687],
            [1.5000004768371582, -0.5000002384185791]
          ])

        assert Nx.all_close(f.(), nx, atol: 1.0e-6) == Nx.tensor(1, type: :u8)
      end
    end

    test "matrix_power is repeated multiplication; pinv of an invertible matrix is Nx's" do
      a = Nx.tensor([[1.0, 2.0], [3.0, 5.0]], type: :f64)
      expected = a |> Nx.dot(a) |> Nx.dot(a) |> Nx.dot(a) |> Nx.dot(a)
      assert Nx.all_close(Nx.LinAlg.matrix_power(a, 5), expected) == Nx.tensor(1, type: :u8)

      # real Nx 0.7.2's, built on its SVD: within 1e-2 of the inverse
      nx =
        Nx.tensor(
          [[-4.998630015552371, 1.9931774774565123], [3.0065896251891755, -0.9988163334391027]],
          type: :f64
        )

      assert Nx.all_close(Nx.LinAlg.pinv(a), nx, atol: 1.0e-4) == Nx.tensor(1, type: :u8)

      assert Nx.all_close(Nx.LinAlg.pinv(a), Nx.LinAlg.invert(a), atol: 1.0e-2) ==
               Nx.tensor(1, type: :u8)

      # least squares of a tall system, through Nx's SVD (pinv): real Nx 0.7.2's solution,
      # whose normal equations hold within 0.1 (the exact one is [1.0, -0.95])
      m = Nx.tensor([[0.0, 1.0], [1.0, 1.0], [2.0, 1.0], [3.0, 1.0]], type: :f64)
      b = Nx.tensor([-1.0, 0.2, 0.9, 2.1], type: :f64)
      x = Nx.LinAlg.least_squares(m, b)
      nx = Nx.tensor([0.9966153652701945, -0.947965432367438], type: :f64)
      assert Nx.all_close(x, nx, atol: 1.0e-4) == Nx.tensor(1, type: :u8)
      residual = Nx.subtract(Nx.dot(m, x), b)

      assert Nx.all_close(Nx.dot(Nx.transpose(m), residual), Nx.tensor([0.0, 0.0], type: :f64),
               atol: 0.1
             ) ==
               Nx.tensor(1, type: :u8)

      # inside defn, with a gradient (d/dA of the Frobenius norm is A / |A|)
      g = Nx.Defn.grad(a, &Nx.LinAlg.norm/1)
      assert Nx.all_close(g, Nx.divide(a, :math.sqrt(1 + 4 + 9 + 25))) == Nx.tensor(1, type: :u8)
    end
  end

  defp outcome(f) do
    t = f.()
    "#{inspect(t.type)} #{inspect(t.shape)} #{inspect(Nx.to_flat_list(t))}"
  rescue
    e -> "#{inspect(e.__struct__)}: #{Exception.message(e)}"
  end

  defp assert_close_list(got, want, tolerance \\ 1.0e-6) do
    assert length(got) == length(want)

    for {g, w} <- Enum.zip(got, want),
        do: assert(abs(g - w) <= tolerance, "#{inspect(got)} is not #{inspect(want)}")
  end
end
