defmodule NxJax.RealNx.ToolboxTest do
  # NxJax.Autodiff (JAX's toolbox beyond Nx) under real Nx 0.7.2, with NxJax as the compiler:
  # custom_root and custom_linear_solve by the implicit function theorem, custom_jvp's reverse
  # rule by transposing the user's JVP, forward mode and Jacobians by two reverse passes,
  # check_grads! and debug_nans. The expected numbers are JAX's (printed by
  # tools/toolbox_reference.py, whose functions are the twins of these), closed forms, central
  # finite differences and real Nx's own gradients of Nx.LinAlg.solve.
  use ExUnit.Case, async: true

  import Nx.Defn
  import NxJax.Autodiff
  import NxJax.GradCheck, only: [check_grads!: 3]

  doctest NxJax.Autodiff
  doctest NxJax.Autodiff.Implicit

  setup do
    Nx.Defn.default_options(compiler: NxJax)
    :ok
  end

  defp f64(x), do: Nx.tensor(x, type: {:f, 64})
  defp number(t), do: Nx.to_number(t)

  # the ops of the wire graph NxJax's compiler makes of `fun` on `args`
  defp wire_ops(fun, args) do
    expr = apply(Nx.Defn.debug_expr(fun), args)

    {{:nx_jax_graph, _version, nodes, _outputs}, _parameters, _hooks} =
      NxJax.WireEncoder.encode(expr)

    for {_id, op, _inputs, _opts, _out} <- nodes, do: op
  end

  defp assert_all_close(got, want, tol) do
    want = if is_list(want), do: Nx.tensor(want, type: Nx.type(got)), else: want
    diff = Nx.subtract(got, want) |> Nx.abs() |> Nx.reduce_max() |> Nx.to_number()
    assert diff <= tol, "max difference #{diff}:\n#{inspect(got)}\n#{inspect(want)}"
  end

  ## custom_root

  # (under real Nx 0.7.2 a while body reads nothing from outside its state, and `f` reads the
  # values it closes over: a solver with a while loop carries those values in its state and
  # writes the equation there; the gradient still comes from `f`)

  # sqrt(a) as the root of x^2 - a, Newton's steps in a while loop with no bound
  defn newton_sqrt(a) do
    custom_root(
      fn x -> x * x - a end,
      1.0,
      fn _f, x0 ->
        {x, _a, _i} =
          while {x = x0, a, i = 0}, i < 100 and Nx.abs(x * x - a) > 1.0e-12 do
            {x - (x * x - a) / (2 * x), a, i + 1}
          end

        x
      end,
      fn g, y -> y / g.(1.0) end
    )
  end

  # the cube root of a by bisection on [0, a + 1]: the solver's own derivative is not the
  # root's (its steps only compare and select)
  defn bisect(a) do
    {lo, hi, _a, _i} =
      while {lo = 0.0 * a, hi = a + 1.0, a, i = 0}, i < 60 do
        mid = (lo + hi) / 2
        above = mid * mid * mid - a > 0
        {Nx.select(above, lo, mid), Nx.select(above, mid, hi), a, i + 1}
      end

    (lo + hi) / 2
  end

  defn bisect_cbrt(a) do
    custom_root(fn x -> x * x * x - a end, 0.0, fn _f, _x0 -> bisect(a) end, fn g, y ->
      y / g.(1.0)
    end)
  end

  # Newton's steps whose residual goes through Nx.reduce with a function of its own,
  # which real Nx cannot differentiate: a gradient through the solver's steps raises
  deftransformp reduce_newton_steps(f, x0) do
    Enum.reduce(1..8, x0, fn _, x ->
      fx = f.(x)
      # (the residual summed over its elements: for a scalar, the residual itself)
      total = Nx.reduce(fx, 0.0, fn a, b -> Nx.add(a, b) end)
      Nx.subtract(x, Nx.divide(total, Nx.multiply(2, x)))
    end)
  end

  defn reduce_sqrt(a) do
    custom_root(
      fn x -> x * x - a end,
      1.0,
      &reduce_newton_steps/2,
      fn g, y -> y / g.(1.0) end
    )
  end

  defn plain_reduce_sqrt(a), do: reduce_newton_steps(fn x -> x * x - a end, 1.0)

  # x with x^3 + a x - 1 = 0 by Newton's steps: df/da = x depends on the root
  deftransformp cubic_root(a) do
    custom_root(
      fn x -> Nx.subtract(Nx.add(Nx.pow(x, 3), Nx.multiply(a, x)), 1.0) end,
      1.0,
      fn f, x0 ->
        Enum.reduce(1..40, x0, fn _, x ->
          Nx.subtract(x, Nx.divide(f.(x), Nx.add(Nx.multiply(3, Nx.multiply(x, x)), a)))
        end)
      end,
      fn g, y -> Nx.divide(y, g.(1.0)) end
    )
  end

  # x with K x + 0.1 x^3 = M p, a non-symmetric Jacobian K + diag(0.3 x^2): tangent_solve
  # builds the matrix of the map it is given and solves with it
  defn coupled_root(p, k, m) do
    custom_root(
      fn x -> Nx.dot(k, x) + 0.1 * x * x * x - Nx.dot(m, p) end,
      Nx.broadcast(0.0, p),
      fn _f, x0 ->
        {x, _rhs, _k, _i} =
          while {x = x0, rhs = Nx.dot(m, p), k, i = 0}, i < 30 do
            jacobian = k + Nx.eye(3, type: x.type) * (0.3 * x * x)
            residual = Nx.dot(k, x) + 0.1 * x * x * x - rhs
            {x - Nx.LinAlg.solve(jacobian, residual), rhs, k, i + 1}
          end

        x
      end,
      fn g, y -> Nx.LinAlg.solve(matrix_of(g), y) end
    )
  end

  # the matrix of a linear map of R^3, column by column
  deftransformp matrix_of(linear) do
    0..2
    |> Enum.map(fn i -> linear.(Nx.equal(Nx.iota({3}), i)) end)
    |> Nx.stack(axis: 1)
  end

  defn scaled_root(a), do: custom_grad(newton_sqrt(a), [a], fn g -> [g * 3.0] end)

  @k [[1.0, 0.5, 0.0], [0.0, 1.0, 0.3], [0.2, 0.0, 1.0]]
  @m [[1.0, 0.5, 0.0], [0.0, 1.0, 0.25], [0.3, 0.0, 1.0]]

  describe "custom_root" do
    test "Newton's square root in an unbounded while: JAX's gradient and second derivative" do
      a = f64(2.0)
      assert_in_delta number(newton_sqrt(a)), :math.sqrt(2.0), 1.0e-15
      # jax.grad and jax.grad(jax.grad) of lax.custom_root (tools/toolbox_reference.py)
      assert_in_delta number(grad(a, &newton_sqrt/1)), 0.35355339059327373, 1.0e-15
      second = grad(a, fn a -> grad(a, &newton_sqrt/1) end)
      assert_in_delta number(second), -0.08838834764831842, 1.0e-15
    end

    test "a second derivative where df/da depends on the root: JAX's" do
      a = f64(2.0)
      assert_in_delta number(cubic_root(a)), 0.45339765151640377, 1.0e-15
      assert_in_delta number(grad(a, &cubic_root/1)), -0.1732702315504082, 1.0e-15
      second = grad(a, fn a -> grad(a, &cubic_root/1) end)
      assert_in_delta number(second), 0.10122162988602391, 1.0e-13
    end

    test "the solver's steps are not differentiated: bisection, and a solver real Nx cannot differentiate" do
      a = f64(2.0)
      want = 1 / (3 * :math.pow(2.0, 2 / 3))
      assert_in_delta number(bisect_cbrt(a)), :math.pow(2.0, 1 / 3), 1.0e-12
      assert_in_delta number(grad(a, &bisect_cbrt/1)), want, 1.0e-9
      # differentiated through its steps, the bisection gives another number
      assert abs(number(grad(a, &bisect/1)) - want) > 0.1

      assert_in_delta number(grad(a, &reduce_sqrt/1)), 0.5 / :math.sqrt(2.0), 1.0e-12

      assert_raise ArgumentError, ~r/cannot compute gradient for Nx.reduce/, fn ->
        grad(a, &plain_reduce_sqrt/1)
      end
    end

    test "a non-symmetric system in R^3: the root and jacrev equal JAX's, and finite differences" do
      p = f64([0.5, -1.0, 2.0])
      {k, m} = {f64(@k), f64(@m)}
      root = coupled_root(p, k, m)

      assert_all_close(
        root,
        [0.4473365893471732, -0.9125764858355132, 1.628584920574037],
        1.0e-14
      )

      jac = jacrev(&coupled_root(&1, k, m), p)

      assert_all_close(
        jac,
        [
          [0.9502986211126042, 0.09311383046547861, -0.030908769304406662],
          [-0.014695810248238675, 0.802592532550107, 0.0655286313523322],
          [0.06122464383769609, -0.010370832829546803, 0.5603325904039622]
        ],
        1.0e-13
      )

      assert :ok = check_grads!(&coupled_root(&1, k, m), [p], modes: [:rev])
    end

    test "custom_grad around the root replaces the implicit gradient" do
      assert number(grad(Nx.tensor(2.0), &scaled_root/1)) == 3.0
    end

    test "a custom_grad inside the equation: its rule gives df/da (x = 1 / a, dx/da = -1/4)" do
      inverse = fn a ->
        custom_root(
          fn x ->
            product =
              Nx.Defn.Kernel.custom_grad(Nx.multiply(x, a), [x, a], fn g ->
                [Nx.multiply(g, a), Nx.multiply(g, x)]
              end)

            Nx.subtract(product, 1.0)
          end,
          1.0,
          fn _f, _x0 -> Nx.divide(1.0, a) end,
          fn g, y -> Nx.divide(y, g.(1.0)) end
        )
      end

      assert_in_delta number(grad(f64(2.0), inverse)), -0.25, 1.0e-15
    end

    test "a wrong shape from the solver or a vectorized guess is refused" do
      assert_raise ArgumentError,
                   ~r/solve must have the shape of the unknown, \{\}, got: \{2\}/,
                   fn ->
                     jit(fn a ->
                       custom_root(
                         &Nx.subtract(&1, a),
                         1.0,
                         fn _f, _x0 -> Nx.tensor([1.0, 2.0]) end,
                         fn _g, y ->
                           y
                         end
                       )
                     end).(2.0)
                   end

      # (a solver's answer vectorized along an axis neither the guess nor the equation has)
      assert_raise ArgumentError, ~r/solve is vectorized along \[:k\], which the unknown/, fn ->
        jit(fn a ->
          custom_root(
            &Nx.subtract(&1, a),
            1.0,
            fn _f, _x -> Nx.vectorize(Nx.tensor([1.0, 2.0]), :k) end,
            fn _g, y ->
              y
            end
          )
        end).(2.0)
      end
    end
  end

  ## custom_linear_solve

  # conjugate gradients for a x = b (a carried in the loop's state, as real Nx's while needs)
  defn conjugate_gradient(a, b) do
    x = 0.0 * b
    r = b - Nx.dot(a, x)

    {x, _r, _p, _rs, _a, _i} =
      while {x, r, p = r, rs = Nx.sum(r * r), a, i = 0}, i < 50 and rs > 1.0e-28 do
        ap = Nx.dot(a, p)
        alpha = rs / Nx.sum(p * ap)
        x = x + alpha * p
        r = r - alpha * ap
        rs_new = Nx.sum(r * r)
        {x, r, r + rs_new / rs * p, rs_new, a, i + 1}
      end

    x
  end

  defn dense_solve(linear, b), do: Nx.LinAlg.solve(matrix_of(linear), b)

  defn cg_loss(a, b) do
    x =
      custom_linear_solve(&Nx.dot(a, &1), b, fn _matvec, b -> conjugate_gradient(a, b) end, nil,
        symmetric: true
      )

    Nx.sum(Nx.sin(x))
  end

  defn general_loss(a, b) do
    x = custom_linear_solve(&Nx.dot(a, &1), b, &dense_solve/2, &dense_solve/2)
    Nx.sum(Nx.sin(x))
  end

  defn reference_loss(a, b), do: Nx.sum(Nx.sin(Nx.LinAlg.solve(a, b)))

  defn forward_only(a, b), do: custom_linear_solve(&Nx.dot(a, &1), b, &dense_solve/2, nil)

  @a_sym [[4.0, 1.0, 0.5], [1.0, 3.0, 0.25], [0.5, 0.25, 2.0]]
  @a_gen [[3.0, 1.0, 0.0], [0.5, 2.0, 0.2], [0.1, 0.4, 4.0]]
  @b [1.0, -2.0, 0.5]

  describe "custom_linear_solve" do
    test "conjugate gradients in a while loop (symmetric): JAX's gradients and Nx.LinAlg.solve's" do
      {a, b} = {f64(@a_sym), f64(@b)}
      assert_all_close(cg_loss(a, b), reference_loss(a, b), 1.0e-13)
      {ga, gb} = grad({a, b}, fn {a, b} -> cg_loss(a, b) end)

      assert_all_close(
        ga,
        [
          [-0.05875130701147593, 0.11426116260162904, -0.0340352399238895],
          [-0.0610459738861804, 0.11872389404070946, -0.03536456418233899],
          [-0.18444202039773214, 0.35870792932524453, -0.10684917043730688]
        ],
        1.0e-12
      )

      assert_all_close(
        gb,
        [0.13776168540621941, 0.14314228359518164, 0.4324847374843374],
        1.0e-12
      )

      {ra, rb} = grad({a, b}, fn {a, b} -> reference_loss(a, b) end)
      assert_all_close(ga, ra, 1.0e-12)
      assert_all_close(gb, rb, 1.0e-12)
    end

    test "a non-symmetric matrix with a transpose solve: JAX's gradients and Hessian in b" do
      {a, b} = {f64(@a_gen), f64(@b)}
      {ga, gb} = grad({a, b}, fn {a, b} -> general_loss(a, b) end)

      assert_all_close(
        ga,
        [
          [-0.1745024549170354, 0.2862624541335637, -0.05391929786762331],
          [-0.00799219630016388, 0.013110793930605916, -0.0024694988567922106],
          [-0.1787560165777196, 0.2932402069701917, -0.05523360062794708]
        ],
        1.0e-13
      )

      assert_all_close(
        gb,
        [0.23724491061754252, 0.010865794969885725, 0.2430278427629671],
        1.0e-13
      )

      # second order: the transposed solve is itself differentiated as a solve
      assert_all_close(
        hessian(&general_loss(a, &1), b),
        [
          [-0.08100293021887128, -0.0019918374141740846, 9.959187070870436e-05],
          [-0.001991837414174086, 0.26044583343933514, -0.010177326707664441],
          [9.959187070870425e-05, -0.010177326707664443, -0.013715958486128355]
        ],
        1.0e-13
      )
    end

    test "a second derivative with respect to the matrix (A + s I): JAX's" do
      {a, b} = {f64(@a_gen), f64(@b)}
      # (a and b are arguments: real Nx's Nx.LinAlg.solve inside a trace takes no tensor from
      # outside it)
      second =
        jit(fn a, b, s ->
          shifted = &general_loss(Nx.add(a, Nx.multiply(&1, Nx.eye(3, type: :f64))), b)
          grad(s, fn s -> grad(s, shifted) end)
        end).(a, b, f64(0.0))

      assert_in_delta number(second), 0.618332181550383, 1.0e-12
    end

    test "without a transpose solve the value is computed and reverse mode is a clear error" do
      {a, b} = {f64(@a_gen), f64(@b)}
      assert_all_close(forward_only(a, b), Nx.LinAlg.solve(a, b), 1.0e-14)

      assert_raise ArgumentError, ~r/needs transpose_solve \(or symmetric: true\)/, fn ->
        grad(b, &Nx.sum(forward_only(a, &1)))
      end

      assert_raise ArgumentError, ~r/:symmetric to be a boolean/, fn ->
        jit(&custom_linear_solve(fn x -> x end, &1, fn _m, b -> b end, nil, symmetric: 1)).(b)
      end
    end
  end

  ## custom_jvp

  # (real Nx's defn takes only variables, tuples and maps as patterns: the rules, which receive
  # lists, are written in transforms)

  # JAX's custom_jvp example: sin(x) y with the rule cos(x) x_dot y + sin(x) y_dot
  deftransformp sin_times(x, y) do
    custom_jvp(Nx.multiply(Nx.sin(x), y), [x, y], fn [x_dot, y_dot] ->
      Nx.add(Nx.multiply(Nx.multiply(Nx.cos(x), x_dot), y), Nx.multiply(Nx.sin(x), y_dot))
    end)
  end

  # a rule that is not the function's derivative (3 t for sin): it is what grad follows
  deftransformp(wrong_sin(x), do: custom_jvp(Nx.sin(x), [x], fn [t] -> Nx.multiply(3.0, t) end))

  deftransformp log1pexp(x) do
    custom_jvp(&Nx.log1p(Nx.exp(&1)), [x], fn [x], [x_dot] ->
      Nx.multiply(x_dot, Nx.subtract(1, Nx.divide(1, Nx.add(1, Nx.exp(x)))))
    end)
  end

  # a tuple value, one tangent per element
  deftransformp sin_cos(x) do
    custom_jvp({Nx.sin(x), Nx.cos(x)}, [x], fn [t] ->
      {Nx.multiply(Nx.cos(x), t), Nx.negate(Nx.multiply(Nx.sin(x), t))}
    end)
  end

  describe "custom_jvp" do
    test "JAX's example: gradients, grad of grad and jvp follow the rule" do
      {x, y} = {f64(2.0), f64(3.0)}
      {gx, gy} = grad({x, y}, fn {x, y} -> sin_times(x, y) end)
      assert_in_delta number(gx), -1.2484405096414273, 1.0e-15
      assert_in_delta number(gy), 0.9092974268256817, 1.0e-15
      second = grad(x, fn x -> grad(x, &sin_times(&1, y)) end)
      assert_in_delta number(second), -2.727892280477045, 1.0e-14

      {value, tangent} = jvp(fn {x, y} -> sin_times(x, y) end, {x, y}, {f64(1.0), f64(0.0)})
      assert_in_delta number(value), :math.sin(2.0) * 3.0, 1.0e-15
      assert_in_delta number(tangent), -1.2484405096414273, 1.0e-15
    end

    test "the rule, not autodiff: a wrong rule is followed, and check_grads! sees it" do
      assert number(grad(Nx.tensor(0.5), &wrong_sin/1)) == 3.0

      assert_raise NxJax.GradCheck.Error, ~r/rev-mode derivative/, fn ->
        check_grads!(&wrong_sin/1, [f64(0.5)], modes: [:rev])
      end

      assert_raise NxJax.GradCheck.Error, ~r/fwd-mode derivative/, fn ->
        check_grads!(&wrong_sin/1, [f64(0.5)], modes: [:fwd])
      end
    end

    test "log1pexp with the stable rule has grad 1.0 at 100.0 where autodiff gives NaN" do
      assert grad(Nx.tensor(100.0), &log1pexp/1) == Nx.tensor(1.0)
      assert Nx.is_nan(grad(Nx.tensor(100.0), &Nx.log1p(Nx.exp(&1)))) == Nx.tensor(1, type: :u8)
    end

    test "a tuple value: each element's rule, and order-2 checks against finite differences" do
      x = f64([0.3, -1.2])

      loss = fn x ->
        {s, c} = sin_cos(x)
        Nx.sum(Nx.add(Nx.multiply(s, 2.0), Nx.multiply(c, c)))
      end

      want =
        Nx.subtract(
          Nx.multiply(2.0, Nx.cos(x)),
          Nx.multiply(2.0, Nx.multiply(Nx.cos(x), Nx.sin(x)))
        )

      assert_all_close(grad(x, loss), want, 1.0e-15)
      assert :ok = check_grads!(&sin_cos/1, [x], order: 2)
    end

    test "bad rules are refused when traced" do
      assert_raise ArgumentError, ~r/must return a tuple of 2 tangents/, fn ->
        grad(f64(1.0), fn x ->
          {s, _c} = custom_jvp({Nx.sin(x), Nx.cos(x)}, [x], fn [t] -> t end)
          s
        end)
      end

      assert_raise ArgumentError, ~r/non-empty list or tuple of tensors/, fn ->
        jit(&custom_jvp(Nx.sin(&1), [], fn [t] -> t end)).(1.0)
      end
    end
  end

  ## forward mode and Jacobians

  # square until the value reaches 100: the number of steps depends on x
  defn square_until(x) do
    {y, _x} =
      while {y = x, x}, y * y < 100 do
        {y * y, x}
      end

    y
  end

  defn squares_tangent(x, t), do: elem(jvp(&square_until/1, x, t), 1)

  defn r3_to_r2(x), do: Nx.stack([x[0] * Nx.sin(x[1]), x[0] ** 2 + x[1] * Nx.exp(x[2])])

  describe "jvp, jacfwd, jacrev, hessian" do
    test "JAX's values for an R^3 -> R^2 function, inside defn and from plain Elixir" do
      x = f64([0.5, -1.25, 0.75])
      t = f64([1.0, 0.5, -2.0])
      {value, tangent} = jvp(&r3_to_r2/1, x, t)
      assert_all_close(value, r3_to_r2(x), 0.0)
      assert_all_close(tangent, [-0.8701540287567691, 7.351000049838024], 1.0e-14)

      want = [
        [-0.9489846193555862, 0.15766118119763434, 0.0],
        [1.0, 2.117000016612675, -2.6462500207658435]
      ]

      assert_all_close(jacfwd(&r3_to_r2/1, x), want, 1.0e-14)
      assert_all_close(jit(&jacrev(fn x -> r3_to_r2(x) end, &1)).(x), want, 1.0e-14)

      assert_all_close(
        hessian(&Nx.sum(r3_to_r2(&1)), x),
        [
          [2.0, 0.3153223623952687, 0.0],
          [0.3153223623952687, 0.4744923096777931, 2.117000016612675],
          [0.0, 2.117000016612675, -2.6462500207658435]
        ],
        1.0e-14
      )

      assert :ok = check_grads!(&r3_to_r2/1, [x], order: 2)
    end

    test "tuples in and out, vjp and linearize" do
      f = fn {a, b} -> {Nx.multiply(a, b), Nx.sum(Nx.multiply(a, a))} end
      a = Nx.tensor([1.0, 2.0])
      b = Nx.tensor([3.0, 4.0])
      {{d1a, d1b}, {d2a, d2b}} = jacfwd(f, {a, b})
      assert d1a == Nx.tensor([[3.0, 0.0], [0.0, 4.0]])
      assert d1b == Nx.tensor([[1.0, 0.0], [0.0, 2.0]])
      assert d2a == Nx.tensor([2.0, 4.0]) and d2b == Nx.tensor([0.0, 0.0])
      assert jacrev(f, {a, b}) == {{d1a, d1b}, {d2a, d2b}}

      {_value, pullback} = vjp(&Nx.sin/1, Nx.tensor([0.0, 1.0]))
      assert_all_close(pullback.(Nx.tensor([2.0, 1.0])), Nx.tensor([2.0, :math.cos(1.0)]), 1.0e-7)
      {_value, push} = linearize(&Nx.exp/1, Nx.tensor(1.0))
      assert_in_delta number(push.(Nx.tensor(2.0))), 2 * :math.exp(1.0), 1.0e-5
    end

    test "NxJax lowers jvp natively (the wire's jvp node); Nx's evaluator runs the two reverse passes" do
      w = Nx.divide(Nx.iota({3, 2}, type: :f64), 5)
      x = f64([0.3, -1.2])
      t = f64([1.0, 0.5])
      f = fn w, x -> Nx.tanh(Nx.dot(w, Nx.multiply(x, x))) end
      tangent = fn w, x, t -> elem(jvp(&f.(w, &1), x, t), 1) end

      assert wire_ops(tangent, [w, x, t]) ==
               ~w(parameter parameter reshape multiply dot tanh parameter jvp)a

      NxJax.RealNxCase.assert_same(tangent, [w, x, t], atol: 1.0e-14, rtol: 1.0e-13)

      # a while loop with no bound (square until >= 100: y = x^4 from 3, dy = 4 x^3 = 108)
      assert :jvp in wire_ops(&squares_tangent/2, [f64(3.0), f64(1.0)])
      assert number(squares_tangent(f64(3.0), f64(1.0))) == 108.0

      # stop_grad and custom_grad have rules only real Nx's reverse passes know: no native node
      stopped = fn x, t ->
        elem(jvp(&Nx.multiply(Nx.Defn.Kernel.stop_grad(&1), Nx.sin(&1)), x, t), 1)
      end

      refute :jvp in wire_ops(stopped, [x, t])
      NxJax.RealNxCase.assert_same(stopped, [x, t], atol: 1.0e-14, rtol: 1.0e-13)
      assert_all_close(jit(stopped).(x, t), Nx.multiply(Nx.multiply(x, Nx.cos(x)), t), 1.0e-15)
    end

    test "bad input is refused: integers, mismatched tangents, cotangents of another shape" do
      assert_raise ArgumentError, ~r/floating-point tensors only/, fn ->
        jvp(&Nx.sin/1, Nx.tensor(1), Nx.tensor(1))
      end

      assert_raise ArgumentError, ~r/tangent to have its primal's shape/, fn ->
        jvp(&Nx.sin/1, Nx.tensor([1.0, 2.0]), Nx.tensor(1.0))
      end

      assert_raise ArgumentError, ~r/one tangent per primal/, fn ->
        jvp(fn {a, b} -> Nx.add(a, b) end, {1.0, 2.0}, 1.0)
      end

      {_value, pullback} = vjp(&Nx.sin/1, Nx.tensor([0.0, 1.0]))
      assert_raise ArgumentError, ~r/its output's shape/, fn -> pullback.(Nx.tensor(1.0)) end
    end
  end

  ## vectorized values, tuple inputs of custom_jvp

  # (tuples are patterns real Nx's defn takes: the rule receives the tangents in the inputs'
  # container)
  defn sin_times_tuple(x, y) do
    custom_jvp(Nx.sin(x) * y, {x, y}, fn {x_dot, y_dot} ->
      Nx.cos(x) * x_dot * y + Nx.sin(x) * y_dot
    end)
  end

  defn log1pexp_tuple(x) do
    custom_jvp(&Nx.log1p(Nx.exp(&1)), {x}, fn {x}, {x_dot} ->
      x_dot * (1 - 1 / (1 + Nx.exp(x)))
    end)
  end

  defn scaled_tuple(x, w), do: custom_jvp(x * w, {x, w}, fn {xd, wd} -> xd * w + x * wd end)

  defp r3_r2(v), do: Nx.stack([Nx.sum(Nx.pow(v, 3)), Nx.product(v)])

  describe "vectorized values and tuple inputs" do
    test "custom_jvp with tuple inputs inside defn: JAX's gradients, the list form's values" do
      {dx, dy} = jit(&grad({&1, &2}, fn {x, y} -> sin_times_tuple(x, y) end)).(2.0, 3.0)
      assert_in_delta number(dx), 3.0 * :math.cos(2.0), 1.0e-6
      assert_in_delta number(dy), :math.sin(2.0), 1.0e-6
      assert {dx, dy} == jit(&grad({&1, &2}, fn {x, y} -> sin_times(x, y) end)).(2.0, 3.0)
      {_value, tangent} = jvp(&sin_times_tuple/2, {2.0, 3.0}, {1.0, 0.0})
      assert_in_delta number(tangent), 3.0 * :math.cos(2.0), 1.0e-6
      assert number(jit(&grad(&1, fn x -> log1pexp_tuple(x) end)).(100.0)) == 1.0
    end

    test "jvp, jacfwd, jacrev and hessian of vectorized values: each entry's own" do
      at = Nx.tensor([[1.0, 2.0], [3.0, 4.0]])
      x = Nx.vectorize(at, :rows)

      # closed forms: d/dv [sum v^3, v0 v1] = [[3 v0^2, 3 v1^2], [v1, v0]]
      jacobian = [[[3.0, 12.0], [2.0, 1.0]], [[27.0, 48.0], [4.0, 3.0]]]

      for jac <- [&jacrev/2, &jacfwd/2] do
        result = jac.(&r3_r2/1, x)
        assert result.vectorized_axes == [rows: 2]
        assert Nx.to_list(Nx.devectorize(result)) == jacobian
      end

      hessian = hessian(fn v -> Nx.sum(Nx.pow(v, 3)) end, x) |> Nx.devectorize()
      assert Nx.to_flat_list(hessian) == [6.0, 0.0, 0.0, 12.0, 18.0, 0.0, 0.0, 24.0]

      # a vectorized tangent: one direction per entry; a plain one: the same for each
      t = Nx.vectorize(Nx.tensor([[1.0, 0.0], [0.0, 1.0]]), :rows)
      {value, tangent} = jvp(&r3_r2/1, x, t)
      assert Nx.to_list(Nx.devectorize(value)) == [[9.0, 2.0], [91.0, 12.0]]
      assert Nx.to_list(Nx.devectorize(tangent)) == [[3.0, 2.0], [48.0, 3.0]]
      {_value, tangent} = jvp(&r3_r2/1, x, Nx.tensor([1.0, 0.0]))
      assert Nx.to_list(Nx.devectorize(tangent)) == [[3.0, 2.0], [27.0, 4.0]]

      # (an output vectorized along an axis x lacks: a vectorized value read from outside)
      w = Nx.vectorize(Nx.tensor([1.0, 2.0, 3.0]), :k)

      assert_raise ArgumentError,
                   ~r/vectorized along \[:rows\].*also vectorized along \[:k\]/,
                   fn ->
                     jacfwd(fn v -> Nx.multiply(v, w) end, x)
                   end
    end

    test "custom_root and custom_linear_solve of vectorized values: each entry's gradient" do
      a = Nx.vectorize(Nx.tensor([2.0, 3.0, 9.0]), :rows)
      roots = jit(&newton_sqrt/1).(a)
      assert roots.vectorized_axes == [rows: 3]
      assert_all_close(Nx.devectorize(roots), Nx.sqrt(Nx.tensor([2.0, 3.0, 9.0])), 1.0e-6)

      # d sqrt(a) = 1 / (2 sqrt a); d2 = -a^(-3/2) / 4
      for {got, want} <- [
            {grad(a, &newton_sqrt/1), &(0.5 / :math.sqrt(&1))},
            {grad(a, &grad(&1, fn a -> newton_sqrt(a) end)), &(-0.25 * :math.pow(&1, -1.5))}
          ] do
        for {g, a} <- Enum.zip(Nx.to_flat_list(Nx.devectorize(got)), [2.0, 3.0, 9.0]) do
          assert_in_delta g, want.(a), 1.0e-6
        end
      end

      # x = A^-1 b per entry: d sum(x) / d b = A^-T 1 for each entry; d / d A = -(A^-T 1)
      # (sum of the entries' x)^T, A being shared by the entries
      matrix = Nx.tensor([[2.0, 1.0], [1.0, 3.0]])
      bs = Nx.tensor([[1.0, 2.0], [0.0, 1.0]])
      b = Nx.vectorize(bs, :rows)

      solve = fn a, b ->
        custom_linear_solve(&Nx.dot(a, &1), b, fn _m, b -> Nx.LinAlg.solve(a, b) end, nil,
          symmetric: true
        )
      end

      w = Nx.LinAlg.solve(Nx.transpose(matrix), Nx.tensor([1.0, 1.0]))
      xs = Nx.LinAlg.solve(matrix, Nx.transpose(bs)) |> Nx.transpose()
      grad_b = jit(fn a, b -> grad(b, &Nx.sum(solve.(a, &1))) end).(matrix, b)
      assert_all_close(Nx.devectorize(grad_b), Nx.stack([w, w]), 1.0e-6)
      grad_a = jit(fn a, b -> grad(a, &Nx.sum(solve.(&1, b))) end).(matrix, b)
      want = Nx.negate(Nx.outer(w, Nx.sum(xs, axes: [0])))
      assert_all_close(grad_a, want, 1.0e-6)
    end

    test "custom_jvp of vectorized values: each entry's rule, a shared input's summed" do
      x = Nx.vectorize(Nx.tensor([0.0, 100.0]), :rows)
      g = jit(&grad(&1, fn x -> log1pexp_tuple(x) end)).(x)
      assert g.vectorized_axes == [rows: 2]
      assert Nx.to_flat_list(Nx.devectorize(g)) == [0.5, 1.0]

      # the rule is x's and w's own derivative: the same gradients as autodiff of x * w
      x = Nx.vectorize(Nx.tensor([1.0, 2.0, 3.0]), :rows)
      custom = jit(&grad({&1, &2}, fn {x, w} -> scaled_tuple(x, w) end)).(x, 2.0)
      plain = jit(&grad({&1, &2}, fn {x, w} -> Nx.multiply(x, w) end)).(x, 2.0)
      lists = &Enum.map(Tuple.to_list(&1), fn t -> Nx.to_flat_list(Nx.devectorize(t)) end)
      assert lists.(custom) == lists.(plain)
      assert lists.(custom) == [[2.0, 2.0, 2.0], [6.0]]
    end
  end

  ## checkpoint, check_grads!, debug_nans

  describe "checkpoint, check_grads! and debug_nans" do
    test "checkpoint gives the function's values and gradients; bad options are refused" do
      loss = fn x -> Nx.sum(checkpoint(&Nx.tanh(Nx.sin(&1)), [x], policy: :dots_saveable)) end
      x = Nx.tensor([0.0, 1.0, -0.5])
      assert grad(x, loss) == grad(x, &Nx.sum(Nx.tanh(Nx.sin(&1))))

      assert_raise ArgumentError, ~r/:policy to be nil, one of/, fn ->
        jit(&checkpoint(fn x -> x end, [&1], policy: :bogus)).(x)
      end
    end

    test "check_grads! of both forms: a good gradient passes, a wrong custom_grad fails" do
      f = fn x, y -> Nx.sum(Nx.multiply(Nx.sin(x), y)) end
      assert :ok = check_grads!(f, [f64([0.5, 1.0, 2.0]), f64(3.0)], order: 2)

      wrong = fn x ->
        Nx.Defn.Kernel.custom_grad(Nx.sin(x), [x], fn g -> [Nx.multiply(g, 2.0)] end)
      end

      assert_raise NxJax.GradCheck.Error, ~r/rev-mode derivative of order 1/, fn ->
        check_grads!(wrong, [f64(0.5)], modes: [:rev])
      end

      sum_sin = &Nx.sum(Nx.sin(&1))
      assert :ok = NxJax.GradCheck.check_grads!(sum_sin, &grad(&1, sum_sin), f64([0.1, 2.0]))

      assert_raise NxJax.GradCheck.Error, ~r/gradient check failed at element 0/, fn ->
        NxJax.GradCheck.check_grads!(sum_sin, &Nx.sin/1, f64([0.1, 2.0]))
      end
    end

    test "debug_nans names the op, its graph node and operands of the first non-finite value" do
      plain = fn x -> grad(x, &Nx.log1p(Nx.exp(&1))) end
      stable = fn x -> grad(x, &log1pexp/1) end
      assert_in_delta number(jit(stable, debug_nans: true).(Nx.tensor(20.0))), 1.0, 1.0e-7

      error =
        assert_raise NxJax.WorkerError, fn ->
          jit(plain, debug_nans: true).(Nx.tensor(100.0))
        end

      assert error.class == "NonFinite"
      assert error.message =~ "(graph node"
      assert error.message =~ "in the value of exp (graph node"

      # in the backward pass: d sqrt(x) / dx at 0 (real Nx's grad is in the graph we run)
      error =
        assert_raise NxJax.WorkerError, fn ->
          jit(&grad(&1, fn x -> Nx.sum(Nx.sqrt(x)) end), debug_nans: true).(Nx.tensor([0.0, 1.0]))
        end

      # (the graph is differentiated before the worker sees it: its backward ops are ops of
      # the one pass it runs, which the report calls the forward pass)
      assert error.message =~ "in the value of divide (graph node"

      # the operands' types and shapes, read from the graph sent, and why there is no line
      assert error.message =~ ~r/divide \(graph node \d+, operands f32\[2\], f32\[2\]\)/
      assert error.message =~ "real Nx's expressions record no source line"
    end
  end
end
