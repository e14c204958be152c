defmodule NxJax.AutodiffTest do
  # NxJax.Autodiff (JAX's differentiation beyond Nx) end to end on the worker: jvp, jacfwd,
  # jacrev, hessian and custom_jvp inside defn, their composition with grad, while, cond,
  # stop_grad and custom_grad, and the errors for bad input.
  use ExUnit.Case, async: true

  import Nx.Defn
  import NxJax.Autodiff
  import NxJax.TestAssertions, only: [assert_close: 3]

  doctest NxJax.Autodiff

  defp f64(x), do: Nx.tensor(x, type: {:f, 64})
  defp number(t), do: Nx.to_number(t)

  defp assert_all_close(got, want, opts \\ []) do
    diff = got |> Nx.subtract(want) |> Nx.abs() |> Nx.reduce_max() |> Nx.to_number()
    assert diff < Keyword.get(opts, :atol, 1.0e-12), "#{inspect(got)} against #{inspect(want)}"
  end

  ## the issue's numbers

  defn cube_sum(x), do: Nx.sum(x ** 3)
  defn hessian_cube_sum(x), do: hessian(&cube_sum/1, x)

  # JAX's custom_jvp example: f(x, y) = sin(x) * y with the rule cos(x) x_dot y + sin(x) y_dot
  defn sin_times(x, y) do
    custom_jvp(Nx.sin(x) * y, [x, y], fn [x_dot, y_dot] ->
      Nx.cos(x) * x_dot * y + Nx.sin(x) * y_dot
    end)
  end

  defn grad_sin_times(x, y), do: grad({x, y}, fn {x, y} -> sin_times(x, y) end)
  defn grad_grad_sin_times(x, y), do: grad(x, fn x -> grad(x, &sin_times(&1, y)) end)
  defn jvp_sin_times(x, y, tx, ty), do: jvp(fn {x, y} -> sin_times(x, y) end, {x, y}, {tx, ty})

  # the stable rule: plain autodiff of log1p(exp(x)) overflows at 100 (inf / inf)
  defn log1pexp(x) do
    custom_jvp(&Nx.log1p(Nx.exp(&1)), [x], fn [x], [x_dot] ->
      x_dot * (1 - 1 / (1 + Nx.exp(x)))
    end)
  end

  defn grad_log1pexp(x), do: grad(x, &log1pexp/1)

  # the same two with their inputs in a tuple: the rules receive tuples (the form real Nx's
  # defn compiles too)
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

  defn grad_plain_log1pexp(x), do: grad(x, &Nx.log1p(Nx.exp(&1)))

  # a hook inside the differentiated function (or the value of a custom_jvp)
  defn hooked_jvp(x, t), do: jvp(fn x -> hook(Nx.sin(x), :inner) end, x, t)
  defn hooked_jacfwd(x), do: jacfwd(fn x -> hook(Nx.sin(x), :inner) end, x)
  defn hooked_jacrev(x), do: jacrev(fn x -> hook(Nx.sin(x), :inner) end, x)

  defn hooked_custom_jvp(x) do
    grad(x, fn x ->
      Nx.sum(custom_jvp(hook(Nx.sin(x), :inner), [x], fn [t] -> Nx.cos(x) * t end))
    end)
  end

  test "a hook inside the function fires once, with the function's value, in every mode" do
    me = self()
    x = Nx.tensor([1.0, 2.0])
    hooks = %{inner: &send(me, {:inner, &1})}
    cosines = Nx.cos(x)

    runs = [
      {&hooked_jvp(&1, Nx.tensor([1.0, 1.0])), &(elem(&1, 1) == cosines)},
      {&hooked_jacfwd/1, &(&1 == Nx.make_diagonal(cosines))},
      {&hooked_jacrev/1, &(&1 == Nx.make_diagonal(cosines))},
      {&hooked_custom_jvp/1, &(&1 == cosines)}
    ]

    for {fun, check} <- runs do
      assert check.(Nx.Defn.jit(fun, hooks: hooks).(x))
      assert_received {:inner, value}
      assert value == Nx.sin(x)
      refute_received {:inner, _}
    end
  end

  describe "the issue's numbers" do
    test "hessian of sum(x^3) at [1.0, 2.0] is [[6, 0], [0, 12]]" do
      assert hessian_cube_sum(Nx.tensor([1.0, 2.0])) == Nx.tensor([[6.0, 0.0], [0.0, 12.0]])
      assert hessian(&cube_sum/1, f64([1.0, 2.0])) == f64([[6.0, 0.0], [0.0, 12.0]])
    end

    test "custom_jvp sin(x) * y at (2.0, 3.0): value 2.7278922, grads -1.2484405 and 0.9092974" do
      assert_in_delta number(sin_times(2.0, 3.0)), 2.7278922, 1.0e-7
      {dx, dy} = grad_sin_times(2.0, 3.0)
      assert_in_delta number(dx), -1.2484405, 1.0e-7
      assert_in_delta number(dy), 0.9092974, 1.0e-7
      # in f64, the exact values of the rule
      {dx, dy} = grad_sin_times(f64(2.0), f64(3.0))
      assert_in_delta number(dx), :math.cos(2.0) * 3.0, 1.0e-15
      assert_in_delta number(dy), :math.sin(2.0), 1.0e-15
    end

    test "custom_jvp's rule drives forward mode too, and grad of grad differentiates the rule" do
      {value, tangent} = jvp_sin_times(f64(2.0), f64(3.0), f64(1.0), f64(0.5))
      assert_in_delta number(value), :math.sin(2.0) * 3.0, 1.0e-15
      assert_in_delta number(tangent), :math.cos(2.0) * 3.0 + :math.sin(2.0) * 0.5, 1.0e-15

      assert_in_delta number(grad_grad_sin_times(f64(2.0), f64(3.0))),
                      -:math.sin(2.0) * 3.0,
                      1.0e-14
    end

    test "custom_jvp with its inputs in a tuple: the list form's values, JAX's numbers" do
      x = f64(2.0)
      y = f64(3.0)
      {dx, dy} = grad({x, y}, fn {x, y} -> sin_times_tuple(x, y) end)
      assert {dx, dy} == grad_sin_times(x, y)
      assert_in_delta number(dx), :math.cos(2.0) * 3.0, 1.0e-15
      assert_in_delta number(dy), :math.sin(2.0), 1.0e-15
      {_value, tangent} = jvp(&sin_times_tuple/2, {x, y}, {f64(1.0), f64(0.5)})
      assert_in_delta number(tangent), :math.cos(2.0) * 3.0 + :math.sin(2.0) * 0.5, 1.0e-15
      assert grad(Nx.tensor(100.0), &log1pexp_tuple/1) == Nx.tensor(1.0)

      # outside a trace, the value (the function called on the tuple's elements)
      assert number(custom_jvp(&Nx.add/2, {1.0, 2.0}, fn {a, b} -> Nx.add(a, b) end)) == 3.0

      assert_raise ArgumentError, ~r/non-empty list or tuple of tensors/, fn ->
        custom_jvp(1.0, {}, fn {} -> 0.0 end)
      end
    end

    test "log1pexp with the stable rule has grad 1.0 at 100.0 where autodiff gives NaN" do
      assert grad_log1pexp(100.0) == Nx.tensor(1.0)
      assert number(grad_plain_log1pexp(100.0)) == :nan
      assert_in_delta number(log1pexp(3.0)), 3.0485873, 1.0e-6
      # the rule is the true derivative, so elsewhere both agree
      assert_in_delta number(grad_log1pexp(0.5)), number(grad_plain_log1pexp(0.5)), 1.0e-7
    end
  end

  ## Jacobians

  # R^3 -> R^2
  defn r3_to_r2(x) do
    Nx.stack([x[0] * Nx.sin(x[1]), x[1] * Nx.exp(x[2]) + x[0] ** 2])
  end

  defn jacfwd_r3(x), do: jacfwd(&r3_to_r2/1, x)
  defn jacrev_r3(x), do: jacrev(&r3_to_r2/1, x)

  # the Jacobian by central differences, row by row (one scalar function per output)
  defp finite_jacobian(fun, x) do
    for i <- 0..1 do
      row = fn x -> fun.(x)[i] end

      for j <- 0..2 do
        step = 1.0e-6
        e = Nx.put_slice(Nx.broadcast(f64(0.0), {3}), [j], f64([step]))
        (number(row.(Nx.add(x, e))) - number(row.(Nx.subtract(x, e)))) / (2 * step)
      end
    end
  end

  describe "jacfwd and jacrev" do
    test "agree for an R^3 -> R^2 function and match central finite differences" do
      x = f64([0.5, -1.25, 0.75])
      fwd = jacfwd_r3(x)
      rev = jacrev_r3(x)
      assert fwd.shape == {2, 3} and rev.shape == {2, 3} and fwd.type == {:f, 64}
      assert_close(fwd, Nx.to_list(rev), 1.0e-15)
      assert_close(fwd, finite_jacobian(&r3_to_r2/1, x), 1.0e-8)
      # the exact values
      [x0, x1, x2] = Nx.to_list(x)

      assert_close(
        fwd,
        [
          [:math.sin(x1), x0 * :math.cos(x1), 0.0],
          [2 * x0, :math.exp(x2), x1 * :math.exp(x2)]
        ],
        1.0e-15
      )
    end

    test "from plain Elixir, with a tuple x and a tuple output" do
      f = fn {a, b} -> {Nx.multiply(a, b), Nx.sum(Nx.multiply(a, a))} end
      a = Nx.tensor([1.0, 2.0])
      b = Nx.tensor([3.0, 4.0])
      {{d1a, d1b}, {d2a, d2b}} = jacfwd(f, {a, b})
      assert d1a == Nx.tensor([[3.0, 0.0], [0.0, 4.0]])
      assert d1b == Nx.tensor([[1.0, 0.0], [0.0, 2.0]])
      assert d2a == Nx.tensor([2.0, 4.0]) and d2b == Nx.tensor([0.0, 0.0])
      assert jacrev(f, {a, b}) == {{d1a, d1b}, {d2a, d2b}}
    end

    test "types are JAX's: jacfwd in the output's type, jacrev and hessian in x's" do
      f = fn x -> Nx.multiply(Nx.as_type(x, :f64), 2.0) end
      x = Nx.tensor([1.0, 2.0])
      assert jacfwd(f, x) == f64([[2.0, 0.0], [0.0, 2.0]])
      assert jacrev(f, x) == Nx.tensor([[2.0, 0.0], [0.0, 2.0]])
      assert hessian(&Nx.sum(Nx.pow(Nx.as_type(&1, :f64), 3)), x).type == {:f, 32}
    end
  end

  ## hessian by composition

  defn grad_of_loss(x), do: grad(x, &loss/1)
  defn loss(x), do: Nx.sum(Nx.sin(x) * x ** 2) + Nx.product(x)
  defn hessian_loss(x), do: hessian(&loss/1, x)
  defn jacfwd_of_grad(x), do: jacfwd(&grad_of_loss/1, x)
  defn jacrev_of_grad(x), do: jacrev(&grad_of_loss/1, x)

  describe "vjp and linearize" do
    defn vjp_in_defn(x, u) do
      {value, pullback} = vjp(&r3_to_r2/1, x)
      {value, pullback.(u)}
    end

    test "vjp's pullback is J^T u and linearize's push is J v (jacrev / jacfwd), in defn too" do
      x = Nx.tensor([0.3, -0.7, 0.5], type: :f64)
      u = Nx.tensor([2.0, -1.0], type: :f64)
      v = Nx.tensor([1.0, 0.5, -2.0], type: :f64)
      jacobian = jacrev_r3(x)
      {value, pullback} = NxJax.Autodiff.vjp(&r3_to_r2/1, x)
      assert value == r3_to_r2(x)
      assert_all_close(pullback.(u), Nx.dot(Nx.transpose(jacobian), u))
      assert vjp_in_defn(x, u) == {value, pullback.(u)}
      {value, push} = NxJax.Autodiff.linearize(&r3_to_r2/1, x)
      assert value == r3_to_r2(x)
      assert_all_close(push.(v), Nx.dot(jacfwd_r3(x), v))
    end

    test "a cotangent of another shape or container is refused" do
      {_value, pullback} = NxJax.Autodiff.vjp(&r3_to_r2/1, Nx.tensor([0.3, -0.7, 0.5]))

      assert_raise ArgumentError, ~r/output of shape \{2\} and a cotangent of shape \{3\}/, fn ->
        pullback.(Nx.tensor([1.0, 2.0, 3.0]))
      end

      assert_raise ArgumentError, ~r/a cotangent in the container of the output/, fn ->
        pullback.({Nx.tensor([1.0, 2.0]), Nx.tensor(1.0)})
      end
    end
  end

  describe "hessian" do
    test "equals jacfwd and jacrev of grad, and the finite differences of grad" do
      x = f64([0.3, -0.8, 1.1])
      h = hessian_loss(x)
      assert h.shape == {3, 3}
      assert_close(h, Nx.to_list(jacfwd_of_grad(x)), 1.0e-14)
      assert_close(h, Nx.to_list(jacrev_of_grad(x)), 1.0e-14)
      # symmetric
      assert_close(h, Nx.to_list(Nx.transpose(h)), 1.0e-14)

      # row j: the central difference of grad along e_j
      step = 1.0e-6

      rows =
        for j <- 0..2 do
          e = Nx.put_slice(Nx.broadcast(f64(0.0), {3}), [j], f64([step]))
          plus = grad_of_loss(Nx.add(x, e))
          minus = grad_of_loss(Nx.subtract(x, e))
          plus |> Nx.subtract(minus) |> Nx.divide(2 * step) |> Nx.to_list()
        end

      assert_close(h, rows, 1.0e-7)
    end
  end

  ## forward mode through control flow

  # y = x^(2^n) where n is how many squarings keep y below 100: unknown before the loop runs
  defn square_until(x) do
    {y, _x} =
      while {y = x, x}, y * y < 100 do
        {y * y, x}
      end

    y
  end

  defn jvp_square_until(x, t), do: jvp(&square_until/1, x, t)
  defn jacfwd_square_until(x), do: jacfwd(&square_until/1, x)

  defn jvp_cond(x, t) do
    jvp(
      fn x ->
        if x > 0 do
          Nx.exp(x) + stop_grad(x * x)
        else
          x * x
        end
      end,
      x,
      t
    )
  end

  describe "forward mode through control flow" do
    test "jvp through a while loop without a bound" do
      # 1.5 -> 2.25 -> 5.0625 -> 25.6289...: three squarings, y = x^8
      {value, tangent} = jvp_square_until(f64(1.5), f64(2.0))
      assert_in_delta number(value), :math.pow(1.5, 8), 1.0e-12
      assert_in_delta number(tangent), 8 * :math.pow(1.5, 7) * 2.0, 1.0e-11
      # another x takes another number of steps: 3.0 -> 9.0 -> 81.0, x^4
      {value, tangent} = jvp_square_until(f64(3.0), f64(1.0))
      assert number(value) == 81.0
      assert_in_delta number(tangent), 4 * 27.0, 1.0e-12
      assert_in_delta number(jacfwd_square_until(f64(3.0))), 108.0, 1.0e-12
    end

    test "jvp through cond takes the branch's derivative; stop_grad's is zero" do
      {value, tangent} = jvp_cond(f64(0.5), f64(1.0))
      assert_in_delta number(value), :math.exp(0.5) + 0.25, 1.0e-15
      assert_in_delta number(tangent), :math.exp(0.5), 1.0e-15
      {_value, tangent} = jvp_cond(f64(-2.0), f64(3.0))
      assert number(tangent) == -12.0
    end
  end

  ## composition with grad

  defn grad_of_jvp(x), do: grad(x, fn x -> elem(jvp(&Nx.sin/1, x, 1.0), 1) end)
  defn jvp_of_grad(x, t), do: jvp(fn x -> grad(x, &Nx.sin/1) end, x, t)

  defn grad_of_jvp_while(x), do: grad(x, fn x -> elem(jvp(&square_until/1, x, 1.0), 1) end)

  # custom_grad on the reverse side of a jacrev
  defn jacrev_custom_grad(x) do
    jacrev(fn x -> custom_grad(Nx.sin(x), [x], fn g -> [g * 5.0] end) end, x)
  end

  defn jvp_custom_grad(x), do: jvp(fn x -> custom_grad(Nx.sin(x), [x], fn g -> [g] end) end, x, x)

  defn jacfwd_custom_grad_in_loop(x) do
    jacfwd(
      fn x ->
        {y, _i} =
          while {y = x, i = 0}, i < 2 do
            {custom_grad(Nx.sin(y), [y], fn g -> [g] end), i + 1}
          end

        y
      end,
      x
    )
  end

  # the loop reads a custom_grad value that does not depend on x: nothing to refuse
  defn jvp_loop_reading_custom_grad(x, c) do
    k = custom_grad(Nx.exp(c), [c], fn g -> [g] end)

    jvp(
      fn x ->
        {y, _i} =
          while {y = x, i = 0}, i < 2 do
            {y * k, i + 1}
          end

        y
      end,
      x,
      1.0
    )
  end

  describe "composition" do
    test "grad of jvp and jvp of grad are second derivatives" do
      # d/dx cos(x) = -sin(x)
      assert_in_delta number(grad_of_jvp(f64(0.7))), -:math.sin(0.7), 1.0e-15
      {value, tangent} = jvp_of_grad(f64(0.7), f64(2.0))
      assert_in_delta number(value), :math.cos(0.7), 1.0e-15
      assert_in_delta number(tangent), -:math.sin(0.7) * 2.0, 1.0e-15
    end

    test "jacrev sees custom_grad's rule" do
      assert jacrev_custom_grad(Nx.tensor([0.0, 1.0])) == Nx.tensor([[5.0, 0.0], [0.0, 5.0]])
    end

    test "reverse mode of a forward pass through an unbounded while names max_iterations" do
      error = assert_raise NxJax.WorkerError, fn -> grad_of_jvp_while(f64(1.5)) end
      assert error.message =~ "max_iterations"
    end

    test "forward mode through custom_grad is refused at trace time, naming custom_jvp" do
      assert_raise ArgumentError, ~r/custom_grad\/3.*custom_jvp\/3/s, fn ->
        jvp_custom_grad(1.0)
      end

      {value, tangent} = jvp_loop_reading_custom_grad(f64(2.0), f64(0.5))
      assert_in_delta number(value), 2.0 * :math.exp(1.0), 1.0e-14
      assert_in_delta number(tangent), :math.exp(1.0), 1.0e-14

      # in a loop body too
      assert_raise ArgumentError,
                   ~r/jacfwd\/2 differentiates forward through a custom_grad/,
                   fn ->
                     jacfwd_custom_grad_in_loop(1.0)
                   end
    end
  end

  ## custom_jvp with control flow and tuples

  # x^(2^n) below 100, bounded: differentiable in both modes, so grad of jvp works through it
  defn square_until_bounded(x) do
    {y, _x} =
      while {y = x, x}, y * y < 100, max_iterations: 10 do
        {y * y, x}
      end

    y
  end

  defn grad_of_jvp_bounded(x),
    do: grad(x, fn x -> elem(jvp(&square_until_bounded/1, x, 1.0), 1) end)

  # a custom_jvp inside a loop body: y -> custom sin(y) three times (the rule says 2 cos(y))
  defn custom_in_loop(x) do
    {y, _i} =
      while {y = x, i = 0}, i < 3 do
        {custom_jvp(Nx.sin(y), [y], fn [t] -> 2 * Nx.cos(y) * t end), i + 1}
      end

    y
  end

  defn grad_custom_in_loop(x), do: grad(x, &custom_in_loop/1)
  defn jvp_custom_in_loop(x), do: jvp(&custom_in_loop/1, x, 1.0)

  defn custom_in_cond(x) do
    if x > 0 do
      custom_jvp(x * x, [x], fn [t] -> 10 * t end)
    else
      x
    end
  end

  # a tuple value: {x + y, x * y} with the rule {x_dot + y_dot, 0} (the product's tangent
  # declared zero)
  defn custom_tuple(x, y) do
    custom_jvp({x + y, x * y}, [x, y], fn [xd, yd] -> {xd + yd, 0} end)
  end

  defn grad_custom_tuple(x, y) do
    grad({x, y}, fn {x, y} ->
      {s, p} = custom_tuple(x, y)
      s + p
    end)
  end

  describe "custom_jvp with control flow and tuples" do
    test "grad of jvp through a while with max_iterations is the second derivative" do
      # 1.5 -> x^8: d2/dx2 = 56 x^6
      assert_in_delta number(grad_of_jvp_bounded(f64(1.5))), 56 * :math.pow(1.5, 6), 1.0e-9
    end

    test "a custom_jvp inside a while body is used by grad and by jvp" do
      x = f64(0.4)
      y1 = :math.sin(0.4)
      y2 = :math.sin(y1)
      want = 2 * :math.cos(0.4) * 2 * :math.cos(y1) * 2 * :math.cos(y2)
      assert_in_delta number(custom_in_loop(x)), :math.sin(y2), 1.0e-15
      assert_in_delta number(grad_custom_in_loop(x)), want, 1.0e-14
      {_value, tangent} = jvp_custom_in_loop(x)
      assert_in_delta number(tangent), want, 1.0e-14
    end

    test "a custom_jvp in the branch taken" do
      assert grad(3.0, &custom_in_cond/1) == Nx.tensor(10.0)
      assert grad(-3.0, &custom_in_cond/1) == Nx.tensor(1.0)
    end

    test "over a tuple value, one tangent per element" do
      assert custom_tuple(2.0, 5.0) == {Nx.tensor(7.0), Nx.tensor(10.0)}
      assert grad_custom_tuple(2.0, 5.0) == {Nx.tensor(1.0), Nx.tensor(1.0)}
    end
  end

  ## errors

  describe "bad input" do
    test "a tangent of another shape than its primal names both shapes" do
      assert_raise ArgumentError, ~r/primal of shape \{2\} and a tangent of shape \{3\}/, fn ->
        jvp(&Nx.sin/1, Nx.tensor([1.0, 2.0]), Nx.tensor([1.0, 2.0, 3.0]))
      end
    end

    test "primals and tangents in different containers" do
      assert_raise ArgumentError, ~r/one tangent per primal/, fn ->
        jvp(fn {a, b} -> Nx.add(a, b) end, {1.0, 2.0}, 1.0)
      end
    end

    test "integer inputs are refused as JAX refuses them" do
      assert_raise ArgumentError, ~r/floating-point or complex tensors only.*s64/, fn ->
        jvp(&Nx.sin/1, 1, 1)
      end

      assert_raise ArgumentError,
                   ~r/jacfwd\/2 differentiates .* floating-point tensors only/,
                   fn ->
                     jacfwd(&Nx.sin/1, Nx.tensor([1, 2]))
                   end

      assert_raise ArgumentError, ~r/floating-point outputs.*s64/, fn ->
        jacrev(&Nx.argmax/1, Nx.tensor([1.0, 2.0]))
      end
    end

    test "custom_jvp refuses a tangent vectorized along an axis its value lacks" do
      x = Nx.vectorize(Nx.tensor([1.0, 2.0]), :rows)
      t = Nx.vectorize(Nx.tensor([1.0, 2.0, 3.0]), :other)

      assert_raise ArgumentError, ~r/vectorized along \[:other\].*\[:rows\]/, fn ->
        Nx.Defn.jit(fn x, t -> custom_jvp(Nx.sin(x), [x], fn [d] -> Nx.multiply(d, t) end) end).(
          x,
          t
        )
      end
    end

    test "a vectorized value read from outside cannot be batched with the differentiated ones" do
      x = Nx.vectorize(Nx.tensor([[1.0, 2.0], [3.0, 4.0]]), :b)
      w = Nx.vectorize(Nx.tensor([1.0, 2.0, 3.0]), :k)

      assert_raise ArgumentError, ~r/vectorized along \[:b\].*also vectorized along \[:k\]/, fn ->
        jacfwd(fn x -> Nx.multiply(x, w) end, x)
      end
    end

    test "custom_jvp's rule must return one tangent per value element, broadcastable" do
      assert_raise ArgumentError, ~r/must return a tuple of 2 tangents/, fn ->
        Nx.Defn.jit(fn x -> custom_jvp({x, x}, [x], fn [t] -> t end) end).(1.0)
      end

      assert_raise ArgumentError, ~r/cannot be broadcast to the value's shape \{2\}/, fn ->
        Nx.Defn.jit(fn x -> custom_jvp(x, [x], fn [_t] -> Nx.tensor([1.0, 2.0, 3.0]) end) end).(
          Nx.tensor([1.0, 2.0])
        )
      end

      assert_raise ArgumentError, ~r/non-empty list or tuple of tensors/, fn ->
        custom_jvp(1.0, [], fn [t] -> t end)
      end
    end
  end

  describe "vectorized values: each entry differentiated on its own" do
    @at Nx.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]])
    defp r3_r2(x), do: Nx.stack([Nx.sum(Nx.pow(x, 3)), Nx.product(x)])
    defp scalar(x), do: Nx.add(Nx.sum(Nx.pow(x, 3)), Nx.product(x))

    # the same transformation of each entry alone, stacked
    defp each_entry(fun), do: Nx.stack(for i <- 0..1, do: fun.(@at[i]))

    test "jacfwd, jacrev and hessian give each entry's own, vectorized like x" do
      x = Nx.vectorize(@at, :rows)

      for {got, want} <- [
            {jacfwd(&r3_r2/1, x), each_entry(&jacfwd(fn v -> r3_r2(v) end, &1))},
            {jacrev(&r3_r2/1, x), each_entry(&jacrev(fn v -> r3_r2(v) end, &1))},
            {hessian(&scalar/1, x), each_entry(&hessian(fn v -> scalar(v) end, &1))}
          ] do
        assert got.vectorized_axes == [rows: 2]
        assert_all_close(Nx.devectorize(got, keep_names: false), want, atol: 1.0e-5)
      end

      # entry 0 by hand: d/dx of [sum x^3, x0 x1 x2] at [1, 2, 3]
      assert Nx.to_flat_list(Nx.devectorize(jacfwd(&r3_r2/1, x))[0]) ==
               [3.0, 12.0, 27.0, 6.0, 3.0, 2.0]

      # hessian of x^3 sums and x0 x1 x2 at [1, 2, 3]: 6 x on the diagonal, x_k off it
      assert Nx.to_flat_list(Nx.devectorize(hessian(&scalar/1, x))[0]) ==
               [6.0, 3.0, 2.0, 3.0, 12.0, 1.0, 2.0, 1.0, 18.0]
    end

    test "custom_jvp of vectorized values: each entry's value and derivatives, as alone" do
      xs = f64([2.0, 0.5, -1.0])
      x = Nx.vectorize(xs, :rows)
      y = f64(3.0)

      value = sin_times(x, y)
      assert value.vectorized_axes == [rows: 3]
      assert_all_close(Nx.devectorize(value, keep_names: false), Nx.multiply(Nx.sin(xs), 3.0))

      # reverse mode (JAX's transpose of the rule): cos(x) * y per entry of x; y is not
      # vectorized, so its gradient sums the entries', as plain autodiff of sin(x) * y gives
      {dx, dy} = grad_sin_times(x, y)
      assert_all_close(Nx.devectorize(dx, keep_names: false), Nx.multiply(Nx.cos(xs), 3.0))
      assert_all_close(dy, Nx.sum(Nx.sin(xs)))
      assert_all_close(dy, grad(y, fn y -> Nx.multiply(Nx.sin(x), y) end))

      # forward mode with a tangent per entry
      tx = Nx.vectorize(f64([1.0, 2.0, 0.0]), :rows)
      {_value, tangent} = jvp_sin_times(x, y, tx, f64(0.5))
      want = Nx.add(Nx.multiply(Nx.cos(xs), f64([3.0, 6.0, 0.0])), Nx.multiply(Nx.sin(xs), 0.5))
      assert_all_close(Nx.devectorize(tangent, keep_names: false), want)

      # the stable log1pexp rule, entry by entry (100.0 among them)
      grads = grad_log1pexp(Nx.vectorize(f64([0.0, 100.0]), :rows))
      assert Nx.devectorize(grads, keep_names: false) == f64([0.5, 1.0])

      # a rule whose tangent is not vectorized (a constant) gives it to every entry
      {_value, ones} = jvp(fn x -> custom_jvp(Nx.sin(x), [x], fn [_d] -> 1.0 end) end, x, 0.0)
      assert ones.vectorized_axes == [rows: 3]
      assert Nx.devectorize(ones, keep_names: false) == f64([1.0, 1.0, 1.0])
      twos = grad(x, fn x -> custom_jvp(Nx.sin(x), [x], fn [d] -> Nx.multiply(2, d) end) end)
      assert Nx.devectorize(twos, keep_names: false) == f64([2.0, 2.0, 2.0])
    end

    test "jvp: vectorized primals or tangents give vectorized tangents" do
      x = Nx.vectorize(@at, :rows)
      t = Nx.tensor([1.0, 0.0, 0.0])
      {value, tangent} = jvp(&r3_r2/1, x, t)
      assert value.vectorized_axes == [rows: 2] and tangent.vectorized_axes == [rows: 2]
      want = each_entry(fn e -> elem(jvp(fn v -> r3_r2(v) end, e, t), 1) end)
      assert_all_close(Nx.devectorize(tangent, keep_names: false), want, atol: 1.0e-5)

      # one primal, a vectorized tangent: one directional derivative per direction
      ts = Nx.vectorize(Nx.eye(3), :dir)
      {_, along} = jvp(&scalar/1, @at[0], ts)
      assert Nx.to_flat_list(Nx.devectorize(along)) == [9.0, 15.0, 29.0]

      # vjp: each entry's pullback of 2 sin(x), 2 cos(x) * u
      {_, pullback} = vjp(fn v -> Nx.multiply(Nx.sin(v), 2) end, x)
      back = pullback.(Nx.tensor([1.0, 10.0, 100.0]))
      assert back.vectorized_axes == [rows: 2]
      want = Nx.multiply(Nx.multiply(Nx.cos(@at), 2), Nx.tensor([1.0, 10.0, 100.0]))
      assert_all_close(Nx.devectorize(back, keep_names: false), want, atol: 1.0e-4)
    end

    test "tuples vectorized along different axes are broadcast together" do
      a = Nx.vectorize(Nx.tensor([1.0, 2.0]), :i)
      c = Nx.vectorize(Nx.tensor([3.0, 4.0, 5.0]), :j)
      {da, dc} = jacrev(fn {a, c} -> Nx.multiply(Nx.sin(a), c) end, {a, c})
      assert da.vectorized_axes == [i: 2, j: 3] and dc.vectorized_axes == [i: 2, j: 3]

      assert_all_close(
        Nx.devectorize(da, keep_names: false),
        Nx.outer(Nx.cos(Nx.tensor([1.0, 2.0])), Nx.tensor([3.0, 4.0, 5.0])),
        atol: 1.0e-6
      )

      assert_all_close(
        Nx.devectorize(dc, keep_names: false),
        Nx.broadcast(Nx.new_axis(Nx.sin(Nx.tensor([1.0, 2.0])), 1), {2, 3}),
        atol: 1.0e-6
      )
    end

    test "they compose with grad inside defn, and with an output that ignores the entry" do
      x = Nx.vectorize(Nx.tensor([[1.0, 2.0], [3.0, 4.0]]), :b)
      # grad of sum(jacfwd(sum x^3)) = grad of sum(3 x^2) = 6 x, entry by entry
      g = Nx.Defn.grad(x, fn x -> Nx.sum(jacfwd(fn v -> Nx.sum(Nx.pow(v, 3)) end, x)) end)
      assert Nx.to_flat_list(Nx.devectorize(g)) == [6.0, 12.0, 18.0, 24.0]

      zero = jacrev(fn _v -> Nx.tensor(2.0) end, x)
      assert zero.vectorized_axes == [b: 2]
      assert Nx.to_flat_list(Nx.devectorize(zero)) == [0.0, 0.0, 0.0, 0.0]
    end
  end
end
