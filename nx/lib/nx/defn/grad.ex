defmodule Nx.Defn.Grad do
  @moduledoc """
  Builds the differentiation nodes of a trace: `:grad` nodes for `grad/2` and
  `value_and_grad/3`, and `custom_grad` metadata for `custom_grad/3`.

  Nothing is differentiated here: the worker differentiates the graph with JAX. This
  module checks the arguments at trace time (so mistakes raise where they are made)
  and builds the nodes described in `docs/PROTOCOL.md` (4.2). Users call these through
  `Nx.Defn.Kernel` inside `defn` or `Nx.Defn` outside it.
  """

  alias Nx.Defn.{Composite, Expr}

  @doc """
  Returns `{value, grad}`: `value` is `fun.(x)` (or `fun_or_expr` itself when it is
  already an expression) and `grad` the gradient of `transform.(value)` with respect to
  `x`, a tensor or a tuple/map of tensors, in the same container as `x`.

  `transform.(value)` must be a tensor (or a number); one that is not a scalar is
  differentiated with a seed of ones, as its sum (as Nx 0.7 does).
  """
  @spec value_and_grad(term, term, (term -> term)) :: {term, term}
  def value_and_grad(x, fun_or_expr, transform \\ & &1) do
    # as in Nx, what is not a container is refused by the protocol that walks containers
    x =
      Composite.container!(
        x,
        "grad/2 differentiates with respect to a tensor, a number or a container of them"
      )

    x = Composite.traverse(x, &Expr.to_expr/1)
    xs = Composite.flatten_list([x])

    if xs == [] do
      no_inputs(x, fun_or_expr)
    else
      differentiate(x, xs, fun_or_expr, transform)
    end
  end

  # As Nx 0.7.2: a container without tensors (the empty map of a layer without parameters)
  # has nothing to differentiate; the value is computed and the gradient is the container.
  defp no_inputs(x, fun_or_expr) do
    value = if is_function(fun_or_expr, 1), do: fun_or_expr.(x), else: fun_or_expr
    {value, x}
  end

  defp differentiate(x, xs, fun_or_expr, transform) do
    # As in Nx: the function gets its own copy of x (a new node, same value), so a value the
    # function captures from outside (the x of the enclosing defn) is a constant of it:
    # grad(t, fn _ -> t end) is 0 and grad(x, fn y -> x * y end) is x.
    {x, xs, value} =
      if is_function(fun_or_expr, 1) do
        x = Composite.traverse(x, &Expr.metadata(&1, %{grad_input: true}))
        {x, Composite.flatten_list([x]), fun_or_expr.(x)}
      else
        {x, xs, fun_or_expr}
      end

    {x, xs, y} = floating_inputs(x, xs, fun_or_expr, value, transform)
    # As in Nx 0.7, a vectorized y is differentiated as the sum of its entries, and each
    # gradient has the vectorized axes of its x: since every op treats entries independently,
    # that is the per-entry gradient for an x vectorized like y, and the sum over the entries
    # for an x without some of y's vectorized axes.
    y = if y.vectorized_axes == [], do: y, else: y |> Nx.devectorize() |> Nx.sum()

    templates =
      Enum.zip_with(xs, gradient_types(y, xs), fn x, type ->
        %{Expr.template_of(x) | type: type}
      end)

    grads = Expr.tuple(:grad, [y | xs], %{}, templates)
    {value, Composite.fill(x, Tuple.to_list(grads))}
  end

  ## The types of the gradients
  #
  # JAX's gradient has its input's type; Nx 0.7.2's has the type its backward pass computes
  # in: the seed is an f32 1.0 and each rule combines the incoming gradient with values of the
  # forward pass, so the gradient of `sum(x)` is f32 for an f64 or f16 `x`, that of
  # `sum(broadcast(z))` real for a complex `z`, `exp`'s has `x`'s type (merged with f32), and an
  # `x` nothing depends on gets f32 zeros. The worker computes in JAX's types and casts to the
  # types found here (the real part for a complex gradient declared real: there the backward
  # pass never met a complex value, so the imaginary part is zero, or, for `imag`, Nx's
  # directional derivative along the real axis is the real part).
  #
  # The rules follow Nx's for the ops whose gradient only moves, sums or selects the incoming
  # one (and for `multiply`, `divide`, `real`, `imag`, `as_type`, `window_scatter_*`); every
  # other op merges the incoming type with its inputs' and outputs' types, which is what Nx's
  # rules compute in, or wider (never narrower than its inputs, so no precision is lost).

  @moves_gradient [:reshape, :transpose, :broadcast, :reverse, :sum, :mean, :concatenate] ++
                    [:add, :subtract, :negate, :bitcast, :elem, :hook, :attach_token] ++
                    [:slice, :dynamic_slice, :put_slice, :pad, :select, :clip, :max, :min] ++
                    [:reduce_max, :reduce_min, :window_sum, :cumulative_sum, :sort, :gather] ++
                    [:indexed_add, :indexed_put]

  @refused [:quotient]

  defp gradient_types(y, xs) do
    x_ids = MapSet.new(xs, & &1.data.id)
    {order, depends} = backward_order(y, x_ids)

    grads =
      Enum.reduce(order, %{y.data.id => {:f, 32}}, fn %Nx.Tensor{data: %Expr{id: id}} = node,
                                                      grads ->
        case grads do
          %{^id => g} ->
            cond do
              MapSet.member?(x_ids, id) ->
                grads

              node.data.op in @refused and Map.fetch!(depends, id) ->
                refuse!(node.data.op)

              true ->
                node
                |> contributions(g)
                |> Enum.filter(fn {arg, _} ->
                  differentiable?(arg) and Map.get(depends, arg.data.id, false)
                end)
                |> Enum.reduce(grads, fn {arg, type}, grads ->
                  Map.update(grads, arg.data.id, type, &Nx.Type.merge(&1, type))
                end)
            end

          %{} ->
            grads
        end
      end)

    Enum.map(xs, &Map.get(grads, &1.data.id, {:f, 32}))
  end

  # The nodes between y and the xs, users before the nodes they use, and whether each
  # node depends on an x.
  defp backward_order(y, x_ids), do: visit(y, x_ids, {[], %{}})

  defp visit(%Nx.Tensor{data: %Expr{id: id}} = node, x_ids, {order, depends} = acc) do
    cond do
      Map.has_key?(depends, id) ->
        acc

      MapSet.member?(x_ids, id) ->
        {[node | order], Map.put(depends, id, true)}

      true ->
        children = gradient_children(node)
        {order, depends} = Enum.reduce(children, acc, &visit(&1, x_ids, &2))
        depends? = Enum.any?(children, &Map.fetch!(depends, &1.data.id))
        {[node | order], Map.put(depends, id, depends?)}
    end
  end

  # the nodes a node's gradient flows to: none through stop_grad, the inputs of a custom_grad,
  # the floating and complex arguments of any other node (integer ones are indices,
  # predicates or counts: our integer inputs are differentiated through floating copies)
  defp gradient_children(%Nx.Tensor{data: %Expr{op: :metadata, opts: %{metadata: metadata}}})
       when is_map_key(metadata, :stop_grad),
       do: []

  defp gradient_children(%Nx.Tensor{
         data: %Expr{op: :metadata, opts: %{metadata: %{custom_grad: {inputs, _, _}}}}
       }),
       do: inputs

  defp gradient_children(%Nx.Tensor{data: %Expr{args: args}}),
    do: Enum.filter(args, &match?(%Nx.Tensor{data: %Expr{}}, &1))

  defp differentiable?(%Nx.Tensor{data: %Expr{op: op}}) when op in @refused, do: true

  defp differentiable?(%Nx.Tensor{data: %Expr{}, type: type}),
    do: Nx.Type.float?(type) or match?({:tuple, _}, type)

  defp differentiable?(_), do: false

  # Nx 0.7.2's refusal (its message): the integer quotient has no gradient
  defp refuse!(:quotient) do
    raise ArgumentError,
          "cannot compute gradient for Nx.quotient/2.\n\nIf a floating point computation is " <>
            "acceptable, consider using an implementation of floor division. See the " <>
            "documentation of `Nx.quotient` for more details.\n"
  end

  # {input, type of its gradient contribution} for a node whose incoming gradient has type g
  defp contributions(%Nx.Tensor{data: %Expr{op: :metadata} = expr}, g) do
    case expr.opts.metadata do
      %{stop_grad: true} -> []
      %{custom_grad: {inputs, _, _}} -> Enum.map(inputs, &{&1, &1.type})
      _ -> Enum.map(expr.args, &{&1, g})
    end
  end

  defp contributions(%Nx.Tensor{data: %Expr{op: op, args: args}}, g) when op in @moves_gradient,
    do: Enum.map(args, &{&1, g})

  defp contributions(%Nx.Tensor{data: %Expr{op: :multiply, args: [x, y]}}, g),
    do: [{x, merge_types(g, [y])}, {y, merge_types(g, [x])}]

  defp contributions(%Nx.Tensor{data: %Expr{op: :divide, args: [x, y]}} = ans, g),
    do: [{x, merge_types(g, [y])}, {y, merge_types(g, [ans, y])}]

  defp contributions(%Nx.Tensor{data: %Expr{op: op, args: [x]}}, g) when op in [:real, :imag],
    do: [{x, Nx.Type.to_real(g)}]

  # conjugate(g) of a complex x (complex even for a real g), real(g) of a real one
  defp contributions(%Nx.Tensor{data: %Expr{op: :conjugate, args: [x]}}, g) do
    if Nx.Type.complex?(x.type),
      do: [{x, Nx.Type.to_complex(g)}],
      else: [{x, Nx.Type.to_real(g)}]
  end

  defp contributions(%Nx.Tensor{data: %Expr{op: :as_type, args: [x]}, type: type}, g) do
    if Nx.Type.complex?(x.type) and not Nx.Type.complex?(type),
      do: [{x, Nx.Type.to_real(g)}],
      else: [{x, g}]
  end

  defp contributions(%Nx.Tensor{data: %Expr{op: :abs, args: [x]}} = ans, g) do
    if Nx.Type.complex?(x.type), do: [{x, merge_types(g, [x, ans])}], else: [{x, g}]
  end

  # the operand's gradient is Nx.broadcast(0, tensor): s64 zeros
  defp contributions(%Nx.Tensor{data: %Expr{op: op, args: [x, source, init]}}, g)
       when op in [:window_scatter_max, :window_scatter_min],
       do: [{x, {:s, 64}}, {source, g}, {init, g}]

  # take's gradient is scattered into zeros of the operand's type
  defp contributions(%Nx.Tensor{data: %Expr{op: op, args: [x | _]}}, g)
       when op in [:take, :take_along_axis],
       do: [{x, merge_types(g, [x])}]

  defp contributions(%Nx.Tensor{data: %Expr{args: args, outs: outs}} = ans, g) do
    type = merge_types(g, [ans | args] ++ (outs || []))
    Enum.map(args, &{&1, type})
  end

  # scalar constants are weakly typed in Nx's backward pass (a number in its rules)
  defp merge_types(g, tensors) do
    Enum.reduce(tensors, g, fn
      %Nx.Tensor{type: {:tuple, _}}, acc -> acc
      %Nx.Tensor{data: %Expr{op: :constant}, shape: {}}, acc -> acc
      %Nx.Tensor{type: type}, acc -> Nx.Type.merge(acc, type)
    end)
  end

  # As Nx 0.7.2, integer inputs keep their type and value inside the function (a PRNG key stays
  # u32 for Nx.Random), and the gradient reaches one only through the ops Nx differentiates:
  # arithmetic, not comparisons, bitwise ops or indices. One it does not reach (a key, a step
  # counter) gets f32 zeros and is given to JAX as an integer that nothing differentiates. One
  # it reaches gets a floating gradient (f32 for the integer types) in Nx; JAX differentiates
  # floats only, so the function is traced a second time on floating copies of those inputs,
  # and that trace is differentiated (the value still comes from the first trace).
  defp floating_inputs(x, xs, fun_or_expr, value, transform) do
    y = value |> transform.() |> scalar!()

    case integer_inputs_reached(y, xs) do
      [] ->
        {x, xs, y}

      reached when is_function(fun_or_expr, 1) ->
        ids = MapSet.new(reached, & &1.data.id)

        floats =
          Composite.traverse(x, fn t ->
            if MapSet.member?(ids, t.data.id), do: to_floating(t), else: t
          end)

        y = floats |> fun_or_expr.() |> transform.() |> scalar!()
        {floats, Composite.flatten_list([floats]), y}

      [integer | _] ->
        raise ArgumentError,
              "grad/2 with an expression (not a function) differentiates with respect to " <>
                "floating-point tensors only, got one of type " <>
                "#{Nx.Type.to_string(integer.type)}. Pass a function of x, a float (3.0, not 3) " <>
                "or convert it with Nx.as_type/2"
    end
  end

  # Nx 0.7.2's ops whose result carries no gradient to their arguments
  @no_gradient [:constant, :tensor, :eye, :iota] ++
                 [:all, :any, :argmax, :argmin, :argsort] ++
                 [:bitwise_and, :bitwise_or, :bitwise_xor, :bitwise_not] ++
                 [:logical_and, :logical_or, :logical_xor, :logical_not] ++
                 [:left_shift, :right_shift, :count_leading_zeros, :population_count] ++
                 [:floor, :round, :ceil, :sign, :is_nan, :is_infinity] ++
                 [:equal, :greater, :greater_equal, :less, :less_equal, :not_equal]

  # The integer inputs among xs that the gradient of y reaches, following Nx's rules (a node
  # passes gradient to the arguments listed by reach_args/1). A branch or loop is followed
  # into its sub-graphs: an integer input that reaches its results only through ops without
  # a gradient (a PRNG key split and drawn from inside a loop) stays an integer, as in Nx.
  defp integer_inputs_reached(y, xs) do
    integers = for x <- xs, not Nx.Type.float?(x.type), into: %{}, do: {x.data.id, x}

    if integers == %{} do
      []
    else
      {_seen, reached} = reach([y], integers, {MapSet.new(), %{}})
      for x <- xs, Map.has_key?(reached, x.data.id), uniq: true, do: x
    end
  end

  defp reach([], _integers, acc), do: acc

  defp reach([%Nx.Tensor{data: %Expr{id: id} = expr} | rest], integers, {seen, reached}) do
    cond do
      MapSet.member?(seen, id) ->
        reach(rest, integers, {seen, reached})

      Map.has_key?(integers, id) ->
        reach(rest, integers, {MapSet.put(seen, id), Map.put(reached, id, true)})

      true ->
        reach(reach_args(expr) ++ rest, integers, {MapSet.put(seen, id), reached})
    end
  end

  defp reach([_other | rest], integers, acc), do: reach(rest, integers, acc)

  defp reach_args(%Expr{op: op}) when op in @no_gradient, do: []

  defp reach_args(%Expr{op: :metadata, opts: %{metadata: metadata}, args: args}) do
    case metadata do
      %{stop_grad: true} -> []
      %{custom_grad: {inputs, _, _}} -> inputs
      _ -> args
    end
  end

  # the predicate of select, the start indices of slices and the indices of take and gather
  # get no gradient
  defp reach_args(%Expr{op: :select, args: [_pred | branches]}), do: branches
  defp reach_args(%Expr{op: :dynamic_slice, args: [tensor | _starts]}), do: [tensor]
  defp reach_args(%Expr{op: :put_slice, args: [tensor, slice | _starts]}), do: [tensor, slice]

  defp reach_args(%Expr{op: op, args: [tensor | _indices]})
       when op in [:take, :take_along_axis, :gather],
       do: [tensor]

  # a branch: what its results are built from (all branches, all results; the predicate gets
  # no gradient); a loop: what its body's results are built from, and each initial value
  # whose parameter one of them reaches (the condition gets no gradient)
  defp reach_args(%Expr{op: :cond, opts: %{branches: branches}}),
    do: Enum.flat_map(branches, fn {:subgraph, leaves, _captures} -> leaves end)

  defp reach_args(%Expr{op: op, args: args, opts: %{body: {:subgraph, next, sub}}})
       when op in [:while, :range_loop] do
    params = for %Nx.Tensor{data: %Expr{id: id}} <- Enum.take(sub, length(next)), do: id
    by_param = Map.new(params, &{&1, true})
    {_seen, reached} = reach(next, by_param, {MapSet.new(), %{}})
    initial = Enum.take(args, length(next))
    taken = for {id, init} <- Enum.zip(params, initial), Map.has_key?(reached, id), do: init
    next ++ taken
  end

  defp reach_args(%Expr{args: args}), do: args

  # an integer input's float copy remembers its type, so ops that take indices read it as
  # the integer it was (Nx.integer_tensor!/3), with a zero gradient
  defp to_floating(%Nx.Tensor{type: type} = t) do
    if Nx.Type.float?(type),
      do: t,
      else: t |> Nx.as_type(Nx.Type.to_floating(type)) |> Expr.metadata(%{integer_input: type})
  end

  defp scalar!(%Nx.Tensor{type: {:tuple, _}} = y), do: not_scalar!(y)

  defp scalar!(%Nx.Tensor{shape: {}} = y) do
    y = Expr.to_expr(y)
    Nx.as_type(y, Nx.Type.to_floating(y.type))
  end

  # as Nx 0.7: a non-scalar value is differentiated with a seed of ones, that is as its sum
  defp scalar!(%Nx.Tensor{} = y), do: y |> Expr.to_expr() |> Nx.sum() |> scalar!()
  defp scalar!(y) when is_number(y), do: scalar!(Expr.to_expr(y))
  defp scalar!(y), do: not_scalar!(y)

  defp not_scalar!(other) do
    raise ArgumentError,
          "expected a tensor or a number as the value to differentiate in grad/2, got: " <>
            "#{inspect(other)}. If the function returns a tuple, use value_and_grad/3 with " <>
            "a transform that picks the scalar to differentiate"
  end

  @doc """
  Returns `expr` (a tensor or a tuple of tensors) with a custom gradient for `inputs`.

  `fun` is called now, at trace time, with `:cotangent` leaves standing for the
  incoming gradient `g` (a tuple of them when `expr` is a tuple). It must return a list
  with one gradient per input; each gradient is broadcast to its input's shape and cast
  to its input's type.
  """
  @spec custom_grad(term, [Nx.Tensor.t()], function) :: term
  def custom_grad(expr, inputs, fun) when is_function(fun, 1) do
    unless is_list(inputs) and inputs != [] and Enum.all?(inputs, &Composite.leaf?/1) do
      raise ArgumentError,
            "custom_grad/3 expects a non-empty list of tensors as its inputs (the values to " <>
              "give gradients to), got: #{inspect(inputs)}"
    end

    inputs = Enum.map(inputs, &Expr.to_expr/1)
    expr = expr_or_tuple!(expr)

    g =
      case expr do
        tuple when is_tuple(tuple) ->
          Composite.traverse(tuple, &cotangent/1)

        tensor ->
          cotangent(tensor)
      end

    grads = fun.(g)

    unless is_list(grads) and length(grads) == length(inputs) do
      raise ArgumentError,
            "the function given to custom_grad/3 must return a list with one gradient per " <>
              "input (#{length(inputs)} here, in the order of the inputs), got: #{inspect(grads)}. " <>
              "Wrap a single gradient in a list: fn g -> [g * ...] end"
    end

    grads =
      grads
      |> Enum.zip(inputs)
      |> Enum.with_index()
      |> Enum.map(fn {{grad, input}, index} -> fit_grad!(grad, input, index) end)

    cotangents = Composite.flatten_list([g])
    Expr.metadata(expr, %{custom_grad: {inputs, cotangents, grads}})
  end

  def custom_grad(_expr, _inputs, fun) do
    raise ArgumentError,
          "custom_grad/3 expects a function of one argument (the incoming gradient), got: #{inspect(fun)}"
  end

  defp expr_or_tuple!(tuple) when is_tuple(tuple) and tuple_size(tuple) > 0 do
    tuple
    |> Tuple.to_list()
    |> Enum.map(fn
      leaf when is_number(leaf) or is_struct(leaf, Nx.Tensor) ->
        Expr.to_expr(leaf)

      other ->
        raise ArgumentError,
              "custom_grad/3 expects a tensor or a tuple of tensors, got: #{inspect(other)}"
    end)
    |> List.to_tuple()
  end

  defp expr_or_tuple!(leaf) when is_number(leaf) or is_struct(leaf, Nx.Tensor),
    do: Expr.to_expr(leaf)

  defp expr_or_tuple!(other) do
    raise ArgumentError,
          "custom_grad/3 expects a tensor or a tuple of tensors, got: #{inspect(other)}"
  end

  # a cotangent leaf shaped (and vectorized) like `tensor`
  defp cotangent(%Nx.Tensor{vectorized_axes: []} = tensor),
    do: Expr.cotangent(tensor.type, tensor.shape)

  defp cotangent(tensor) do
    tensor.type
    |> Expr.cotangent(Nx.full_shape(tensor))
    |> Nx.vectorize(tensor.vectorized_axes)
  end

  # Broadcast a returned gradient to its input's shape and cast it to its input's type.
  defp fit_grad!(grad, input, _index) when is_number(grad) do
    grad = Expr.constant(grad, input.type, Nx.full_shape(input))
    if input.vectorized_axes == [], do: grad, else: Nx.vectorize(grad, input.vectorized_axes)
  end

  defp fit_grad!(%Nx.Tensor{type: {kind, _}} = grad, input, index) when kind != :tuple do
    grad = Expr.to_expr(grad)

    grad =
      try do
        Nx.broadcast(grad, input.shape)
      rescue
        ArgumentError ->
          reraise ArgumentError,
                  "the gradient #{index} returned by the custom_grad/3 function has shape " <>
                    "#{inspect(grad.shape)}, which cannot be broadcast to its input's shape " <>
                    "#{inspect(input.shape)}. Return a gradient with the input's shape " <>
                    "(sum over the broadcast axes with Nx.sum/2 if the input was broadcast)",
                  __STACKTRACE__
      end

    grad |> Nx.as_type(input.type) |> fit_vectorized(input)
  end

  defp fit_grad!(other, input, index) do
    raise ArgumentError,
          "the gradient #{index} returned by the custom_grad/3 function must be a tensor or a " <>
            "number with the shape of its input (#{inspect(input.shape)}), got: #{inspect(other)}"
  end

  # The gradient of an input gets the input's vectorized axes: entries along vectorized axes
  # the input does not have are summed (Nx 0.7), missing ones are broadcast.
  defp fit_vectorized(%Nx.Tensor{vectorized_axes: same} = grad, %Nx.Tensor{vectorized_axes: same}),
    do: grad

  defp fit_vectorized(grad, input) do
    {keep, extra} =
      grad.vectorized_axes
      |> Enum.with_index()
      |> Enum.split_with(fn {{name, _}, _} -> Keyword.has_key?(input.vectorized_axes, name) end)

    grad =
      case extra do
        [] ->
          grad

        _ ->
          summed =
            grad
            |> Nx.devectorize(keep_names: false)
            |> Nx.sum(axes: Enum.map(extra, &elem(&1, 1)))

          case keep do
            [] -> summed
            _ -> Nx.vectorize(summed, Enum.map(keep, &elem(&1, 0)))
          end
      end

    Expr.align_vectorized(Expr.to_expr(grad), input.vectorized_axes)
  end
end
