defmodule Nx.Helpers do
  @moduledoc false
  # What Nx 0.7.2's test files import from their test/support (written for nx_jax; the same
  # behaviour: defaults, the one-step finite difference, the messages' content).
  import ExUnit.Assertions

  # grad_func.(x) against (func.(x + step/2) - func.(x - step/2)) / step, a difference taken
  # along every element of x at once (the tests call it with scalar x)
  def check_grads!(func, grad_func, x, opts \\ []) when is_list(opts) do
    atol = Keyword.get(opts, :atol, 1.0e-7)
    rtol = Keyword.get(opts, :rtol, 1.0e-4)
    step = Keyword.get(opts, :step, 1.0e-4)
    half = Nx.divide(step, 2.0)
    estimate = Nx.divide(Nx.subtract(func.(Nx.add(x, half)), func.(Nx.subtract(x, half))), step)
    computed = grad_func.(x)

    close!(computed, estimate, [atol: atol, rtol: rtol], "\nfor input\n\n#{inspect(x)}\n")
  end

  def assert_all_close(lhs, rhs, opts \\ []) do
    tolerance = [
      atol: Keyword.get(opts, :atol, 1.0e-4),
      rtol: Keyword.get(opts, :rtol, 1.0e-4),
      equal_nan: Keyword.get(opts, :equal_nan, false)
    ]

    close!(lhs, rhs, tolerance, "")
  end

  defp close!(lhs, rhs, tolerance, suffix) do
    unless Nx.all_close(lhs, rhs, tolerance) == Nx.tensor(1, type: {:u, 8}) do
      flunk(
        "expected\n\n#{inspect(lhs)}\n\nto be within tolerance of\n\n#{inspect(rhs)}\n#{suffix}"
      )
    end
  end
end
