defmodule NxJax.CheckGradsTest do
  # NxJax.GradCheck.check_grads!/3, as jax.test_util.check_grads: forward and reverse modes,
  # orders 1 and 2, containers in and out, tolerances by type; and that it catches wrong rules.
  use ExUnit.Case, async: true

  doctest NxJax.GradCheck

  alias NxJax.GradCheck

  test "orders 1 and 2, both modes, on functions of several and of container arguments" do
    f = fn x, y -> Nx.sum(Nx.multiply(Nx.sin(x), y)) end
    x = Nx.tensor([0.5, 1.0, 2.0], type: :f64)
    assert GradCheck.check_grads!(f, [x, Nx.tensor(3.0, type: :f64)], order: 2) == :ok

    g = fn %{a: a, b: {b, c}} ->
      %{out: Nx.multiply(Nx.exp(a), b), other: Nx.tanh(Nx.add(c, a))}
    end

    arg = %{
      a: Nx.tensor([0.1, -0.3], type: :f64),
      b: {Nx.tensor(2.0, type: :f64), Nx.tensor(0.5, type: :f64)}
    }

    assert GradCheck.check_grads!(g, [arg], order: 2) == :ok
  end

  test "f32 inputs are checked with f32 tolerances" do
    h = fn x -> Nx.multiply(Nx.log1p(Nx.exp(x)), Nx.cos(x)) end
    assert GradCheck.check_grads!(h, [Nx.tensor([-1.0, 0.25, 1.5])], order: 2) == :ok
  end

  test "a wrong custom_grad fails reverse mode, a wrong custom_jvp forward mode" do
    wrong_grad = fn x ->
      Nx.Defn.Kernel.custom_grad(Nx.sin(x), [x], fn g -> [Nx.multiply(g, 2.0)] end)
    end

    x = Nx.tensor([0.3, 0.6], type: :f64)

    error =
      assert_raise GradCheck.Error, fn ->
        GradCheck.check_grads!(wrong_grad, [x], modes: [:rev])
      end

    assert error.message =~ "rev-mode derivative of order 1 is off"

    wrong_jvp = fn x ->
      NxJax.Autodiff.custom_jvp(Nx.sin(x), [x], fn [t] -> Nx.multiply(t, 3.0) end)
    end

    error =
      assert_raise GradCheck.Error, fn ->
        GradCheck.check_grads!(wrong_jvp, [x], modes: [:fwd])
      end

    assert error.message =~ "fwd-mode derivative of order 1 is off"
  end

  test "bad options and integer arguments are refused; import Nx.Defn does not bring it" do
    f = fn x -> Nx.exp(x) end

    assert_raise ArgumentError, ~r/:order to be 1 or 2/, fn ->
      GradCheck.check_grads!(f, [1.0], order: 3)
    end

    assert_raise ArgumentError, ~r/:modes to be/, fn ->
      GradCheck.check_grads!(f, [1.0], modes: [:up])
    end

    assert_raise ArgumentError, ~r/floating-point arguments, got: \{:s, 64\}/, fn ->
      GradCheck.check_grads!(f, [Nx.tensor(1)])
    end

    refute function_exported?(Nx.Defn, :check_grads!, 3)
    refute function_exported?(Nx.Defn.Kernel, :check_grads!, 3)
  end
end
