# The gradient helpers in one page: plain autodiff against custom_grad.
#
#     make demo        (or: mix run examples/grad_helpers.exs)
#
# Every number below is computed by the Python JAX worker from a graph traced here in Elixir.
defmodule GradHelpers do
  import Nx.Defn

  # log(1 + e^t): plain autodiff overflows exp(t) and gives NaN for large t.
  defn log1pexp(t), do: Nx.log1p(Nx.exp(t))
  defn grad_log1pexp(t), do: grad(t, log1pexp(t))

  defn custom_log1pexp(t) do
    custom_grad(log1pexp(t), [t], fn g -> [g * (1 - 1 / (1 + Nx.exp(t)))] end)
  end

  defn grad_custom_log1pexp(t), do: grad(t, custom_log1pexp(t))
  defn print_grad_custom_log1pexp(t), do: print_expr(grad(t, custom_log1pexp(t)))

  # t / (1 + sqrt(t)): the derivative of sqrt is infinite at 0, autodiff gives NaN there.
  defn r1psqrt(t), do: t / (1 + Nx.sqrt(t))
  defn grad_r1psqrt(t), do: grad(t, r1psqrt(t))
  defn manual_grad_r1psqrt(t), do: (Nx.sqrt(t) + 2) / (2 * (Nx.sqrt(t) + 1) ** 2)

  defn custom_r1psqrt(t) do
    custom_grad(r1psqrt(t), [t], fn g -> [g * manual_grad_r1psqrt(t)] end)
  end

  defn grad_custom_r1psqrt(t), do: grad(t, custom_r1psqrt(t))

  # stop_grad: the value passes, the gradient does not.
  defn stopped(x), do: grad(x, fn x -> stop_grad(Nx.exp(x)) + x * x end)
end

# Numbers printed as Nx 0.7.2 prints them: the shortest decimal of the value as a double.
format = fn tensor -> Inspect.Nx.Tensor.format_number(Nx.to_number(tensor), Nx.type(tensor)) end

rows = [
  {"log1p(exp(t))", Nx.tensor(3.0), &GradHelpers.grad_log1pexp/1,
   &GradHelpers.grad_custom_log1pexp/1},
  {"log1p(exp(t))", Nx.tensor(100.0), &GradHelpers.grad_log1pexp/1,
   &GradHelpers.grad_custom_log1pexp/1},
  {"log1p(exp(t)) f64", Nx.tensor(710.0, type: :f64), &GradHelpers.grad_log1pexp/1,
   &GradHelpers.grad_custom_log1pexp/1},
  {"t / (1 + sqrt(t))", Nx.tensor(0.0), &GradHelpers.grad_r1psqrt/1,
   &GradHelpers.grad_custom_r1psqrt/1},
  {"t / (1 + sqrt(t))", Nx.tensor(4.0), &GradHelpers.grad_r1psqrt/1,
   &GradHelpers.grad_custom_r1psqrt/1}
]

IO.puts(
  "Gradients computed by JAX (#{NxJax.Worker.call(:info, [])[:backend]}) from Elixir defn\n"
)

header = ["function", "t", "autodiff grad", "custom_grad grad"]

lines =
  for {name, t, autodiff, custom} <- rows do
    [name, format.(t), format.(autodiff.(t)), format.(custom.(t))]
  end

widths =
  Enum.map(0..3, fn i -> Enum.max(Enum.map([header | lines], &String.length(Enum.at(&1, i)))) end)

print = fn cells ->
  cells
  |> Enum.zip(widths)
  |> Enum.map_join("  ", fn {cell, width} -> String.pad_trailing(cell, width) end)
  |> String.trim_trailing()
  |> IO.puts()
end

print.(header)
print.(Enum.map(widths, &String.duplicate("-", &1)))
Enum.each(lines, print)

IO.puts("\ngrad of stop_grad(exp(x)) + x * x at x = 3.0: #{format.(GradHelpers.stopped(3.0))}")
IO.puts("\nThe graph shipped for grad of the custom log1pexp (print_expr/1 inside defn):")
GradHelpers.print_grad_custom_log1pexp(Nx.tensor(1.0))
