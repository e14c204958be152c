# Finding where a NaN comes from: `debug_nans: true` runs a call op by op on the worker and
# stops at the first NaN or infinity, naming the op and the line of this file that wrote it,
# in the forward pass or in the gradient rule that made it.
#
#     mix run examples/nan_hunting.exs
defmodule NanHunting do
  import Nx.Defn

  # log(1 + e^t): e^t overflows f32 for t > 88
  defn log1pexp(t), do: Nx.log1p(Nx.exp(t))

  # t / (1 + sqrt(t)): finite at 0, but the derivative of sqrt there is infinite
  defn r1psqrt(t), do: t / (1 + Nx.sqrt(t))

  # the fix: a gradient written for the whole expression
  defn stable_r1psqrt(t) do
    custom_grad(r1psqrt(t), [t], fn g -> [g * (Nx.sqrt(t) + 2) / (2 * (Nx.sqrt(t) + 1) ** 2)] end)
  end
end

report = fn label, fun, x ->
  plain = Nx.Defn.jit(fun).(x)
  IO.puts("#{label} at #{x}: #{Nx.to_number(plain)} without debug_nans")

  try do
    Nx.Defn.jit(fun, debug_nans: true).(x)
    IO.puts("  debug_nans: nothing to report\n")
  rescue
    error in NxJax.WorkerError -> IO.puts("  #{error.class}: #{error.message}\n")
  end
end

report.("grad of log1pexp", &Nx.Defn.grad(&1, fn t -> NanHunting.log1pexp(t) end), 100.0)
report.("grad of r1psqrt", &Nx.Defn.grad(&1, fn t -> NanHunting.r1psqrt(t) end), 0.0)

report.(
  "grad of stable_r1psqrt",
  &Nx.Defn.grad(&1, fn t -> NanHunting.stable_r1psqrt(t) end),
  0.0
)
