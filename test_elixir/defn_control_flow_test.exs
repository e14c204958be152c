defmodule NxJax.DefnControlFlowTest do
  # if/cond/while, reduce/window_reduce with defn functions, deftransform, tap/then/keyword!,
  # end to end on the worker; gradients against central differences in f64.
  use ExUnit.Case, async: true
  # the tests tagged :seam run under NxJax.Test.SeamCompiler too (make test-seam)
  setup context, do: NxJax.Test.SeamRun.watch(context)

  import Nx.Defn

  @f64 {:f, 64}

  defp f64(value), do: Nx.tensor(value, type: @f64)

  ## if / cond

  defn sqrt_or_zero(x), do: if(x > 0, do: Nx.sqrt(x), else: 0.0)
  defn grad_sqrt_or_zero(x), do: grad(x, &sqrt_or_zero/1)
  defn select_sqrt_or_zero(x), do: Nx.select(x > 0, Nx.sqrt(x), 0.0)
  defn grad_select_sqrt_or_zero(x), do: grad(x, &select_sqrt_or_zero/1)

  defn piecewise(x) do
    cond do
      x < -1 -> -x * x
      x < 1 -> Nx.sin(x)
      true -> Nx.exp(x) * 2
    end
  end

  defn grad_piecewise(x), do: grad(x, &piecewise/1)

  defn branch_container(x, y) do
    if Nx.sum(x) > 0 do
      {x * y, %{a: y, b: 1}}
    else
      {x - y, %{a: Nx.negate(y), b: x}}
    end
  end

  defn scaled_if(x, scale), do: if(x > 0, do: x * scale, else: Nx.log(scale) + x)
  defn grad_scaled_if(x, scale), do: grad({x, scale}, fn {x, s} -> scaled_if(x, s) end)

  # (Nx 0.7.2's defn_test.exs, "access variable from condition")
  defn condition_binding(a) do
    cond do
      b = Nx.all(a > 0) -> a + b
      b = Nx.all(a < 0) -> a - b
      true -> a
    end
  end

  describe "if and cond on a scalar condition" do
    @tag :seam
    test "a variable bound in a cond condition is visible in its branch" do
      assert condition_binding(Nx.tensor([1, 2, 3])) == Nx.tensor([2, 3, 4])
      assert condition_binding(Nx.tensor([-1, -2, -3])) == Nx.tensor([-2, -3, -4])
      assert condition_binding(Nx.tensor([-1, 0, 1])) == Nx.tensor([-1, 0, 1])
    end

    test "only the taken branch runs: the gradient of sqrt-or-zero at 0 is 0, not NaN" do
      assert sqrt_or_zero(4.0) == Nx.tensor(2.0)
      assert sqrt_or_zero(-4.0) == Nx.tensor(0.0)
      assert grad_sqrt_or_zero(0.0) == Nx.tensor(0.0)
      assert grad_sqrt_or_zero(4.0) == Nx.tensor(0.25)
      # the select form differentiates both branches: 0 * inf
      assert Nx.to_number(grad_select_sqrt_or_zero(0.0)) == :nan
    end

    test "the graph holds a :cond node with one sub-graph per branch and no select" do
      x = Nx.Defn.Expr.parameter(0, {:f, 32}, {})
      result = Nx.Defn.Expr.with_tracing(fn -> sqrt_or_zero(x) end)
      {graph, _, _} = Nx.Defn.WireEncoder.encode(result)
      {:nx_jax_graph, 1, nodes, _} = graph
      ops = Enum.map(nodes, &elem(&1, 1))
      assert :cond in ops
      refute :select in ops
      {_, :cond, _, %{branches: [taken, other]}, _} = List.keyfind(nodes, :cond, 1)
      assert {:nx_jax_graph, 1, [_ | _], [_]} = taken
      assert {:nx_jax_graph, 1, [_ | _], [_]} = other
    end

    test "cond picks the first true clause; gradients match finite differences" do
      assert piecewise(-2.0) == Nx.tensor(-4.0)
      assert_in_delta Nx.to_number(piecewise(0.5)), :math.sin(0.5), 1.0e-6
      assert_in_delta Nx.to_number(piecewise(2.0)), 2 * :math.exp(2.0), 1.0e-4

      for x <- [-2.0, -0.3, 0.5, 1.7] do
        :ok = NxJax.GradCheck.check_grads!(&piecewise/1, &grad_piecewise/1, f64(x))
      end
    end

    @tag :seam
    test "branches return containers; leaves get the merged type and broadcast shape" do
      x = Nx.tensor([1.0, 2.0])
      {value, %{a: a, b: b}} = branch_container(x, 3.0)
      assert value == Nx.tensor([3.0, 6.0])
      assert a == Nx.tensor(3.0)
      assert b == Nx.tensor([1.0, 1.0])

      {value, %{a: a, b: b}} = branch_container(Nx.tensor([-1.0, -2.0]), 3.0)
      assert value == Nx.tensor([-4.0, -5.0])
      assert a == Nx.tensor(-3.0)
      assert b == Nx.tensor([-1.0, -2.0])
    end

    test "values the branches close over get gradients through the cond" do
      {gx, gs} = grad_scaled_if(f64(2.0), f64(3.0))
      assert gx == f64(3.0) and gs == f64(2.0)
      {gx, gs} = grad_scaled_if(f64(-2.0), f64(4.0))
      assert gx == f64(1.0) and gs == f64(0.25)

      for x <- [-1.5, 0.7] do
        :ok =
          NxJax.GradCheck.check_grads!(
            &scaled_if(&1, 1.7),
            &elem(grad_scaled_if(&1, f64(1.7)), 0),
            f64(x)
          )

        :ok =
          NxJax.GradCheck.check_grads!(
            &scaled_if(f64(x), &1),
            &elem(grad_scaled_if(f64(x), &1), 1),
            f64(1.7)
          )
      end
    end

    defn if_option(opts \\ []), do: if(opts[:flag], do: 1, else: -1)

    # regression: a missing option (nil) silently took the else branch; Nx 0.7.2 refuses it
    @tag :seam
    test "an if on an option takes true/false statically and refuses nil" do
      assert if_option(flag: true) == Nx.tensor(1)
      assert if_option(flag: false) == Nx.tensor(-1)

      assert_raise CompileError,
                   ~r/cond in defn expects the predicate to be true, false, or a scalar tensor, got: nil/,
                   fn -> if_option([]) end

      # a concrete NaN scalar is not zero: the true branch, as Nx.select takes it
      assert Nx.Defn.ControlFlow.branch(Nx.tensor(:nan), fn -> 1 end, fn -> 2 end) == 1
    end

    @tag :seam
    test "branches returning different containers raise at trace time" do
      assert_raise ArgumentError, ~r/same container/, fn ->
        Nx.Defn.jit(fn x ->
          Nx.Defn.ControlFlow.branch(Nx.greater(x, 0), fn -> {x, x} end, fn -> x end)
        end).(1.0)
      end
    end
  end

  ## while

  defn power(x) do
    {y, _i} =
      while {y = x, i = 1}, i < 4 do
        {y * x, i + 1}
      end

    y
  end

  defn bounded_power(x) do
    {y, _i} =
      while {y = x, i = 1}, i < 4, max_iterations: 10 do
        {y * x, i + 1}
      end

    y
  end

  defn grad_bounded_power(x), do: grad(x, &bounded_power/1)
  defn grad_power(x), do: grad(x, &power/1)
  defn second_grad_power(x), do: grad(x, &grad_power/1)

  defn unbounded_square(t) do
    value_and_grad(t, fn t ->
      while t, t < 100 do
        t * t
      end
    end)
  end

  defn three_sines(t) do
    value_and_grad(t, fn t ->
      {_, t} =
        while {i = 0, t = Nx.pow(t, 3)}, i < 3 do
          {i + 1, Nx.sin(t)}
        end

      Nx.sum(Nx.pow(t, 2))
    end)
  end

  defn three_sines_unrolled(t) do
    value_and_grad(
      t,
      &(&1 |> Nx.pow(3) |> Nx.sin() |> Nx.sin() |> Nx.sin() |> Nx.pow(2) |> Nx.sum())
    )
  end

  defn captured_power(t, x) do
    value_and_grad(x, fn x ->
      {_, t} =
        while {x, t}, t < 100 do
          {x, x * t}
        end

      Nx.sum(t)
    end)
  end

  # Newton's iteration for sqrt(a), stopping on a tolerance: a dynamic trip count
  defn newton_sqrt(a) do
    {y, _a, _n} =
      while {y = a, a, n = 0}, Nx.abs(y * y - a) > 1.0e-10 * a, max_iterations: 50 do
        {(y + a / y) / 2, a, n + 1}
      end

    y
  end

  defn grad_newton_sqrt(a), do: grad(a, &newton_sqrt/1)

  defn range_poly(x, coefficients) do
    {acc, _x, _c} =
      while {acc = Nx.tensor(0.0, type: :f64), x, coefficients}, i <- 0..2 do
        {acc + Nx.take(coefficients, i) * x ** i, x, coefficients}
      end

    acc
  end

  defn grad_range_poly(x, c), do: grad(x, &range_poly(&1, c))

  defn closes_over(x, scale) do
    while y = x, i <- 1..3 do
      y * scale + i
    end
  end

  defn grad_closes_over(x, scale), do: grad(scale, &closes_over(x, &1))

  defn nested(x) do
    while y = x, _i <- 1..2 do
      if y > 5 do
        y / 2
      else
        while z = y, _j <- 1..3 do
          z * 1.5
        end
      end
    end
  end

  defn grad_nested(x), do: grad(x, &nested/1)

  defn stopped_early(x) do
    while y = x, y < 1000, max_iterations: 3 do
      y * 2
    end
  end

  defn changes_type(x) do
    while acc = 0.0, _i <- 1..2 do
      acc + x
    end
  end

  defn changes_shape(x) do
    while acc = x, _i <- 1..2 do
      Nx.stack([acc, acc])
    end
  end

  describe "while" do
    @tag :seam
    test "with a condition runs until it is false" do
      assert power(2.0) == Nx.tensor(16.0)
      assert bounded_power(2.0) == Nx.tensor(16.0)
      assert_in_delta Nx.to_number(newton_sqrt(f64(2.0))), :math.sqrt(2.0), 1.0e-9
    end

    test "with max_iterations it is differentiable (a bounded scan)" do
      assert grad_bounded_power(f64(2.0)) == f64(32.0)
      :ok = NxJax.GradCheck.check_grads!(&bounded_power/1, &grad_bounded_power/1, f64(1.3))
      # d sqrt(a) / da = 1 / (2 sqrt(a)), through a loop that stops on a tolerance
      assert_in_delta Nx.to_number(grad_newton_sqrt(f64(2.0))), 0.5 / :math.sqrt(2.0), 1.0e-9
      :ok = NxJax.GradCheck.check_grads!(&newton_sqrt/1, &grad_newton_sqrt/1, f64(3.0))
    end

    @tag :seam
    test "max_iterations stops a loop whose condition still holds" do
      assert stopped_early(1.0) == Nx.tensor(8.0)
    end

    test "an unbounded while is differentiable: the exact gradient of the steps taken" do
      # power(x) = x^4 in three steps: 4 x^3
      assert grad_power(f64(2.0)) == f64(32.0)
      :ok = NxJax.GradCheck.check_grads!(&power/1, &grad_power/1, f64(1.3))
      # Nx 0.7.2's grad_test cases: t -> t * t while t < 100 from 2.0 is t^8 (256, 8 t^7)
      assert unbounded_square(f64(2.0)) == {f64(256.0), f64(1024.0)}
      # three sin steps after t^3, as the unrolled composition
      t = f64([-2.5, -1.0, 0.0, 1.0, 1.5])
      {v, g} = three_sines(t)
      {v_unrolled, g_unrolled} = three_sines_unrolled(t)
      assert_in_delta Nx.to_number(v), Nx.to_number(v_unrolled), 1.0e-12
      assert Nx.all_close(g, g_unrolled, atol: 1.0e-12) == Nx.tensor(1, type: :u8)
      # a captured value: t -> x * t while t < 100 from 1.0 at x = 2 is x^7 (128; 7 x^6 = 448,
      # where Nx 0.7.2 answers 5461: its issue #1747)
      assert captured_power(f64(1.0), f64(2.0)) == {f64(128.0), f64(448.0)}
    end

    test "a second derivative through an unbounded while is an error naming the fix" do
      assert_raise NxJax.WorkerError, ~r/second derivative.*max_iterations: n/s, fn ->
        second_grad_power(f64(2.0))
      end
    end

    test "over a range, with gradients" do
      c = f64([1.0, -2.0, 0.5])
      assert range_poly(f64(2.0), c) == f64(1.0 - 4.0 + 2.0)
      assert grad_range_poly(f64(2.0), c) == f64(-2.0 + 2.0)
      :ok = NxJax.GradCheck.check_grads!(&range_poly(&1, c), &grad_range_poly(&1, c), f64(0.7))
    end

    test "the body closes over values of the enclosing trace" do
      # y1 = 2x + 1, y2 = 4x + 2 + 2, y3 = 8x + 8 + 3 with scale 2
      assert closes_over(f64(1.0), f64(2.0)) == f64(19.0)

      :ok =
        NxJax.GradCheck.check_grads!(
          &closes_over(f64(1.0), &1),
          &grad_closes_over(f64(1.0), &1),
          f64(1.5)
        )
    end

    test "loops and conds nest" do
      # 1 -> 3.375 -> 11.390625; 6 -> 3 -> 10.125
      assert nested(f64(1.0)) == f64(11.390625)
      assert nested(f64(6.0)) == f64(10.125)
      :ok = NxJax.GradCheck.check_grads!(&nested/1, &grad_nested/1, f64(1.0))
      :ok = NxJax.GradCheck.check_grads!(&nested/1, &grad_nested/1, f64(6.0))
    end

    # a CompileError naming the while's place in the source, as Nx raises
    @tag :seam
    test "the body must keep the state's types and shapes" do
      assert_raise CompileError,
                   ~r/defn_control_flow_test.exs:\d+: the do-block in while must return tensors with the same shape, type, and names as the initial arguments: the body must keep the type of state leaf 0/,
                   fn -> changes_type(f64(1.0)) end

      assert_raise CompileError, ~r/keep the shape of state leaf 0/, fn ->
        changes_shape(1.0)
      end
    end

    defn cond_without_true(x) do
      cond do
        x > 0 -> x
        x < -5 -> -x
      end
    end

    defn if_without_else(x), do: if(x > 0, do: x * 2)
    defn mismatched_branches(x), do: if(x > 0, do: {x, x}, else: x)

    @tag :seam
    test "cond/if: Nx's CompileErrors, and 0 for a missing else" do
      assert_raise CompileError,
                   ~r/cond\/if expects at least one branch to always evaluate to true/,
                   fn -> cond_without_true(1.0) end

      assert if_without_else(3) == Nx.tensor(6)
      assert if_without_else(-3) == Nx.tensor(0)

      assert_raise CompileError,
                   ~r/cond\/if expects all branches to return compatible tensor types/,
                   fn -> mismatched_branches(1.0) end

      # the functions of Nx.Defn.ControlFlow called directly raise ArgumentError
      assert_raise ArgumentError, ~r/condition must be a scalar tensor/, fn ->
        Nx.Defn.jit(fn x -> Nx.Defn.ControlFlow.while(x, fn x -> {x, x} end, &Nx.add(&1, 1)) end).(
          1
        )
      end
    end
  end

  ## reduce / window_reduce

  defn sum_squares(t), do: Nx.reduce(t, 0.0, [axes: [1]], fn x, acc -> x * x + acc end)
  defn total_sum_squares(t), do: Nx.sum(sum_squares(t))
  defn grad_sum_squares(t), do: grad(t, &total_sum_squares/1)

  defn window_softmax_sum(t) do
    t
    |> Nx.window_reduce(0.0, {2, 2}, [strides: [1, 2], padding: [{0, 1}, {1, 0}]], fn x, acc ->
      acc + Nx.exp(x)
    end)
    |> Nx.sum()
  end

  defn grad_window_softmax_sum(t), do: grad(t, &window_softmax_sum/1)

  defn window_max_dilated(t) do
    t
    |> Nx.window_reduce(Nx.tensor(:neg_infinity), {2}, [window_dilations: 2], &Nx.max/2)
  end

  defn reduce_to_matrix(t), do: Nx.reduce(t, 0, fn x, acc -> Nx.broadcast(x + acc, {1, 1}) end)

  defn window_reduce_to_pair(t),
    do: Nx.window_reduce(t, 0, {2}, fn x, acc -> Nx.broadcast(x + acc, {2}) end)

  defn iota_of(n), do: Nx.iota({n})

  describe "reduce and window_reduce with a defn function" do
    # regression: these raised ArgumentError with another message; Nx 0.7.2 raises
    # RuntimeError naming the shape the function returned
    @tag :seam
    test "a reducer that returns a non-scalar tensor raises RuntimeError" do
      assert_raise RuntimeError, "reduce function must return a scalar tensor, got: {1, 1}", fn ->
        reduce_to_matrix(Nx.tensor([1, 2, 3]))
      end

      assert_raise RuntimeError,
                   "window_reduce function must return a scalar tensor, got: {2}",
                   fn -> window_reduce_to_pair(Nx.tensor([1, 2, 3])) end
    end

    @tag :seam
    test "a traced argument used as a dimension says to pass it as an option" do
      assert_raise ArgumentError,
                   ~r/invalid dimension in axis 0 found in shape.*pass a dimension or a shape as an argument to a defn function/s,
                   fn -> iota_of(10) end
    end

    @tag :seam
    test "Nx.tensor/2 of data that is not a literal warns at compile time, and still works" do
      warning =
        ExUnit.CaptureIO.capture_io(:stderr, fn ->
          {:module, module, _, _} =
            defmodule TensorOfOption do
              import Nx.Defn
              defn rate(x, opts \\ []), do: x * Nx.tensor(opts[:rate])
              defn literal(x), do: x * Nx.tensor([1.0, 2.0])
              defn negative(x), do: x * Nx.tensor([-1, +2]) + Nx.tensor(-3.5)
            end

          send(self(), {:defined, module})
        end)

      assert_received {:defined, module}

      assert warning =~ "Nx.tensor/2 inside defn expects the first argument to be a literal"
      assert warning =~ "opts[:rate]"
      refute warning =~ "[1.0, 2.0]"
      refute warning =~ "-3.5"
      refute warning =~ "[-1, +2]"
      assert module.rate(2.0, rate: 0.5) == Nx.tensor(1.0)
      assert module.literal(2.0) == Nx.tensor([2.0, 4.0])
      assert module.negative(2) == Nx.tensor([-5.5, 0.5])
    end

    @tag :seam
    test "reduce over axes, keep_axes and types" do
      t = Nx.tensor([[1.0, 2.0], [3.0, 4.0]])
      assert sum_squares(t) == Nx.tensor([5.0, 25.0])

      assert Nx.reduce(
               Nx.tensor([[1, 2, 3], [4, 5, 6]]),
               1,
               [axes: [0], keep_axes: true],
               &Nx.multiply/2
             ) ==
               Nx.tensor([[4, 10, 18]])

      assert Nx.reduce(Nx.tensor([1, 2, 3]), 0.5, &Nx.add/2) == Nx.tensor(6.5)
      assert Nx.reduce(Nx.tensor([1, 2, 3]), 0, [type: {:f, 64}], &Nx.add/2) == f64(6.0)
    end

    test "reduce gradients match finite differences" do
      t = f64([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
      assert grad_sum_squares(t) == Nx.multiply(t, 2)

      prod = fn t -> Nx.reduce(t, 1.0, &Nx.multiply/2) end
      grad_prod = fn t -> Nx.Defn.grad(t, prod) end
      :ok = NxJax.GradCheck.check_grads!(prod, grad_prod, t)
    end

    @tag :seam
    test "window_reduce: strides, padding (holding acc) and dilations" do
      t = Nx.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])

      sums =
        Nx.window_reduce(t, 0.0, {2, 2}, [strides: [1, 2], padding: [{0, 1}, {1, 0}]], &Nx.add/2)

      # padded: [[0,1,2,3],[0,4,5,6],[0,0,0,0]], windows at columns 0 and 2
      assert sums == Nx.tensor([[5.0, 16.0], [4.0, 11.0]])

      assert window_max_dilated(Nx.tensor([1.0, 5.0, 2.0, 0.0, 7.0])) ==
               Nx.tensor([2.0, 5.0, 7.0])
    end

    test "window_reduce gradients match finite differences" do
      t = f64([[0.5, -1.0, 0.3], [0.2, 0.4, -0.6]])
      :ok = NxJax.GradCheck.check_grads!(&window_softmax_sum/1, &grad_window_softmax_sum/1, t)
    end
  end

  ## deftransform, tap, then, keyword!

  deftransform axis_count(tensor, opts \\ []) do
    opts = Keyword.validate!(opts, axes: nil)
    length(opts[:axes] || Tuple.to_list(tensor.shape))
  end

  deftransformp(doubled_shape(tensor), do: Tuple.to_list(tensor.shape) |> Enum.map(&(&1 * 2)))

  # (Kernel's length/1 in a transform: a defn body has Nx.Defn.Kernel only, as in Nx 0.7.2)
  deftransformp(doubled_rank(tensor), do: length(doubled_shape(tensor)))

  defn transforms(t) do
    t
    |> tap(&send(self(), {:tapped, &1.shape}))
    |> then(&(&1 * axis_count(&1)))
    |> Nx.sum(axes: [0])
    |> Nx.multiply(doubled_rank(t))
  end

  defn with_opts(t, opts \\ []) do
    opts = keyword!(opts, [:power, scale: 1])
    t ** opts[:power] * opts[:scale]
  end

  describe "deftransform, tap, then, keyword!" do
    @tag :seam
    test "deftransform functions run at trace time with Kernel semantics" do
      assert axis_count(Nx.iota({2, 3})) == 2
      assert axis_count(Nx.iota({2, 3}), axes: [1]) == 1
      # [[0, 1, 2], [3, 4, 5]] * 2 axes, summed over axis 0, * 2 dims
      assert transforms(Nx.iota({2, 3})) == Nx.tensor([12, 20, 28])
      assert_received {:tapped, {2, 3}}
    end

    @tag :seam
    test "keyword! fills defaults and raises for unknown keys" do
      assert with_opts(Nx.tensor(3), power: 2) == Nx.tensor(9)
      assert with_opts(Nx.tensor(3), power: 2, scale: 2) == Nx.tensor(18)

      assert_raise ArgumentError,
                   "unknown key :pow in [pow: 2], expected one of [:power, :scale]",
                   fn ->
                     with_opts(Nx.tensor(3), pow: 2)
                   end

      assert Nx.Defn.Kernel.keyword!([], [:a, b: 2]) == [b: 2]

      assert_raise ArgumentError, ~r/expected a keyword list/, fn ->
        Nx.Defn.Kernel.keyword!(:oops, [:a])
      end
    end
  end

  defn sum_entries(t) do
    while acc = 0, part <- t do
      acc + part
    end
  end

  defn sum_float_entries(t) do
    while acc = 0.0, part <- t do
      acc + part
    end
  end

  defn sum_rows(t) do
    while acc = Nx.broadcast(0.0, {3}), row <- t do
      acc + row
    end
  end

  # Nx 0.7.2's defn_test: `part <- tensor` walks the first axis
  test "while over the entries of a tensor's first axis" do
    assert sum_entries(Nx.tensor([0, 1, 2, 3, 4])) == Nx.tensor(10)
    assert sum_rows(Nx.iota({3, 3}, type: :f32)) == Nx.tensor([9.0, 12.0, 15.0])

    # differentiable: d/dt sum(t * t) over the entries
    assert Nx.Defn.grad(Nx.tensor([1.0, 2.0, 3.0]), &sum_float_entries(Nx.multiply(&1, &1))) ==
             Nx.tensor([2.0, 4.0, 6.0])

    assert_raise ArgumentError, ~r"expects a tensor of rank 1 or more", fn ->
      sum_entries(Nx.tensor(3))
    end
  end

  defn while_condition_unroll(a) do
    while a, Nx.less(a, 10), unroll: true do
      a + 1
    end
  end

  # the messages of Nx 0.7.2's defn_test
  @tag :seam
  test "while refuses what Nx refuses: a pattern, a missing do-block, :unroll with a condition" do
    assert_raise ArgumentError,
                 ~r/invalid initial argument for "while". Expected a variable, a variable assignment, or a tuple of the same/,
                 fn ->
                   defmodule InvalidWhilePattern do
                     import Nx.Defn
                     defn upto(a), do: while(:foo, Nx.less(a, 10), do: a + 1)
                   end
                 end

    assert_raise ArgumentError,
                 ~r/expected last argument of "while" to be a do-block, got: a \+ 1/,
                 fn ->
                   defmodule InvalidWhileBlock do
                     import Nx.Defn
                     defn upto(a), do: while(a, Nx.less(a, 10), a + 1)
                   end
                 end

    assert_raise CompileError,
                 ~r/options are not supported on while with conditions, only with generators, got: \[unroll: true\]/,
                 fn -> while_condition_unroll(Nx.tensor(0)) end
  end

  defn initial_binding(x) do
    {doubled, _} =
      while {y = x, i = 0}, i < 3 do
        {y * 2, i + 1}
      end

    # `y = x` and `i = 0` in the state bound y and i here too, to the initial values (Nx 0.7.2)
    {doubled, y, i}
  end

  @tag :seam
  test "variables bound in a while's initial state are visible after it" do
    assert initial_binding(Nx.tensor(1.5)) == {Nx.tensor(12.0), Nx.tensor(1.5), Nx.tensor(0)}
  end

  defn vectorized_cond(p1, c1, p2, c2, c3) do
    cond do
      p1 -> c1
      p2 -> c2
      true -> c3
    end
  end

  test "a cond on predicates vectorized on different axes selects entry by entry, by name" do
    # (EXLA 0.7.2's vectorize_test "cond 2 vectorized preds with different axes"): the branch
    # vectorized on pred1 inside the one on pred2 is put in the result's order of axes, not
    # paired with it by position
    p1 = Nx.vectorize(Nx.tensor([0, 1, 0]), :pred1)
    c1 = Nx.vectorize(Nx.tensor([10, 100]), :pred2)
    p2 = Nx.vectorize(Nx.tensor([1, 0]), :pred2)
    c2 = Nx.vectorize(Nx.tensor([20, 200, 2000]), :pred1)
    expected = Nx.vectorize(Nx.tensor([[20, 40], [10, 100], [2000, 40]]), pred1: 3, pred2: 2)
    assert vectorized_cond(p1, c1, p2, c2, 40) == expected
  end
end
