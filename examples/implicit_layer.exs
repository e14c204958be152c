# A fixed-point ("deep equilibrium") layer: z = tanh(W z + x), found by iterating, and its
# gradient by implicit differentiation (NxJax.Autodiff.Implicit.custom_root/4): the solver's
# iterations are never differentiated, so they cost nothing in the backward pass and may run
# as long as they need (an unbounded while).
#
#     mix run examples/implicit_layer.exs
#
# The same gradient through 60 unrolled iterations (a range loop, differentiated step by step)
# is printed beside it.
defmodule ImplicitLayer do
  import Nx.Defn
  import NxJax.Autodiff

  defn residual(z, w, x), do: Nx.tanh(Nx.dot(w, z) + x) - z

  # the equilibrium by fixed-point iteration until it moves less than 1e-6
  defn equilibrium(w, x) do
    custom_root(
      fn z -> residual(z, w, x) end,
      Nx.broadcast(0.0, x),
      fn f, z0 ->
        {z, _step, _i} =
          while {z = z0, step = 1.0, i = 0}, step > 1.0e-6 and i < 1000 do
            next = z + f.(z)
            {next, Nx.reduce_max(Nx.abs(next - z)), i + 1}
          end

        z
      end,
      # g is v -> (dF/dz) v at the root: its matrix from the unit vectors, then a solve
      fn g, y ->
        columns = for i <- 0..3, do: g.(Nx.equal(Nx.iota({4}), i))
        Nx.LinAlg.solve(Nx.stack(columns, axis: 1), y)
      end
    )
  end

  defn unrolled(w, x) do
    {z, _w, _x} =
      while {z = Nx.broadcast(0.0, x), w, x}, _i <- 1..60 do
        {Nx.tanh(Nx.dot(w, z) + x), w, x}
      end

    z
  end

  defn loss(w, x), do: Nx.sum(equilibrium(w, x) ** 2)
  defn unrolled_loss(w, x), do: Nx.sum(unrolled(w, x) ** 2)
end

w =
  Nx.tensor([
    [0.3, -0.2, 0.1, 0.0],
    [0.1, 0.25, -0.15, 0.2],
    [-0.2, 0.1, 0.3, 0.1],
    [0.05, 0.0, 0.2, -0.3]
  ])

x = Nx.tensor([0.5, -1.0, 0.25, 0.8])
z = ImplicitLayer.equilibrium(w, x)
IO.puts("equilibrium z:        #{inspect(Nx.to_flat_list(z))}")

IO.puts(
  "residual at z (max):  #{Nx.to_number(Nx.reduce_max(Nx.abs(ImplicitLayer.residual(z, w, x))))}"
)

{dw, dx} = Nx.Defn.grad({w, x}, fn {w, x} -> ImplicitLayer.loss(w, x) end)
{uw, ux} = Nx.Defn.grad({w, x}, fn {w, x} -> ImplicitLayer.unrolled_loss(w, x) end)
IO.puts("d loss / d x, implicit: #{inspect(Nx.to_flat_list(dx))}")
IO.puts("d loss / d x, unrolled: #{inspect(Nx.to_flat_list(ux))}")

diff = fn a, b -> Nx.to_number(Nx.reduce_max(Nx.abs(Nx.subtract(a, b)))) end
IO.puts("max difference, d/dW: #{diff.(dw, uw)}, d/dx: #{diff.(dx, ux)}")
