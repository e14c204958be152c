defmodule Nx.Defn.Compiler do
  @moduledoc """
  Jits functions: traces them on parameters, encodes the result with `Nx.Defn.WireEncoder`,
  hands the graph to the compiler that runs it and rebuilds the result container from the
  concrete tensors that come back.

  This is the machinery behind `Nx.Defn.jit/2`, calls to `defn` functions from outside
  `defn`, and eager `Nx` operations; users call those instead.

  ## The compiler behaviour

  A compiler is Nx 0.7.2's `Nx.Defn.Compiler`: five callbacks with the meanings Nx gives
  them, called as Nx calls them. `jit/2`, `jit_apply/3`, `defn` calls from outside `defn`
  and `grad/2` call `c:__jit__/5`; `Nx.Defn.compile/3` calls `c:__compile__/4`;
  `Nx.Defn.stream/3` calls `c:__stream__/7`; `Nx.Defn.to_backend/1` calls
  `c:__to_backend__/1`. `vars` are the arguments with each tensor leaf replaced by a
  parameter expression (numbered across all arguments, in order); arguments that are lists
  or functions (options, callbacks) are not among them, the function given to the compiler
  applies them itself. Each list of `args_list` holds one function of no arguments per
  parameter, in order, that returns its tensor. The function given to the compiler traces:
  called on `vars`, it returns the expression of the result (a container of expression
  tensors), with `current/0` naming the compiler meanwhile.

  The `:compiler` option (of the call, or of `Nx.Defn.default_options/0`) names the compiler.
  None, or the default compiler (`config :nx, :default_compiler`: `NxJax`, nx_jax's, which runs
  every graph on the JAX worker), takes the front end's own path (the trace cache and the
  planned calls below), which reaches the default compiler through its two graph callbacks:

    * `c:__compile__/1` - once per trace: the graph term of `Nx.Defn.WireEncoder.encode/1`, to
      whatever the compiler runs later
    * `c:__run__/5` - on every call: runs a compiled graph on the concrete arguments it
      takes, and returns one tensor per output template (a tensor of `Nx.BinaryBackend`, or
      of the compiler's `Nx.Backend` where results stay resident); `hooks` are the trace's
      hooks by index (`{name, fun, template}`), which it calls with the hooked values

  `Nx.Defn.Debug` returns the traced expression. Any other module is called through the five
  callbacks, with the call's options (less `:compiler`); a module without `c:__jit__/5` is an
  `ArgumentError`. `graph_trace/5` and `graph_run/5` give a compiler with the two graph
  callbacks the front end's trace cache on that path (`NxJax.__jit__/5` is made of them), so a
  user's compiler that wraps another one (or `Nx.Defn.Evaluator`, which runs on the default
  compiler) works.

  ## Planned calls

  A `defn` or jitted function called again and again from one process with arguments of
  one signature is the common case. At the second such call the calling process keeps a
  plan of the call (in its process dictionary, for at most 64 functions): the trace and
  the options it runs under. A later call follows the plan straight to `c:__run__/5` when
  its options (the call's own and this process's defaults) are the very terms the plan was
  made with, its arguments are tensors of the plan's types, shapes and names (or tuples and
  maps of such tensors with the plan's sizes and keys), none of them vectorized, and the
  trace is still cached; any other call takes the general path (options,
  signature, trace cache), with the same result. Traces with hooks or `debug_nans: true`
  have no plan. The option `planned_calls: false` (of the call, or of this process's defaults)
  keeps a call off plans, to measure what they save (docs/BENCHMARKS.md "Latency mechanisms").
  """

  @doc """
  Traces `fun.(vars)` (it must call `fun` with `vars`), compiles the expression, and runs it on
  each list of argument functions of `args_list`: one result container per list. `key`
  identifies the function (not `vars`: a cache must add their types and shapes).
  """
  @callback __jit__(
              key :: term,
              vars :: [Nx.Container.t()],
              fun :: ([Nx.Container.t()] -> Nx.Container.t()),
              args_list :: [[(() -> Nx.Tensor.t())]],
              opts :: keyword
            ) :: [Nx.Container.t()]

  @doc """
  As `c:__jit__/5` without arguments yet: traces and compiles now, and returns the function
  that runs on an `args_list` and returns one result container per list.
  """
  @callback __compile__(
              key :: term,
              vars :: [Nx.Container.t()],
              fun :: ([Nx.Container.t()] -> Nx.Container.t()),
              opts :: keyword
            ) :: ([[(() -> Nx.Tensor.t())]] -> [Nx.Container.t()])

  @doc """
  A stream (`Nx.Stream`) of `fun`, which returns `{output, accumulator}`: `input` is the
  container of the first argument's parameters, `acc` the initial accumulator (tensors);
  `vars` and the one list of `args_list` as in `c:__jit__/5` (the input's and the
  accumulator's entries in it are replaced by each input sent and the accumulator so far).
  Returns a list of one stream.
  """
  @callback __stream__(
              key :: term,
              input :: Nx.Container.t(),
              acc :: Nx.Container.t(),
              vars :: [Nx.Container.t()],
              fun :: ([Nx.Container.t()] -> {Nx.Container.t(), Nx.Container.t()}),
              args_list :: [[(() -> Nx.Tensor.t())]],
              opts :: keyword
            ) :: [Nx.Stream.t()]

  @doc "The compiler options of each partition (device) that a serving runs on."
  @callback __partitions_options__(opts :: keyword) :: [keyword]

  @doc "The backend, `{module, options}`, of the results the compiler returns under `opts`."
  @callback __to_backend__(opts :: keyword) :: {module, keyword}

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

  @optional_callbacks __compile__: 1, __run__: 5

  alias Nx.Defn.{Composite, Expr}

  @doc """
  Calls the `defn` implementation `impl` on `args`: inlined when already tracing (a
  `defn` called from another `defn`), jitted otherwise.

  The encoded trace is cached (`Nx.Defn.TraceCache`: in `:persistent_term`, at most
  `config :nx, trace_cache_size:` entries) per implementation and argument
  signature (the type and shape of each tensor, the container structure, any
  non-tensor argument as it is), so a `defn` is traced once per signature, as in Nx;
  `print_expr/1` and `then/2` side effects therefore happen on the first call only.
  A cached call sends the worker only the graph's key and the arguments
  (`NxJax.Worker.run_cached/5`).
  """
  @spec __runtime__(function, [term]) :: term
  def __runtime__(impl, args) do
    if Expr.tracing?(), do: apply(impl, args), else: call(impl, impl, args, [])
  end

  @current_key __MODULE__

  @doc """
  The compiler of the `defn` or jitted function being traced (the `:compiler` option given,
  or the default compiler, which runs every graph); `nil` outside of one, as in Nx 0.7.2.
  """
  @spec current() :: module | nil
  def current, do: Process.get(@current_key)

  defp with_current(compiler, fun), do: Expr.with_process_value(@current_key, compiler, fun)

  @doc false
  # The compiler that runs every graph: `config :nx, default_compiler: module` (this
  # application's environment names nx_jax's), read once; a clear error where it is not loaded
  # (this project alone: its own tests trace and print, they run nothing).
  def runtime do
    case :persistent_term.get({__MODULE__, :runtime}, nil) do
      nil ->
        module = Application.fetch_env!(:nx, :default_compiler)

        unless is_atom(module) and Code.ensure_loaded?(module) and
                 function_exported?(module, :__run__, 5) do
          raise RuntimeError,
                "the clean-room Nx runs every graph on its default compiler, " <>
                  "config :nx, default_compiler: #{inspect(module)}, which is not loaded " <>
                  "(or has no __run__/5): add nx_jax to your dependencies, or set a compiler " <>
                  "that implements Nx.Defn.Compiler"
        end

        :persistent_term.put({__MODULE__, :runtime}, module)
        module

      module ->
        module
    end
  end

  @doc false
  # the application of the default compiler (its helpers called inside defn are library code)
  def runtime_application do
    case :persistent_term.get({__MODULE__, :runtime_application}, :unset) do
      :unset ->
        app = Application.get_application(Application.fetch_env!(:nx, :default_compiler))
        :persistent_term.put({__MODULE__, :runtime_application}, app)
        app

      app ->
        app
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
    if Expr.tracing?(), do: apply(fun, args), else: call(id, fun, args, opts)
  end

  @plans {__MODULE__, :plans}
  @max_plans 64

  # A call from outside of any trace, with its own options `opts` (over this process's
  # defaults): by this process's plan for `id` when it fits (planned/2), else through run/5,
  # which makes the plan at the second call of a signature.
  defp call(id, fun, args, opts) do
    defaults = Nx.Defn.default_options()

    with {^opts, ^defaults, plan} <- Process.get({@plans, id}),
         {:ok, result} <- planned(plan, args) do
      result
    else
      _ ->
        {planned?, run_opts} = Keyword.pop(Keyword.merge(defaults, opts), :planned_calls, true)
        run(id, fun, args, run_opts, if(plans?(planned?), do: {id, opts, defaults}))
    end
  end

  # the `:planned_calls` option (see "Planned calls")
  defp plans?(planned?) when is_boolean(planned?), do: planned?

  defp plans?(other) do
    raise ArgumentError,
          "the :planned_calls option must be a boolean (false: every call takes the general " <>
            "path), got: #{inspect(other)}"
  end

  # (the steps of cached/5 and execute/3 that a call of the plan's signature would take)
  defp planned({checks, mark, parameters, container, templates, graph, opts}, args) do
    with leaves when is_list(leaves) <- fitted(args, checks, []),
         true <- Nx.Defn.TraceCache.still?(mark) do
      :counters.add(counters_ref(), 2, 1)
      args = made_all(taken(parameters, leaves), [])
      {:ok, rebuilt(container, runtime().__run__(graph, args, templates, %{}, opts))}
    end
  end

  # The tensors of `args`, in the order of the arguments' leaves (Composite's: tuples left to
  # right, maps by sorted keys), when `args` are made as the plan's were: containers of the
  # same tuples and map keys holding tensors of the same types, shapes and names, not
  # vectorized (the same signature, signature/1); else false. One walk, in step with the
  # checks of plan_checks/1.
  defp fitted([arg | args], [check | checks], acc) do
    case fit(arg, check, acc) do
      false -> false
      acc -> fitted(args, checks, acc)
    end
  end

  defp fitted([], [], acc), do: :lists.reverse(acc)
  defp fitted(_args, _checks, _acc), do: false

  defp fit(
         %Nx.Tensor{data: %data{}, type: type, shape: shape, names: names, vectorized_axes: []} =
           tensor,
         {type, shape, names},
         acc
       )
       when data != Expr,
       do: [tensor | acc]

  defp fit(tuple, {:tuple, size, checks}, acc) when tuple_size(tuple) == size,
    do: fit_elements(tuple, 0, checks, acc)

  defp fit(map, {:map, size, keys, checks}, acc)
       when is_map(map) and not is_struct(map) and map_size(map) == size,
       do: fit_values(map, keys, checks, acc)

  defp fit(_arg, _check, _acc), do: false

  defp fit_elements(_tuple, _i, [], acc), do: acc

  defp fit_elements(tuple, i, [check | checks], acc) do
    case fit(elem(tuple, i), check, acc) do
      false -> false
      acc -> fit_elements(tuple, i + 1, checks, acc)
    end
  end

  defp fit_values(_map, [], [], acc), do: acc

  defp fit_values(map, [key | keys], [check | checks], acc) do
    with %{^key => value} <- map,
         acc when acc != false <- fit(value, check, acc) do
      fit_values(map, keys, checks, acc)
    else
      _ -> false
    end
  end

  # what fitted/3 checks, for arguments made of tensors (concrete, not vectorized) in tuples
  # and maps; nil for any other argument (a number, a struct, a lazy container)
  defp plan_checks(args) do
    checks = Enum.map(args, &plan_check/1)
    if Enum.member?(checks, nil), do: nil, else: checks
  end

  defp plan_check(%Nx.Tensor{data: %data{}, vectorized_axes: []} = tensor) when data != Expr,
    do: {tensor.type, tensor.shape, tensor.names}

  defp plan_check(tuple) when is_tuple(tuple) do
    if checks = plan_checks(Tuple.to_list(tuple)), do: {:tuple, tuple_size(tuple), checks}
  end

  defp plan_check(map) when is_map(map) and not is_struct(map) do
    keys = map |> Map.keys() |> Enum.sort()

    if checks = plan_checks(Enum.map(keys, &Map.fetch!(map, &1))),
      do: {:map, map_size(map), keys, checks}
  end

  defp plan_check(_other), do: nil

  # Keeps this process's plan for `id` (options `opts` and `defaults`): the trace found in the
  # cache (`mark`: its entry) and the options it runs under (`run_opts`). At most @max_plans
  # functions have one: past that, the older plans are dropped.
  defp plan({id, opts, defaults}, args, compiled, mark, run_opts) do
    with {:graph, graph, parameters, container, templates, hooks} when hooks == %{} <- compiled,
         checks when checks != nil <- plan_checks(args) do
      plan = {checks, mark, parameters, container, templates, graph, run_opts}

      if Process.put({@plans, id}, {opts, defaults, plan}) == nil do
        case [id | Process.get(@plans, [])] do
          ids when length(ids) > @max_plans ->
            for old <- tl(ids), do: Process.delete({@plans, old})
            Process.put(@plans, [id])

          ids ->
            Process.put(@plans, ids)
        end
      end
    end
  end

  @doc false
  # The trace cache's id of `fun`, worked out once by Nx.Defn.jit/2: the function itself when
  # it captures nothing, else the digest of its code and captured values, so that a call does
  # not hash and compare those values (a model's parameters, say) again every time, which
  # grew with their size (`git show 19d163f:docs/BENCHMARKS.md`, "A jitted closure's captured values, hashed at every call"). Equal closures get the same id.
  def jit_id(fun) do
    case Function.info(fun, :env) do
      {:env, []} -> {:jit, fun}
      _ -> {:jit_digest, :erlang.md5(:erlang.term_to_binary(fun, [:deterministic]))}
    end
  end

  # The `:compiler` option (given, or in `Nx.Defn.default_options/0`): `Nx.Defn.Debug`
  # returns the traced expression, as in Nx; the default compiler (`nil`, or named) runs
  # the graph by the front end's own path (cached/5, whose hits make plans: plan/5); any other
  # module is called as Nx calls a compiler (foreign_jit/5).
  defp run(id, fun, args, opts, plan_for) do
    runtime = runtime()

    case Keyword.pop(opts, :compiler) do
      {Nx.Defn.Debug, _opts} ->
        with_current(Nx.Defn.Debug, fn -> trace(fun, args) end)

      {compiler, opts} when compiler == nil or compiler == runtime ->
        with_current(runtime, fn -> cached(id, fun, args, opts, plan_for) end)

      {compiler, opts} ->
        foreign_jit(compiler, id, fun, args, opts)
    end
  end

  ## Compilers other than the default one

  # c:__jit__/5 of `compiler` on the call, as Nx.Defn.jit_apply/3 of Nx 0.7.2 calls it
  defp foreign_jit(compiler, id, fun, args, opts) do
    compiler!(compiler)
    {key, vars, trace_fun} = foreign_params(compiler, id, fun, args)
    [result] = compiler.__jit__(key, vars, trace_fun, [argument_funs(args)], opts)
    result
  end

  @doc false
  # The call `Nx.Defn.compile/3` makes under a compiler other than the default one (and not
  # Nx.Defn.Debug), or nil: `{compiler, opts}` (opts less :compiler).
  def foreign_compiler(opts) do
    case Keyword.pop(opts, :compiler) do
      {compiler, _opts} when compiler in [nil, Nx.Defn.Debug] -> nil
      {compiler, opts} -> if compiler != runtime(), do: {compiler!(compiler), opts}
    end
  end

  @doc false
  # c:__compile__/4 of `compiler` for `templates` (static lists among them); the function it
  # returns is called with the arguments of each call (templates' statics included)
  def foreign_compile(compiler, fun, templates, opts) do
    {key, vars, trace_fun} = foreign_params(compiler, jit_id(fun), fun, templates)
    compiled = compiler.__compile__(key, vars, trace_fun, opts)

    fn args ->
      [result] = compiled.([argument_funs(args)])
      result
    end
  end

  @doc false
  # c:__stream__/7 of `compiler` (any, the default one too): the input's parameters and the
  # accumulator (tensors) given
  def compiler_stream(compiler, fun, [_input, acc | _] = args, opts) do
    compiler!(compiler)
    {key, vars, trace_fun} = foreign_params(compiler, jit_id(fun), fun, args)
    acc = Composite.traverse(acc, &Nx.to_tensor/1)

    [stream] =
      compiler.__stream__(key, hd(vars), acc, vars, trace_fun, [argument_funs(args)], opts)

    stream
  end

  defp compiler!(compiler) do
    cond do
      not is_atom(compiler) ->
        raise ArgumentError, "the :compiler option must be a module, got: #{inspect(compiler)}"

      not Code.ensure_loaded?(compiler) ->
        raise ArgumentError,
              "the :compiler option names #{inspect(compiler)}, which is not loaded (is its " <>
                "application among your dependencies?)"

      not function_exported?(compiler, :__jit__, 5) ->
        raise ArgumentError,
              "the :compiler option names #{inspect(compiler)}, which is not a compiler: it " <>
                "does not implement Nx.Defn.Compiler (no __jit__/5)"

      true ->
        compiler
    end
  end

  # The key, `vars` and the tracing function of a call as Nx 0.7.2 gives them to a compiler:
  # a list or a function among the arguments (options, callbacks) is not a var, the tracing
  # function puts it back (and the key names it, with the function's trace cache id `id`); a
  # lazy container is a var of its templates.
  defp foreign_params(compiler, id, fun, args) do
    statics = for arg <- args, do: if(static?(arg), do: {:static, arg})
    {params, _concrete} = parameters(Enum.reject(args, &static?/1))
    key = if Enum.any?(statics), do: {id, statics}, else: id

    trace_fun = fn vars ->
      with_current(compiler, fn ->
        Expr.with_tracing(fn ->
          fun
          |> apply(with_statics(statics, vars))
          |> Composite.traverse(&Expr.to_expr/1)
        end)
      end)
    end

    {key, params, trace_fun}
  end

  defp static?(arg) when is_list(arg) or is_function(arg), do: true
  defp static?(arg) when is_tuple(arg) and tuple_size(arg) > 0, do: is_function(elem(arg, 0))
  defp static?(_arg), do: false

  defp with_statics([{:static, arg} | statics], vars), do: [arg | with_statics(statics, vars)]
  defp with_statics([nil | statics], [var | vars]), do: [var | with_statics(statics, vars)]
  defp with_statics([], []), do: []

  # one function per tensor leaf of the arguments (not of the static ones), in the order of
  # the parameters: it returns the concrete tensor (a lazy container's made when called)
  defp argument_funs(args) do
    args
    |> Enum.reject(&static?/1)
    |> lazy_arguments()
    |> Tuple.to_list()
    |> Composite.flatten_list()
    |> Enum.map(fn leaf -> fn -> made(to_concrete_or_lazy(leaf)) end end)
  end

  defp to_concrete_or_lazy(%Nx.Tensor{data: {:lazy, _}} = template), do: template
  defp to_concrete_or_lazy(leaf), do: to_concrete(leaf)

  ## Running graphs for a compiler (the default path's trace cache)

  @doc """
  For a compiler that implements the two graph callbacks (`c:__compile__/1`, `c:__run__/5`)
  and is called through `c:__jit__/5`: the trace of `fun.(vars)`, encoded and compiled by
  `compiler`, from the trace cache (`Nx.Defn.TraceCache`) by `key` and the types, shapes and
  names of `vars` (a trace of its own under `debug_nans: true`); traced and cached on a miss.
  `graph_run/5` runs it.
  """
  @spec graph_trace(module, term, [term], ([term] -> term), keyword) :: term
  def graph_trace(compiler, key, vars, fun, opts) do
    debug = Keyword.get(opts, :debug_nans, false) == true
    signature = Enum.map(vars, &Composite.traverse(&1, fn leaf -> leaf_signature(leaf) end))
    cache_key = {__MODULE__, compiler, key, signature, debug}

    case Nx.Defn.TraceCache.fetch(cache_key) do
      nil ->
        count = Enum.reduce(vars, 0, &(Composite.count(&1) + &2))
        compiled = compile(compiler, fn -> fun.(vars) end, count, debug)
        :counters.add(counters_ref(), 1, 1)
        Nx.Defn.TraceCache.put(cache_key, compiled)

      {compiled, _mark} ->
        :counters.add(counters_ref(), 2, 1)
        compiled
    end
  end

  @doc """
  The template of the result container of a trace of `graph_trace/5` (template tensors, with
  any other term of the result as it is).
  """
  @spec graph_template(term) :: term
  def graph_template({:no_tensors, result}), do: result
  def graph_template(compiled) when elem(compiled, 0) == :graph, do: elem(compiled, 3)

  defp leaf_signature(%Nx.Tensor{type: type, shape: shape, vectorized_axes: axes, names: names}),
    do: {type, shape, axes, named(names)}

  defp leaf_signature(number), do: number

  @doc """
  Runs the trace of `graph_trace/5` on `args` (one function per parameter, as in an
  `args_list` of `c:__jit__/5`; only those of the parameters the graph reads are called) with
  `compiler`'s `c:__run__/5`, and returns the result container. `vars` are those the trace was
  made of (`donate: [position]` names positions among them).
  """
  @spec graph_run(module, term, [term], [(() -> Nx.Tensor.t())], keyword) :: term
  def graph_run(compiler, compiled, vars, args, opts) do
    opts = if Keyword.has_key?(opts, :donate), do: donated(opts, vars, compiled), else: opts
    execute(compiler, compiled, args, opts)
  end

  @doc false
  # The eager path of Nx.Defn.Expr.apply_op/4: `key` names the op, its options and output
  # template, so each eager op is traced once per argument signature.
  def __eager__(key, fun, args) do
    if Expr.tracing?(), do: apply(fun, args), else: cached({:eager, key}, fun, args, [], nil)
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
  # A hit of a call from outside of any trace (`plan_for`, not nil) makes the process's plan
  # of the call (plan/5).
  defp cached(id, fun, args, opts, plan_for) do
    # (a call that donates has no plan: its options name argument positions to translate)
    donate? = Keyword.has_key?(opts, :donate)
    {signature, concrete} = signature(args)
    # (a debug_nans trace records where each node was made: a trace of its own)
    debug = Keyword.get(opts, :debug_nans, false) == true

    key =
      if debug, do: {__MODULE__, id, signature, :debug_nans}, else: {__MODULE__, id, signature}

    compiled =
      case Nx.Defn.TraceCache.fetch(key) do
        nil ->
          {params, _concrete} = parameters(args)
          compiled = compile(runtime(), tracing(fun, params), length(concrete), debug)
          :counters.add(counters_ref(), 1, 1)
          Nx.Defn.TraceCache.put(key, compiled)

        {compiled, mark} ->
          :counters.add(counters_ref(), 2, 1)

          if plan_for != nil and not donate?, do: plan(plan_for, args, compiled, mark, opts)

          compiled
      end

    opts = if donate?, do: donated(opts, args, compiled), else: opts
    execute(runtime(), compiled, concrete, opts)
  end

  # `donate: [position]` (positions of the call's arguments, each a tensor or a container) as
  # `donated: [position]`, the positions of the tensors that the compiler's `c:__run__/5`
  # takes (every leaf of each donated argument that the graph reads)
  defp donated(opts, args, compiled) do
    {donate, opts} = Keyword.pop(opts, :donate)
    count = length(args)

    unless is_list(donate) and Enum.all?(donate, &(is_integer(&1) and &1 >= 0 and &1 < count)) do
      raise ArgumentError,
            "the :donate option takes a list of argument positions (0-based) of the call, " <>
              "which has #{count} argument(s), got: #{inspect(donate)}"
    end

    # the leaves of argument i are numbered from offsets[i], in the order parameters/1 numbers
    {counts, _} =
      args
      |> lazy_arguments()
      |> Tuple.to_list()
      |> Enum.map_reduce(0, &{Composite.count(&1), &2})

    offsets = Enum.scan([0 | counts], &(&1 + &2))

    leaves =
      Enum.flat_map(
        Enum.uniq(donate),
        &Enum.to_list(Enum.at(offsets, &1)..(Enum.at(offsets, &1 + 1) - 1)//1)
      )

    positions =
      case elem(compiled, 0) == :graph and elem(compiled, 2) do
        :all -> leaves
        false -> []
        parameters -> for {p, i} <- Enum.with_index(parameters), p in leaves, do: i
      end

    [{:donated, positions} | opts]
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

  # (a function of an `args_list`, Nx.Defn.Compiler's callbacks)
  defp made(fun) when is_function(fun, 0), do: to_concrete(fun.())
  defp made(tensor), do: tensor

  @doc """
  Traces `fun` on `args` (each leaf a parameter) and returns the resulting expression,
  without encoding or running it (`Nx.Defn.debug_expr/2`).
  """
  @spec trace(function, [term]) :: term
  def trace(fun, args) do
    {params, _concrete} = parameters(args)
    {result, _hooks} = Expr.with_hooks(tracing(fun, params))
    # (numbers among the results are expressions too, as Nx's compilers return them)
    Composite.traverse(result, &Expr.to_expr/1)
  end

  # the trace of `fun` applied to the parameter expressions
  defp tracing(fun, params), do: fn -> Expr.with_tracing(fn -> apply(fun, params) end) end

  # `trace` run (a function of no arguments that traces), its result encoded for `compiler`.
  # The hook functions stay here, by index (Nx.Defn.Expr.hook/3); the graph names the index.
  # With `debug`, the run gets `debug_sites: %{wire id => "file:line"}` among its options.
  defp compile(compiler, trace, count, false) do
    {result, hooks} = Expr.with_hooks(trace)
    encode(compiler, result, hooks, count)
  end

  defp compile(compiler, trace, count, true) do
    {{result, hooks}, sites} = Expr.with_sites(fn -> Expr.with_hooks(trace) end)

    case encode(compiler, result, hooks, count) do
      {:graph, compiled, parameters, container, templates, hooks} ->
        by_wire_id =
          for {ref, id} <- Nx.Defn.WireEncoder.ids(result),
              site = sites[ref],
              into: %{},
              do: {id, site}

        {:graph, compiled, parameters, container, templates, hooks, by_wire_id}

      other ->
        other
    end
  end

  # `parameters`: the indices of the `count` concrete arguments the graph takes, or :all
  defp encode(compiler, result, hooks, count) do
    # (as in Nx: a result must be tensors, numbers or containers of them)
    Composite.container!(
      result,
      "a defn or jitted function must return tensors, numbers or containers of them"
    )

    case Composite.flatten_list([result]) do
      [] ->
        {:no_tensors, result}

      _leaves ->
        {graph, parameters, container} = Nx.Defn.WireEncoder.encode(result)
        parameters = if parameters == Enum.to_list(0..(count - 1)//1), do: :all, else: parameters
        templates = Composite.flatten_list([container])
        {:graph, compiler.__compile__(graph), parameters, container, templates, hooks}
    end
  end

  defp execute(_compiler, {:no_tensors, result}, _args, _opts), do: result

  defp execute(
         compiler,
         {:graph, compiled, parameters, container, templates, hooks, sites},
         args,
         opts
       ),
       do:
         execute(compiler, {:graph, compiled, parameters, container, templates, hooks}, args, [
           {:debug_sites, sites} | opts
         ])

  defp execute(compiler, {:graph, compiled, parameters, container, templates, hooks}, args, opts) do
    results =
      compiler.__run__(compiled, made_all(taken(parameters, args), []), templates, hooks, opts)

    rebuilt(container, results)
  end

  # the arguments the graph takes (`parameters`: their indices, or :all)
  defp taken(:all, args), do: args

  defp taken(parameters, args) do
    args = List.to_tuple(args)
    Enum.map(parameters, &elem(args, &1))
  end

  # one tensor, the common case, without the walk
  defp rebuilt(container, [result]) when is_struct(container, Nx.Tensor), do: result
  defp rebuilt(container, results), do: Nx.Defn.WireEncoder.rebuild(container, results)

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
