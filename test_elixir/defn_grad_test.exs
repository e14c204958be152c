defmodule NxJax.DefnGradTest do
  # grad, value_and_grad, stop_grad, custom_grad and metadata, end to end on the worker.
  use ExUnit.Case, async: true

  import Nx.Defn

  alias Nx.Defn.Expr

  defn log1pexp(t), do: Nx.log1p(Nx.exp(t))
  defn grad_log1pexp(t), do: grad(t, log1pexp(t))
  defn value_and_grad_log1pexp(t), do: value_and_grad(t, &log1pexp/1)

  defn custom_log1pexp(t) do
    custom_grad(log1pexp(t), [t], fn g -> [g * (1 - 1 / (1 + Nx.exp(t)))] end)
  end

  defn grad_custom_log1pexp(t), do: grad(t, custom_log1pexp(t))

  defn r1psqrt(t), do: t / (1 + Nx.sqrt(t))
  defn grad_r1psqrt(t), do: grad(t, r1psqrt(t))
  defn manual_grad_r1psqrt(t), do: (Nx.sqrt(t) + 2) / (2 * (Nx.sqrt(t) + 1) ** 2)

  defn custom_r1psqrt(t) do
    custom_grad(r1psqrt(t), [t], fn g -> [g * manual_grad_r1psqrt(t)] end)
  end

  defn grad_custom_r1psqrt(t), do: grad(t, custom_r1psqrt(t))

  defn grad_stop_exp(x), do: grad(x, fn x -> stop_grad(Nx.exp(x)) + x * x end)
  defn grad_x_stop_x(x), do: grad(x, fn x -> x * stop_grad(x) end)
  defn grad_metadata(x), do: grad(x, fn x -> Expr.metadata(x * x, %{oops: true}) end)
  defn grad_grad_sin(x), do: grad(x, fn x -> grad(x, &Nx.sin/1) end)

  # A tuple expression with a custom gradient: d/dx of a*b where {a, b} = {2x, 3x}
  # would be 12x; the custom rule says the gradient is ga + gb instead.
  defn custom_tuple(x) do
    {a, b} = custom_grad({2 * x, 3 * x}, [x], fn {ga, gb} -> [ga + gb] end)
    a * b
  end

  defn grad_custom_tuple(x), do: grad(x, custom_tuple(x))

  defn grad_two(x, y), do: grad({x, y}, fn {x, y} -> Nx.sum(x * y + Nx.sin(y)) end)

  defn bad_custom_grad(t), do: grad(t, custom_grad(Nx.exp(t), [t], fn g -> g end))
  defn non_scalar_grad(t), do: grad(t, Nx.exp(t))

  defp f64(x), do: Nx.tensor(x, type: {:f, 64})

  # (Nx 0.7.2's grad_test "simple": the function gets its own copy of x)
  defn grad_of_captured(t), do: grad(t, fn _t -> t end)
  defn grad_captured_times_own(x), do: grad(x, fn y -> x * y end)

  describe "a value the function captures from outside" do
    test "is a constant of the function, as in Nx 0.7.2" do
      assert grad_of_captured(Nx.tensor(1.0)) == Nx.tensor(0.0)
      assert grad_of_captured(Nx.tensor([1.0, 2.0])) == Nx.tensor([0.0, 0.0])
      # d/dy (x * y) = x, not d/dx (x * x) = 2x
      assert grad_captured_times_own(Nx.tensor(3.0)) == Nx.tensor(3.0)
      # the function's own argument is still differentiated
      assert Nx.Defn.grad(Nx.tensor(2.0), &Nx.multiply(&1, &1)) == Nx.tensor(4.0)
    end
  end

  describe "log1pexp" do
    test "value and gradient at 3.0" do
      assert log1pexp(3.0) == Nx.tensor(3.0485873)
      assert_in_delta Nx.to_number(log1pexp(3.0)), 3.0485873, 1.0e-7
      assert grad_log1pexp(3.0) == Nx.tensor(0.95257413)
    end

    test "value_and_grad at 1.0, inside defn and from Nx.Defn" do
      assert {value, grad} = value_and_grad_log1pexp(1.0)
      assert {value, grad} == {Nx.tensor(1.3132616), Nx.tensor(0.7310586)}
      assert Nx.Defn.value_and_grad(1.0, &log1pexp/1) == {value, grad}
      assert Nx.Defn.grad(Nx.tensor(1.0), &log1pexp/1) == grad
    end

    test "autodiff overflows at 100.0 while custom_grad gives exactly 1.0" do
      assert Nx.to_number(grad_log1pexp(100.0)) == :nan
      assert Nx.to_number(grad_custom_log1pexp(100.0)) == 1.0
      assert grad_custom_log1pexp(100.0) == Nx.tensor(1.0)
    end

    test "custom_grad in f64 at 709.0 gives 1.0" do
      result = grad_custom_log1pexp(f64(709.0))
      assert result.type == {:f, 64}
      assert Nx.to_number(result) == 1.0
    end

    test "custom_grad agrees with autodiff where autodiff is fine" do
      for t <- [-2.0, 0.0, 0.5, 3.0] do
        assert_in_delta Nx.to_number(grad_custom_log1pexp(t)),
                        Nx.to_number(grad_log1pexp(t)),
                        1.0e-6
      end
    end

    test "check_grads! passes for log1pexp at 0.5 in f64, autodiff and custom" do
      assert :ok = NxJax.GradCheck.check_grads!(&log1pexp/1, &grad_log1pexp/1, f64(0.5))

      assert :ok =
               NxJax.GradCheck.check_grads!(&custom_log1pexp/1, &grad_custom_log1pexp/1, f64(0.5))
    end

    test "check_grads! perturbs every element of a tensor x" do
      x = Nx.tensor([-1.0, 0.5, 2.0], type: {:f, 64})
      loss = fn x -> Nx.sum(log1pexp(x)) end
      assert :ok = NxJax.GradCheck.check_grads!(loss, &Nx.Defn.grad(&1, loss), x)
    end

    test "check_grads! raises with both values when the gradient is wrong" do
      wrong = fn x -> Nx.multiply(Nx.Defn.grad(x, &log1pexp/1), 2.0) end

      error =
        assert_raise NxJax.GradCheck.Error, fn ->
          NxJax.GradCheck.check_grads!(&log1pexp/1, wrong, f64(0.5))
        end

      assert error.message =~ "grad_fun gave 1.24"
      assert error.message =~ "finite differences give 0.62"
    end
  end

  describe "r1psqrt" do
    test "autodiff is NaN at 0.0, the manual gradient is 1.0" do
      assert Nx.to_number(grad_r1psqrt(0.0)) == :nan
      assert manual_grad_r1psqrt(0.0) == Nx.tensor(1.0)
    end

    test "custom_grad gives 1.0 at 0.0 and matches autodiff at 4.0" do
      assert grad_custom_r1psqrt(0.0) == Nx.tensor(1.0)

      assert_in_delta Nx.to_number(grad_custom_r1psqrt(4.0)),
                      Nx.to_number(grad_r1psqrt(4.0)),
                      1.0e-7

      assert :ok = NxJax.GradCheck.check_grads!(&r1psqrt/1, &grad_custom_r1psqrt/1, f64(4.0))
    end
  end

  describe "stop_grad and metadata" do
    test "stop_grad keeps the value and zeroes its gradient" do
      assert grad_stop_exp(3.0) == Nx.tensor(6.0)
      assert grad_x_stop_x(3.0) == Nx.tensor(3.0)
      assert Nx.Defn.jit(fn x -> Nx.Defn.Kernel.stop_grad(Nx.exp(x)) end).(0.0) == Nx.tensor(1.0)
    end

    test "other metadata lets gradients through" do
      assert grad_metadata(3.0) == Nx.tensor(6.0)

      assert :ok =
               NxJax.GradCheck.check_grads!(
                 &Expr.metadata(Nx.multiply(&1, &1), %{oops: true}),
                 &grad_metadata/1,
                 f64(3.0)
               )
    end
  end

  describe "grad" do
    test "grad of grad of sin at 3.0 is -sin(3.0)" do
      assert_in_delta Nx.to_number(grad_grad_sin(3.0)), -0.14112, 1.0e-6
    end

    test "with respect to a tuple of tensors" do
      x = Nx.tensor([1.0, 2.0])
      y = Nx.tensor([3.0, 4.0])
      {gx, gy} = grad_two(x, y)
      assert gx == y
      assert Nx.to_flat_list(gy) == Nx.to_flat_list(Nx.add(x, Nx.cos(y)))
    end

    test "with respect to a map of tensors, outside defn" do
      grads = Nx.Defn.grad(%{a: 2.0, b: 5.0}, fn %{a: a, b: b} -> Nx.multiply(a, b) end)
      assert grads == %{a: Nx.tensor(5.0), b: Nx.tensor(2.0)}
    end

    # Nx 0.7.2 seeds a non-scalar value with ones (this raised before, unlike Nx)
    test "of a value that is not a scalar is the gradient of its sum, as in Nx" do
      assert non_scalar_grad(Nx.tensor([1.0, 2.0])) == Nx.exp(Nx.tensor([1.0, 2.0]))
    end
  end

  describe "custom_grad" do
    test "over a tuple expression gets a tuple of cotangents" do
      # value a * b = 6x^2; gradient ga + gb = b + a = 5x
      assert custom_tuple(2.0) == Nx.tensor(24.0)
      assert grad_custom_tuple(2.0) == Nx.tensor(10.0)
    end

    test "a wrong return value raises ArgumentError naming the fix" do
      assert_raise ArgumentError, ~r/must return a list with one gradient per input/, fn ->
        bad_custom_grad(1.0)
      end
    end

    test "gradients are broadcast to the input's shape" do
      f = fn x -> Nx.sum(Nx.Defn.Kernel.custom_grad(Nx.exp(x), [x], fn _g -> [2.0] end)) end
      assert Nx.Defn.grad(Nx.tensor([1.0, 2.0, 3.0]), f) == Nx.tensor([2.0, 2.0, 2.0])
    end
  end

  describe "as Nx 0.7.2's grad_test" do
    test "a bitcast to the type a value has passes its gradient through" do
      f = &Nx.sum(Nx.bitcast(&1, {:f, 32}))
      assert Nx.Defn.grad(Nx.tensor([1, 2, 3], type: {:s, 32}), f) == Nx.tensor([1.0, 1.0, 1.0])
    end

    test "integer indices computed from an integer input have a zero gradient" do
      t = Nx.iota({3, 4})
      i = Nx.tensor([[0, 0], [2, 2], [1, 0], [0, 1], [2, 3]])
      u = Nx.tensor([1, -1, 2, -2, 3])

      add = fn i ->
        t |> Nx.indexed_add(Nx.multiply(i, 2) |> Nx.min(2), u) |> Nx.sin() |> Nx.sum()
      end

      assert Nx.Defn.grad(i, add) == Nx.broadcast(0.0, {5, 2})
      assert Nx.Defn.grad(i, &Nx.sum(Nx.indexed_put(t, &1, u))) == Nx.broadcast(0.0, {5, 2})

      slice = &Nx.sum(Nx.slice(Nx.iota({5}, type: :f32), [&1], [2]))
      assert Nx.Defn.grad(Nx.tensor(1), slice) == Nx.tensor(0.0)
      # float indices that do not come from an integer input are still refused
      assert_raise ArgumentError, "indices must be an integer tensor, got {:f, 32}", fn ->
        Nx.Defn.grad(Nx.tensor(1.0), &Nx.sum(Nx.take(Nx.iota({3}), &1)))
      end
    end

    test "what is not a container is refused by Nx.Container; a tuple value is not a scalar" do
      assert_raise Protocol.UndefinedError, fn -> Nx.Defn.grad(:invalid, & &1) end

      assert_raise ArgumentError, ~r"expected a tensor or a number", fn ->
        Nx.Defn.grad(Nx.tensor(1.0), &{Nx.add(&1, 1), Nx.subtract(&1, 1)})
      end
    end
  end

  defn grad_quotient(t), do: grad(t, &Nx.quotient(&1, 2))

  defn quotient_beside_the_value(t),
    do: value_and_grad(t, fn t -> {t * t, Nx.quotient(t, 2)} end, fn {y, _} -> y end)

  describe "quotient (as Nx 0.7.2)" do
    test "the gradient through it is refused with Nx's message" do
      assert_raise ArgumentError, ~r"^cannot compute gradient for Nx.quotient/2", fn ->
        grad_quotient(2)
      end
    end

    test "of an integer input it computes on the integer when the gradient does not reach it" do
      assert quotient_beside_the_value(Nx.tensor(3)) ==
               {{Nx.tensor(9), Nx.tensor(1)}, Nx.tensor(6.0)}
    end
  end

  defn grad_composed_window_scatter_min(t, source, init) do
    grad({t, source, init}, fn {t, source, init} ->
      t
      |> Nx.pow(2)
      |> Nx.window_scatter_min(source, init, {2, 3}, strides: [2, 3], padding: :valid)
      |> Nx.exp()
      |> Nx.add(Nx.multiply(init, 2))
    end)
  end

  test "window_scatter's init value gradient adds up as Nx's sum (the f32 value of Nx 0.7.2)" do
    t =
      Nx.tensor([[7, 2, 5, 3, 10, 2], [3, 8, 9, 3, 4, 2], [1, 5, 7, 5, 6, 1], [0, 6, 2, 7, 2, 8]])

    {dt, _dsource, dinit} = grad_composed_window_scatter_min(t, Nx.tensor([[2, 6], [3, 1]]), 0)
    # 2 * 24 + 20 + exp(2) + exp(6) + exp(3) + exp(1); a sum in f32 gives 501.6217041015625
    assert dinit == Nx.tensor(501.6216735839844)
    assert dt == Nx.broadcast(0.0, {4, 6})
  end
end
