defmodule NxJax.Test.SeamCompiler do
  @moduledoc """
  A second implementation of `Nx.Defn.Compiler`, for the tests: it evaluates the traced
  `Nx.Defn.Expr` graph itself, in Elixir, on the bytes of `Nx.BinaryBackend` tensors, and
  names nothing of nx_jax's runtime (no worker, no pool, no wire). The front end reaches it
  only through Nx 0.7.2's five callbacks, so the programs it runs prove that the front end
  traces, inlines and rebuilds containers without knowing what will run the graph (as Nx's
  evaluator proves Nx's own seam).

  It computes a small set of ops, on integers and f32/f64 floats (bf16 is stored by
  truncation, not rounded as the worker rounds it):
  `:parameter`, `:constant`, `:tensor`, the element-wise `:add`, `:subtract`, `:multiply`,
  `:divide`, `:negate`, `:exp`, `:log`, `:sin`, `:cos` (inputs broadcast to the output shape
  and cast to its type, as PROTOCOL 4.1 says), `:as_type`, `:sum` and `:mean`, `:reshape`,
  `:broadcast`, `:transpose`, `:dot`, and the identity of `:metadata` (`stop_grad` and the
  like). Every value is rounded to its node's type after each op. Any other op is an
  `ArgumentError` naming it; so is `grad` (the clean room has the JAX worker differentiate
  `:grad` nodes), a vectorized node, and a computation that leaves the finite numbers.
  """

  @behaviour Nx.Defn.Compiler

  alias Nx.Defn.{Composite, Expr}

  @elementwise [:add, :subtract, :multiply, :divide, :negate, :exp, :log, :sin, :cos]

  @ops @elementwise ++
         [:parameter, :constant, :tensor, :as_type, :sum, :mean, :reshape, :broadcast] ++
         [:transpose, :dot, :metadata, :elem]

  @impl true
  def __jit__(key, vars, fun, args_list, opts), do: __compile__(key, vars, fun, opts).(args_list)

  # traced once, evaluated on every list of arguments
  @impl true
  def __compile__(_key, vars, fun, _opts) do
    output = fun.(vars)
    templates = Composite.flatten_list(vars)

    fn args_list ->
      for args <- args_list do
        params = templates |> Enum.zip_with(args, &read_argument/2) |> List.to_tuple()

        {result, _values} =
          Composite.traverse(output, %{}, fn tensor, values ->
            {list, values} = eval(tensor, params, values)
            data = %Nx.BinaryBackend{state: Nx.BinaryBackend.from_list(list, tensor.type)}
            {%Nx.Tensor{tensor | data: data}, values}
          end)

        result
      end
    end
  end

  # a step per input sent, compiled once (the step returns {output, accumulator})
  @impl true
  def __stream__(key, input, acc, vars, fun, [args], opts) do
    run = __compile__(key, vars, fun, opts)
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

      %Nx.Tensor{data: %backend{}} ->
        raise ArgumentError,
              "#{inspect(__MODULE__)} reads arguments of Nx.BinaryBackend only, got a tensor " <>
                "of #{inspect(backend)}: copy it with Nx.backend_copy/2 first"

      other ->
        raise ArgumentError,
              "#{inspect(__MODULE__)}: expected a tensor argument, got: #{inspect(other)}"
    end
  end

  ## Evaluation (values: a node's flat list of numbers, row-major, memoized by node id)

  defp eval(%Nx.Tensor{data: %Expr{id: id, op: op}} = tensor, params, values) do
    case values do
      %{^id => value} ->
        {value, values}

      %{} ->
        check!(tensor)
        {inputs, values} = Enum.map_reduce(tensor.data.args, values, &eval(&1, params, &2))
        value = compute(op, inputs, tensor, params)
        {value, Map.put(values, id, value)}
    end
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

  defp compute(op, inputs, tensor, params) do
    tensor |> op(inputs, params) |> rounded(tensor.type)
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

  defp op(%{data: %{op: :parameter, opts: %{index: index}}}, [], params),
    do: elem(params, index)

  defp op(%{data: %{op: :constant, opts: %{value: value}}} = t, [], _),
    do: List.duplicate(value, size(t.shape))

  defp op(%{data: %{op: :tensor, opts: %{data: binary}}} = t, [], _),
    do: Nx.BinaryBackend.to_list(binary, t.type)

  defp op(%{data: %{op: op, args: args}} = t, inputs, _) when op in @elementwise do
    fun = elementwise(op)

    inputs =
      Enum.zip_with(args, inputs, fn arg, list ->
        list |> implicit_broadcast(arg.shape, t.shape) |> Enum.map(&cast(&1, t.type))
      end)

    case inputs do
      [a] -> Enum.map(a, fun)
      [a, b] -> Enum.zip_with(a, b, fun)
    end
  end

  defp op(%{data: %{op: :as_type}} = t, [list], _), do: Enum.map(list, &cast(&1, t.type))

  defp op(%{data: %{op: :sum, args: [arg], opts: opts}}, [list], _),
    do: sums(list, arg.shape, opts.axes)

  defp op(%{data: %{op: :mean, args: [arg], opts: opts}} = t, [list], _) do
    count = div(size(arg.shape), max(size(t.shape), 1))
    for sum <- sums(list, arg.shape, opts.axes), do: cast(sum, t.type) / count
  end

  defp op(%{data: %{op: :reshape}}, [list], _), do: list

  defp op(%{data: %{op: :broadcast, args: [arg], opts: %{axes: axes}}} = t, [list], _) do
    from = List.to_tuple(list)
    dims = Tuple.to_list(arg.shape)

    for index <- indices(t.shape) do
      index = List.to_tuple(index)

      at =
        Enum.zip_with(axes, dims, fn axis, dim -> if dim == 1, do: 0, else: elem(index, axis) end)

      elem(from, flat(at, dims))
    end
  end

  defp op(%{data: %{op: :transpose, args: [arg], opts: %{axes: axes}}} = t, [list], _) do
    from = List.to_tuple(list)
    dims = Tuple.to_list(arg.shape)
    # output axis k is input axis axes[k]: input axis j is output axis (position of j)
    inverse = axes |> Enum.with_index() |> Enum.sort() |> Enum.map(&elem(&1, 1))

    for index <- indices(t.shape) do
      index = List.to_tuple(index)
      elem(from, flat(Enum.map(inverse, &elem(index, &1)), dims))
    end
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

  # the identity: one value, or a tuple of them (custom_grad over a tuple) read by :elem
  defp op(%{data: %{op: :metadata}, type: {:tuple, _}}, inputs, _), do: {:tuple, inputs}
  defp op(%{data: %{op: :metadata}}, [value], _), do: value

  defp op(%{data: %{op: :elem, opts: %{index: index}}}, [{:tuple, values}], _),
    do: Enum.at(values, index)

  defp elementwise(:add), do: &+/2
  defp elementwise(:subtract), do: &-/2
  defp elementwise(:multiply), do: &*/2
  defp elementwise(:divide), do: &divide/2
  defp elementwise(:negate), do: &-/1
  defp elementwise(:exp), do: &:math.exp/1
  defp elementwise(:log), do: &:math.log/1
  defp elementwise(:sin), do: &:math.sin/1
  defp elementwise(:cos), do: &:math.cos/1

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

  ## Shapes and indices

  defp size(shape), do: shape |> Tuple.to_list() |> Enum.reduce(1, &*/2)

  # every index of `shape`, row-major, each a list
  defp indices(shape) when is_tuple(shape), do: indices(Tuple.to_list(shape))
  defp indices([]), do: [[]]
  defp indices([dim | dims]), do: for(i <- 0..(dim - 1)//1, rest <- indices(dims), do: [i | rest])

  defp flat(index, dims), do: Enum.zip_reduce(index, dims, 0, fn i, dim, acc -> acc * dim + i end)

  # the flat position in `shape` of the element whose axis axes[k] has index values[k]
  defp place(shape, axes, values) do
    by_axis = Map.new(Enum.zip(axes, values))
    dims = Tuple.to_list(shape)
    flat(Enum.map(0..(length(dims) - 1)//1, &Map.fetch!(by_axis, &1)), dims)
  end

  defp free_axes(shape, taken), do: Enum.to_list(0..(tuple_size(shape) - 1)//1) -- taken

  # `list` of `shape` broadcast to `out` by NumPy's rules (trailing axes aligned, size 1 repeats)
  defp implicit_broadcast(list, shape, shape), do: list

  defp implicit_broadcast(list, shape, out) do
    from = List.to_tuple(list)
    dims = List.duplicate(1, tuple_size(out) - tuple_size(shape)) ++ Tuple.to_list(shape)

    for index <- indices(out) do
      elem(from, flat(Enum.zip_with(index, dims, &if(&2 == 1, do: 0, else: &1)), dims))
    end
  end

  # the sums over `axes` (nil: all) of `list` of `shape`, in the row-major order of the axes
  # kept (keep_axes changes the shape only)
  defp sums(list, shape, axes) do
    dims = Tuple.to_list(shape)
    axes = axes || Enum.to_list(0..(length(dims) - 1)//1)
    kept = for {dim, axis} <- Enum.with_index(dims), axis not in axes, do: dim

    totals =
      shape
      |> indices()
      |> Enum.zip(list)
      |> Enum.reduce(%{}, fn {index, x}, acc ->
        key = for {i, axis} <- Enum.with_index(index), axis not in axes, do: i
        Map.update(acc, key, x, &(&1 + x))
      end)

    for index <- indices(kept), do: Map.get(totals, index, 0)
  end
end
