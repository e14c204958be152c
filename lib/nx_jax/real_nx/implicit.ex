defmodule NxJax.Autodiff.Implicit do
  @moduledoc """
  Implicit differentiation inside `defn` under real Nx 0.7.2: `custom_root/4` and
  `custom_linear_solve/5`, the functions of the clean room's `NxJax.Autodiff.Implicit` with the
  same arguments and options. Users reach them through `NxJax.Autodiff`.

  Real Nx differentiates in Elixir (`Nx.Defn.Grad`) before the compiler sees the graph, so
  here the implicit function theorem is written with real Nx's own `custom_grad/3`: the
  solver's result is taken with `stop_grad/1` (its iterations are never differentiated, and
  need not be differentiable), and the values the equation reads from outside (found in the
  expression of its residual at the solution, as a `cond` finds its captures) are the inputs
  of the `custom_grad/3`. For a root `x` of `f` (`f(x, p) == 0`) with `J` the Jacobian of `f`
  in `x`, the cotangent `g` of `x` gives each such `p` the cotangent `-(df/dp)^T w` with
  `w = J^-T g`; for a linear solve `A x = b`, `w = A^-T g` comes from `transpose_solve` (or from
  `solve` when `symmetric: true`). In the backward rule `x` is again the differentiated root,
  so second derivatives are the implicit ones too.

  Differences from the clean room (docs/DIFFERENTIATION.md, "Under real Nx"):

    * `tangent_solve.(g, y)` is called with the transposed map (`v -> J^T v`, a
      vector-Jacobian product of `f` at the root): a solver of any linear map, as its
      contract asks, gives `J^-T y`. For a scalar unknown the two maps are the same.
    * Real Nx 0.7.2's `while` body reads nothing from outside its state, while `f` reads the
      values it closes over: a solver with a `while` loop carries those values in its state
      and writes the equation there (the gradient still comes from `f`).
    * The solvers receive the user's own `matvec` (not a linear map supplied by JAX).

  Vectorized values are solved entry by entry, as in the clean room: the unknown has the
  vectorized axes of the initial guess (or `b`) and of what `f` (or `matvec`) makes of it, and
  real Nx's `grad/2` differentiates each entry on its own.
  """

  # (deftransform: real Nx's defn calls only functions defined with defn or deftransform)
  import Nx.Defn, only: [deftransform: 2]
  import Nx.Defn.Kernel, only: [custom_grad: 3, stop_grad: 1]

  alias Nx.Defn.Expr
  alias NxJax.Autodiff.Checks
  alias NxJax.RealNx.ExprRewrite

  @doc """
  The root `x` of `f` (`f.(x) == 0`, `x` shaped like `initial_guess`) that
  `solve.(f, initial_guess)` finds, with the gradient of the implicit function theorem:
  d x = -(df/dx)^-1 (df/dp) d p for every value `p` that `f` closes over.
  `tangent_solve.(g, y)` must return `v` with `g.(v) == y` for the linear map `g` it is given
  (for a scalar, `fn g, y -> y / g.(1.0) end`).

  `solve` is run, never differentiated; the initial guess gets a zero gradient. Under real Nx
  0.7.2 a `while` body reads nothing from outside its state: a solver with a `while` loop
  carries what the equation needs in its state (and writes the equation there), while the
  gradient still comes from `f`.

  ## Examples

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
  deftransform custom_root(f, initial_guess, solve, tangent_solve)
               when is_function(f, 1) and is_function(solve, 2) and is_function(tangent_solve, 2) do
    x0 = initial_guess |> unknown!("custom_root/4", "the initial guess") |> widened(f)
    residual = &fit!(f.(&1), x0, "f.(x)")
    root = solve.(residual, x0) |> fit!(x0, "solve")

    # J(x)^-T g: tangent_solve given v -> J(x)^T v, the vector-Jacobian product of f at x
    transposed_solve = fn x, g ->
      vjp = fn v ->
        v = fit!(v, x, "g.(v)'s argument", true)
        Nx.Defn.grad(x, fn x -> Nx.sum(Nx.multiply(residual.(x), v)) end)
      end

      tangent_solve.(vjp, g) |> fit!(x, "tangent_solve")
    end

    if traced?(root), do: implicit(stop_grad(root), residual, transposed_solve), else: root
  end

  @doc """
  The solution `x` of the linear system `matvec.(x) == b` that `solve.(matvec, b)` computes,
  differentiated as the solution of that system (with respect to `b` and to every value
  `matvec` closes over), not through the solver's steps.

  Reverse mode needs the transposed system: give `transpose_solve.(vecmat, b)` (solving
  `vecmat.(x) == b`, `vecmat` the transpose of `matvec`), or `symmetric: true` when the
  matrix is symmetric (then `solve` serves for both). With `transpose_solve` `nil` and no
  `symmetric: true`, taking a gradient raises. `matvec` must be linear in `x`; `b` and `x`
  have the same shape.

  ## Examples

  (`a` is an argument of the jitted function: real Nx 0.7.2's `Nx.LinAlg.solve/2` inside a
  trace does not take a tensor captured from outside it)

      iex> solve = fn a, b ->
      ...>   NxJax.Autodiff.Implicit.custom_linear_solve(&Nx.dot(a, &1), b,
      ...>     fn _matvec, b -> Nx.LinAlg.solve(a, b) end, nil, symmetric: true)
      ...> end
      iex> a = Nx.tensor([[2.0, 1.0], [1.0, 3.0]])
      iex> Nx.Defn.jit(solve).(a, Nx.tensor([1.0, 2.0])) |> Nx.to_flat_list()
      [0.20000000298023224, 0.5999999642372131]
      iex> grad_b = fn a, b -> Nx.Defn.grad(b, &Nx.sum(solve.(a, &1))) end
      iex> Nx.Defn.jit(grad_b).(a, Nx.tensor([1.0, 2.0])) |> Nx.to_flat_list()
      [0.3999999761581421, 0.19999998807907104]
  """
  deftransform custom_linear_solve(matvec, b, solve, transpose_solve, opts \\ [])
               when is_function(matvec, 1) and is_function(solve, 2) and
                      (is_function(transpose_solve, 2) or is_nil(transpose_solve)) do
    symmetric = Checks.linear_solve_options!(opts)
    b = b |> unknown!("custom_linear_solve/5", "b") |> widened(matvec)
    apply_matvec = &fit!(matvec.(fit!(&1, b, "matvec.(v)'s argument")), b, "matvec.(x)")
    x = solve.(apply_matvec, b) |> fit!(b, "solve")

    if traced?(x) do
      # the transposed system is itself solved as a linear system, so that a second gradient
      # does not run through the transpose solver's steps either
      transposed =
        cond do
          symmetric ->
            fn _x, g -> custom_linear_solve(matvec, g, solve, solve, symmetric: true) end

          transpose_solve ->
            &transposed_solve(apply_matvec, &1, &2, solve, transpose_solve)

          true ->
            &no_transpose!/2
        end

      residual = &Nx.subtract(apply_matvec.(&1), b)
      transposed = &fit!(transposed.(&1, &2), &1, "transpose_solve")
      implicit(stop_grad(x), residual, transposed)
    else
      x
    end
  end

  ## The implicit function theorem, with real Nx's custom_grad

  # `root` (the solver's answer, under stop_grad) with the implicit gradient: for x with
  # f(x, p) = 0, the cotangent g of x gives p the cotangent -(df/dp)^T w, w = J(x)^-T g (by
  # `transposed_solve`), for every value p the residual reads from outside (its captures,
  # found in its expression). The backward rule takes x again as `implicit` of the root (built
  # only when a gradient is taken), so that a second gradient sees the root move in J and in
  # df/dp alike.
  defp implicit(root, residual, transposed_solve) do
    r = residual.(root)
    captures = captures(r, root.data.id)

    if captures == [] do
      root
    else
      # (real Nx's Nx.Defn.Grad works on devectorized expressions: a vectorized root's
      # cotangent arrives with its vectorized axes leading its shape, and the inputs'
      # gradients go back so)
      custom_grad(root, captures, fn g ->
        x = implicit(root, residual, transposed_solve)
        g = if root.vectorized_axes == [], do: g, else: Nx.vectorize(g, root.vectorized_axes)
        w = transposed_solve.(x, fit!(g, x, "the cotangent"))
        ids = Enum.map(captures, & &1.data.id)

        # df/dp^T w: the residual's expression with x in place of the root and the captures
        # as the differentiated values (devectorized, as the arguments of real Nx's nodes are)
        Nx.Defn.grad(List.to_tuple(captures), fn ps ->
          replace =
            [{root.data.id, x} | Enum.zip(ids, Tuple.to_list(ps))]
            |> Map.new(fn {id, t} -> {id, Nx.devectorize(t, keep_names: false)} end)

          Nx.sum(Nx.multiply(ExprRewrite.replace(r, replace), w))
        end)
        |> Tuple.to_list()
        |> Enum.map(&(&1 |> Nx.negate() |> Nx.devectorize(keep_names: false)))
      end)
    end
  end

  # The values the residual `r` reads from outside the equation (nodes that do not depend on
  # the unknown, id `x_id`, read by nodes that do): floating-point ones only (what has a
  # gradient), constants aside.
  defp captures(r, x_id) do
    {_depends, found} = ExprRewrite.outside(r, MapSet.new([x_id]))

    Enum.filter(found, fn %Nx.Tensor{type: {kind, _}, data: %Expr{op: op}} ->
      kind in [:f, :bf] and op not in [:constant, :tensor, :iota, :eye]
    end)
  end

  # v -> A^T v (the gradient of <A z, v> in z; A linear, so at any z) and its solve, whose
  # own transpose is the original system
  defp transposed_solve(matvec, at, g, solve, transpose_solve) do
    vecmat = fn v ->
      v = fit!(v, at, "vecmat.(v)'s argument")
      Nx.Defn.grad(at, fn z -> Nx.sum(Nx.multiply(matvec.(z), v)) end)
    end

    custom_linear_solve(vecmat, g, transpose_solve, solve)
  end

  defp no_transpose!(_x, _g) do
    raise ArgumentError,
          "custom_linear_solve/5 needs transpose_solve (or symmetric: true) to be " <>
            "differentiated in reverse mode (grad/2), got nil"
  end

  ## Values

  # (inside a trace the values are expressions; outside one there is nothing to differentiate)
  defp traced?(%Nx.Tensor{data: %Expr{}}), do: true
  defp traced?(_tensor), do: false

  defp unknown!(value, fun, what), do: Checks.unknown!(value, fun, what, &Nx.to_tensor/1)

  # the unknown in the type and vectorized axes of what `fun` makes of it too (an f32 guess
  # for an f64 equation solves in f64; a scalar guess for an equation that reads a vectorized
  # value has one entry per entry of it)
  defp widened(unknown, fun) do
    case fun.(unknown) do
      %Nx.Tensor{type: {kind, _} = type} = out when kind in [:f, :bf] ->
        [unknown, _out] = Nx.broadcast_vectors([unknown, out])
        Nx.as_type(unknown, Nx.Type.merge(unknown.type, type))

      # (anything else is refused where it is fitted)
      _ ->
        unknown
    end
  end

  # `value` returned by a user's function as a tensor of `like`'s shape, type and vectorized
  # axes (a scalar broadcast to it where `scalar_ok`; a value with fewer vectorized axes is
  # the same for every entry of those it lacks)
  defp fit!(value, like, what, scalar_ok \\ false) do
    tensor = Checks.returned!(value, like, what, &number_like(&1, like), scalar_ok)
    Checks.unknown_vectorized_within!(tensor, like, what, value)
    [_like, tensor] = Nx.broadcast_vectors([like, Nx.as_type(tensor, like.type)])
    if tensor.shape == like.shape, do: tensor, else: Nx.broadcast(tensor, like.shape)
  end

  defp number_like(%Nx.Tensor{} = tensor, _like), do: tensor
  defp number_like(number, like), do: Nx.tensor(number, type: like.type)
end
