defmodule NxJax.Autodiff do
  @moduledoc """
  JAX's differentiation toolbox beyond Nx, under real Nx 0.7.2: the functions of the clean
  room's `NxJax.Autodiff` (the same names, arguments and options, so the same code runs under
  both front ends): forward mode (`jvp/3`, `linearize/2`), `vjp/2`, Jacobians (`jacfwd/2`,
  `jacrev/2`), `hessian/2`, `custom_jvp/3`, implicit differentiation (`custom_root/4`,
  `custom_linear_solve/5`, from `NxJax.Autodiff.Implicit`) and `checkpoint/3`. Use them inside
  `defn` after `import NxJax.Autodiff`, or call them from plain Elixir (each runs as
  `Nx.Defn.jit_apply/3` would; inside a trace they join it).

  Under real Nx, `Nx.Defn.Grad` differentiates in Elixir before any compiler sees the graph,
  so each function is written with real Nx's own reverse mode (`grad/2`, `custom_grad/3`,
  `stop_grad/1`), and the graph nx_jax's compiler receives is already differentiated:

    * `jvp/3` is written as two reverse passes (the tangent is the gradient, with respect
      to a cotangent `u`, of `<vjp(u), t>`, linear in `u`, so taken at `u = 0`): what other
      compilers run and what real Nx's `grad/2` differentiates. The tangent is marked with
      the function's output, its primals and their tangents, and NxJax's compiler lowers it
      to one `jax.jvp` instead (unless the output's graph has a `stop_grad/1` or a
      `custom_grad/3`, whose rules only real Nx's passes know, or a value is vectorized).
      Jacobians and the Hessian are built from `grad/2` row by row (`jacrev/2`) or from
      `jvp/3` column by column (`jacfwd/2`): a graph that grows with the number of rows or
      columns.
    * Vectorized values (`Nx.vectorize/2`) are differentiated entry by entry, as real Nx's
      `grad/2` differentiates them (the passes are written on the entries).
    * `custom_jvp/3`'s reverse rule is the user's forward rule transposed: the gradient with
      respect to the tangents of `<jvp_fun.(tangents), g>` (linear in the tangents).
    * `checkpoint/3` gives the function's values and gradients; real Nx writes the backward
      pass itself, so nothing is recomputed and no memory is saved.

  docs/DIFFERENTIATION.md, "Under real Nx", says what differs from the clean room.
  """

  # (deftransform: real Nx's defn calls only functions defined with defn or deftransform)
  import Nx.Defn, only: [deftransform: 1, deftransform: 2]
  import Nx.Defn.Kernel, only: [custom_grad: 3]

  alias Nx.Defn.{Composite, Expr}
  alias NxJax.Autodiff.Checks
  alias NxJax.RealNx.ExprRewrite

  @doc """
  Forward mode: returns `{primal_out, tangent_out}`, the value of `fun` at `primals` and its
  directional derivative along `tangents` (`jax.jvp`).

  `primals` is a tensor (or number) or a tuple of them, `tangents` the same container with
  one tangent of each primal's shape (cast to its type). `fun` takes the container (or, for
  a tuple, one argument per element) and returns a tensor or a container of tensors.

  ## Examples

      iex> {value, tangent} = NxJax.Autodiff.jvp(&Nx.sin/1, 0.0, 2.0)
      iex> {Nx.to_number(value), Nx.to_number(tangent)}
      {0.0, 2.0}
  """
  @spec jvp(function, term, term) :: {term, term}
  deftransform jvp(fun, primals, tangents) when is_function(fun) do
    Nx.Defn.jit_apply(&jvp_expr(fun, &1, &2), [primals, tangents], on_conflict: :reuse)
  end

  defp jvp_expr(fun, primals, tangents) do
    xs = floats!(primals, "jvp/3", "primals")
    ts = Checks.tangents!(primals, tangents, xs, leaves!(tangents, "jvp/3", "tangents"))

    # the function's own copy of each primal (what it reads from outside is a constant of it):
    # a node of its own, which a native jvp takes as the variable
    copies = Enum.map(xs, &Expr.reshape(&1, &1))
    out = Checks.call!(fun, Checks.fill(primals, copies))
    outs = out |> outputs!("jvp/3") |> batched!(xs ++ ts, "jvp/3")

    # the cotangent u at which the (linear) pullback is differentiated: zeros of the outputs'
    # floating types, so each tangent comes back in its output's type, and with their
    # vectorized axes, so each entry gets its own tangent
    us =
      for y <- outs do
        u = Nx.broadcast(Nx.tensor(0, type: Nx.Type.to_floating(y.type)), Nx.shape(y))
        if y.vectorized_axes == [], do: u, else: hd(Nx.broadcast_vectors([u, y]))
      end

    primals = Checks.fill(primals, xs)

    passes =
      Nx.Defn.grad(List.to_tuple(us), fn us ->
        pullback =
          Nx.Defn.grad(primals, fn x ->
            Checks.pairing(Checks.call!(fun, x), Tuple.to_list(us), "jvp/3")
          end)

        Checks.pairing(pullback, ts, "jvp/3")
      end)

    # each tangent marked with what NxJax's compiler needs to lower it natively, as jax.jvp of
    # the output with respect to the copies (other compilers run the two passes); not where
    # the output's graph has a stop_grad or a custom_grad (custom_jvp's too): the wire lowers
    # those as the identity, and only real Nx's reverse passes know their rules; nor with
    # vectorized values (the wire's jvp node, lowered from this mark, takes none)
    vectorized? = Enum.any?(outs ++ xs ++ ts, &(&1.vectorized_axes != []))

    tangents =
      Enum.zip_with(outs, Tuple.to_list(passes), fn y, tangent ->
        if elem(y.type, 0) in [:f, :bf, :c] and expr?(y) and expr?(tangent) and
             not vectorized? and not ExprRewrite.any?(y, &gradient_rule?/1) do
          Expr.metadata(tangent, %{nx_jax_jvp: {y, copies, Enum.map(ts, &Expr.tensor/1)}})
        else
          tangent
        end
      end)

    {out, Checks.fill(out, tangents)}
  end

  defp gradient_rule?(%Nx.Tensor{data: %Expr{op: :metadata, args: [_, meta]}}),
    do: is_map_key(meta, :stop_grad) or is_map_key(meta, :custom_grad)

  defp gradient_rule?(_node), do: false

  @doc """
  Reverse mode with the pullback kept (`jax.vjp`): returns `{primal_out, pullback}`, where
  `pullback.(cotangent)` is the gradient of `<fun.(primals), cotangent>` with respect to
  `primals`, in their container.

  ## Examples

      iex> f = fn x -> Nx.multiply(Nx.sin(x), 2) end
      iex> {value, pullback} = NxJax.Autodiff.vjp(f, Nx.tensor([0.0, 1.0]))
      iex> Nx.to_flat_list(value)
      [0.0, 1.6829419136047363]
      iex> pullback.(Nx.tensor([1.0, 10.0])) |> Nx.to_flat_list()
      [2.0, 10.806045532226562]
  """
  @spec vjp(function, term) :: {term, (term -> term)}
  deftransform vjp(fun, primals) when is_function(fun, 1) do
    value = Nx.Defn.jit_apply(fun, [primals], on_conflict: :reuse)

    pullback = fn cotangent ->
      Nx.Defn.jit_apply(
        fn primals, cotangent ->
          Nx.Defn.grad(primals, fn x ->
            Checks.pairing(fun.(x), Composite.flatten_list([cotangent]), "vjp/2")
          end)
        end,
        [primals, cotangent],
        on_conflict: :reuse
      )
    end

    {value, pullback}
  end

  @doc """
  Forward mode with the point fixed (`jax.linearize`): returns `{primal_out, jvp_fun}`, where
  `jvp_fun.(tangents)` is the tangent of `fun` at `primals` along `tangents` (each call runs
  `jvp/3`).

  ## Examples

      iex> {value, push} = NxJax.Autodiff.linearize(&Nx.exp/1, Nx.tensor(0.0))
      iex> {Nx.to_number(value), Nx.to_number(push.(Nx.tensor(3.0)))}
      {1.0, 3.0}
  """
  @spec linearize(function, term) :: {term, (term -> term)}
  deftransform linearize(fun, primals) when is_function(fun) do
    value = Nx.Defn.jit_apply(&Checks.call!(fun, &1), [primals], on_conflict: :reuse)
    {value, fn tangents -> elem(jvp(fun, primals, tangents), 1) end}
  end

  @doc """
  The Jacobian of `fun` at `x` by forward mode (`jax.jacfwd`): for an output of shape `s`
  and an `x` of shape `t`, a tensor of shape `s ++ t`, in the output's type. A tuple `x`
  gives one Jacobian per element, in a tuple; a tuple output a tuple of those.

  ## Examples

      iex> NxJax.Autodiff.jacfwd(fn x -> Nx.multiply(x, x) end, Nx.tensor([1.0, 2.0]))
      #Nx.Tensor<
        f32[2][2]
        [
          [2.0, 0.0],
          [0.0, 4.0]
        ]
      >
  """
  @spec jacfwd(function, term) :: term
  deftransform jacfwd(fun, x) when is_function(fun) do
    Nx.Defn.jit_apply(&jacfwd_expr(fun, &1), [x], on_conflict: :reuse)
  end

  @doc """
  The Jacobian of `fun` at `x` by reverse mode (`jax.jacrev`), in `x`'s type.

  ## Examples

      iex> NxJax.Autodiff.jacrev(fn x -> Nx.sum(Nx.exp(x)) end, Nx.tensor([0.0, 1.0]))
      #Nx.Tensor<
        f32[2]
        [1.0, 2.7182817459106445]
      >
  """
  @spec jacrev(function, term) :: term
  deftransform jacrev(fun, x) when is_function(fun) do
    Nx.Defn.jit_apply(&jacrev_expr(fun, &1), [x], on_conflict: :reuse)
  end

  @doc """
  The Hessian of `fun` at `x` (shape `out ++ x ++ x`, in `x`'s type; for a tuple `x`, a
  tuple of rows of blocks), here `jacrev/2` of `jacrev/2`.

  ## Examples

      iex> f = fn {a, b} -> Nx.multiply(Nx.multiply(a, a), b) end
      iex> {{aa, ab}, {ba, bb}} = NxJax.Autodiff.hessian(f, {3.0, 5.0})
      iex> Enum.map([aa, ab, ba, bb], &Nx.to_number/1)
      [10.0, 6.0, 6.0, 0.0]
  """
  @spec hessian(function, term) :: term
  deftransform hessian(fun, x) when is_function(fun) do
    Nx.Defn.jit_apply(
      fn x -> jacrev_expr(&jacrev_expr(fun, &1, "hessian/2"), x, "hessian/2") end,
      [x],
      on_conflict: :reuse
    )
  end

  # one row per output element: the gradient of that element
  defp jacrev_expr(fun, x, name \\ "jacrev/2") do
    xs = floats!(x, name, "x")
    x = Checks.fill(x, xs)
    out = Checks.call!(fun, x)
    out |> outputs!(name) |> batched!(xs, name)

    {jacobians, _count} =
      Composite.traverse(out, 0, fn y, o ->
        {jacobian_rows(fun, x, xs, floating_output!(y, name), o), o + 1}
      end)

    jacobians
  end

  defp jacobian_rows(fun, x, xs, y, o) do
    rows =
      for i <- 0..(Nx.size(y) - 1)//1 do
        Nx.Defn.grad(x, fn x -> pick(Checks.call!(fun, x), o, i) end)
      end

    blocks =
      for {xi, k} <- Enum.with_index(xs) do
        rows
        |> Enum.map(&Enum.at(Composite.flatten_list([&1]), k))
        |> jacobian_block(0, y, xi)
      end

    fill_blocks(x, blocks)
  end

  # one column per element of x: the jvp along that element's unit vector
  defp jacfwd_expr(fun, x) do
    xs = floats!(x, "jacfwd/2", "x")
    x = Checks.fill(x, xs)
    out = Checks.call!(fun, x)
    out |> outputs!("jacfwd/2") |> batched!(xs, "jacfwd/2")
    Enum.each(Composite.flatten_list([out]), &floating_output!(&1, "jacfwd/2"))

    columns =
      for {xi, k} <- Enum.with_index(xs) do
        for j <- 0..(Nx.size(xi) - 1)//1 do
          tangents =
            xs
            |> Enum.with_index()
            |> Enum.map(fn {xl, l} -> if l == k, do: unit(xl, j), else: Nx.multiply(xl, 0) end)

          {_, tangent} = jvp_expr(fun, x, Checks.fill(x, tangents))
          Composite.flatten_list([tangent])
        end
      end

    outs = Composite.flatten_list([out])

    leaves =
      outs
      |> Enum.with_index()
      |> Enum.map(fn {y, o} ->
        blocks =
          Enum.zip_with(xs, columns, fn xi, cols ->
            cols |> Enum.map(&Enum.at(&1, o)) |> jacobian_block(1, y, xi)
          end)

        fill_blocks(x, blocks)
      end)

    Checks.fill(out, leaves)
  end

  defp fill_blocks(x, blocks) when is_tuple(x), do: List.to_tuple(blocks)
  defp fill_blocks(_x, [block]), do: block

  # the Jacobian block d y / d xi, shape y ++ xi, from its rows (`axis` 0: one per element of
  # y, each shaped like xi) or its columns (`axis` 1: one per element of xi, shaped like y)
  defp jacobian_block(pieces, axis, y, xi) do
    pieces
    |> Enum.map(&Nx.flatten/1)
    |> Nx.stack(axis: axis)
    |> Nx.reshape(List.to_tuple(Tuple.to_list(Nx.shape(y)) ++ Tuple.to_list(Nx.shape(xi))))
  end

  # the i-th element (row-major) of the o-th output leaf
  defp pick(out, o, i) do
    leaf = [out] |> Composite.flatten_list() |> Enum.at(o) |> Nx.to_tensor()
    Nx.flatten(leaf)[i]
  end

  defp unit(x, j) do
    Nx.iota({Nx.size(x)}) |> Nx.equal(j) |> Nx.as_type(Nx.type(x)) |> Nx.reshape(Nx.shape(x))
  end

  @doc """
  Returns `expr_or_fun` (an expression, or a function called on `inputs`) with a forward
  rule of its own: its tangent, when the `inputs` (a list of tensors) move along tangents
  `[t1, ..., tk]`, is what `jvp_fun` returns (`jax.custom_jvp`). Under real Nx the reverse
  rule is that forward rule transposed, so the rule must be linear in the tangents. `inputs`
  may also be a tuple (`{x, y}`): the rule then receives the tangents (and the inputs) in a
  tuple, a pattern real Nx's `defn` takes (`fn {x_dot, y_dot} -> ... end`; it takes no list
  patterns).

  `jvp_fun` receives the list of tangents, or, with two arguments, the list of inputs and the
  list of tangents, and returns the tangent of the value (a tensor or number, broadcast to
  the value's shape) or, for a tuple value, a tuple of them. Nothing else the value depends
  on gets a derivative through it.

  ## Examples

      iex> log1pexp = fn x ->
      ...>   NxJax.Autodiff.custom_jvp(Nx.log1p(Nx.exp(x)), [x], fn [x_dot] ->
      ...>     Nx.multiply(x_dot, Nx.subtract(1, Nx.divide(1, Nx.add(1, Nx.exp(x)))))
      ...>   end)
      ...> end
      iex> Nx.Defn.grad(100.0, log1pexp)
      #Nx.Tensor<
        f32
        1.0
      >
  """
  @spec custom_jvp(term, [Nx.Tensor.t()] | tuple, function) :: term
  deftransform custom_jvp(expr_or_fun, inputs, jvp_fun)
               when is_function(jvp_fun, 1) or is_function(jvp_fun, 2) do
    list = Checks.custom_jvp_inputs!(inputs)
    value = Checks.custom_jvp_value!(expr_or_fun, list, &Nx.to_tensor/1)
    leaves = Composite.flatten_list([value])

    if Enum.any?(leaves, &expr?/1) do
      rule = fn ts ->
        jvp_fun
        |> Checks.apply_rule(inputs, ts)
        |> Checks.fit_tangents!(value, &fit_tangent/2)
      end

      # (an input that is not an expression, a tensor from outside the trace, depends on
      # nothing: it gets no cotangent)
      traced = for {x, k} <- Enum.with_index(list), expr?(x), do: k

      leaves
      |> Enum.with_index()
      |> Enum.map(fn {leaf, i} ->
        custom_grad(leaf, Enum.map(traced, &Enum.at(list, &1)), fn g ->
          grads = transposed_rule(rule, list, leaf, i, g)
          Enum.map(traced, &Enum.at(grads, &1))
        end)
      end)
      |> then(&Checks.fill(value, &1))
    else
      # outside a trace nothing is differentiated: the value is all there is
      value
    end
  end

  deftransform(custom_jvp(_expr_or_fun, _inputs, jvp_fun), do: Checks.custom_jvp_rule!(jvp_fun))

  # the cotangent of each input: the gradient, with respect to the tangents, of the value's
  # i-th tangent paired with `g` (linear in the tangents, so taken at zero tangents). Real
  # Nx's Nx.Defn.Grad works on devectorized expressions: the cotangent of a vectorized leaf
  # arrives with its vectorized axes leading its shape, and the inputs' cotangents go back so.
  defp transposed_rule(rule, inputs, leaf, i, g) do
    g = if leaf.vectorized_axes == [], do: g, else: Nx.vectorize(g, leaf.vectorized_axes)
    inputs = Enum.map(inputs, &Nx.to_tensor/1)

    # (zero tangents with their inputs' vectorized axes: one tangent per entry)
    zeros =
      for x <- inputs do
        zero = Nx.broadcast(Nx.tensor(0, type: Nx.Type.to_floating(x.type)), x.shape)
        if x.vectorized_axes == [], do: zero, else: hd(Nx.broadcast_vectors([zero, x]))
      end

    grads =
      Nx.Defn.grad(List.to_tuple(zeros), fn ts ->
        tangent = ts |> Tuple.to_list() |> rule.() |> Enum.at(i)
        Nx.sum(Nx.multiply(tangent, g))
      end)

    grads
    |> Tuple.to_list()
    |> Enum.zip_with(inputs, fn grad, x ->
      grad |> Nx.as_type(Nx.Type.to_floating(x.type)) |> Nx.devectorize(keep_names: false)
    end)
  end

  # the rule's tangent of `value`: broadcast to its shape, in its floating type
  defp fit_tangent(tangent, value),
    do: Checks.broadcast_tangent!(tangent, value.shape, Nx.Type.to_floating(value.type))

  ## Implicit differentiation

  @doc "`NxJax.Autodiff.Implicit.custom_root/4`: a root differentiated by the implicit function theorem."
  deftransform(custom_root(f, initial_guess, solve, tangent_solve),
    do: NxJax.Autodiff.Implicit.custom_root(f, initial_guess, solve, tangent_solve)
  )

  @doc "`NxJax.Autodiff.Implicit.custom_linear_solve/5`: a linear solve differentiated as a solution."
  deftransform(custom_linear_solve(matvec, b, solve, transpose_solve, opts \\ []),
    do: NxJax.Autodiff.Implicit.custom_linear_solve(matvec, b, solve, transpose_solve, opts)
  )

  ## Checkpoints

  @doc """
  `fun` applied to `args` (a list of its arguments). The clean room's `jax.checkpoint`:
  the same options are checked (`:policy`, `:prevent_cse`), the same values and gradients are
  given, but under real Nx the backward pass is written by `Nx.Defn.Grad`, so nothing is
  recomputed and no memory is saved.

  ## Examples

      iex> loss = fn x -> Nx.sum(NxJax.Autodiff.checkpoint(&Nx.sin/1, [x])) end
      iex> Nx.Defn.grad(Nx.tensor([0.0, 1.0]), loss)
      #Nx.Tensor<
        f32[2]
        [1.0, 0.5403022766113281]
      >
  """
  deftransform(checkpoint(fun, args, opts \\ []))

  deftransform checkpoint(fun, args, opts) do
    Checks.checkpoint_options!(opts)
    {apply_fun, containers} = Checks.checkpoint_arguments!(fun, args)
    apply_fun.(containers)
  end

  @doc "`tensor`, named for `checkpoint/3`'s policies: the identity for values and gradients."
  deftransform checkpoint_name(tensor, name) do
    Checks.checkpoint_name!(name, "checkpoint_name/2")
    tensor
  end

  ## Shared

  defp expr?(value), do: match?(%Nx.Tensor{data: %Expr{}}, value)

  defp leaves!(container, name, what) do
    leaves =
      try do
        [container] |> Composite.flatten_list() |> Enum.map(&Nx.to_tensor/1)
      rescue
        Protocol.UndefinedError -> []
      end

    if leaves == [] do
      raise ArgumentError,
            "#{name} expects a tensor, a number or a tuple of them as its #{what}, got: " <>
              inspect(container)
    end

    leaves
  end

  # the differentiated values: floating-point, as JAX requires
  defp floats!(container, name, what) do
    leaves = leaves!(container, name, what)
    Enum.each(leaves, &Checks.differentiable!(&1.type, name, [:f, :bf]))
    leaves
  end

  defp floating_output!(y, name) do
    y = Nx.to_tensor(y)
    Checks.floating_output!(y.type, name)
    y
  end

  defp outputs!(out, name), do: out |> Checks.outputs!(name) |> Enum.map(&Nx.to_tensor/1)

  # Vectorized differentiated values: real Nx's grad/2 differentiates each entry on its own,
  # so the toolbox's passes do too, provided the outputs are vectorized along the values' axes
  # only (an output vectorized along another axis reads a vectorized value from outside)
  defp batched!(outs, values, name) do
    names = values |> Enum.flat_map(&Keyword.keys(&1.vectorized_axes)) |> Enum.uniq()
    if names != [], do: Enum.each(outs, &Checks.output_vectorized_within!(&1, names, name))
    outs
  end
end
