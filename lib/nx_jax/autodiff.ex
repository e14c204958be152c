defmodule NxJax.Autodiff do
  @moduledoc """
  JAX's differentiation toolbox beyond Nx, for `defn` code: forward mode (`jvp/3`),
  Jacobians (`jacfwd/2`, `jacrev/2`), `hessian/2`, functions with a forward rule of
  their own (`custom_jvp/3`), implicit differentiation (`custom_root/4`,
  `custom_linear_solve/5`, from `NxJax.Autodiff.Implicit`) and checkpoints (`checkpoint/3`,
  `checkpoint_name/2`, from `NxJax.Autodiff.Checkpoint`); `NxJax.GradCheck.check_grads!/3`
  checks any of them against finite differences, and the `debug_nans: true` option of
  `Nx.Defn.jit/2` finds where a NaN comes from. Use them inside `defn` after `import NxJax.Autodiff` (next to
  `import Nx.Defn`), or call them from plain Elixir, where each one runs on the worker as
  `Nx.Defn.jit/2` would (inside a trace they join it).

  Each builds a node of the wire graph (`docs/PROTOCOL.md`, 4.2): the worker re-evaluates
  the function's nodes as a function of the differentiated values and hands that to
  `jax.jvp`, `jax.jacfwd`, `jax.jacrev`, `jax.hessian` or `jax.custom_jvp`. They compose
  with `grad/2`, `stop_grad/1`, `custom_grad/3`, `if`/`cond` and `while` as JAX's
  transformations do; see `docs/DIFFERENTIATION.md`.

  As with `grad/2`, the function gets its own copy of `x`: a value it reads from outside
  (the `x` of the enclosing `defn`) is a constant of it. The differentiated values must be
  floating-point (`jvp/3` also takes complex ones), as JAX requires; an integer one is
  refused at trace time. Vectorized values (`Nx.vectorize/2`) are differentiated entry by
  entry, as `jax.vmap` of the transformation, and the results are vectorized like them. The
  types of the results are JAX's: a tangent (and `jacfwd`'s Jacobian) has the output's type,
  `jacrev`'s and `hessian`'s Jacobians have `x`'s.

  ## Examples

      iex> NxJax.Autodiff.hessian(fn x -> Nx.sum(Nx.pow(x, 3)) end, Nx.tensor([1.0, 2.0]))
      #Nx.Tensor<
        f32[2][2]
        [
          [6.0, 0.0],
          [0.0, 12.0]
        ]
      >
  """

  alias Nx.Defn.{Composite, ControlFlow, Expr}
  alias NxJax.Autodiff.Checks

  @doc """
  Forward mode: returns `{primal_out, tangent_out}`, the value of `fun` at `primals` and its
  directional derivative along `tangents` (`jax.jvp`).

  `primals` is a tensor (or number) or a tuple of them, `tangents` the same container with
  one tangent of each primal's shape (cast to its type). `fun` takes the container (or, for
  a tuple, one argument per element) and returns a tensor or a container of tensors;
  `tangent_out` is that container of tangents. Loops differentiate forward whatever their
  number of iterations (a `while` without `max_iterations` too).

  ## Examples

      iex> {value, tangent} = NxJax.Autodiff.jvp(&Nx.sin/1, 0.0, 2.0)
      iex> {Nx.to_number(value), Nx.to_number(tangent)}
      {0.0, 2.0}

      iex> f = fn {x, y} -> Nx.multiply(Nx.sin(x), y) end
      iex> {_value, tangent} = NxJax.Autodiff.jvp(f, {2.0, 3.0}, {1.0, 0.0})
      iex> tangent
      #Nx.Tensor<
        f32
        -1.2484405040740967
      >
  """
  @spec jvp(function, term, term) :: {term, term}
  def jvp(fun, primals, tangents) when is_function(fun) do
    Nx.Defn.Compiler.jit_apply(&jvp_expr(fun, &1, &2), [primals, tangents], [])
  end

  @doc """
  Reverse mode with the pullback kept (`jax.vjp`): returns `{primal_out, pullback}`, where
  `pullback.(cotangent)` (a cotangent shaped like `primal_out`, in its container) is the
  vector-Jacobian product: the gradient of `<fun.(primals), cotangent>` with respect to
  `primals`, in their container. Each call of `pullback` is a `grad` (it differentiates `fun`
  again; inside `defn` the trace shares what it can).

  ## Examples

      iex> f = fn x -> Nx.multiply(Nx.sin(x), 2) end
      iex> {value, pullback} = NxJax.Autodiff.vjp(f, Nx.tensor([0.0, 1.0]))
      iex> Nx.to_flat_list(value)
      [0.0, 1.6829419136047363]
      iex> pullback.(Nx.tensor([1.0, 10.0])) |> Nx.to_flat_list()
      [2.0, 10.806045532226562]
  """
  @spec vjp(function, term) :: {term, (term -> term)}
  def vjp(fun, primals) when is_function(fun, 1) do
    value = Nx.Defn.Compiler.jit_apply(fun, [primals], [])

    pullback = fn cotangent ->
      Nx.Defn.Compiler.jit_apply(
        fn primals, cotangent ->
          Nx.Defn.grad(primals, fn x ->
            Checks.pairing(fun.(x), Composite.flatten_list([cotangent]), "vjp/2")
          end)
        end,
        [primals, cotangent],
        []
      )
    end

    {value, pullback}
  end

  @doc """
  Forward mode with the point fixed (`jax.linearize`): returns `{primal_out, jvp_fun}`, where
  `jvp_fun.(tangents)` is the tangent of `fun` at `primals` along `tangents` (as `jvp/3`
  gives it; each call runs `jvp/3`, JAX's linearization is not kept between calls).

  ## Examples

      iex> {value, push} = NxJax.Autodiff.linearize(&Nx.exp/1, Nx.tensor(0.0))
      iex> {Nx.to_number(value), Nx.to_number(push.(Nx.tensor(3.0)))}
      {1.0, 3.0}
  """
  @spec linearize(function, term) :: {term, (term -> term)}
  def linearize(fun, primals) when is_function(fun) do
    value = Nx.Defn.Compiler.jit_apply(fun, [primals], [])
    {value, fn tangents -> elem(jvp(fun, primals, tangents), 1) end}
  end

  @doc """
  The Jacobian of `fun` at `x` by forward mode (`jax.jacfwd`): for an output of shape `s`
  and an `x` of shape `t`, a tensor of shape `s ++ t` whose entry `[i..., j...]` is
  d out[i...] / d x[j...], in the output's type.

  `x` is a floating-point tensor or a tuple of them (then one Jacobian per element, in a
  tuple); an output that is a tuple gives a tuple of those.

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
  def jacfwd(fun, x) when is_function(fun), do: jacobian(:jacfwd, fun, x)

  @doc """
  The Jacobian of `fun` at `x` by reverse mode (`jax.jacrev`), in `x`'s type; the same
  values as `jacfwd/2`, cheaper when the output has fewer elements than `x`.

  ## Examples

      iex> NxJax.Autodiff.jacrev(fn x -> Nx.sum(Nx.exp(x)) end, Nx.tensor([0.0, 1.0]))
      #Nx.Tensor<
        f32[2]
        [1.0, 2.7182817459106445]
      >
  """
  @spec jacrev(function, term) :: term
  def jacrev(fun, x) when is_function(fun), do: jacobian(:jacrev, fun, x)

  @doc """
  The Hessian of `fun` at `x` (`jax.hessian`: `jacfwd` of `jacrev`): shape
  `out ++ x ++ x`, in `x`'s type. For a tuple `x`, a tuple of rows of blocks
  (`{{d2/dx0dx0, d2/dx0dx1}, {d2/dx1dx0, d2/dx1dx1}}`).

  ## Examples

      iex> f = fn {a, b} -> Nx.multiply(Nx.multiply(a, a), b) end
      iex> {{aa, ab}, {ba, bb}} = NxJax.Autodiff.hessian(f, {3.0, 5.0})
      iex> Enum.map([aa, ab, ba, bb], &Nx.to_number/1)
      [10.0, 6.0, 6.0, 0.0]
  """
  @spec hessian(function, term) :: term
  def hessian(fun, x) when is_function(fun), do: jacobian(:hessian, fun, x)

  @doc """
  Returns `expr_or_fun` (an expression, or a function called on `inputs`) with a forward
  rule of its own: its tangent, when the `inputs` (a list of tensors) move along tangents
  `[t1, ..., tk]`, is what `jvp_fun` returns (`jax.custom_jvp`). Reverse mode (`grad/2`) is
  derived from that rule by JAX, so the rule must be linear in the tangents. `inputs` may
  also be a tuple (`{x, y}`): the rule then receives the tangents (and the inputs) in a
  tuple, the pattern real Nx's `defn` takes (`fn {x_dot, y_dot} -> ... end`).

  `jvp_fun` receives the list of tangents (one per input, each of its input's shape and
  type), or, with two arguments, the list of inputs and the list of tangents. It returns the
  tangent of `expr_or_fun`: a tensor (or number, broadcast to the value's shape and cast to
  its type) or, for a tuple, a tuple of them. Nothing else the value depends on gets a
  derivative through it (as with `custom_grad/3`).

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
      iex> Nx.Defn.grad(100.0, fn x -> Nx.log1p(Nx.exp(x)) end)
      #Nx.Tensor<
        f32
        NaN
      >
  """
  @spec custom_jvp(term, [Nx.Tensor.t()] | tuple, function) :: term
  def custom_jvp(expr_or_fun, inputs, jvp_fun)
      when is_function(jvp_fun, 1) or is_function(jvp_fun, 2) do
    list = Checks.custom_jvp_inputs!(inputs)

    # outside a trace nothing is differentiated: the value is all there is
    if Expr.tracing?() or Enum.any?(list, &Expr.expr?/1) or Expr.expr?(expr_or_fun) do
      exprs = Enum.map(list, &Expr.to_expr/1)
      custom_jvp_expr(expr_or_fun, Checks.like_inputs(inputs, exprs), exprs, jvp_fun)
    else
      if is_function(expr_or_fun), do: apply(expr_or_fun, list), else: expr_or_fun
    end
  end

  def custom_jvp(_expr_or_fun, _inputs, jvp_fun), do: Checks.custom_jvp_rule!(jvp_fun)

  ## Implicit differentiation and checkpoints (their own modules)

  @doc "`NxJax.Autodiff.Implicit.custom_root/4`: a root differentiated by the implicit function theorem."
  defdelegate custom_root(f, initial_guess, solve, tangent_solve), to: NxJax.Autodiff.Implicit

  @doc "`NxJax.Autodiff.Implicit.custom_linear_solve/5`: a linear solve differentiated as a solution."
  defdelegate custom_linear_solve(matvec, b, solve, transpose_solve, opts \\ []),
    to: NxJax.Autodiff.Implicit

  @doc "`NxJax.Autodiff.Checkpoint.checkpoint/3`: `jax.checkpoint` of a function, with a policy."
  defdelegate checkpoint(fun, args, opts \\ []), to: NxJax.Autodiff.Checkpoint

  @doc "`NxJax.Autodiff.Checkpoint.checkpoint_name/2`: a name for the policies of `checkpoint/3`."
  defdelegate checkpoint_name(tensor, name), to: NxJax.Autodiff.Checkpoint

  ## jvp

  defp jvp_expr(fun, primals, tangents) do
    xs = leaves!(primals, "jvp/3", "primals")
    ts = leaves!(tangents, "jvp/3", "tangents")

    ts = Checks.tangents!(primals, tangents, xs, ts)
    Enum.each(xs, &Checks.differentiable!(&1.type, "jvp/3", [:f, :bf, :c]))

    # vectorized primals or tangents: the jvp of the batched function is the batch of the
    # entries' jvps (each entry's output depends on its own entry only)
    {vec, both} = devectorize_leaves(xs ++ ts)
    {xs, ts} = Enum.split(both, length(xs))
    {copies, out, batched} = batched_call(fun, primals, xs, vec, "jvp/3")
    refuse_reverse_only!(Composite.flatten_list([batched]), copies, "jvp/3")

    tangent_out =
      Composite.traverse(batched, fn y ->
        template = %{Expr.template_of(y) | type: Nx.Type.to_floating(y.type)}
        Expr.expr(:jvp, [y | copies] ++ ts, %{}, template) |> revectorize_leaf(vec)
      end)

    {out, tangent_out}
  end

  ## Jacobians

  defp jacobian(op, fun, x) do
    Nx.Defn.Compiler.jit_apply(&jacobian_expr(op, fun, &1), [x], [])
  end

  defp jacobian_expr(op, fun, x) do
    name = "#{op}/2"
    xs = leaves!(x, name, "x")
    Enum.each(xs, &Checks.differentiable!(&1.type, name, [:f, :bf]))
    # vectorized values: the worker takes each entry's Jacobian of the batched function
    # (opts batch: the number of leading vectorized axes), as jax.vmap of the transformation
    {vec, xs} = devectorize_leaves(xs)
    {copies, _out, batched} = batched_call(fun, x, xs, vec, name)
    ys = Composite.flatten_list([batched])

    Enum.each(ys, &Checks.floating_output!(&1.type, name))

    if op != :jacrev, do: refuse_reverse_only!(ys, copies, name)

    batch = length(vec)
    opts = if batch > 0, do: %{batch: batch}, else: %{}

    Composite.traverse(batched, fn y ->
      jacobians = Expr.tuple(op, [y | copies], opts, jacobian_templates(op, y, copies, batch))
      blocks = Enum.map(Tuple.to_list(jacobians), &revectorize_leaf(&1, vec))
      fill_jacobians(op, x, blocks, length(copies))
    end)
  end

  # (with `batch` leading vectorized axes, each block is y's shape ++ the entry shapes of x)
  defp jacobian_templates(:hessian, y, xs, batch) do
    for a <- xs, b <- xs, do: block(a.type, [y.shape, entry(a, batch), entry(b, batch)])
  end

  defp jacobian_templates(op, y, xs, batch) do
    for a <- xs,
        do: block(if(op == :jacfwd, do: y.type, else: a.type), [y.shape, entry(a, batch)])
  end

  defp entry(x, batch),
    do: x.shape |> Tuple.to_list() |> Enum.drop(batch) |> List.to_tuple()

  defp block(type, shapes),
    do: Expr.template(type, shapes |> Enum.flat_map(&Tuple.to_list/1) |> List.to_tuple())

  defp fill_jacobians(:hessian, x, blocks, k) do
    blocks
    |> Enum.chunk_every(k)
    |> Enum.map(&Composite.fill(x, &1))
    |> then(&Composite.fill(x, &1))
  end

  defp fill_jacobians(_op, x, jacobians, _k), do: Composite.fill(x, jacobians)

  ## custom_jvp

  # `inputs` in the container the user gave, `exprs` their list
  defp custom_jvp_expr(expr_or_fun, inputs, exprs, jvp_fun) do
    expr = Checks.custom_jvp_value!(expr_or_fun, exprs, &Expr.to_expr/1)
    es = Composite.flatten_list([expr])

    {{params, tangents}, scope} =
      ControlFlow.trace_on_parameters(exprs, fn params ->
        jvp_fun
        |> Checks.apply_rule(inputs, params)
        |> Checks.fit_tangents!(expr, &fit_tangent/2)
      end)

    captures = ControlFlow.captures(tangents, scope)

    opts = %{
      primals: length(exprs),
      jvp: {:subgraph, tangents, params ++ captures}
    }

    node_inputs = Enum.map(es ++ exprs ++ captures, &ControlFlow.node_input/1)
    values = Expr.tuple(:custom_jvp, node_inputs, opts, Enum.map(es, &Expr.template_of/1))

    Composite.fill(expr, Tuple.to_list(values))
  end

  # the rule's tangent of `value`, broadcast to its shape and vectorized axes, in its type
  # (zeros for an integer leaf, whose tangent JAX takes as zero)
  defp fit_tangent(tangent, value) do
    if elem(value.type, 0) in [:f, :bf, :c] do
      tangent
      |> Expr.to_expr()
      |> vectorized_like!(value)
      |> Checks.broadcast_tangent!(value.shape, value.type)
    else
      Expr.constant(0, value.type, value.shape) |> vectorized_like!(value)
    end
  end

  # (a vectorized value's tangent has one entry per entry of the value: the rule's result
  # broadcast to the value's vectorized axes, in their order)
  defp vectorized_like!(tangent, value) do
    names = Keyword.keys(value.vectorized_axes)

    case Keyword.keys(tangent.vectorized_axes) -- names do
      [] ->
        Expr.align_vectorized(tangent, value.vectorized_axes)

      extra ->
        raise ArgumentError,
              "the tangent returned by the custom_jvp/3 function is vectorized along " <>
                "#{inspect(extra)}, which the value (vectorized along #{inspect(names)}) is " <>
                "not: a tangent has one entry per entry of its value"
    end
  end

  ## Shared

  # the leaves of a tensor, number or tuple/map of them, as expressions (vectorized ones too:
  # the callers batch them, see devectorize_leaves/1)
  defp leaves!(container, name, what) do
    container =
      Composite.container!(container, "#{name} expects a tensor, a number or a tuple of them")

    leaves = container |> List.wrap() |> Composite.flatten_list() |> Enum.map(&Expr.to_expr/1)

    if leaves == [] do
      raise ArgumentError,
            "#{name} expects a tensor or a tuple of tensors as its #{what}, got: " <>
              inspect(container)
    end

    leaves
  end

  # Vectorized differentiated values (and tangents): every leaf broadcast to the vectorized
  # axes of them all, then devectorized, those axes leading. Returns `{vectorized_axes,
  # leaves}` (`[]` and the leaves as they are when none is vectorized). The function is then
  # called on the copies vectorized again (call/4), so it sees what it would see without us,
  # and its outputs come back devectorized over the same axes (devectorize_output/4): the
  # graph is one batched function whose entries are independent.
  defp devectorize_leaves(leaves) do
    if Enum.all?(leaves, &(&1.vectorized_axes == [])) do
      {[], leaves}
    else
      leaves = Nx.broadcast_vectors(leaves)
      {hd(leaves).vectorized_axes, Enum.map(leaves, &Nx.devectorize(&1, keep_names: false))}
    end
  end

  # `fun` called on its copies of `xs` (devectorized over `vec`, vectorized again for it):
  # `{copies, out, batched}`, `batched` being `out` with every leaf an expression devectorized
  # over `vec` (devectorize_output/4), the function's outputs as the graph differentiates them
  defp batched_call(fun, container, xs, vec, name) do
    {copies, out} = call(fun, container, xs, vec)
    Checks.outputs!(out, name)
    ref = if vec != [], do: revectorize_leaf(hd(copies), vec)
    {copies, out, Composite.traverse(out, &devectorize_output(&1, vec, ref, name))}
  end

  defp revectorize_leaf(tensor, []), do: tensor
  defp revectorize_leaf(tensor, vec), do: Nx.vectorize(tensor, vec)

  # an output of the function, over the vectorized axes of the values it differentiates: one
  # that does not vary along some of them is broadcast; one vectorized along another axis (a
  # vectorized value read from outside) cannot be batched with them
  defp devectorize_output(y, [], _ref, _name), do: Expr.to_expr(y)

  defp devectorize_output(y, vec, ref, name) do
    y = Expr.to_expr(y)
    Checks.output_vectorized_within!(y, Keyword.keys(vec), name)
    [_, y] = Nx.broadcast_vectors([ref, y])
    Nx.devectorize(y, keep_names: false)
  end

  # calls `fun` on its own copy of each differentiated value (as grad/2 does): what it reads
  # from outside is a constant of it
  defp call(fun, container, xs, vec) do
    copies = Enum.map(xs, &Expr.metadata(&1, %{differentiated: true}))
    arg = Composite.fill(container, Enum.map(copies, &revectorize_leaf(&1, vec)))
    {copies, Checks.call!(fun, arg)}
  end

  # forward mode through a custom_grad/3 node: its rule is reverse-mode only (jax.custom_vjp)
  defp refuse_reverse_only!(ys, copies, name) do
    ids = MapSet.new(copies, & &1.data.id)
    Enum.reduce(ys, %{}, &depends_on(&1, ids, &2, name))
    :ok
  end

  defp depends_on(%Nx.Tensor{data: %Expr{id: id} = expr}, ids, seen, name) do
    cond do
      Map.has_key?(seen, id) ->
        seen

      MapSet.member?(ids, id) ->
        Map.put(seen, id, true)

      true ->
        args = for %Nx.Tensor{data: %Expr{}} = arg <- expr.args, do: arg
        seen = Enum.reduce(args, seen, &depends_on(&1, ids, &2, name))
        depends? = Enum.any?(args, &Map.fetch!(seen, &1.data.id))

        if depends? and (custom_grad?(expr) or carries_custom_grad?(expr)) do
          raise ArgumentError,
                "#{name} differentiates forward through a custom_grad/3, whose rule is " <>
                  "reverse-mode only (JAX cannot differentiate a custom_vjp forward). Use " <>
                  "jacrev/2 or grad/2, or give the function a forward rule with " <>
                  "NxJax.Autodiff.custom_jvp/3"
        end

        Map.put(seen, id, depends?)
    end
  end

  defp custom_grad?(expr),
    do: match?(%{op: :metadata, opts: %{metadata: %{custom_grad: _}}}, expr)

  # a custom_grad/3 in a sub-graph of `expr` (a loop body, a branch, a reducer), at any depth
  defp carries_custom_grad?(%Expr{opts: opts}) do
    Enum.any?(opts, fn {_key, value} ->
      value
      |> List.wrap()
      |> Enum.any?(fn
        # (not past its parameters: the captured values lie outside it)
        {:subgraph, outputs, params} ->
          outputs |> reaches_custom_grad?(MapSet.new(params, & &1.data.id)) |> elem(0)

        _other ->
          false
      end)
    end)
  end

  defp reaches_custom_grad?([], seen), do: {false, seen}

  defp reaches_custom_grad?([%Nx.Tensor{data: %Expr{id: id} = expr} | rest], seen) do
    cond do
      MapSet.member?(seen, id) ->
        reaches_custom_grad?(rest, seen)

      custom_grad?(expr) or carries_custom_grad?(expr) ->
        {true, seen}

      true ->
        args = for %Nx.Tensor{data: %Expr{}} = arg <- expr.args, do: arg
        reaches_custom_grad?(args ++ rest, MapSet.put(seen, id))
    end
  end

  defp reaches_custom_grad?([_other | rest], seen), do: reaches_custom_grad?(rest, seen)
end
