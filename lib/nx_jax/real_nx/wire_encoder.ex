defmodule NxJax.WireEncoder do
  @moduledoc """
  Real Nx 0.7.2's expressions (`%Nx.Defn.Expr{id, op, args, context}`, options inside `args`
  in the order of the `Nx.Backend` callback) written as the wire graph of docs/PROTOCOL.md
  section 4: the graph the clean-room front end sends, so the worker is the same for both.

  Real Nx differentiates in Elixir before a compiler sees the expression, so the graph has no
  `:grad` node: `stop_grad` and `custom_grad` arrive as `:metadata` nodes, identity here. A
  vectorized expression is already a computation on full shapes (Nx's front end devectorizes
  before it calls the backend): every node travels with its devectorized shape.

  Scopes, as real Nx draws them (`Nx.Defn.Tree`): a `while` body and condition and a `:fun`
  reducer are closed (their own parameters); an `:optional`'s fallback reads only the call's
  arguments and is written inline; a `cond` branch is open (it reads nodes of the scopes
  around it). A branch reads a node of its parent as a capture: the node is computed before
  the `:cond` and passed to it, and is a parameter of the branch's sub-graph (PROTOCOL 4.3).
  What a branch captures is found as `Nx.Defn.Tree.scope_ids/1` draws scopes: nodes of the
  enclosing scope, nodes the other branch reads too, and parameters; everything else a branch
  reads is computed inside it, so it runs only when its branch is taken.
  """

  alias Nx.Defn.{Composite, Expr, Tree}
  alias Nx.Tensor, as: T

  @version 1

  # ops whose wire op has the same name, the same inputs (the tensors of `args`) and no
  # options
  @same_ops ~w(exp expm1 log log1p sigmoid cos sin tan cosh sinh tanh acosh asinh atanh
               sqrt rsqrt cbrt negate sign abs bitwise_not is_nan is_infinity conjugate
               population_count count_leading_zeros floor ceil round erf erfc erf_inv acos
               asin atan bitcast real imag as_type reshape select clip
               add subtract multiply divide pow remainder atan2 max min quotient bitwise_and
               bitwise_or bitwise_xor left_shift right_shift logical_and logical_or
               logical_xor)a
  @comparisons ~w(equal not_equal greater less less_equal greater_equal)a
  @aggregates ~w(sum product reduce_max reduce_min all any)a
  @windows ~w(window_sum window_product window_max window_min)a

  @doc """
  The wire graph of `outputs` (a container of expressions, what a `defn` returned).

  Returns `{graph, parameters, hooks}`: `parameters` are the indices of the arguments the
  graph reads, in order (the graph's parameter `i` is the argument `Enum.at(parameters, i)`);
  `hooks` maps the index of each `:hook` node (PROTOCOL 4.5) to `{name, callback, template}`,
  the hook's name and function (`Nx.Defn.Kernel.hook/3`, `nil` if it has none) and the
  template of the container it hooks.
  """
  @spec encode(Nx.Container.t()) :: {tuple, [non_neg_integer], map}
  def encode(outputs) do
    level = level(Tree.scope_ids(outputs), :root)
    {ids, level} = Enum.map_reduce(Composite.flatten_list([outputs]), level, &visit/2)

    parameters = level.roots |> Map.keys() |> Enum.sort()
    renumber = parameters |> Enum.with_index() |> Map.new()

    nodes =
      level.nodes
      |> Enum.reverse()
      |> Enum.map(fn
        {id, :parameter, [], %{index: i}, out} -> {id, :parameter, [], %{index: renumber[i]}, out}
        node -> node
      end)

    {{:nx_jax_graph, @version, nodes, ids}, parameters, level.hooks}
  end

  ## Levels: one graph under construction (the root or a sub-graph)

  # params: :root (the arguments), :own (a closed sub-graph's own parameters), :captured (a
  # branch: every parameter is a capture) or {:inline, %{index => wire id}} (a fallback)
  # (hooks: every hook of the trace, numbered across its sub-graphs)
  defp level(scope, params, captures \\ %{}, hooks \\ %{}) do
    %{
      nodes: [],
      count: 0,
      ids: %{},
      scope: scope,
      params: params,
      captures: captures,
      roots: %{},
      hooks: hooks
    }
  end

  defp sub_graph(level, ids),
    do: {:nx_jax_graph, @version, Enum.reverse(level.nodes), ids}

  defp emit(%{count: id} = level, op, inputs, opts, out),
    do: {id, %{level | nodes: [{id, op, inputs, opts, out} | level.nodes], count: id + 1}}

  defp visit(%T{data: %Expr{id: expr_id}} = t, level) do
    case level do
      %{ids: %{^expr_id => wire}} ->
        {wire, level}

      %{captures: %{^expr_id => index}} ->
        {wire, level} = emit(level, :parameter, [], %{index: index}, out(t))
        {wire, put_in(level.ids[expr_id], wire)}

      %{} ->
        {wire, level} = lower(t.data.op, t.data.args, t, level)
        {wire, put_in(level.ids[expr_id], wire)}
    end
  end

  defp visit_all(exprs, level), do: Enum.map_reduce(exprs, level, &visit/2)

  # {type, shape} of a tensor, its vectorized axes leading
  defp out(%T{type: type, shape: shape, vectorized_axes: []}), do: {type, shape}

  defp out(%T{type: type, shape: shape, vectorized_axes: axes}),
    do: {type, List.to_tuple(Keyword.values(axes) ++ Tuple.to_list(shape))}

  defp outs(container), do: Enum.map(Composite.flatten_list([container]), &out/1)

  # a tuple-valued wire node stands for a tensor-valued expression through its element 0
  defp single_or_tuple(%T{type: {:tuple, _}}, tuple_id, level), do: {tuple_id, level}

  defp single_or_tuple(%T{} = t, tuple_id, level),
    do: emit(level, :elem, [tuple_id], %{index: 0}, out(t))

  ## Leaves

  defp lower(:parameter, [index], t, %{params: params} = level) do
    case params do
      {:inline, ids} ->
        {Map.fetch!(ids, index), level}

      :root ->
        case level.roots do
          %{^index => wire} ->
            {wire, level}

          %{} ->
            {wire, level} = emit(level, :parameter, [], %{index: index}, out(t))
            {wire, put_in(level.roots[index], wire)}
        end

      :own ->
        emit(level, :parameter, [], %{index: index}, out(t))

      :captured ->
        raise ArgumentError,
              "nx_jax: parameter #{index} is read inside a cond branch but was not captured"
    end
  end

  defp lower(:constant, [value], t, level),
    do: emit(level, :constant, [], %{value: constant(value, t.type)}, out(t))

  defp lower(:tensor, [tensor], t, level) do
    tensor = Nx.devectorize(tensor, keep_names: false)
    emit(level, :tensor, [], %{data: Nx.to_binary(tensor)}, out(t))
  end

  defp lower(:iota, [axis], t, level), do: emit(level, :iota, [], %{axis: axis}, out(t))

  # the identity matrix (of the last two axes): where two iotas agree
  defp lower(:eye, [], %T{type: type} = t, level) do
    {_type, shape} = out(t)
    rank = tuple_size(shape)
    {rows, level} = emit(level, :iota, [], %{axis: rank - 2}, {{:s, 64}, shape})
    {cols, level} = emit(level, :iota, [], %{axis: rank - 1}, {{:s, 64}, shape})
    opts = %{operand_type: {:s, 64}}
    {same, level} = emit(level, :equal, [rows, cols], opts, {{:u, 8}, shape})
    emit(level, :as_type, [same], %{}, {type, shape})
  end

  ## Element-wise, shape and indexing ops

  defp lower(op, args, t, level) when op in @same_ops do
    {inputs, level} = visit_all(args, level)
    emit(level, op, inputs, %{}, out(t))
  end

  # the type both sides are compared in is decided here, once
  defp lower(op, [a, b], t, level) when op in @comparisons do
    {inputs, level} = visit_all([a, b], level)
    emit(level, op, inputs, %{operand_type: Nx.Type.merge(a.type, b.type)}, out(t))
  end

  defp lower(op, [x, opts], t, level) when op in @aggregates do
    {input, level} = visit(x, level)
    wire = %{axes: opts[:axes], keep_axes: opts[:keep_axes] || false}
    emit(level, op, [input], wire, out(t))
  end

  defp lower(op, [x, opts], t, level) when op in [:argmax, :argmin] do
    {input, level} = visit(x, level)

    wire = %{
      axis: opts[:axis],
      keep_axis: opts[:keep_axis] || false,
      tie_break: opts[:tie_break] || :low
    }

    emit(level, op, [input], wire, out(t))
  end

  defp lower(op, [x, dims, opts], t, level) when op in @windows do
    {input, level} = visit(x, level)
    emit(level, op, [input], window_opts(dims, opts), out(t))
  end

  defp lower(op, [x, source, init, dims, opts], t, level)
       when op in [:window_scatter_max, :window_scatter_min] do
    {inputs, level} = visit_all([x, source, init], level)

    wire = %{
      window_dimensions: Tuple.to_list(dims),
      strides: opts[:strides],
      padding: opts[:padding]
    }

    emit(level, op, inputs, wire, out(t))
  end

  defp lower(:squeeze, [x, _axes], t, level), do: lower(:reshape, [x], t, level)

  defp lower(op, [x, axes], t, level) when op in [:transpose, :reverse] do
    {input, level} = visit(x, level)
    emit(level, op, [input], %{axes: axes}, out(t))
  end

  defp lower(:broadcast, [x, _shape, axes], t, level) do
    {input, level} = visit(x, level)
    emit(level, :broadcast, [input], %{axes: axes}, out(t))
  end

  defp lower(:pad, [x, value, config], t, level) do
    {inputs, level} = visit_all([x, value], level)
    emit(level, :pad, inputs, %{padding_config: config}, out(t))
  end

  defp lower(:dot, [t1, c1, b1, t2, c2, b2], t, level) do
    {inputs, level} = visit_all([t1, t2], level)
    emit(level, :dot, inputs, %{contract_axes: {c1, c2}, batch_axes: {b1, b2}}, out(t))
  end

  defp lower(:conv, [input, kernel, opts], t, level) do
    {inputs, level} = visit_all([input, kernel], level)

    keys = ~w(strides padding input_dilation kernel_dilation feature_group_size
              batch_group_size input_permutation kernel_permutation output_permutation)a

    emit(level, :conv, inputs, Map.new(keys, &{&1, opts[&1]}), out(t))
  end

  # static starts: a slice; tensor starts: a dynamic slice (then the strides, if any)
  defp lower(:slice, [x, starts, lengths, strides], t, level) do
    {input, level} = visit(x, level)

    if Enum.all?(starts, &is_integer/1) do
      wire = %{start_indices: starts, lengths: lengths, strides: strides}
      emit(level, :slice, [input], wire, out(t))
    else
      {starts, level} = Enum.map_reduce(starts, level, &index_scalar/2)
      {type, shape} = out(t)

      if Enum.all?(strides, &(&1 == 1)) do
        emit(level, :dynamic_slice, [input | starts], %{lengths: lengths}, {type, shape})
      else
        lengths_shape = List.to_tuple(lengths)
        opts = %{lengths: lengths}

        {sliced, level} =
          emit(level, :dynamic_slice, [input | starts], opts, {type, lengths_shape})

        zeros = Enum.map(lengths, fn _ -> 0 end)
        wire = %{start_indices: zeros, lengths: lengths, strides: strides}
        emit(level, :slice, [sliced], wire, {type, shape})
      end
    end
  end

  defp lower(:put_slice, [x, starts, slice], t, level) do
    {inputs, level} = visit_all([x, slice], level)
    {starts, level} = Enum.map_reduce(starts, level, &index_scalar/2)
    emit(level, :put_slice, inputs ++ starts, %{}, out(t))
  end

  defp lower(op, [x, indices, axis], t, level) when op in [:take, :take_along_axis] do
    {inputs, level} = visit_all([x, indices], level)
    emit(level, op, inputs, %{axis: axis}, out(t))
  end

  defp lower(:gather, [x, indices, opts], t, level) do
    {inputs, level} = visit_all([x, indices], level)
    emit(level, :gather, inputs, %{axes: opts[:axes]}, out(t))
  end

  defp lower(op, [x, indices, updates, opts], t, level)
       when op in [:indexed_add, :indexed_put] do
    {inputs, level} = visit_all([x, indices, updates], level)
    emit(level, op, inputs, %{axes: opts[:axes]}, out(t))
  end

  defp lower(:concatenate, [tensors, axis], t, level) do
    {inputs, level} = visit_all(tensors, level)
    emit(level, :concatenate, inputs, %{axis: axis}, out(t))
  end

  # (Nx 0.9) each tensor given a new axis of size 1 at `axis`, then joined along it
  defp lower(:stack, [tensors, axis], t, level) do
    {type, _shape} = out(t)
    {ids, level} = visit_cast(tensors, type, level)

    {inputs, level} =
      Enum.zip(ids, tensors)
      |> Enum.map_reduce(level, fn {id, tensor}, level ->
        {_type, shape} = out(tensor)
        emit(level, :reshape, [id], %{}, {type, Tuple.insert_at(shape, axis, 1)})
      end)

    emit(level, :concatenate, inputs, %{axis: axis}, out(t))
  end

  defp lower(op, [x, opts], t, level) when op in [:sort, :argsort] do
    {input, level} = visit(x, level)
    emit(level, op, [input], %{axis: opts[:axis], direction: opts[:direction]}, out(t))
  end

  # the wire's transforms run along the last axis: another axis is moved there and back
  defp lower(op, [x, opts], t, level) when op in [:fft, :ifft] do
    {input, level} = visit(x, level)
    {in_type, in_shape} = out(x)
    {type, shape} = out(t)
    rank = tuple_size(shape)
    axis = opts[:axis] || rank - 1
    wire = %{length: opts[:length]}

    if axis == rank - 1 do
      emit(level, op, [input], wire, {type, shape})
    else
      perm = Enum.to_list(0..(rank - 1)) -- [axis]
      perm = perm ++ [axis]
      permute = fn shape -> List.to_tuple(Enum.map(perm, &elem(shape, &1))) end
      inverse = Enum.map(0..(rank - 1), fn k -> Enum.find_index(perm, &(&1 == k)) end)

      {moved, level} =
        emit(level, :transpose, [input], %{axes: perm}, {in_type, permute.(in_shape)})

      {done, level} = emit(level, op, [moved], wire, {type, permute.(shape)})
      emit(level, :transpose, [done], %{axes: inverse}, {type, shape})
    end
  end

  defp lower(:triangular_solve, [a, b, opts], t, level) do
    {inputs, level} = visit_all([a, b], level)

    wire = %{
      lower: Keyword.get(opts, :lower, true),
      left_side: Keyword.get(opts, :left_side, true),
      transform_a: Keyword.get(opts, :transform_a, :none)
    }

    emit(level, :triangular_solve, inputs, wire, out(t))
  end

  defp lower(:lu, [{p, l, u}, x, _opts], _t, level) do
    {input, level} = visit(x, level)
    emit(level, :lu, [input], %{}, Enum.map([p, l, u], &out/1))
  end

  ## Containers and metadata

  defp lower(:elem, [tuple, index], t, level) do
    case visit(tuple, level) do
      {{:inline_tuple, ids}, level} -> {Enum.fetch!(ids, index), level}
      {tuple_id, level} -> emit(level, :elem, [tuple_id], %{index: index}, out(t))
    end
  end

  # NxJax.Autodiff.jvp/3's tangent (lib/nx_jax/real_nx/autodiff.ex): written as two reverse passes
  # (what other compilers run, and what real Nx's grad differentiates), marked with the
  # function's output, its primals and their tangents: here the wire's jvp node (jax.jvp on the
  # worker) in place of those passes
  defp lower(:metadata, [%T{}, %{nx_jax_jvp: {y, xs, ts}}], t, level) do
    {ids, level} = visit_all([y | xs] ++ ts, level)
    emit(level, :jvp, ids, %{}, out(t))
  end

  # stop_grad, custom_grad (already applied by real Nx's gradient) and any other metadata:
  # the value itself
  # (a tuple's metadata, as custom_grad of a tuple-valued function, is read by :elem nodes)
  defp lower(:metadata, [%T{} = expr, _metadata], _t, level), do: visit(expr, level)

  defp lower(:metadata, [tuple, _metadata], _t, level) when is_tuple(tuple) do
    {ids, level} = visit_all(Tuple.to_list(tuple), level)
    {{:inline_tuple, ids}, level}
  end

  # the value of `expr`, computed after the hooks of the token
  defp lower(:attach_token, [token, expr], t, level) do
    case visit(token, level) do
      {{:hooks, []}, level} ->
        visit(expr, level)

      {{:hooks, hook_ids}, level} ->
        {x, level} = visit(expr, level)
        emit(level, :attach_token, hook_ids ++ [x], %{}, out(t))
    end
  end

  # a token's hooks, in the order they were added: a `:hook` node each (what attach_token
  # names of it is its element 0)
  defp lower(:token, [%Nx.Defn.Token{hooks: hooks}], _t, level) do
    {ids, level} =
      hooks
      |> Enum.reverse()
      |> Enum.flat_map_reduce(level, fn %{expr: expr, name: name, callback: callback}, level ->
        case Composite.flatten_list([expr]) do
          [] ->
            {[], level}

          leaves ->
            {inputs, level} = visit_all(leaves, level)
            index = map_size(level.hooks)
            template = Nx.to_template(expr)
            level = put_in(level.hooks[index], {name, callback, template})
            {hook, level} = emit(level, :hook, inputs, %{index: index}, Enum.map(leaves, &out/1))
            {first, level} = emit(level, :elem, [hook], %{index: 0}, out(hd(leaves)))
            {[first], level}
        end
      end)

    {{:hooks, ids}, level}
  end

  ## Reductions with a function

  # (the tensor and the accumulator are of the out type on the wire: Nx casts them there)
  defp lower(:reduce, [x, acc, opts, fun], t, level) do
    {inputs, level} = visit_cast([x, acc], t.type, level)
    {reducer, level} = reducer(fun, level)
    wire = %{reducer: reducer, axes: opts[:axes], keep_axes: opts[:keep_axes] || false}
    emit(level, :reduce, inputs, wire, out(t))
  end

  defp lower(:window_reduce, [x, acc, dims, opts, fun], t, level) do
    {inputs, level} = visit_cast([x, acc], t.type, level)
    {reducer, level} = reducer(fun, level)
    wire = Map.put(window_opts(dims, opts), :reducer, reducer)
    emit(level, :window_reduce, inputs, wire, out(t))
  end

  # Nx.map: the scalar function on each element, in a while loop over the flattened tensor
  # (the wire has no map; a loop keeps what the function may do, a cond included, per element)
  defp lower(:map, [x, _opts, %T{data: %Expr{op: :fun, args: [_params, fun, _mfa]}}], t, level) do
    {type, shape} = out(t)
    n = Tuple.product(shape)
    index = {{:s, 64}, {}}
    flat = {type, {n}}
    {[x_id], level} = visit_cast([x], type, level)
    {x_flat, level} = emit(level, :reshape, [x_id], %{}, flat)
    {zeros, level} = emit(level, :constant, [], %{value: 0}, flat)
    {first, level} = emit(level, :constant, [], %{value: 0}, index)

    condition = level(%{}, :own)
    {i, condition} = emit(condition, :parameter, [], %{index: 0}, index)
    {size, condition} = emit(condition, :constant, [], %{value: n}, index)

    {more, condition} =
      emit(condition, :less, [i, size], %{operand_type: {:s, 64}}, {{:u, 8}, {}})

    body = level(Tree.scope_ids(fun), :own, %{}, level.hooks)
    {i, body} = emit(body, :parameter, [], %{index: 0}, index)
    {acc, body} = emit(body, :parameter, [], %{index: 1}, flat)
    {xs, body} = emit(body, :parameter, [], %{index: 2}, flat)
    {slot, body} = emit(body, :dynamic_slice, [xs, i], %{lengths: [1]}, {type, {1}})
    {element, body} = emit(body, :reshape, [slot], %{}, {type, {}})
    {y, inline} = visit(fun, %{body | params: {:inline, %{0 => element}}})
    body = %{inline | params: :own}

    {y, body} =
      case out(fun) do
        {^type, _} -> {y, body}
        {_other, _} -> emit(body, :as_type, [y], %{}, {type, {}})
      end

    {y, body} = emit(body, :reshape, [y], %{}, {type, {1}})
    {acc, body} = emit(body, :put_slice, [acc, y, i], %{}, flat)
    {one, body} = emit(body, :constant, [], %{value: 1}, index)
    {next, body} = emit(body, :add, [i, one], %{}, index)

    opts = %{
      condition: sub_graph(condition, [more]),
      body: sub_graph(body, [next, acc, xs]),
      max_iterations: nil
    }

    level = %{level | hooks: body.hooks}
    {loop, level} = emit(level, :while, [first, zeros, x_flat], opts, [index, flat, flat])
    {mapped, level} = emit(level, :elem, [loop], %{index: 1}, flat)
    emit(level, :reshape, [mapped], %{}, {type, shape})
  end

  ## Control flow

  defp lower(:while, [initial, _arg, condition, body], t, level) do
    {inputs, level} = visit_all(Composite.flatten_list([initial]), level)
    {condition, level} = closed_graph(condition, level)
    {body, level} = closed_graph(body, level)
    opts = %{condition: condition, body: body, max_iterations: nil}
    {tuple_id, level} = emit(level, :while, inputs, opts, outs(initial))
    single_or_tuple(t, tuple_id, level)
  end

  defp lower(:cond, [clauses, last], t, level) do
    {tuple_id, level} = cond_node(clauses, last, t, level)
    single_or_tuple(t, tuple_id, level)
  end

  # EXLA 0.7.2 lowers qr (real types), top_k, fft2 and ifft2 natively; so do we. Every other
  # optional op is Nx's own fallback expression, written inline.
  defp lower(:optional, [%T{data: %Expr{op: :qr, args: [x, opts]}}, {q, r}, _fun], _t, level)
       when elem(q.type, 0) != :c do
    {input, level} = visit(x, level)
    emit(level, :qr, [input], %{mode: opts[:mode] || :reduced}, [out(q), out(r)])
  end

  defp lower(:optional, [%T{data: %Expr{op: :top_k, args: [x, opts]}}, {v, i}, _fun], _t, level) do
    {input, level} = visit(x, level)
    emit(level, :top_k, [input], %{k: opts[:k]}, [out(v), out(i)])
  end

  defp lower(:optional, [%T{data: %Expr{op: op, args: [x, opts]}}, _fallback, _fun], t, level)
       when op in [:fft2, :ifft2] do
    {input, level} = visit(x, level)
    emit(level, op, [input], %{axes: opts[:axes], lengths: opts[:lengths]}, out(t))
  end

  defp lower(:optional, [%T{data: %Expr{args: call_args}}, fallback, _fun], _t, level) do
    {args, _opts} = Enum.split_while(call_args, &(not is_list(&1)))
    {ids, level} = visit_all(args, level)
    params = ids |> Enum.with_index(&{&2, &1}) |> Map.new()
    inline = %{level | params: {:inline, params}, scope: Tree.scope_ids(fallback)}
    {results, inline} = visit_all(Composite.flatten_list([fallback]), inline)
    level = %{inline | params: level.params, scope: level.scope}

    case fallback do
      %T{} -> {hd(results), level}
      _tuple -> {{:inline_tuple, results}, level}
    end
  end

  defp lower(op, _args, _t, _level) do
    raise ArgumentError,
          "nx_jax: the expression op #{inspect(op)} of real Nx is not supported yet by " <>
            "NxJax (docs/ARCHITECTURE.md, \"Two projects\")"
  end

  ## Helpers of the ops above

  # an integer constant travels as the value its type holds (Nx keeps the low bits of one
  # that does not fit)
  defp constant(value, {:s, bits}) when is_integer(value),
    do: <<value::signed-size(bits)>> |> then(fn <<v::signed-size(bits)>> -> v end)

  defp constant(value, {:u, bits}) when is_integer(value),
    do: <<value::size(bits)>> |> then(fn <<v::size(bits)>> -> v end)

  defp constant(value, _type), do: value

  # the expressions, each as `type`
  defp visit_cast(exprs, type, level) do
    Enum.map_reduce(exprs, level, fn expr, level ->
      {id, level} = visit(expr, level)

      case out(expr) do
        {^type, _shape} -> {id, level}
        {_other, shape} -> emit(level, :as_type, [id], %{}, {type, shape})
      end
    end)
  end

  # a start index: a scalar tensor expression, or an integer
  defp index_scalar(%T{} = start, level), do: visit(start, level)

  defp index_scalar(start, level) when is_integer(start),
    do: emit(level, :constant, [], %{value: start}, {{:s, 64}, {}})

  defp window_opts(dims, opts) do
    rank = tuple_size(dims)

    %{
      window_dimensions: Tuple.to_list(dims),
      strides: opts[:strides] || List.duplicate(1, rank),
      padding: opts[:padding] || List.duplicate({0, 0}, rank),
      window_dilations: opts[:window_dilations] || List.duplicate(1, rank)
    }
  end

  # a `:fun` node (a reducer): a closed sub-graph of its own parameters
  # (its result is of the out type on the wire: Nx leaves that cast to the compiler)
  defp reducer(%T{type: type, data: %Expr{op: :fun, args: [_params, expr, _mfa]}}, level) do
    {{:nx_jax_graph, version, nodes, [id]} = graph, level} = closed_graph(expr, level)

    case out(expr) do
      {^type, _shape} ->
        {graph, level}

      {_other, shape} ->
        cast = {length(nodes), :as_type, [id], %{}, {type, shape}}
        {{:nx_jax_graph, version, nodes ++ [cast], [cast |> elem(0)]}, level}
    end
  end

  # a closed sub-graph (while, reducers): its parameters are its own, by index
  defp closed_graph(expr, level) do
    sub = level(Tree.scope_ids(expr), :own, %{}, level.hooks)
    {ids, sub} = visit_all(Composite.flatten_list([expr]), sub)
    {sub_graph(sub, ids), %{level | hooks: sub.hooks}}
  end

  # A cond of clauses `[{pred, body} | rest]` and `last`, as the wire's two-branch conds
  # nested in their false branches (as EXLA nests them). Returns the tuple-valued node.
  defp cond_node([{pred, on_true} | rest], last, t, level) do
    on_false = if rest == [], do: last, else: {:nested, rest, last, t}
    true_scope = Tree.scope_ids(on_true)
    false_scope = branch_scope(on_false)

    {pred_id, level} = visit(pred, level)

    # what both branches read of the enclosing scopes, in the order found
    {captures, _seen} =
      Enum.reduce([{on_true, false_scope}, {on_false, true_scope}], {[], %{}}, fn
        {branch, other}, acc -> collect(branch_exprs(branch), level.scope, other, acc)
      end)

    captures = Enum.reverse(captures)
    {capture_ids, level} = visit_all(captures, level)
    index = captures |> Enum.with_index(fn c, i -> {c.data.id, i} end) |> Map.new()

    {true_graph, level} = branch_graph(on_true, true_scope, index, level)
    {false_graph, level} = branch_graph(on_false, false_scope, index, level)
    opts = %{branches: [true_graph, false_graph]}
    emit(level, :cond, [pred_id | capture_ids], opts, outs(last))
  end

  # the scope of a nested cond as its own expression (a fresh id: it is no node of the trace)
  defp branch_scope({:nested, rest, last, t}),
    do: Tree.scope_ids(%{t | data: %{t.data | id: make_ref(), args: [rest, last]}})

  defp branch_scope(body), do: Tree.scope_ids(body)

  # the expressions a branch reads first
  defp branch_exprs({:nested, rest, last, _t}),
    do:
      Enum.flat_map(rest, fn {pred, body} -> [pred | Composite.flatten_list([body])] end) ++
        Composite.flatten_list([last])

  defp branch_exprs(body), do: Composite.flatten_list([body])

  defp branch_graph({:nested, rest, last, t}, scope, index, level) do
    sub = level(scope, :captured, index, level.hooks)
    {tuple_id, sub} = cond_node(rest, last, t, sub)

    {ids, sub} =
      last
      |> outs()
      |> Enum.with_index()
      |> Enum.map_reduce(sub, fn {out, i}, sub ->
        emit(sub, :elem, [tuple_id], %{index: i}, out)
      end)

    {sub_graph(sub, ids), %{level | hooks: sub.hooks}}
  end

  defp branch_graph(body, scope, index, level) do
    sub = level(scope, :captured, index, level.hooks)
    {ids, sub} = visit_all(Composite.flatten_list([body]), sub)
    {sub_graph(sub, ids), %{level | hooks: sub.hooks}}
  end

  # The captures of a branch: walking down from what it reads, a node of the enclosing
  # scope, one the other branch reads, or a parameter is captured (and not walked further);
  # constants are written where they are read; closed sub-expressions are not walked.
  defp collect(exprs, scope, other, acc) do
    Enum.reduce(exprs, acc, &collect_one(&1, scope, other, &2))
  end

  defp collect_one(%T{data: %Expr{id: id, op: op, args: args}} = t, scope, other, {acc, seen}) do
    cond do
      Map.has_key?(seen, id) ->
        {acc, seen}

      op == :constant ->
        {acc, Map.put(seen, id, true)}

      # (a token is never a value: its hooks are walked)
      op == :token ->
        {_args, acc} =
          Tree.apply_args(t, :scope, {acc, Map.put(seen, id, true)}, fn arg, acc ->
            {arg, collect_one(arg, scope, other, acc)}
          end)

        acc

      op == :parameter or Map.has_key?(scope, id) or Map.has_key?(other, id) or
          captured_elem?(op, args, scope, other) ->
        {[t | acc], Map.put(seen, id, true)}

      op == :fun ->
        {acc, Map.put(seen, id, true)}

      true ->
        {_args, acc} =
          Tree.apply_args(t, :scope, {acc, Map.put(seen, id, true)}, fn arg, acc ->
            {arg, collect_one(arg, scope, other, acc)}
          end)

        acc
    end
  end

  # a tuple's elements travel, never the tuple: an element of a tuple of the enclosing scope
  # is captured
  defp captured_elem?(:elem, [%T{data: %Expr{id: tuple_id}}, _index], scope, other),
    do: Map.has_key?(scope, tuple_id) or Map.has_key?(other, tuple_id)

  defp captured_elem?(_op, _args, _scope, _other), do: false
end
