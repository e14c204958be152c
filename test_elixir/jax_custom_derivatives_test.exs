defmodule NxJax.JaxCustomDerivativesTest do
  # The custom-derivative examples of JAX's documentation (custom_vjp / custom_jvp), written
  # in defn with custom_grad/3 and run on the worker. The numbers are the ones the issue
  # quotes from those examples.
  use ExUnit.Case, async: true

  import Nx.Defn
  import NxJax.GradCheck, only: [check_grads!: 3]

  # Identity forward; backward, the incoming cotangent is clipped to [lo, hi].
  defn clip_gradient(x, lo, hi) do
    custom_grad(x, [x], fn g -> [Nx.min(Nx.max(g, lo), hi)] end)
  end

  defn clipped_sin(x), do: Nx.sin(clip_gradient(x, -0.75, 0.75))
  defn grad_clipped_sin(x), do: grad(x, clipped_sin(x))

  # sin with its derivative declared by hand: g * cos(x). Its own derivative is
  # differentiable again, so grad of grad works through the custom rule.
  defn custom_sin(x), do: custom_grad(Nx.sin(x), [x], fn g -> [g * Nx.cos(x)] end)
  defn grad_custom_sin(x), do: grad(x, custom_sin(x))
  defn grad_grad_custom_sin(x), do: grad(x, fn x -> grad(x, &custom_sin/1) end)
  defn grad_sum_custom_sin(x), do: grad(x, Nx.sum(custom_sin(x)))

  # x ** 2 * y, declaring y's gradient zero (x's is the true 2 * x * y).
  defn x2y(x, y) do
    custom_grad(x ** 2 * y, [x, y], fn g -> [g * 2 * x * y, Nx.multiply(g, 0.0)] end)
  end

  defn grad_x2y(x, y), do: grad({x, y}, fn {x, y} -> x2y(x, y) end)
  defn grad_plain_x2y(x, y), do: grad({x, y}, fn {x, y} -> x ** 2 * y end)

  defp f64(x), do: Nx.tensor(x, type: {:f, 64})
  defp number(t), do: Nx.to_number(t)

  describe "clip_gradient" do
    test "is the identity forward" do
      assert clip_gradient(Nx.tensor([-2.0, 0.5, 3.0]), -0.75, 0.75) ==
               Nx.tensor([-2.0, 0.5, 3.0])

      assert clipped_sin(1.0) == Nx.sin(1.0)
    end

    test "sin(clip_gradient(x)) has grad 0.75 at 0.0 (cos 0 = 1 clipped) and cos 1 at 1.0" do
      assert grad_clipped_sin(0.0) == Nx.tensor(0.75)
      assert_in_delta number(grad_clipped_sin(1.0)), 0.5403023, 1.0e-7
      assert_in_delta number(grad_clipped_sin(f64(1.0))), :math.cos(1.0), 1.0e-15
      # negative cotangents are clipped at -0.75: cos(3.0) = -0.98999
      assert grad_clipped_sin(3.0) == Nx.tensor(-0.75)
    end

    test "matches finite differences where nothing is clipped, and only there" do
      assert :ok = check_grads!(&clipped_sin/1, &grad_clipped_sin/1, f64(1.0))

      assert_raise NxJax.GradCheck.Error, fn ->
        check_grads!(&clipped_sin/1, &grad_clipped_sin/1, f64(0.0))
      end
    end
  end

  describe "custom sin" do
    test "value is sin; grad at 3.0 is -0.9899925 and grad of grad is -0.14112" do
      assert custom_sin(3.0) == Nx.sin(3.0)
      assert_in_delta number(grad_custom_sin(3.0)), -0.9899925, 1.0e-7
      assert_in_delta number(grad_grad_custom_sin(3.0)), -0.14112, 1.0e-6
      assert_in_delta number(grad_grad_custom_sin(f64(3.0))), -:math.sin(3.0), 1.0e-15
    end

    test "first and second derivatives pass the finite-difference check in f64" do
      x = f64([-2.0, 0.5, 3.0])
      sum_sin = fn x -> Nx.sum(custom_sin(x)) end
      assert :ok = check_grads!(sum_sin, &Nx.Defn.grad(&1, sum_sin), x)

      sum_grad = fn x -> Nx.sum(grad_sum_custom_sin(x)) end
      assert :ok = check_grads!(sum_grad, &Nx.Defn.grad(&1, sum_grad), x)
    end
  end

  describe "x ** 2 * y with y's gradient declared zero" do
    test "gives (12.0, 0.0) at (2.0, 3.0), where autodiff gives (12.0, 4.0)" do
      assert x2y(2.0, 3.0) == Nx.tensor(12.0)
      assert grad_x2y(2.0, 3.0) == {Nx.tensor(12.0), Nx.tensor(0.0)}
      assert grad_plain_x2y(2.0, 3.0) == {Nx.tensor(12.0), Nx.tensor(4.0)}
    end

    test "x's declared gradient matches finite differences in f64" do
      y = f64(3.0)
      fx = fn x -> x2y(x, y) end
      assert :ok = check_grads!(fx, &Nx.Defn.grad(&1, fx), f64(2.0))

      fy = fn y -> x2y(f64(2.0), y) end
      assert Nx.Defn.grad(y, fy) == f64(0.0)
      assert_raise NxJax.GradCheck.Error, fn -> check_grads!(fy, &Nx.Defn.grad(&1, fy), y) end
    end
  end
end
