defmodule Nx.Defn.Compiler do
  @moduledoc """
  Jits functions: traces them on parameters, encodes the result with `NxJax.Graph`,
  runs the graph on the worker and rebuilds the result container from the concrete
  tensors that come back.

  This is the machinery behind `Nx.Defn.jit/2`, calls to `defn` functions from outside
  `defn`, and eager `Nx` operations; users call those instead.
  """

  alias Nx.Defn.{Composite, Expr}

  @doc """
  Calls the `defn` implementation `impl` on `args`: inlined when already tracing (a
  `defn` called from another `defn`), jitted otherwise.

  The encoded trace is cached (in `:persistent_term`) per implementation and argument
  signature (the type and shape of each tensor, any non-tensor argument as it is), so
  a `defn` is traced once per signature, as in Nx; `print_expr/1` and `transform/2`
  side effects therefore happen on the first call only.
  """
  @spec __runtime__(function, [term]) :: term
  def __runtime__(impl, args) do
    if Expr.tracing?() do
      apply(impl, args)
    else
      {params, concrete} = parameters(args)
      key = {__MODULE__, impl, Composite.traverse(List.to_tuple(params), &{&1.type, &1.shape})}

      compiled =
        case :persistent_term.get(key, nil) do
          nil ->
            compiled = compile(impl, params)
            :persistent_term.put(key, compiled)
            compiled

          compiled ->
            compiled
        end

      execute(compiled, concrete, [])
    end
  end

  @doc """
  Traces `fun` on `args` and runs it on the worker; see `Nx.Defn.jit_apply/3`.
  """
  @spec jit_apply(function, [term], keyword) :: term
  def jit_apply(fun, args, opts) when is_function(fun, length(args)) and is_list(opts) do
    if Expr.tracing?() do
      apply(fun, args)
    else
      {params, concrete} = parameters(args)
      execute(compile(fun, params), concrete, opts)
    end
  end

  @doc """
  Replaces every leaf of the argument list with a parameter expression, numbered in
  order; returns the new arguments and the concrete tensors, one per parameter.
  """
  @spec parameters([term]) :: {[term], [Nx.Tensor.t()]}
  def parameters(args) do
    {params, {_count, concrete}} =
      Composite.map_reduce(List.to_tuple(args), {0, []}, fn leaf, {index, acc} ->
        tensor = to_concrete(leaf)
        {Expr.parameter(index, tensor.type, tensor.shape), {index + 1, [tensor | acc]}}
      end)

    {Tuple.to_list(params), Enum.reverse(concrete)}
  end

  defp compile(fun, params), do: encode(Expr.with_tracing(fn -> apply(fun, params) end))

  defp encode(result) do
    case Composite.flatten_list([result]) do
      [] ->
        {:no_tensors, result}

      _leaves ->
        {graph, parameters, container} = NxJax.Graph.encode(result)
        {:graph, :erlang.term_to_binary(graph), parameters, container}
    end
  end

  defp execute({:no_tensors, result}, _args, _opts), do: result

  defp execute({:graph, graph_bin, parameters, container}, args, opts) do
    args = List.to_tuple(args)
    args = Enum.map(parameters, &to_wire(elem(args, &1)))
    results = NxJax.Worker.run(graph_bin, args, opts)
    templates = Composite.flatten_list([container])
    NxJax.Graph.rebuild(container, Enum.zip_with(templates, results, &from_wire/2))
  end

  @doc """
  Converts a number or a concrete tensor to a concrete tensor (as `Nx.to_tensor/1`),
  raising a clear error for an expression that escaped its trace.

  ## Examples

      iex> Nx.Defn.Compiler.to_concrete(1.5)
      %Nx.Tensor{data: %Nx.BinaryBackend{state: <<1.5::float-32-native>>}, type: {:f, 32}, shape: {}, names: []}
  """
  @spec to_concrete(Nx.Tensor.t() | number) :: Nx.Tensor.t()
  def to_concrete(%Nx.Tensor{data: %Expr{}}) do
    raise ArgumentError,
          "cannot compute an expression tensor outside of defn: it was built while tracing " <>
            "and escaped its defn/jit (return it from the defn instead)"
  end

  def to_concrete(tensor_or_number), do: Nx.to_tensor(tensor_or_number)

  defp to_wire(%Nx.Tensor{data: %Nx.BinaryBackend{state: binary}, type: type, shape: shape}) do
    {type, shape, binary}
  end

  # The worker must answer with the declared type and shape (PROTOCOL 4).
  defp from_wire(%Nx.Tensor{type: type, shape: shape} = template, {type, shape, binary}) do
    %Nx.Tensor{template | data: %Nx.BinaryBackend{state: binary}}
  end

  defp from_wire(%Nx.Tensor{type: type, shape: shape}, {wire_type, wire_shape, _binary}) do
    raise NxJax.WorkerError,
      class: "ShapeError",
      message:
        "the worker returned #{inspect(wire_type)} #{inspect(wire_shape)} for an output " <>
          "declared #{inspect(type)} #{inspect(shape)}"
  end
end
