defmodule NxJax.Autodiff.Implicit do
  @moduledoc """
  Implicit differentiation inside `defn`: `custom_root/4` (`jax.lax.custom_root`) and
  `custom_linear_solve/5` (`jax.lax.custom_linear_solve`). Their gradients come from the
  equation the result satisfies, not from the iterations of the solver that found it, so a
  solver written with an unbounded `while` is never differentiated (and need not be
  differentiable at all). Users reach them through `NxJax.Autodiff`.

  Each function given here is traced once into a sub-graph of the node (as the branches of
  `if` and the bodies of `while` are, `Nx.Defn.ControlFlow`): the values it closes over become
  captures of the node, and gradients flow to them. The linear functions the solvers receive
  (`g` of a tangent solve, `matvec` of a linear solve, and its transpose) are supplied by JAX
  when the node runs: inside the solver they are `:linear_map` nodes (docs/PROTOCOL.md 4.3).

  Their values are tensors (not containers) of a floating-point type. Vectorized values
  (`Nx.vectorize/2`) are solved whole: the unknown has the vectorized axes of the initial
  guess (or `b`) and of what `f` (or `matvec`) makes of it, so a vectorized equation is one
  equation per entry and its gradient is each entry's, as `jax.vmap` of the solve would give;
  the linear maps the solvers receive act on each entry on its own (a block-diagonal map).
  """

  alias Nx.Defn.{ControlFlow, Expr}
  alias NxJax.Autodiff.Checks

  @doc """
  The root `x` of `f` (`f.(x) == 0`, `x` shaped like `initial_guess`) that
  `solve.(f, initial_guess)` finds, with the gradient of the implicit function theorem:
  d x = -(df/dx)^-1 (df/dp) d p for every value `p` that `f` closes over.
  `tangent_solve.(g, y)` must return `v` with `g.(v) == y`, `g` being the linear map
  v -> (df/dx) v at the root (for a scalar, `fn g, y -> y / g.(1.0) end`).

  `solve` is run, never differentiated; the initial guess gets a zero gradient.

  ## Examples

  The square root of `a` by six Newton steps from 1.0; its derivative 1 / (2 sqrt(a)) comes
  from `f`, not from the steps:

      iex> sqrt = fn a ->
      ...>   NxJax.Autodiff.Implicit.custom_root(
      ...>     fn x -> Nx.subtract(Nx.multiply(x, x), a) end,
      ...>     1.0,
      ...>     fn f, x0 ->
      ...>       Enum.reduce(1..6, x0, fn _, x -> Nx.subtract(x, Nx.divide(f.(x), Nx.multiply(2, x))) end)
      ...>     end,
      ...>     fn g, y -> Nx.divide(y, g.(1.0)) end
      ...>   )
      ...> end
      iex> Nx.Defn.jit(sqrt).(2.0) |> Nx.to_number()
      1.4142135381698608
      iex> Nx.Defn.grad(Nx.tensor(2.0), sqrt) |> Nx.to_number()
      0.3535533845424652
  """
  def custom_root(f, initial_guess, solve, tangent_solve)
      when is_function(f, 1) and is_function(solve, 2) and is_function(tangent_solve, 2) do
    x0 = initial_guess |> unknown!("custom_root/4", "the initial guess") |> widened(f)
    fit = &fit!(&1, x0, &2)

    {{[x], [residual]}, f_scope} = trace([x0], fn [x] -> [fit.(f.(x), "f.(x)")] end)

    {{[guess], [root]}, solve_scope} =
      trace([x0], fn [guess] -> [fit.(solve.(&fit.(f.(&1), "f.(x)"), guess), "solve")] end)

    {{[y], [v]}, tangent_scope} =
      trace([x0], fn [y] ->
        [fit.(tangent_solve.(linear_map(x0, "g"), y), "tangent_solve")]
      end)

    scope = Enum.reduce([solve_scope, tangent_scope], f_scope, &MapSet.union/2)
    captures = ControlFlow.captures([residual, root, v], scope)

    opts = %{
      f: {:subgraph, [residual], [x | captures]},
      solve: {:subgraph, [root], [guess | captures]},
      tangent_solve: {:subgraph, [v], [y | captures]}
    }

    Expr.expr(:custom_root, node_inputs([x0 | captures]), opts, Expr.template_of(x0))
  end

  @doc """
  The solution `x` of the linear system `matvec.(x) == b` that `solve.(matvec, b)` computes,
  differentiated as the solution of that system (with respect to `b` and to every value
  `matvec` closes over), not through the solver's steps.

  Reverse mode needs the transposed system: give `transpose_solve.(vecmat, b)` (solving
  `vecmat.(x) == b`, `vecmat` the transpose of `matvec`), or `symmetric: true` when the
  matrix is symmetric (then `solve` serves for both). `transpose_solve` may be `nil`
  (forward mode only). `matvec` must be linear in `x`; `b` and `x` have the same shape.

  ## Examples

      iex> a = Nx.tensor([[2.0, 1.0], [1.0, 3.0]])
      iex> solve = fn b ->
      ...>   NxJax.Autodiff.Implicit.custom_linear_solve(&Nx.dot(a, &1), b,
      ...>     fn _matvec, b -> Nx.LinAlg.solve(a, b) end, nil, symmetric: true)
      ...> end
      iex> Nx.Defn.jit(solve).(Nx.tensor([1.0, 2.0])) |> Nx.to_flat_list()
      [0.19999998807907104, 0.6000000238418579]
      iex> Nx.Defn.grad(Nx.tensor([1.0, 2.0]), &Nx.sum(solve.(&1))) |> Nx.to_flat_list()
      [0.4000000059604645, 0.20000000298023224]
  """
  def custom_linear_solve(matvec, b, solve, transpose_solve, opts \\ [])
      when is_function(matvec, 1) and is_function(solve, 2) and
             (is_function(transpose_solve, 2) or is_nil(transpose_solve)) do
    symmetric = Checks.linear_solve_options!(opts)
    b = b |> unknown!("custom_linear_solve/5", "b") |> widened(matvec)
    fit = &fit!(&1, b, &2)

    {{[x], [ax]}, matvec_scope} = trace([b], fn [x] -> [fit.(matvec.(x), "matvec.(x)")] end)

    {{[rhs], [solution]}, solve_scope} =
      trace([b], fn [rhs] -> [fit.(solve.(linear_map(b, "matvec"), rhs), "solve")] end)

    {transpose, scopes} =
      case transpose_solve do
        nil ->
          {nil, [matvec_scope, solve_scope]}

        fun ->
          {{[rhs], [solution]}, scope} =
            trace([b], fn [rhs] ->
              [fit.(fun.(linear_map(b, "vecmat"), rhs), "transpose_solve")]
            end)

          {{rhs, solution}, [matvec_scope, solve_scope, scope]}
      end

    scope = Enum.reduce(scopes, &MapSet.union/2)
    outputs = [ax, solution] ++ if(transpose, do: [elem(transpose, 1)], else: [])
    captures = ControlFlow.captures(outputs, scope)

    opts = %{
      matvec: {:subgraph, [ax], [x | captures]},
      solve: {:subgraph, [solution], [rhs | captures]},
      transpose_solve:
        transpose && {:subgraph, [elem(transpose, 1)], [elem(transpose, 0) | captures]},
      symmetric: symmetric
    }

    Expr.expr(:custom_linear_solve, node_inputs([b | captures]), opts, Expr.template_of(b))
  end

  ## Tracing

  # The unknown's type and vectorized axes: those of the initial guess (or b) merged with
  # what `fun` makes of it (an f32 guess 1.0 for an f64 equation solves in f64; a scalar guess
  # for an equation that reads a vectorized value has one entry per entry of it), found by
  # tracing `fun` once in a scope that is then dropped.
  defp widened(unknown, fun) do
    {{_params, out}, _scope} = trace([unknown], fn [x] -> fun.(x) end)

    case out do
      %Nx.Tensor{type: {kind, _} = type} when kind in [:f, :bf] ->
        axes = Expr.vectorized_union([unknown, out])

        unknown
        |> Nx.as_type(Nx.Type.merge(unknown.type, type))
        |> Expr.align_vectorized(axes)

      # (anything else is refused when it is traced for good)
      _ ->
        unknown
    end
  end

  defp trace(templates, fun), do: ControlFlow.trace_on_parameters(templates, fun)

  # The linear map JAX passes to a solver, applied to `v` (shaped and typed like `like`).
  defp linear_map(like, name) do
    fn v ->
      # (a number or scalar stands for a constant vector: g.(1.0) for a scalar unknown)
      v = fit!(v, like, "#{name}.(v)'s argument", true)
      Expr.expr(:linear_map, [ControlFlow.node_input(v)], %{}, Expr.template_of(like))
    end
  end

  # a vectorized value travels to the node devectorized (Nx.Defn.ControlFlow.node_input/1)
  defp node_inputs(tensors), do: Enum.map(tensors, &ControlFlow.node_input/1)

  ## Values

  defp unknown!(value, fun, what), do: Checks.unknown!(value, fun, what, &Expr.to_expr/1)

  # `value` returned by a user's function, as a tensor of `like`'s shape, type and vectorized
  # axes (a scalar broadcast to it where `scalar_ok`; a value with fewer vectorized axes is
  # the same for every entry of those it lacks)
  defp fit!(value, like, what, scalar_ok \\ false) do
    tensor = Checks.returned!(value, like, what, &Expr.to_expr/1, scalar_ok)
    Checks.unknown_vectorized_within!(tensor, like, what, value)

    tensor = tensor |> Nx.as_type(like.type) |> Expr.align_vectorized(like.vectorized_axes)
    if tensor.shape == like.shape, do: tensor, else: Nx.broadcast(tensor, like.shape)
  end
end
