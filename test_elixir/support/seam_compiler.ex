defmodule NxJax.Test.SeamCompiler do
  @moduledoc """
  A second implementation of `Nx.Defn.Compiler`, for the tests: it evaluates the traced
  `Nx.Defn.Expr` graph itself, in Elixir, on the bytes of `Nx.BinaryBackend` tensors, and
  names nothing of nx_jax's runtime (no worker, no pool, no wire). The front end reaches it
  only through Nx 0.7.2's five callbacks, so the programs it runs prove that the front end
  traces, inlines and rebuilds containers without knowing what will run the graph (as Nx's
  evaluator proves Nx's own seam). `make test-seam` runs the suite's tests tagged `:seam`
  with it as the default compiler (`NxJax.Test.SeamRun`).

  It computes a subset of the wire graph's ops (docs/PROTOCOL.md), on integers and f16, f32
  and f64 floats (bf16 is stored by truncation, not rounded as the worker rounds it):

    * leaves: `:parameter`, `:constant`, `:tensor`, `:iota`;
    * element-wise, the inputs broadcast to the output shape and cast to its type (PROTOCOL
      4.1): arithmetic (`:add`, `:subtract`, `:multiply`, `:divide`, `:pow`, `:max`, `:min`,
      `:remainder`, `:quotient`, `:negate`, `:abs`, `:sign`, `:floor`, `:ceil`), the bitwise
      ops and shifts, and `:exp`, `:expm1`, `:log`, `:log1p`, `:sqrt`, `:sin`, `:cos`,
      `:tanh`, `:sigmoid`;
    * element-wise on the inputs as they are, giving 1 or 0 (u8): the comparisons and the
      logical ops; and `:select`, `:clip`, `:as_type`;
    * reductions over axes: `:sum`, `:product`, `:reduce_max`, `:reduce_min`, `:all`,
      `:any`, `:mean`;
    * shapes: `:reshape`, `:broadcast`, `:transpose`, `:slice`, `:dynamic_slice`,
      `:concatenate`, `:reverse`; and `:dot`;
    * sub-graphs, evaluated each time they run: the reducers of `:reduce` and
      `:window_reduce`, `:cond` (the taken branch only), `:while`, `:range_loop`, and the
      tuples they give (`:elem`); the identity of `:metadata` (`stop_grad` and the like);
      hooks (`:hook`, its function called in the calling process when the node is computed,
      the jit's `hooks:` option overriding it by name, and `:attach_token`).

  Every value is rounded to its node's type after each op. Any other op is an
  `ArgumentError` naming it; so is `grad` (the clean room has the JAX worker differentiate
  `:grad` nodes), a vectorized node, and a computation that leaves the finite numbers.
  """

  @behaviour Nx.Defn.Compiler

  alias Nx.Defn.{Composite, Expr}

  # element-wise ops computed in the output type
  @computed [:add, :subtract, :multiply, :divide, :pow, :max, :min, :remainder, :quotient] ++
              [:bitwise_and, :bitwise_or, :bitwise_xor, :left_shift, :right_shift] ++
              [:negate, :abs, :sign, :floor, :ceil, :exp, :expm1, :log, :log1p, :sqrt] ++
              [:sin, :cos, :tanh, :sigmoid, :bitwise_not]

  # element-wise ops on the inputs as they are, giving 1 or 0 (u8)
  @predicates [:equal, :not_equal, :less, :less_equal, :greater, :greater_equal] ++
                [:logical_and, :logical_or, :logical_xor, :logical_not]

  @reductions [:sum, :product, :reduce_max, :reduce_min, :all, :any]

  @ops @computed ++
         @predicates ++
         @reductions ++
         [:parameter, :constant, :tensor, :iota, :select, :clip, :as_type, :mean, :dot] ++
         [:reshape, :broadcast, :transpose, :slice, :dynamic_slice, :concatenate, :reverse] ++
         [:reduce, :window_reduce, :cond, :while, :range_loop, :elem, :metadata] ++
         [:hook, :attach_token]

  @impl true
  def __jit__(key, vars, fun, args_list, opts), do: __compile__(key, vars, fun, opts).(args_list)

  # traced once, evaluated on every list of arguments
  @impl true
  def __compile__(_key, vars, fun, opts) do
    # (the clean room keeps the functions of a trace's hooks beside it, by node index)
    {output, hooks} = Expr.with_hooks(fn -> fun.(vars) end)
    given = opts[:hooks] || %{}

    hooks =
      Map.new(hooks, fn {index, {name, default, template}} ->
        {index, {Map.get(given, name, default), template}}
      end)

    templates = Composite.flatten_list(vars)

    fn args_list ->
      for args <- args_list do
        # (each argument read when the graph reads it, as Nx's compilers do)
        run = %{args: templates |> Enum.zip(args) |> List.to_tuple(), hooks: hooks}

        {result, _values} =
          Composite.traverse(output, %{}, fn tensor, values ->
            {list, values} = eval(tensor, run, values)
            {concrete(tensor, list), values}
          end)

        result
      end
    end
  end

  # a step per input sent, compiled once (the step returns {output, accumulator})
  @impl true
  def __stream__(key, input, acc, vars, fun, [args], opts),
    do: stream(__compile__(key, vars, fun, opts), input, acc, args)

  @doc false
  # the stream whose steps `run` (a compiled step: a list of argument lists in, results out)
  # computes; `args` are the stream's arguments, input and accumulator first
  def stream(run, input, acc, args) do
    rest = Enum.drop(args, Composite.count(input) + Composite.count(acc))

    step = fn data, acc ->
      [result] = run.([Nx.Defn.Stream.step_args(data, acc, rest)])
      result
    end

    [Nx.Defn.Stream.start_link(input, acc, step)]
  end

  @impl true
  def __partitions_options__(opts), do: [opts]

  @impl true
  def __to_backend__(_opts), do: {Nx.BinaryBackend, []}

  ## Arguments

  defp read_argument(template, make) do
    case make.() do
      %Nx.Tensor{data: %Nx.BinaryBackend{state: binary}, type: type, shape: shape}
      when type == template.type and shape == template.shape ->
        Nx.BinaryBackend.to_list(binary, type)

      %Nx.Tensor{data: %Nx.BinaryBackend{}} = tensor ->
        raise ArgumentError,
              "#{inspect(__MODULE__)}: an argument is #{inspect(tensor.type)} " <>
                "#{inspect(tensor.shape)} where the trace expects #{inspect(template.type)} " <>
                "#{inspect(template.shape)}"

      # (a number sent to a stream)
      number when is_number(number) and template.shape == {} ->
        rounded([cast(number, template.type)], template.type)

      # (a template, Nx.template/2: no data to compute with, as Nx's template backend says)
      %Nx.Tensor{data: nil} ->
        raise "cannot perform operations on a Nx.TemplateBackend tensor"

      %Nx.Tensor{data: %backend{}} ->
        raise ArgumentError,
              "#{inspect(__MODULE__)} reads arguments of Nx.BinaryBackend only, got a tensor " <>
                "of #{inspect(backend)}: copy it with Nx.backend_copy/2 first"

      other ->
        raise ArgumentError,
              "#{inspect(__MODULE__)}: expected a tensor argument, got: #{inspect(other)}"
    end
  end

  ## Evaluation (values: a node's flat list of numbers, row-major, memoized by node id; a
  ## node of several results, {:tuple, [value]})

  defp eval(%Nx.Tensor{data: %Expr{id: id, op: op}} = tensor, run, values) do
    case values do
      %{^id => value} ->
        {value, values}

      %{} ->
        check!(tensor)
        {inputs, values} = Enum.map_reduce(tensor.data.args, values, &eval(&1, run, &2))
        value = compute(op, inputs, tensor, run)
        {value, Map.put(values, id, value)}
    end
  end

  # the values of a sub-graph's outputs, its parameters (those of its own, then the values of
  # the enclosing graph it captures) given `inputs`
  defp subgraph({:subgraph, outputs, params}, inputs, run) do
    values = Map.new(Enum.zip(params, inputs), fn {param, value} -> {param.data.id, value} end)
    {outputs, _values} = Enum.map_reduce(outputs, values, &eval(&1, %{run | args: {}}, &2))
    outputs
  end

  defp check!(%Nx.Tensor{data: %Expr{op: :grad}}) do
    raise ArgumentError,
          "#{inspect(__MODULE__)} cannot run grad: in the clean room a :grad node is " <>
            "differentiated by the JAX worker, and this compiler evaluates forward graphs only"
  end

  defp check!(%Nx.Tensor{data: %Expr{op: op}}) when op not in @ops do
    raise ArgumentError,
          "#{inspect(__MODULE__)} does not implement the op #{inspect(op)} (it evaluates " <>
            "#{Enum.map_join(Enum.sort(@ops), ", ", &inspect/1)})"
  end

  defp check!(%Nx.Tensor{vectorized_axes: [_ | _], data: %Expr{op: op}}) do
    raise ArgumentError,
          "#{inspect(__MODULE__)} does not evaluate vectorized nodes (#{inspect(op)})"
  end

  defp check!(_tensor), do: :ok

  # (the errors of an argument and of a hook's function are their own)
  defp compute(op, inputs, tensor, run) when op in [:parameter, :hook],
    do: op(tensor, inputs, run)

  defp compute(op, inputs, tensor, run) do
    tensor |> op(inputs, run) |> rounded(tensor.type)
  rescue
    # (:math's functions and float encoding raise ArgumentError on what they cannot hold)
    _ in [ArithmeticError, ArgumentError] ->
      raise ArgumentError,
            "#{inspect(__MODULE__)} computes on finite numbers only: #{inspect(op)} " <>
              "overflowed or met a non-finite value"
  end

  # the numbers `list` as an element of `type` holds them (floats rounded, integers wrapped)
  defp rounded({:tuple, _} = tuple, _type), do: tuple

  defp rounded(list, type),
    do: list |> Nx.BinaryBackend.from_list(type) |> Nx.BinaryBackend.to_list(type)

  ## Ops: one clause each, or per family

  defp op(%{data: %{op: :parameter, opts: %{index: index}}}, [], run) do
    {template, make} = elem(run.args, index)
    read_argument(template, make)
  end

  defp op(%{data: %{op: :constant, opts: %{value: value}}} = t, [], _),
    do: List.duplicate(value, size(t.shape))

  defp op(%{data: %{op: :tensor, opts: %{data: binary}}} = t, [], _),
    do: Nx.BinaryBackend.to_list(binary, t.type)

  # the index along `axis`, or the row-major position where it is nil
  defp op(%{data: %{op: :iota, opts: %{axis: axis}}} = t, [], _) do
    for {index, position} <- Enum.with_index(indices(t.shape)),
        do: cast(if(axis, do: Enum.at(index, axis), else: position), t.type)
  end

  defp op(%{data: %{op: op, args: args}} = t, inputs, _) when op in @computed do
    args
    |> broadcast_all(inputs, t.shape)
    |> Enum.map(fn list -> Enum.map(list, &cast(&1, t.type)) end)
    |> Enum.zip_with(&computed(op, &1))
  end

  defp op(%{data: %{op: op, args: args}} = t, inputs, _) when op in @predicates do
    args
    |> broadcast_all(inputs, t.shape)
    |> Enum.zip_with(&if(predicate(op, &1), do: 1, else: 0))
  end

  # (a NaN predicate, an atom, is not zero: it selects, as Nx does)
  defp op(%{data: %{op: :select, args: args}} = t, inputs, _) do
    [which, on_true, on_false] = broadcast_all(args, inputs, t.shape)

    Enum.zip_with([which, on_true, on_false], fn [p, a, b] ->
      cast(if(p != 0, do: a, else: b), t.type)
    end)
  end

  defp op(%{data: %{op: :clip, args: args}} = t, inputs, _) do
    args
    |> broadcast_all(inputs, t.shape)
    |> Enum.map(fn list -> Enum.map(list, &cast(&1, t.type)) end)
    |> Enum.zip_with(fn [x, low, high] -> computed(:min, [computed(:max, [x, low]), high]) end)
  end

  defp op(%{data: %{op: :as_type}} = t, [list], _), do: Enum.map(list, &cast(&1, t.type))

  defp op(%{data: %{op: op, args: [arg], opts: opts}} = t, [list], _) when op in @reductions do
    list = Enum.map(list, &cast(&1, t.type))
    list = if op in [:all, :any], do: Enum.map(list, &if(&1 != 0, do: 1, else: 0)), else: list
    {init, fun} = reducer(op)
    folds(list, arg.shape, opts.axes, init, fun)
  end

  # the reducer sub-graph, fun.(element, accumulator), folded from the accumulator given
  defp op(%{data: %{op: :reduce, args: [arg | _], opts: opts}}, [list, [acc] | captures], run),
    do: folds(list, arg.shape, opts.axes, acc, &reduced(opts.reducer, &1, &2, captures, run))

  # each window's elements in row-major order, a padded position holding the accumulator
  defp op(%{data: %{op: :window_reduce, args: [arg | _], opts: opts}} = t, inputs, run) do
    [list, [init] | captures] = inputs
    dims = Tuple.to_list(arg.shape)
    elements = List.to_tuple(list)
    window = [opts.strides, opts.window_dilations, opts.padding]

    for anchor <- indices(t.shape) do
      for offset <- indices(List.to_tuple(opts.window_dimensions)), reduce: init do
        acc ->
          at =
            Enum.zip_with([anchor, offset | window], fn [a, o, stride, dilation, {low, _}] ->
              a * stride + o * dilation - low
            end)

          inside = Enum.zip_with(at, dims, &(&1 >= 0 and &1 < &2)) |> Enum.all?()
          x = if inside, do: elem(elements, flat(at, dims)), else: init
          reduced(opts.reducer, x, acc, captures, run)
      end
    end
  end

  defp op(%{data: %{op: :mean, args: [arg], opts: opts}} = t, [list], _) do
    count = div(size(arg.shape), max(size(t.shape), 1))
    list = Enum.map(list, &cast(&1, t.type))
    for sum <- folds(list, arg.shape, opts.axes, 0, &+/2), do: sum / count
  end

  defp op(%{data: %{op: :reshape}}, [list], _), do: list

  defp op(%{data: %{op: :broadcast, args: [arg], opts: %{axes: axes}}} = t, [list], _) do
    dims = Tuple.to_list(arg.shape)

    gather(list, dims, t.shape, fn index ->
      index = List.to_tuple(index)
      Enum.zip_with(axes, dims, fn axis, dim -> if dim == 1, do: 0, else: elem(index, axis) end)
    end)
  end

  defp op(%{data: %{op: :transpose, args: [arg], opts: %{axes: axes}}} = t, [list], _) do
    # output axis k is input axis axes[k]: input axis j is output axis (position of j)
    inverse = axes |> Enum.with_index() |> Enum.sort() |> Enum.map(&elem(&1, 1))

    gather(list, Tuple.to_list(arg.shape), t.shape, fn index ->
      index = List.to_tuple(index)
      Enum.map(inverse, &elem(index, &1))
    end)
  end

  defp op(%{data: %{op: :slice, args: [arg], opts: opts}} = t, [list], _) do
    %{start_indices: starts, strides: strides} = opts

    gather(list, Tuple.to_list(arg.shape), t.shape, fn index ->
      Enum.zip_with([index, starts, strides], fn [i, start, stride] -> start + i * stride end)
    end)
  end

  # start indices given as scalars, each clamped so that the slice fits (as Nx does)
  defp op(%{data: %{op: :dynamic_slice, args: [arg | _], opts: opts}} = t, [list | starts], _) do
    dims = Tuple.to_list(arg.shape)

    starts =
      Enum.zip_with([starts, dims, opts.lengths], fn [[start], dim, length] ->
        start |> max(0) |> min(dim - length)
      end)

    gather(list, dims, t.shape, &Enum.zip_with(&1, starts, fn i, start -> start + i end))
  end

  defp op(%{data: %{op: :reverse, args: [arg], opts: %{axes: axes}}} = t, [list], _) do
    dims = Tuple.to_list(arg.shape)

    gather(list, dims, t.shape, fn index ->
      for {{i, dim}, axis} <- Enum.with_index(Enum.zip(index, dims)),
          do: if(axis in axes, do: dim - 1 - i, else: i)
    end)
  end

  # each output element from the input whose span of `axis` holds its index there
  defp op(%{data: %{op: :concatenate, args: args, opts: %{axis: axis}}} = t, inputs, _) do
    parts =
      Enum.zip_with(args, inputs, fn arg, list ->
        {Tuple.to_list(arg.shape), List.to_tuple(Enum.map(list, &cast(&1, t.type)))}
      end)

    for index <- indices(t.shape), do: concatenated(parts, index, axis)
  end

  defp op(%{data: %{op: :dot, args: [a, b], opts: opts}} = t, [left, right], _) do
    %{contract_axes: {lc, rc}, batch_axes: {lb, rb}} = opts
    left = left |> Enum.map(&cast(&1, t.type)) |> List.to_tuple()
    right = right |> Enum.map(&cast(&1, t.type)) |> List.to_tuple()
    lf = free_axes(a.shape, lc ++ lb)
    rf = free_axes(b.shape, rc ++ rb)
    contracted = lc |> Enum.map(&elem(a.shape, &1)) |> List.to_tuple()

    for index <- indices(t.shape) do
      {batch, rest} = Enum.split(index, length(lb))
      {i, j} = Enum.split(rest, length(lf))

      for c <- indices(contracted), reduce: cast(0, t.type) do
        acc ->
          x = elem(left, place(a.shape, lb ++ lc ++ lf, batch ++ c ++ i))
          y = elem(right, place(b.shape, rb ++ rc ++ rf, batch ++ c ++ j))
          acc + x * y
      end
    end
  end

  # the branch the scalar predicate picks (not zero: the first), given the captured values
  defp op(%{data: %{op: :cond, opts: %{branches: [yes, no]}}}, [[p] | captures], run),
    do: {:tuple, subgraph(if(p != 0, do: yes, else: no), captures, run)}

  # the state (the first inputs, one per result), then the captured values
  defp op(%{data: %{op: :while, opts: opts}, type: {:tuple, n}}, inputs, run) do
    {state, captures} = Enum.split(inputs, n)
    {:tuple, loop(state, captures, opts, run, 0)}
  end

  defp op(%{data: %{op: :range_loop, opts: opts}, type: {:tuple, n}}, inputs, run) do
    %{body: body, first: first, step: step, count: count} = opts
    {state, captures} = Enum.split(inputs, n)

    {:tuple,
     Enum.reduce(0..(count - 1)//1, state, fn k, state ->
       subgraph(body, state ++ [[first + k * step] | captures], run)
     end)}
  end

  # the identity: one value, or a tuple of them (custom_grad over a tuple) read by :elem
  defp op(%{data: %{op: :metadata}, type: {:tuple, _}}, inputs, _), do: {:tuple, inputs}
  defp op(%{data: %{op: :metadata}}, [value], _), do: value

  defp op(%{data: %{op: :elem, opts: %{index: index}}}, [{:tuple, values}], _),
    do: Enum.at(values, index)

  # the identity, calling the hook's function (if any) on the container it hooks
  defp op(%{data: %{op: :hook, args: args, opts: %{index: index}}}, inputs, run) do
    with {fun, template} when fun != nil <- Map.fetch!(run.hooks, index),
         do: fun.(Composite.fill(template, Enum.zip_with(args, inputs, &concrete/2)))

    {:tuple, inputs}
  end

  # the value, once the hooks of the token are computed (they are its other inputs)
  defp op(%{data: %{op: :attach_token}}, inputs, _), do: List.last(inputs)

  # the body while the condition holds, at most :max_iterations times
  defp loop(state, captures, %{condition: condition, body: body} = opts, run, done) do
    [[holds]] = subgraph(condition, state ++ captures, run)

    if holds != 0 and (opts.max_iterations == nil or done < opts.max_iterations),
      do: loop(subgraph(body, state ++ captures, run), captures, opts, run, done + 1),
      else: state
  end

  defp computed(:add, [a, b]), do: a + b
  defp computed(:subtract, [a, b]), do: a - b
  defp computed(:multiply, [a, b]), do: a * b
  defp computed(:divide, [a, b]), do: divide(a, b)
  defp computed(:pow, [a, b]) when is_integer(a) and is_integer(b) and b >= 0, do: a ** b
  defp computed(:pow, [a, b]), do: :math.pow(a, b)
  defp computed(:max, [a, b]), do: if(order(a) >= order(b), do: a, else: b)
  defp computed(:min, [a, b]), do: if(order(a) <= order(b), do: a, else: b)
  defp computed(:remainder, [a, b]) when is_integer(a), do: rem(a, b)
  defp computed(:remainder, [a, b]), do: :math.fmod(a, b)
  defp computed(:quotient, [a, b]), do: div(a, b)
  defp computed(:bitwise_and, [a, b]), do: Bitwise.band(a, b)
  defp computed(:bitwise_or, [a, b]), do: Bitwise.bor(a, b)
  defp computed(:bitwise_xor, [a, b]), do: Bitwise.bxor(a, b)
  defp computed(:left_shift, [a, b]), do: Bitwise.bsl(a, b)
  defp computed(:right_shift, [a, b]), do: Bitwise.bsr(a, b)
  defp computed(:bitwise_not, [a]), do: Bitwise.bnot(a)
  defp computed(:negate, [a]), do: -a
  defp computed(:abs, [a]), do: abs(a)
  defp computed(:sign, [a]) when a > 0, do: 1
  defp computed(:sign, [a]) when a < 0, do: -1
  defp computed(:sign, [_a]), do: 0
  defp computed(:floor, [a]), do: if(is_integer(a), do: a, else: Float.floor(a))
  defp computed(:ceil, [a]), do: if(is_integer(a), do: a, else: Float.ceil(a))
  defp computed(:exp, [a]), do: :math.exp(a)
  defp computed(:expm1, [a]), do: :math.exp(a) - 1
  defp computed(:log, [a]), do: :math.log(a)
  defp computed(:log1p, [a]), do: :math.log(1 + a)
  defp computed(:sqrt, [a]), do: :math.sqrt(a)
  defp computed(:sin, [a]), do: :math.sin(a)
  defp computed(:cos, [a]), do: :math.cos(a)
  defp computed(:tanh, [a]), do: :math.tanh(a)
  defp computed(:sigmoid, [a]), do: 1 / (1 + :math.exp(-a))

  defp predicate(:equal, [a, b]), do: a == b
  defp predicate(:not_equal, [a, b]), do: a != b
  defp predicate(:less, [a, b]), do: order(a) < order(b)
  defp predicate(:less_equal, [a, b]), do: order(a) <= order(b)
  defp predicate(:greater, [a, b]), do: order(a) > order(b)
  defp predicate(:greater_equal, [a, b]), do: order(a) >= order(b)
  defp predicate(:logical_and, [a, b]), do: a != 0 and b != 0
  defp predicate(:logical_or, [a, b]), do: a != 0 or b != 0
  defp predicate(:logical_xor, [a, b]), do: a != 0 != (b != 0)
  defp predicate(:logical_not, [a]), do: a == 0

  # a named reduction's start and its fun.(element, accumulator) (nil: no element yet)
  defp reducer(:sum), do: {0, &+/2}
  defp reducer(:product), do: {1, &*/2}
  defp reducer(:all), do: {1, &min/2}
  defp reducer(:any), do: {0, &max/2}
  defp reducer(:reduce_max), do: {nil, &if(&2, do: computed(:max, [&1, &2]), else: &1)}
  defp reducer(:reduce_min), do: {nil, &if(&2, do: computed(:min, [&1, &2]), else: &1)}

  # numbers and the infinities in their order (to Elixir, an atom is above every number)
  defp order(:neg_infinity), do: {0, 0}
  defp order(:infinity), do: {2, 0}
  defp order(x) when is_number(x), do: {1, x}
  defp order(:nan), do: raise(ArgumentError, "NaN has no order")

  defp reduced(reducer, x, acc, captures, run) do
    [[value]] = subgraph(reducer, [[x], [acc] | captures], run)
    value
  end

  # float division as IEEE 754 has it where the divisor is zero (a later op on the
  # non-finite result raises)
  defp divide(a, b) when b == 0 do
    cond do
      a > 0 -> :infinity
      a < 0 -> :neg_infinity
      true -> :nan
    end
  end

  defp divide(a, b), do: a / b

  defp cast(x, {:f, _}) when is_integer(x), do: x * 1.0
  defp cast(x, {:bf, _}) when is_integer(x), do: x * 1.0
  defp cast(x, {int, _}) when int in [:s, :u] and is_float(x), do: trunc(x)
  defp cast(x, _type), do: x

  # the node `tensor` as a binary backend tensor of the values `list`
  defp concrete(tensor, list) do
    data = %Nx.BinaryBackend{state: Nx.BinaryBackend.from_list(list, tensor.type)}
    %Nx.Tensor{tensor | data: data}
  end

  ## Shapes and indices

  defp size(shape), do: shape |> Tuple.to_list() |> Enum.reduce(1, &*/2)

  # every index of `shape`, row-major, each a list
  defp indices(shape) when is_tuple(shape), do: indices(Tuple.to_list(shape))
  defp indices([]), do: [[]]
  defp indices([dim | dims]), do: for(i <- 0..(dim - 1)//1, rest <- indices(dims), do: [i | rest])

  defp flat(index, dims), do: Enum.zip_reduce(index, dims, 0, fn i, dim, acc -> acc * dim + i end)

  # for each index of `shape`, the element of `list` (of dimensions `dims`) at `from.(index)`
  defp gather(list, dims, shape, from) do
    list = List.to_tuple(list)
    for index <- indices(shape), do: elem(list, flat(from.(index), dims))
  end

  # the flat position in `shape` of the element whose axis axes[k] has index values[k]
  defp place(shape, axes, values) do
    by_axis = Map.new(Enum.zip(axes, values))
    dims = Tuple.to_list(shape)
    flat(Enum.map(0..(length(dims) - 1)//1, &Map.fetch!(by_axis, &1)), dims)
  end

  defp free_axes(shape, taken), do: Enum.to_list(0..(tuple_size(shape) - 1)//1) -- taken

  # the inputs of an element-wise node, each broadcast to the output shape
  defp broadcast_all(args, inputs, shape),
    do: Enum.zip_with(args, inputs, &implicit_broadcast(&2, &1.shape, shape))

  # `list` of `shape` broadcast to `out` by NumPy's rules (trailing axes aligned, size 1 repeats)
  defp implicit_broadcast(list, shape, shape), do: list

  defp implicit_broadcast(list, shape, out) do
    dims = List.duplicate(1, tuple_size(out) - tuple_size(shape)) ++ Tuple.to_list(shape)

    gather(list, dims, out, fn index ->
      Enum.zip_with(index, dims, &if(&2 == 1, do: 0, else: &1))
    end)
  end

  # the element at `index` of the concatenation along `axis` of `parts` ({dims, elements})
  defp concatenated([{dims, elements} | parts], index, axis) do
    size = Enum.at(dims, axis)
    at = Enum.at(index, axis)

    if at < size,
      do: elem(elements, flat(index, dims)),
      else: concatenated(parts, List.replace_at(index, axis, at - size), axis)
  end

  # `list` of `shape` folded over `axes` (nil: all) by fun.(element, accumulator) from `init`,
  # in the row-major order of the axes kept (keep_axes changes the shape only)
  defp folds(list, shape, axes, init, fun) do
    dims = Tuple.to_list(shape)
    axes = axes || Enum.to_list(0..(length(dims) - 1)//1)
    kept = for {dim, axis} <- Enum.with_index(dims), axis not in axes, do: dim

    totals =
      shape
      |> indices()
      |> Enum.zip(list)
      |> Enum.reduce(%{}, fn {index, x}, acc ->
        key = for {i, axis} <- Enum.with_index(index), axis not in axes, do: i
        Map.update(acc, key, fun.(x, init), &fun.(x, &1))
      end)

    for index <- indices(kept), do: Map.get(totals, index, init)
  end
end
