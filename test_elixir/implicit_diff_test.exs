defmodule NxJax.ImplicitDiffTest do
  # custom_root/4 and custom_linear_solve/5: values, gradients against closed forms, central
  # differences and Nx.LinAlg.solve's, composition with grad of grad, cond and stop_grad, and
  # the errors raised at trace time.
  use ExUnit.Case, async: true

  doctest NxJax.Autodiff.Implicit

  import Nx.Defn
  import NxJax.Autodiff

  # x = sqrt(a) by Newton from 1.0, in a while loop with no bound
  defn newton_sqrt(a) do
    custom_root(
      fn x -> x * x - a end,
      1.0,
      fn f, x0 ->
        {x, _i} =
          while {x = x0, i = 0}, i < 100 and Nx.abs(f.(x)) > 1.0e-7 do
            {x - f.(x) / (2 * x), i + 1}
          end

        x
      end,
      fn g, y -> y / g.(1.0) end
    )
  end

  # the cube root of a by bisection on [0, a + 1]: comparisons and selects only, nothing
  # differentiable in the solver
  defn bisect_cbrt(a) do
    custom_root(
      fn x -> x * x * x - a end,
      0.0,
      fn f, _x0 ->
        {lo, hi, _} =
          while {lo = 0.0 * a, hi = a + 1.0, i = 0}, i < 60 do
            mid = (lo + hi) / 2
            above = f.(mid) > 0
            {Nx.select(above, lo, mid), Nx.select(above, mid, hi), i + 1}
          end

        (lo + hi) / 2
      end,
      fn g, y -> y / g.(1.0) end
    )
  end

  # x with x + 0.1 x^3 = m p (a coupled system in R^3) by Newton, tangent solve dense
  defn coupled_root(p, m) do
    custom_root(
      fn x -> x + 0.1 * x * x * x - Nx.dot(m, p) end,
      Nx.broadcast(0.0, p),
      fn f, x0 ->
        {x, _} =
          while {x = x0, i = 0}, i < 30 do
            jacobian = Nx.eye(3, type: x.type) * (1 + 0.3 * x * x)
            {x - Nx.LinAlg.solve(jacobian, f.(x)), i + 1}
          end

        x
      end,
      fn g, y ->
        columns = for i <- 0..2, do: g.(Nx.equal(Nx.iota({3}), i))
        Nx.LinAlg.solve(Nx.stack(columns, axis: 1), y)
      end
    )
  end

  defn scaled_root(a), do: custom_grad(newton_sqrt(a), [a], fn g -> [g * 3.0] end)
  defn doubled_root(a), do: newton_sqrt(custom_grad(a * 1.0, [a], fn g -> [g * 2.0] end))

  # Newton's steps unrolled, the root the solver found hooked as :root
  defn hooked_root(a) do
    custom_root(
      fn x -> x * x - a end,
      1.0,
      fn f, x0 ->
        x = x0
        x = x - f.(x) / (2 * x)
        x = x - f.(x) / (2 * x)
        x = x - f.(x) / (2 * x)
        x = x - f.(x) / (2 * x)
        x = x - f.(x) / (2 * x)
        x = x - f.(x) / (2 * x)
        hook(x, :root)
      end,
      fn g, y -> y / g.(1.0) end
    )
  end

  defn piecewise(a), do: if(a > 1, do: newton_sqrt(a), else: a * 0.0)
  defn stopped(a), do: stop_grad(newton_sqrt(a)) + a

  defn conjugate_gradient(matvec, b) do
    x = Nx.broadcast(0.0, b)
    r = b - matvec.(x)

    {x, _r, _p, _rs, _i} =
      while {x, r, p = r, rs = Nx.sum(r * r), i = 0}, i < 50 and rs > 1.0e-14 do
        ap = matvec.(p)
        alpha = rs / Nx.sum(p * ap)
        x = x + alpha * p
        r = r - alpha * ap
        rs_new = Nx.sum(r * r)
        {x, r, r + rs_new / rs * p, rs_new, i + 1}
      end

    x
  end

  # the matrix of a linear map of R^3 from its columns, then a direct solve
  defn dense_solve(linear, b) do
    columns = for i <- 0..2, do: linear.(Nx.equal(Nx.iota({3}), i))
    Nx.LinAlg.solve(Nx.stack(columns, axis: 1), b)
  end

  defn cg_solve(a, b),
    do: custom_linear_solve(&Nx.dot(a, &1), b, &conjugate_gradient/2, nil, symmetric: true)

  defn general_solve(a, b),
    do: custom_linear_solve(&Nx.dot(a, &1), b, &dense_solve/2, &dense_solve/2)

  defn forward_only_solve(a, b),
    do: custom_linear_solve(&Nx.dot(a, &1), b, &dense_solve/2, nil)

  defn cg_loss(a, b), do: Nx.sum(Nx.sin(cg_solve(a, b)))
  defn general_loss(a, b), do: Nx.sum(Nx.sin(general_solve(a, b)))
  defn reference_loss(a, b), do: Nx.sum(Nx.sin(Nx.LinAlg.solve(a, b)))

  defp assert_all_close(got, want, tol) do
    diff = Nx.subtract(got, want) |> Nx.abs() |> Nx.reduce_max() |> Nx.to_number()
    assert diff <= tol, "max difference #{diff}:\n#{inspect(got)}\n#{inspect(want)}"
  end

  defp central(f, x, h) do
    (f.(x + h) - f.(x - h)) / (2 * h)
  end

  describe "custom_root" do
    test "Newton's square root: the value, and d x / d a = 0.35355339 at a = 2.0" do
      assert_in_delta Nx.to_number(newton_sqrt(2.0)), :math.sqrt(2.0), 1.0e-6
      grad = Nx.to_number(grad(Nx.tensor(2.0), &newton_sqrt/1))
      assert_in_delta grad, 0.35355339, 1.0e-6
    end

    test "vectorized: one root and one derivative per entry, with a scalar initial guess" do
      as = Nx.tensor([2.0, 3.0, 9.0])
      a = Nx.vectorize(as, :rows)

      # the loop runs while any entry has not converged (Nx's vectorized while)
      root = newton_sqrt(a)
      assert root.vectorized_axes == [rows: 3]
      assert_all_close(Nx.devectorize(root, keep_names: false), Nx.sqrt(as), 1.0e-6)

      # d sqrt(a) / d a = 1 / (2 sqrt(a)), entry by entry; the first is the issue's 0.35355339
      grads = grad(a, &newton_sqrt/1)
      assert grads.vectorized_axes == [rows: 3]
      want = Nx.divide(0.5, Nx.sqrt(as))
      assert_all_close(Nx.devectorize(grads, keep_names: false), want, 1.0e-6)

      # the same numbers as each entry alone
      for {entry, i} <- Enum.with_index(Nx.to_flat_list(as)) do
        alone = Nx.to_number(grad(Nx.tensor(entry), &newton_sqrt/1))
        assert_in_delta Nx.to_number(Nx.devectorize(grads)[i]), alone, 1.0e-7
      end

      # a vectorized system in R^3: each entry's Jacobian (through the dense tangent solve)
      m = Nx.tensor([[1.0, 0.5, 0.0], [0.0, 1.0, 0.25], [0.3, 0.0, 1.0]])
      ps = Nx.tensor([[0.5, -1.0, 2.0], [1.0, 0.0, -0.5]])
      jac = jacrev(&coupled_root(&1, m), Nx.vectorize(ps, :rows))

      for i <- 0..1 do
        alone = jacrev(&coupled_root(&1, m), ps[i])
        assert_all_close(Nx.devectorize(jac, keep_names: false)[i], alone, 1.0e-6)
      end
    end

    test "custom_grad around the root or its input, and a hook in the solver" do
      # the user's gradient of the root replaces the implicit one
      assert Nx.to_number(grad(Nx.tensor(2.0), &scaled_root/1)) == 3.0

      # a custom_grad on the way in: d sqrt(b) / d a with b = a and db/da declared 2
      assert_in_delta Nx.to_number(grad(Nx.tensor(2.0), &doubled_root/1)), 2 * 0.35355339, 1.0e-6

      # a hook inside the solver sees the root it found; the gradient is still the implicit one
      me = self()

      hooked =
        Nx.Defn.jit(&grad(&1, fn a -> hooked_root(a) end), hooks: %{root: &send(me, {:root, &1})})

      assert_in_delta Nx.to_number(hooked.(Nx.tensor(2.0))), 0.35355339, 1.0e-6
      assert_received {:root, root}
      assert_in_delta Nx.to_number(root), :math.sqrt(2.0), 1.0e-6
    end

    test "the second derivative is the implicit one: -a^(-3/2) / 4 (grad of grad)" do
      second = grad(Nx.tensor(2.0), fn a -> grad(a, &newton_sqrt/1) end)
      assert_in_delta Nx.to_number(second), -0.25 * :math.pow(2.0, -1.5), 1.0e-6
    end

    test "a solver that is not differentiable at all (bisection) gets d cbrt(a) / d a" do
      assert_in_delta Nx.to_number(bisect_cbrt(8.0)), 2.0, 1.0e-6
      grad = grad(Nx.tensor(8.0, type: :f64), &bisect_cbrt/1)
      assert grad.type == {:f, 64}
      assert_in_delta Nx.to_number(grad), 1 / 12, 1.0e-12
    end

    test "a system in R^3 with a dense tangent solve matches central differences (f64)" do
      p = Nx.tensor([0.5, -1.0, 2.0], type: :f64)
      m = Nx.tensor([[1.0, 0.2, 0.0], [0.1, 1.5, -0.3], [0.0, 0.4, 0.8]], type: :f64)
      loss = fn p -> Nx.sum(Nx.sin(coupled_root(p, m))) end
      root = coupled_root(p, m)
      residual = root |> Nx.add(Nx.multiply(0.1, Nx.pow(root, 3))) |> Nx.subtract(Nx.dot(m, p))
      assert_all_close(residual, Nx.broadcast(0.0, {3}), 1.0e-12)

      numeric =
        for i <- 0..2 do
          e = Nx.multiply(Nx.equal(Nx.iota({3}), i), 1.0e-6)
          (Nx.to_number(loss.(Nx.add(p, e))) - Nx.to_number(loss.(Nx.subtract(p, e)))) / 2.0e-6
        end

      assert_all_close(grad(p, loss), Nx.tensor(numeric, type: :f64), 1.0e-8)
    end

    test "it composes with cond and stop_grad" do
      assert_in_delta Nx.to_number(grad(Nx.tensor(4.0), &piecewise/1)), 0.25, 1.0e-6
      assert Nx.to_number(grad(Nx.tensor(0.5), &piecewise/1)) == 0.0
      assert Nx.to_number(grad(Nx.tensor(2.0), &stopped/1)) == 1.0
      # and central differences of the value agree with the gradient
      f = fn a -> Nx.to_number(newton_sqrt(Nx.tensor(a, type: :f64))) end
      assert_in_delta central(f, 3.0, 1.0e-4), 0.5 / :math.sqrt(3.0), 1.0e-6
    end

    test "bad functions are refused when traced, naming what is wrong" do
      assert_raise ArgumentError,
                   ~r/f.\(x\) must have the shape of the unknown, \{\}, got: \{2\}/,
                   fn ->
                     Nx.Defn.jit(fn a ->
                       custom_root(
                         &Nx.subtract(Nx.broadcast(&1, {2}), a),
                         1.0,
                         fn _f, x -> x end,
                         fn _g, y -> y end
                       )
                     end).(2.0)
                   end

      assert_raise ArgumentError, ~r/tangent_solve must return a tensor, got: \{/, fn ->
        Nx.Defn.jit(fn a ->
          custom_root(&Nx.subtract(&1, a), 1.0, fn _f, x -> x end, fn _g, y -> {y, y} end)
        end).(2.0)
      end

      assert_raise ArgumentError,
                   ~r/custom_root\/4 expects the initial guess to be a tensor/,
                   fn ->
                     Nx.Defn.jit(fn a ->
                       custom_root(&Nx.subtract(&1, a), {1.0}, fn _f, x -> x end, fn _g, y ->
                         y
                       end)
                     end).(2.0)
                   end

      # a solver whose result reads a vectorized value the unknown does not have
      v = Nx.vectorize(Nx.tensor([1.0, 2.0]), :other)

      assert_raise ArgumentError, ~r/solve is vectorized along \[:other\]/, fn ->
        Nx.Defn.jit(fn a, v ->
          custom_root(&Nx.subtract(&1, a), 1.0, fn _f, x -> Nx.add(x, v) end, fn _g, y -> y end)
        end).(2.0, v)
      end
    end
  end

  describe "custom_linear_solve" do
    setup do
      a = Nx.tensor([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])
      b = Nx.tensor([1.0, 2.0, 3.0])
      %{a: a, b: b}
    end

    test "conjugate gradients (symmetric): the solution and the gradients of Nx.LinAlg.solve",
         %{a: a, b: b} do
      assert_all_close(cg_solve(a, b), Nx.LinAlg.solve(a, b), 1.0e-5)
      {da, db} = grad({a, b}, fn {a, b} -> cg_loss(a, b) end)
      {want_da, want_db} = grad({a, b}, fn {a, b} -> reference_loss(a, b) end)
      assert_all_close(da, want_da, 1.0e-5)
      assert_all_close(db, want_db, 1.0e-5)
    end

    test "vectorized b, or a matrix per entry: each entry's solution and gradients", %{a: a} do
      bs = Nx.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]])
      b = Nx.vectorize(bs, :rows)

      x = cg_solve(a, b)
      assert x.vectorized_axes == [rows: 2]

      for i <- 0..1 do
        assert_all_close(
          Nx.devectorize(x, keep_names: false)[i],
          Nx.LinAlg.solve(a, bs[i]),
          1.0e-5
        )
      end

      # a is shared: its gradient sums the entries' (as Nx.LinAlg.solve's does); b's is per entry
      {da, db} = grad({a, b}, fn {a, b} -> cg_loss(a, b) end)
      {want_da, want_db} = grad({a, b}, fn {a, b} -> reference_loss(a, b) end)
      assert_all_close(da, want_da, 1.0e-5)
      assert db.vectorized_axes == [rows: 2]
      assert_all_close(Nx.devectorize(db), Nx.devectorize(want_db), 1.0e-5)

      # a matrix per entry (captured by matvec) and one b: the unknown takes the entries' axis
      as = Nx.stack([a, Nx.add(a, Nx.eye(3))])
      x = general_solve(Nx.vectorize(as, :mats), bs[0])
      assert x.vectorized_axes == [mats: 2]

      for i <- 0..1 do
        assert_all_close(
          Nx.devectorize(x, keep_names: false)[i],
          Nx.LinAlg.solve(as[i], bs[0]),
          1.0e-5
        )
      end

      da = grad(Nx.vectorize(as, :mats), &general_loss(&1, bs[0]))

      for i <- 0..1 do
        want = grad(as[i], &reference_loss(&1, bs[0]))
        assert_all_close(Nx.devectorize(da, keep_names: false)[i], want, 1.0e-5)
      end
    end

    test "a non-symmetric matrix with a transpose solve", %{b: b} do
      a = Nx.tensor([[3.0, 1.0, -0.5], [0.2, 2.0, 0.7], [1.0, -0.3, 4.0]])
      assert_all_close(general_solve(a, b), Nx.LinAlg.solve(a, b), 1.0e-5)
      {da, db} = grad({a, b}, fn {a, b} -> general_loss(a, b) end)
      {want_da, want_db} = grad({a, b}, fn {a, b} -> reference_loss(a, b) end)
      assert_all_close(da, want_da, 1.0e-5)
      assert_all_close(db, want_db, 1.0e-5)
    end

    test "without a transpose solve the value is computed and reverse mode is a clear error",
         %{a: a, b: b} do
      assert_all_close(forward_only_solve(a, b), Nx.LinAlg.solve(a, b), 1.0e-5)

      error =
        assert_raise NxJax.WorkerError, fn ->
          grad(b, fn b -> Nx.sum(forward_only_solve(a, b)) end)
        end

      assert error.message =~ "transpose_solve"
      # the worker serves on
      assert_all_close(cg_solve(a, b), Nx.LinAlg.solve(a, b), 1.0e-5)
    end

    test "a bad option or a matvec of another shape is refused when traced", %{a: a, b: b} do
      assert_raise ArgumentError, ~r/:symmetric to be a boolean/, fn ->
        Nx.Defn.jit(fn a, b ->
          custom_linear_solve(&Nx.dot(a, &1), b, &dense_solve/2, nil, symmetric: :yes)
        end).(a, b)
      end

      assert_raise ArgumentError,
                   ~r/matvec.\(x\) must have the shape of the unknown, \{3\}, got: \{\}/,
                   fn ->
                     Nx.Defn.jit(fn a, b ->
                       custom_linear_solve(&Nx.sum(Nx.dot(a, &1)), b, &dense_solve/2, nil)
                     end).(a, b)
                   end
    end
  end
end
