defmodule NxJax.DebugNansTest do
  # debug_nans: true (a jit/defn option): the worker runs the graph op by op and the first NaN
  # or infinity, forward or backward, fails the call naming the op and its line here.
  use ExUnit.Case, async: true

  import Nx.Defn

  @softplus_line __ENV__.line + 1
  defn softplus(t), do: Nx.log1p(Nx.exp(t))

  defn ratio(x) do
    one_plus_root = 1 + Nx.sqrt(x)
    x / one_plus_root
  end

  @root_line __ENV__.line - 4

  defn stable_ratio(x) do
    value = x / (1 + Nx.sqrt(x))
    custom_grad(value, [x], fn g -> [g * (1 + Nx.sqrt(x) / 2) / (1 + Nx.sqrt(x)) ** 2] end)
  end

  defn hooked(x), do: x |> Nx.exp() |> hook(&send(self(), {:hooked, &1})) |> Nx.multiply(2)

  defp debug(fun, arg), do: Nx.Defn.jit(fun, debug_nans: true).(arg)

  test "finite runs give the jitted values" do
    for t <- [-3.0, 0.5, 20.0] do
      g = fn t -> grad(t, &softplus/1) end
      assert debug(&softplus/1, t) == softplus(t)
      assert debug(g, t) == Nx.Defn.jit(g).(t)
    end
  end

  test "an overflow in the forward pass names exp, its line and its input" do
    error =
      assert_raise NxJax.WorkerError, fn -> debug(fn t -> grad(t, &softplus/1) end, 100.0) end

    assert error.class == "NonFinite"

    assert error.message =~
             "inf first appeared in the forward pass, in the value of exp at " <>
               "test_elixir/debug_nans_test.exs:#{@softplus_line}, computed from finite " <>
               "inputs (input 0: float32 100.0)"

    # without the option the value is silently infinite
    assert Nx.to_number(softplus(100.0)) == :infinity
  end

  test "a NaN made by a gradient rule names the rule's op, its line, and custom_grad" do
    error = assert_raise NxJax.WorkerError, fn -> debug(fn x -> grad(x, &ratio/1) end, 0.0) end
    assert error.class == "NonFinite"

    assert error.message =~
             "nan first appeared in the backward pass of grad"

    assert error.message =~
             "the gradient rule of sqrt at test_elixir/debug_nans_test.exs:#{@root_line} " <>
               "turned a finite incoming gradient"

    assert error.message =~ "its forward inputs: input 0: float32 0.0"
    assert error.message =~ "consider custom_grad/3"
    # (the report has no Python traceback: it names its node itself)
    refute error.message =~ "Traceback"
    # without the option: NaN, silently
    assert Nx.to_number(grad(Nx.tensor(0.0), &ratio/1)) == :nan
  end

  test "custom_grad gives the finite gradient: nothing to report" do
    assert debug(fn x -> grad(x, &stable_ratio/1) end, 0.0) == Nx.tensor(1.0)
    assert_in_delta Nx.to_number(debug(fn x -> grad(x, &stable_ratio/1) end, 4.0)), 2 / 9, 1.0e-6
  end

  test "hooks fire in a debug run, and the worker serves on after a report" do
    assert debug(&hooked/1, 0.0) == Nx.tensor(2.0)
    assert_received {:hooked, value}
    assert value == Nx.tensor(1.0)
    assert_raise NxJax.WorkerError, fn -> debug(&softplus/1, 100.0) end
    assert hooked(Nx.tensor(0.0)) == Nx.tensor(2.0)
  end
end
