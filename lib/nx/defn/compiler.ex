defmodule Nx.Defn.Compiler do
  @moduledoc """
  Jits functions: traces them on parameters, encodes the result with `Nx.Defn.Graph`,
  hands the graph to the compiler that runs it and rebuilds the result container from the
  concrete tensors that come back.

  This is the machinery behind `Nx.Defn.jit/2`, calls to `defn` functions from outside
  `defn`, and eager `Nx` operations; users call those instead.

  ## The compiler behaviour

  A compiler runs graphs; the front end (tracing, caching the traces, containers) knows no
  compiler by name. The one that runs every graph is the `:default_compiler` of the
  `:nx_jax` application environment (nx_jax's own, `NxJax`, which runs them on the JAX
  worker); it implements two callbacks:

    * `c:__compile__/1` - once per trace: the graph term of `Nx.Defn.Graph.encode/1`, to
      whatever the compiler runs later
    * `c:__run__/5` - on every call: runs a compiled graph on the concrete arguments it
      takes, and returns one tensor per output template (a tensor of `Nx.BinaryBackend`, or
      of the compiler's `Nx.Backend` where results stay resident); `hooks` are the trace's
      hooks by index (`{name, fun, template}`), which it calls with the hooked values
  """

  @doc "Prepares the graph of a trace for `c:__run__/5` (called once per trace)."
  @callback __compile__(graph :: tuple) :: term

  @doc "Runs a compiled graph on `args`: one tensor per template of `templates`."
  @callback __run__(
              compiled :: term,
              args :: [Nx.Tensor.t()],
              templates :: [Nx.Tensor.t()],
              hooks :: %{non_neg_integer => {atom | nil, function, term}},
              opts :: keyword
            ) :: [Nx.Tensor.t()]

  alias Nx.Defn.{Composite, Expr}

  @doc """
  Calls the `defn` implementation `impl` on `args`: inlined when already tracing (a
  `defn` called from another `defn`), jitted otherwise.

  The encoded trace is cached (`Nx.Defn.TraceCache`: in `:persistent_term`, at most
  `config :nx_jax, trace_cache_size:` entries) per implementation and argument
  signature (the type and shape of each tensor, the container structure, any
  non-tensor argument as it is), so a `defn` is traced once per signature, as in Nx;
  `print_expr/1` and `transform/2` side effects therefore happen on the first call only.
  A cached call sends the worker only the graph's key and the arguments
  (`NxJax.Worker.run_cached/5`).
  """
  @spec __runtime__(function, [term]) :: term
  def __runtime__(impl, args) do
    if Expr.tracing?() do
      apply(impl, args)
    else
      case Nx.Defn.default_options() do
        [] -> with_current(runtime(), fn -> cached(impl, impl, args, []) end)
        defaults -> run(impl, impl, args, defaults)
      end
    end
  end

  @current_key __MODULE__

  @doc """
  The compiler of the `defn` or jitted function being traced (the `:compiler` option given,
  or the default compiler, which runs every graph); `nil` outside of one, as in Nx 0.7.2.
  """
  @spec current() :: module | nil
  def current, do: Process.get(@current_key)

  defp with_current(compiler, fun), do: Expr.with_process_value(@current_key, compiler, fun)

  # the compiler that runs every graph: `config :nx_jax, default_compiler: module` (mix.exs
  # sets nx_jax's own), read once
  defp runtime do
    case :persistent_term.get({__MODULE__, :runtime}, nil) do
      nil ->
        module = Application.fetch_env!(:nx_jax, :default_compiler)
        :persistent_term.put({__MODULE__, :runtime}, module)
        module

      module ->
        module
    end
  end

  @doc """
  Traces `fun` on `args` and runs it on the worker; see `Nx.Defn.jit_apply/3`.

  The trace is cached per function (closures are equal when their code and captured
  values are) and argument signature, as for `defn`.
  """
  @spec jit_apply(function, [term], keyword) :: term
  def jit_apply(fun, args, opts), do: __jit__({:jit, fun}, fun, args, opts)

  @doc false
  # jit_apply/3 with the trace cache's id of `fun` given (jit_id/1)
  def __jit__(id, fun, args, opts) when is_function(fun, length(args)) and is_list(opts) do
    if Expr.tracing?(),
      do: apply(fun, args),
      else: run(id, fun, args, Keyword.merge(Nx.Defn.default_options(), opts))
  end

  @doc false
  # The trace cache's id of `fun`, worked out once by Nx.Defn.jit/2: the function itself when
  # it captures nothing, else the digest of its code and captured values, so that a call does
  # not hash and compare those values (a model's parameters, say) again every time, which
  # grew with their size (docs/BENCHMARKS.md section 9). Equal closures get the same id.
  def jit_id(fun) do
    case Function.info(fun, :env) do
      {:env, []} -> {:jit, fun}
      _ -> {:jit_digest, :erlang.md5(:erlang.term_to_binary(fun, [:deterministic]))}
    end
  end

  # the options of a call that the default compiler reads (its worker's, NxJax.Worker.run/3)
  @worker_options [:timeout, :server, :hooks, :hooks_in, :retry, :retryable, :reply_spin_us] ++
                    [:debug_nans]

  # The `:compiler` option (given, or in `Nx.Defn.default_options/0`): `Nx.Defn.Debug`
  # returns the traced expression, as in Nx; the default compiler (`nil`, or named) runs
  # the graph; any other (`Nx.Defn.Evaluator`, `EXLA`, ...) has the default compiler run
  # it too, which the log says once per compiler. The options meant for that compiler are
  # not passed on.
  defp run(id, fun, args, opts) do
    runtime = runtime()
    {compiler, opts} = Keyword.pop(opts, :compiler)
    with_current(compiler || runtime, fn -> run_with(compiler, runtime, id, fun, args, opts) end)
  end

  defp run_with(Nx.Defn.Debug, _runtime, _id, fun, args, _opts), do: trace(fun, args)

  defp run_with(compiler, runtime, id, fun, args, opts)
       when compiler == nil or compiler == runtime,
       do: cached(id, fun, args, opts)

  defp run_with(compiler, _runtime, id, fun, args, opts) when is_atom(compiler) do
    note_compiler(compiler)
    cached(id, fun, args, Keyword.take(opts, @worker_options))
  end

  defp run_with(compiler, _runtime, _id, _fun, _args, _opts),
    do: raise(ArgumentError, "the :compiler option must be a module, got: #{inspect(compiler)}")

  defp note_compiler(compiler) do
    key = {__MODULE__, :noted_compiler, compiler}

    unless :persistent_term.get(key, false) do
      :persistent_term.put(key, true)

      require Logger

      Logger.info(
        "nx_jax: defn runs on #{inspect(runtime())}; the compiler #{inspect(compiler)} " <>
          "(and its options) is not used"
      )
    end
  end

  @doc false
  # The eager path of Nx.Defn.Expr.apply_op/4: `key` names the op, its options and output
  # template, so each eager op is traced once per argument signature.
  def __eager__(key, fun, args) do
    if Expr.tracing?(), do: apply(fun, args), else: cached({:eager, key}, fun, args, [])
  end

  @doc """
  Counters of this node since it started: `traces` (functions traced and encoded),
  `trace_cache_hits` (calls that reused a cached trace), and the trace cache's
  `trace_cache_entries` and `trace_cache_evictions` (`Nx.Defn.TraceCache`).
  """
  @spec counters() :: %{atom => non_neg_integer}
  def counters do
    ref = counters_ref()

    Map.merge(
      %{traces: :counters.get(ref, 1), trace_cache_hits: :counters.get(ref, 2)},
      Nx.Defn.TraceCache.stats()
    )
  end

  defp counters_ref do
    case :persistent_term.get({__MODULE__, :counters}, nil) do
      nil ->
        ref = :counters.new(2, [:write_concurrency])
        :persistent_term.put({__MODULE__, :counters}, ref)
        ref

      ref ->
        ref
    end
  end

  # One walk over the arguments gives the signature and the concrete tensors; the parameter
  # expressions are built only when the signature is not cached yet.
  defp cached(id, fun, args, opts) do
    {signature, concrete} = signature(args)
    # (a debug_nans trace records where each node was made: a trace of its own)
    debug = Keyword.get(opts, :debug_nans, false) == true

    key =
      if debug, do: {__MODULE__, id, signature, :debug_nans}, else: {__MODULE__, id, signature}

    compiled =
      case Nx.Defn.TraceCache.get(key) do
        nil ->
          {params, _concrete} = parameters(args)
          compiled = compile(fun, params, length(concrete), debug)
          :counters.add(counters_ref(), 1, 1)
          Nx.Defn.TraceCache.put(key, compiled)

        compiled ->
          :counters.add(counters_ref(), 2, 1)
          compiled
      end

    execute(compiled, concrete, opts)
  end

  # the argument container with each leaf replaced by {type, shape, vectorized_axes, names}
  # (names nil when no axis is named; parameters carry the names, so traced results are
  # named as in Nx), and the concrete tensors in order (a list of tensors, the common case,
  # without the walk)
  defp signature(args) do
    case flat_signature(args, [], []) do
      nil -> walk_signature(args)
      found -> found
    end
  end

  defp flat_signature([], signature, concrete),
    do: {List.to_tuple(:lists.reverse(signature)), :lists.reverse(concrete)}

  defp flat_signature([%Nx.Tensor{data: %data{}} = tensor | rest], signature, concrete)
       when data != Expr do
    %Nx.Tensor{type: type, shape: shape, vectorized_axes: axes, names: names} = tensor
    flat_signature(rest, [{type, shape, axes, named(names)} | signature], [tensor | concrete])
  end

  defp flat_signature(_other, _signature, _concrete), do: nil

  defp named(names), do: if(all_nil?(names), do: nil, else: names)

  defp all_nil?([nil | rest]), do: all_nil?(rest)
  defp all_nil?([]), do: true
  defp all_nil?(_names), do: false

  defp walk_signature(args) do
    {signature, concrete} =
      Composite.map_reduce(lazy_arguments(args), [], fn leaf, acc ->
        %Nx.Tensor{type: type, shape: shape, vectorized_axes: axes, names: names} =
          tensor = to_concrete(leaf)

        {{type, shape, axes, named(names)}, [tensor | acc]}
      end)

    {signature, Enum.reverse(concrete)}
  end

  @doc """
  Replaces every leaf of the argument list with a parameter expression, numbered in
  order; returns the new arguments and the concrete tensors, one per parameter.
  """
  @spec parameters([term]) :: {[term], [Nx.Tensor.t()]}
  def parameters(args) do
    {params, {_count, concrete}} =
      Composite.map_reduce(lazy_arguments(args), {0, []}, fn leaf, {index, acc} ->
        tensor = to_concrete(leaf)

        param =
          Expr.parameter(index, tensor.type, tensor.shape, tensor.vectorized_axes, tensor.names)

        {param, {index + 1, [tensor | acc]}}
      end)

    {Tuple.to_list(params), Enum.reverse(concrete)}
  end

  # The arguments as a tuple, each Nx.LazyContainer of its own implementation replaced by
  # the container it stands for, holding templates that know how to make their tensor:
  # `execute/3` makes only those that the graph reads.
  defp lazy_arguments(args) do
    args
    |> List.to_tuple()
    |> Composite.expand_lazy(fn template, make -> %Nx.Tensor{template | data: {:lazy, make}} end)
  end

  defp made(%Nx.Tensor{data: {:lazy, make}} = template) do
    tensor = Nx.to_tensor(make.())

    unless Nx.compatible?(%Nx.Tensor{template | data: nil}, tensor) do
      raise ArgumentError,
            "an Nx.LazyContainer announced #{inspect(%Nx.Tensor{template | data: nil})} " <>
              "and made #{inspect(tensor)}"
    end

    tensor
  end

  defp made(tensor), do: tensor

  @doc """
  Traces `fun` on `args` (each leaf a parameter) and returns the resulting expression,
  without encoding or running it (`Nx.Defn.debug_expr/2`).
  """
  @spec trace(function, [term]) :: term
  def trace(fun, args) do
    {params, _concrete} = parameters(args)
    {result, _hooks} = traced(fun, params)
    # (numbers among the results are expressions too, as Nx's compilers return them)
    Composite.traverse(result, &Expr.to_expr/1)
  end

  # `fun` applied to the parameter expressions, and the hooks its trace defined
  defp traced(fun, params),
    do: Expr.with_hooks(fn -> Expr.with_tracing(fn -> apply(fun, params) end) end)

  # the hook functions stay here, by index (Nx.Defn.Expr.hook/3); the graph names the index.
  # With `debug`, the run gets `debug_sites: %{wire id => "file:line"}` among its options.
  defp compile(fun, params, count, false) do
    {result, hooks} = traced(fun, params)
    encode(result, hooks, count)
  end

  defp compile(fun, params, count, true) do
    {{result, hooks}, sites} = Expr.with_sites(fn -> traced(fun, params) end)

    case encode(result, hooks, count) do
      {:graph, compiled, parameters, container, templates, hooks} ->
        by_wire_id =
          for {ref, id} <- Nx.Defn.Graph.ids(result), site = sites[ref], into: %{}, do: {id, site}

        {:graph, compiled, parameters, container, templates, hooks, by_wire_id}

      other ->
        other
    end
  end

  # `parameters`: the indices of the `count` concrete arguments the graph takes, or :all
  defp encode(result, hooks, count) do
    # (as in Nx: a result must be tensors, numbers or containers of them)
    Composite.container!(
      result,
      "a defn or jitted function must return tensors, numbers or containers of them"
    )

    case Composite.flatten_list([result]) do
      [] ->
        {:no_tensors, result}

      _leaves ->
        {graph, parameters, container} = Nx.Defn.Graph.encode(result)
        parameters = if parameters == Enum.to_list(0..(count - 1)//1), do: :all, else: parameters
        templates = Composite.flatten_list([container])
        {:graph, runtime().__compile__(graph), parameters, container, templates, hooks}
    end
  end

  defp execute({:no_tensors, result}, _args, _opts), do: result

  defp execute({:graph, compiled, parameters, container, templates, hooks, sites}, args, opts),
    do:
      execute({:graph, compiled, parameters, container, templates, hooks}, args, [
        {:debug_sites, sites} | opts
      ])

  defp execute({:graph, compiled, parameters, container, templates, hooks}, args, opts) do
    args = if parameters == :all, do: args, else: taken(parameters, List.to_tuple(args))

    case runtime().__run__(compiled, made_all(args, []), templates, hooks, opts) do
      # one tensor, the common case, without the walk
      [result] when is_struct(container, Nx.Tensor) -> result
      results -> Nx.Defn.Graph.rebuild(container, results)
    end
  end

  defp taken(parameters, args), do: Enum.map(parameters, &elem(args, &1))

  # The arguments made (made/1), in order, in one walk (every call passes here). A template
  # (Nx.template/2) describes an input and has no data to compute with.
  defp made_all([arg | rest], acc), do: made_all(rest, [made(arg) | acc])

  defp made_all([], acc) do
    if :lists.any(&match?(%Nx.Tensor{data: nil}, &1), acc) do
      raise "cannot perform operations on a Nx.TemplateBackend tensor"
    end

    :lists.reverse(acc)
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
end
