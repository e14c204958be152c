defmodule Nx.Defn do
  @moduledoc """
  Numerical definitions: functions whose body is traced into an expression graph and
  run, differentiated and compiled by JAX on the Python worker.

      defmodule MyMath do
        import Nx.Defn

        defn log1pexp(t), do: Nx.log1p(Nx.exp(t))
        defn grad_log1pexp(t), do: grad(t, log1pexp(t))
      end

      MyMath.log1pexp(3.0)
      #=> #Nx.Tensor<f32 3.0485873222351074>
      MyMath.grad_log1pexp(3.0)
      #=> #Nx.Tensor<f32 0.9525741338729858>

  Inside a `defn` body `Nx.Defn.Kernel` is imported in place of `Kernel`'s numeric
  operators, so `+`, `-`, `*`, `/`, `**` and unary `-` work on tensors and numbers, and
  `stop_grad/1`, `custom_grad/3`, `hook/2,3`, the hook tokens (`create_token/0`,
  `hook_token/3,4`, `attach_token/2`), `print_value/2,3`, `print_expr/2`, `tap/2` and
  `then/2` are available; `if/2` and `cond/1` accept tensor conditions. `grad/1,2` and
  `value_and_grad/1,2,3` are this module's, imported with it.

  Calling a `defn` from outside `defn` jits it: the arguments (tensors, numbers, and
  tuples and maps of them; any other term is passed as it is) become parameters, the
  body is traced, and the graph runs on the worker; the result is the same container
  of concrete tensors. Calling a `defn` from inside another `defn` inlines it.
  """

  alias Nx.Defn.{Compiler, SourceChecks}

  @kernel_ops [+: 2, -: 2, *: 2, /: 2, **: 2, -: 1, +: 1] ++
                [==: 2, !=: 2, <: 2, <=: 2, >: 2, >=: 2, elem: 2, if: 2, then: 2, tap: 2] ++
                [max: 2, min: 2, rem: 2, div: 2, and: 2, or: 2, not: 1] ++
                [{:.., 0}, {:.., 2}, {:"..//", 3}, |>: 2, <>: 2, @: 1] ++
                [raise: 1, raise: 2, inspect: 1, inspect: 2]

  # Nx.Defn.Kernel's documentation of Elixir's special forms (never imported)
  @kernel_special_forms [alias: 1, alias: 2, import: 1, import: 2, require: 1, require: 2] ++
                          [case: 2, cond: 1, __using__: 1]

  @doc false
  # the Kernel functions that Nx.Defn.Kernel replaces inside defn (and with `use Nx.Defn.Kernel`)
  def kernel_ops, do: @kernel_ops

  @doc false
  # what of Nx.Defn.Kernel defn bodies (and `use Nx.Defn.Kernel`) do not import
  def kernel_special_forms, do: @kernel_special_forms

  @doc """
  Defines a public numerical function; see the module documentation.
  """
  defmacro defn(call, do: body), do: define(:def, call, body, __CALLER__)

  @doc """
  Defines a private numerical function; see the module documentation.
  """
  defmacro defnp(call, do: body), do: define(:defp, call, body, __CALLER__)

  @doc """
  Defines a public function that `defn` code calls at trace time with plain Elixir
  semantics: its body uses `Kernel` (not `Nx.Defn.Kernel`), so it can inspect shapes,
  types and options, and build expressions with `Nx` functions.

  ## Examples

      deftransform double_axis(opts \\ []), do: Keyword.get(opts, :axis, 0) * 2
  """
  defmacro deftransform(call, do: body) do
    quote do
      unquote(register_transform(:transform, call))
      def unquote(call), do: unquote(body)
    end
  end

  @doc """
  A bodiless head for multi-clause transforms (the defaults of the clauses that follow):
  `deftransform f(x \\\\ 1, y)`.
  """
  defmacro deftransform(call) do
    quote do
      unquote(register_transform(:transform, call))
      def unquote(call)
    end
  end

  @doc """
  A private `deftransform/2`.
  """
  defmacro deftransformp(call, do: body) do
    quote do
      unquote(register_transform(:transformp, call))
      defp unquote(call), do: unquote(body)
    end
  end

  @doc "A bodiless head of a private multi-clause transform; see `deftransform/1`."
  defmacro deftransformp(call) do
    quote do
      unquote(register_transform(:transformp, call))
      defp unquote(call)
    end
  end

  defp register_transform(kind, call) do
    {name, args, _guards} = decompose(call)
    arity = length(args)
    name = with {:unquote, _, [value]} <- name, do: value
    SourceChecks.register(kind, name, nil, arity, arity - count_defaults(args))
  end

  defp count_defaults(args), do: Enum.count(args, &match?({:\\, _, [_, _]}, &1))

  defp define(kind, call, body, env) do
    {name, args, guards} = decompose(call)
    arity = length(args)
    SourceChecks.check_head!(args, head_meta(call), env)
    SourceChecks.check_patterns!(body, env)

    # `name` is an atom, or an unquote fragment (`defn unquote(name)(x)` inside a `for`): then
    # the implementation's name is one too, and the module body refers to the fragment's value
    {impl, impl_value, name_value} =
      case name do
        {:unquote, meta, [value]} ->
          impl_value = quote(do: :"__defn:#{unquote(value)}__")
          {{:unquote, meta, [impl_value]}, impl_value, value}

        name ->
          {:"__defn:#{name}__", :"__defn:#{name}__", name}
      end

    vars = Enum.map(1..arity//1, &Macro.var(:"arg#{&1}", __MODULE__))

    wrapper_args =
      Enum.zip_with(args, vars, fn
        {:\\, meta, [_pattern, default]}, var -> {:\\, meta, [var, default]}
        _pattern, var -> var
      end)

    impl_args =
      Enum.map(args, fn
        {:\\, _, [pattern, _default]} -> pattern
        pattern -> pattern
      end)

    impl_head =
      if guards, do: {:when, [], [{impl, [], impl_args}, guards]}, else: {impl, [], impl_args}

    # the wrapper's call of the implementation (a local call, so defnp works too; a closure
    # without free variables, equal from call to call, so the trace cache finds it)
    capture = {:fn, [], [{:->, [], [vars, {impl, [], vars}]}]}

    registration =
      SourceChecks.register(
        if(kind == :def, do: :defn, else: :defnp),
        name_value,
        impl_value,
        arity,
        arity - count_defaults(args)
      )

    quote do
      unquote(registration)

      unless Module.defines?(__MODULE__, {unquote(name_value), unquote(arity)}) do
        unquote(kind)(unquote(name)(unquote_splicing(wrapper_args))) do
          Nx.Defn.Compiler.__runtime__(unquote(capture), unquote(vars))
        end
      end

      unquote(if kind == :def, do: quote(do: @doc(false)))

      unquote(kind)(unquote(impl_head)) do
        # as in Nx 0.7.2: Nx.Defn.Kernel in place of Kernel (which `Kernel.` names too); Kernel
        # itself only inside the closures the body writes (kernel_in_closures/1)
        import Kernel, only: []
        import Nx.Defn.Kernel, except: unquote(@kernel_special_forms), warn: false
        alias Nx.Defn.Kernel, as: Kernel

        unquote(
          body
          |> kernel_in_closures()
          |> warn_traced_tensor_data()
          |> rewrite_cond()
          |> SourceChecks.rewrite_remotes(env)
          |> SourceChecks.mark_sites(env)
        )
      end
    end
  end

  # A defn body sees Nx.Defn.Kernel, not Kernel: `apply/3` or `length/1` there is "undefined
  # function ... (there is no such import)", as in Nx 0.7.2. The closures the body writes,
  # `fn` and `&(...)` (a hook's `&send(self(), &1)`), see Kernel's functions besides
  # Nx.Defn.Kernel's, as Nx 0.7.2's do (its defn resolves their local calls in the module's own
  # scope). Done before rewrite_cond/1, whose clause bodies become closures too but stay
  # defn code.
  defp kernel_in_closures(body) do
    Macro.prewalk(body, fn
      {:fn, meta, clauses} ->
        {:fn, meta,
         Enum.map(clauses, fn {:->, clause_meta, [args, clause_body]} ->
           {:->, clause_meta, [args, with_kernel(clause_body)]}
         end)}

      # (`&1`, and captures of a named function, `&fun/1` or `&Mod.fun/1`, call nothing
      # themselves; `&(&1 / 2)` is a closure)
      {:&, _, [n]} = capture when is_integer(n) ->
        capture

      {:&, _, [{:/, _, [{name, _, context}, arity]}]} = capture
      when is_atom(name) and is_atom(context) and is_integer(arity) ->
        capture

      {:&, _, [{:/, _, [{{:., _, [_, _]}, _, []}, arity]}]} = capture when is_integer(arity) ->
        capture

      {:&, meta, [expr]} = capture ->
        if meta[:nx_kernel_in_scope] do
          capture
        else
          # an immediately called `fn` gives the capture a scope of its own to import Kernel in
          marked = {:&, [{:nx_kernel_in_scope, true} | meta], [expr]}
          quote do: (fn -> unquote(with_kernel(marked)) end).()
        end

      other ->
        other
    end)
  end

  # (Kernel by its atom, which the body's alias of Kernel to Nx.Defn.Kernel does not touch)
  defp with_kernel(body) do
    {:__block__, [],
     [{:import, [], [:"Elixir.Kernel", [except: @kernel_ops, warn: false]]}, body]}
  end

  # `Nx.tensor(data)` inside defn builds a constant at trace time: data that is not written
  # out in the source (an option, a variable) makes every different value a new trace and
  # compilation. Warned at compile time, as Nx 0.7.2 does (the call still works).
  defp warn_traced_tensor_data(body) do
    Macro.prewalk(body, fn
      {{:., _, [{:__aliases__, _, [:Nx]}, :tensor]}, meta, [data | _]} = call ->
        unless data |> fold_signs() |> Macro.quoted_literal?() do
          IO.warn(
            "Nx.tensor/2 inside defn expects the first argument to be a literal (such as a " <>
              "list), got: #{Macro.to_string(data)}. Any other value makes a constant of " <>
              "each value it takes, so each one traces and compiles the function anew: " <>
              "convert such data with Nx.tensor/2 outside defn and pass the tensor as an " <>
              "argument" <> at_line(meta),
            []
          )
        end

        call

      other ->
        other
    end)
  end

  # `-1` in the source is a call of unary minus on 1 (a literal once expanded)
  defp fold_signs(data) do
    Macro.prewalk(data, fn
      {:-, _, [number]} when is_number(number) -> -number
      {:+, _, [number]} when is_number(number) -> number
      other -> other
    end)
  end

  defp at_line(meta), do: if(meta[:line], do: " (line #{meta[:line]})", else: "")

  # `cond` is a special form and cannot be imported: rewrite it, as Nx 0.7.2 does, into the
  # list of its clauses, `{predicate, fn -> body end}`, every predicate evaluated in order
  # (a variable one binds is visible in the later ones and in the bodies), for
  # Nx.Defn.ControlFlow.cond_clauses/1 (see `Nx.Defn.Kernel.if/2`)
  defp rewrite_cond(body) do
    Macro.prewalk(body, fn
      {:cond, meta, [[do: clauses]]} ->
        var = Macro.var(:condition, __MODULE__)

        pairs =
          Enum.map(clauses, fn {:->, _, [[condition], clause_body]} ->
            quote do
              unquote(var) = unquote(condition)
              {unquote(var), fn -> unquote(clause_body) end}
            end
          end)

        site = {:{}, [], [quote(do: __ENV__.file), meta[:line]]}

        quote do
          Nx.Defn.ControlFlow.at_site(unquote(site), fn ->
            Nx.Defn.ControlFlow.cond_clauses(unquote(pairs))
          end)
        end

      other ->
        other
    end)
  end

  defp head_meta({:when, _, [call, _guards]}), do: head_meta(call)
  defp head_meta({_name, meta, _args}), do: meta

  defp decompose({:when, _, [call, guards]}) do
    {name, args, nil} = decompose(call)
    {name, args, guards}
  end

  defp decompose({name, _meta, args}) when is_atom(name) and is_list(args), do: {name, args, nil}

  defp decompose({{:unquote, _, [_]} = name, _meta, args}) when is_list(args),
    do: {name, args, nil}

  defp decompose({name, _meta, context}) when is_atom(name) and is_atom(context),
    do: {name, [], nil}

  defp decompose(call) do
    raise ArgumentError, "invalid defn head: #{Macro.to_string(call)}"
  end

  @defaults_key {__MODULE__, :default_options}

  @doc """
  The default options of `defn` calls and `jit/2` in this process (see
  `default_options/1`), else the global ones (`global_default_options/1`, or
  `config :nx, :default_defn_options`).
  """
  @spec default_options() :: keyword
  def default_options, do: Process.get(@defaults_key) || global_defaults()

  @global_key {__MODULE__, :global_default_options}

  # The global defaults: the application environment's, read once into :persistent_term
  # (global_default_options/1 writes both). Every call reads them, and on a CPU shared with
  # the worker Application.get_env/3 costs a call more (`git show 19d163f:docs/BENCHMARKS.md`, "The client's layers on a shared CPU, cut one by one").
  defp global_defaults do
    case :persistent_term.get(@global_key, :unset) do
      :unset ->
        options = Application.get_env(:nx, :default_defn_options, [])
        :persistent_term.put(@global_key, options)
        options

      options ->
        options
    end
  end

  @doc """
  Sets the default options of `defn` calls and `jit/2` in this process (merged under the
  options a `jit` call gives) and returns the previous defaults. Meant for scripts and
  tests.

  `compiler: Nx.Defn.Debug` makes `defn` return the traced expression instead of running
  it (as in Nx); any other compiler is called as Nx calls one (see `Nx.Defn.Compiler`).

  ## Examples

      iex> previous = Nx.Defn.default_options(compiler: Nx.Defn.Evaluator)
      iex> Nx.Defn.default_options()
      [compiler: Nx.Defn.Evaluator]
      iex> Nx.Defn.default_options(previous)
      [compiler: Nx.Defn.Evaluator]
  """
  @spec default_options(keyword) :: keyword
  def default_options(options) when is_list(options) do
    previous = default_options()
    Process.put(@defaults_key, options)
    previous
  end

  @doc """
  Sets the default options of every process that has not set its own (see
  `default_options/1`) and returns the previous global ones.

  They are kept in the application environment (`config :nx, :default_defn_options`),
  which is read once, at the first call that needs them: after changing that setting with
  `Application.put_env/3`, call this function with the new options.
  """
  @spec global_default_options(keyword) :: keyword
  def global_default_options(options) when is_list(options) do
    previous = Application.get_env(:nx, :default_defn_options, [])
    Application.put_env(:nx, :default_defn_options, options)
    :persistent_term.put(@global_key, options)
    previous
  end

  @doc """
  Returns a function of the same arity as `fun` that jits `fun` on its arguments.

  `opts` are passed to the worker (`NxJax.Worker.run/3`); `hooks: %{name => fun}` gives the
  functions of the hooks named `name` (`Nx.Defn.Kernel.hook/2,3`), overriding their defaults.
  `compiler: module` names another compiler, called with `opts` through its `__jit__/5` (see
  `Nx.Defn.Compiler`).

  ## Examples

      jitted = Nx.Defn.jit(fn x -> Nx.exp(x) end)
      jitted.(0.0)
      #=> #Nx.Tensor<f32 1.0>
  """
  @spec jit(function, keyword) :: function
  def jit(fun, opts \\ []) when is_function(fun) and is_list(opts) do
    {:arity, arity} = Function.info(fun, :arity)
    # (:on_conflict and the trace cache's id of `fun` are worked out once here, not at each
    # call; a bad :on_conflict still raises at a call)
    {on_conflict, opts} = Keyword.pop(opts, :on_conflict, :raise)
    jitted(fun, arity, Compiler.jit_id(fun), on_conflict, opts)
  end

  for arity <- 0..8 do
    args = Macro.generate_arguments(arity, __MODULE__)

    defp jitted(fun, unquote(arity), id, on_conflict, opts) do
      fn unquote_splicing(args) ->
        jit_or_conflict(id, fun, unquote(args), opts, on_conflict, "JITed function")
      end
    end
  end

  defp jitted(_fun, arity, _id, _on_conflict, _opts) do
    raise ArgumentError,
          "Nx.Defn.jit/2 supports functions of up to 8 arguments, got arity #{arity}"
  end

  @doc """
  Jits `fun` and calls it on the list `args` right away.

  Called while another function is being traced (from a `deftransform` of a `defn`, say),
  it raises, as in Nx 0.7.2, unless `:on_conflict` says otherwise: `:force` runs `fun` on
  its (concrete) arguments right away, `:reuse` traces it into the enclosing function.

  ## Examples

      Nx.Defn.jit_apply(&Nx.add/2, [1.0, 2.0])
      #=> #Nx.Tensor<f32 3.0>
  """
  @spec jit_apply(function, [term], keyword) :: term
  def jit_apply(fun, args, opts \\ []) do
    {on_conflict, opts} = Keyword.pop(opts, :on_conflict, :raise)
    jit_or_conflict({:jit, fun}, fun, args, opts, on_conflict, "JITed function")
  end

  @doc """
  The backend, as `{module, options}`, of the results of `defn` calls and jitted functions
  under `opts` (merged over `default_options/0`): `NxJax.Backend` (results resident on the
  worker) when this process's default backend is that one, else `Nx.BinaryBackend`. (A call
  with a resident argument also gives resident results.)

  ## Examples

      iex> Nx.Defn.to_backend([])
      {Nx.BinaryBackend, []}
  """
  @spec to_backend(keyword) :: {module, keyword}
  def to_backend(opts \\ []) when is_list(opts) do
    opts = Keyword.merge(default_options(), opts)

    unless is_map(Keyword.get(opts, :hooks, %{})) do
      raise ArgumentError, ":hooks option must be a map"
    end

    case Compiler.foreign_compiler(opts) do
      {compiler, opts} ->
        compiler.__to_backend__(opts)

      nil ->
        {backend, _options} = Nx.default_backend()

        if backend != Nx.BinaryBackend and Nx.Backend.backend?(backend),
          do: {backend, []},
          else: {Nx.BinaryBackend, []}
    end
  end

  @doc """
  Starts a stream of `fun`, jitted: `fun` takes one input, the accumulator and the other
  `args`, and returns `{output, accumulator}`.

  `args` are at least two: the first is the template (or an example) of each input, the
  second the initial accumulator (numbers become tensors); the rest are passed to every
  step as they are. Each `Nx.Stream.send/2` runs one step on the worker, in order; each
  `Nx.Stream.recv/1` returns the output of the oldest step not yet received (waiting for
  it); `Nx.Stream.done/1` stops the stream and returns the accumulator. An input that is
  not compatible with the template raises `ArgumentError` in `send`; a step that raises
  stops the stream's process (linked to the caller).

  Options as `jit/2` (`:hooks` is a map of hook functions).
  The stream is the compiler's (`c:Nx.Defn.Compiler.__stream__/7`): with no compiler named,
  Nx's default, `Nx.Defn.Evaluator`, whose outputs are checked against the accumulator's
  template as in Nx 0.7.2; `compiler: NxJax` checks them against the step's output, as EXLA.

  ## Examples

      defmodule Streamed do
        import Nx.Defn
        defn running_sum(x, acc), do: {acc, acc + x}
      end

      stream = Nx.Defn.stream(&Streamed.running_sum/2, [Nx.template({}, :s64), 0])
      Nx.Stream.send(stream, 1)
      Nx.Stream.recv(stream)
      #=> #Nx.Tensor<s64 0>
      Nx.Stream.send(stream, 2)
      Nx.Stream.recv(stream)
      #=> #Nx.Tensor<s64 1>
      Nx.Stream.done(stream)
      #=> #Nx.Tensor<s64 3>
  """
  @spec stream(function, [term], keyword) :: Nx.Stream.t()
  def stream(fun, args, opts \\ []) when is_function(fun) and is_list(args) and is_list(opts) do
    if Nx.Defn.Expr.tracing?() do
      raise "cannot call Nx.Defn.stream/3 when there is a JIT compilation happening"
    end

    unless is_map(Keyword.get(opts, :hooks, %{})) do
      raise ArgumentError, ":hooks option must be a map"
    end

    case args do
      [_input, _acc | _rest] when is_function(fun, length(args)) ->
        # the step runs in the stream's process, with this process's defaults
        # (the stream is the compiler's, as in Nx; with none named, Nx's default compiler's,
        # Nx.Defn.Evaluator, which runs on the default compiler)
        {compiler, opts} =
          case Keyword.pop(Keyword.merge(default_options(), opts), :compiler) do
            {compiler, opts} when compiler in [nil, Nx.Defn.Debug] -> {Nx.Defn.Evaluator, opts}
            {compiler, opts} -> {compiler, opts}
          end

        Compiler.compiler_stream(compiler, fun, args, opts)

      [_, _ | _] ->
        raise ArgumentError,
              "Nx.Defn.stream/3 was given #{length(args)} arguments for a function of arity " <>
                "#{elem(Function.info(fun, :arity), 1)}"

      _ ->
        raise ArgumentError, "Nx.Defn.stream/3 expects at least two arguments"
    end
  end

  # `id`: the trace cache's id of `fun` (Compiler.jit_id/1 for a jitted function)
  defp jit_or_conflict(id, fun, args, opts, on_conflict, what) do
    case {Nx.Defn.Expr.tracing?(), on_conflict} do
      {false, conflict} when conflict in [:raise, :force, :reuse] ->
        Compiler.__jit__(id, fun, args, opts)

      {true, :raise} ->
        raise "cannot invoke #{what} when there is a JIT compilation happening"

      {true, :force} ->
        Nx.Defn.Expr.without_tracing(fn -> Compiler.__jit__(id, fun, args, opts) end)

      {true, :reuse} ->
        apply(fun, args)

      {_, other} ->
        raise ArgumentError,
              "the :on_conflict option must be :raise, :force or :reuse, got: #{inspect(other)}"
    end
  end

  @doc """
  The gradient of the scalar `fun.(x)` with respect to `x` (a tensor, a number, or a
  container of them), in the same container as `x`. Outside `defn` it is computed on the
  worker; inside `defn` (where `import Nx.Defn` makes it available, as in Nx) it is traced
  into the caller's graph.

  Integer leaves of `x` keep their values inside `fun` (a PRNG key stays `u32`); their
  gradient is floating (`f32`), zero where Nx's gradient does not reach them. A value that
  is not a scalar is differentiated as its sum.

  Inside `defn` the second argument may also be an expression already built from `x`
  (`grad(t, log1pexp(t))`, an extension of Nx 0.7.2, which takes a function only).

  ## Examples

      Nx.Defn.grad(3.0, &Nx.sin/1)
      #=> #Nx.Tensor<f32 -0.9899924993515015>

      defn grad_sin(x), do: grad(x, &Nx.sin/1)
  """
  @spec grad(term, term) :: term
  def grad(x, fun_or_expr) do
    # (inside a trace, a nested grad joins it, as Nx's does)
    Compiler.jit_apply(
      fn x ->
        {_value, grad} = Nx.Defn.Grad.value_and_grad(x, fun_or_expr)
        grad
      end,
      [x],
      []
    )
  end

  @doc """
  Returns `{value, grad}`: the value of `fun.(x)` and its gradient with respect to `x`
  (see `grad/2`). When the value is not a scalar (for example a `{loss, aux}` tuple),
  `transform` picks the scalar to differentiate; the value is returned untransformed.

  ## Examples

      Nx.Defn.value_and_grad(1.0, fn x -> Nx.log1p(Nx.exp(x)) end)
      #=> {#Nx.Tensor<f32 1.31326162815094>, #Nx.Tensor<f32 0.7310585975646973>}

      defn loss_and_grad(p), do: value_and_grad(p, &loss/1)
  """
  @spec value_and_grad(term, term, (term -> term)) :: {term, term}
  def value_and_grad(x, fun_or_expr, transform \\ & &1) when is_function(transform, 1) do
    Compiler.jit_apply(&Nx.Defn.Grad.value_and_grad(&1, fun_or_expr, transform), [x], [])
  end

  @doc """
  The function `x -> grad(x, fun)`.

  ## Examples

      iex> Nx.Defn.grad(&Nx.multiply(&1, &1)).(Nx.tensor(3.0))
      #Nx.Tensor<
        f32
        6.0
      >

  """
  @spec grad(function) :: (term -> term)
  def grad(fun) when is_function(fun, 1), do: &grad(&1, fun)

  @doc """
  The function `x -> value_and_grad(x, fun)`.

  ## Examples

      iex> {value, grad} = Nx.Defn.value_and_grad(&Nx.multiply(&1, &1)).(Nx.tensor(3.0))
      iex> {Nx.to_number(value), Nx.to_number(grad)}
      {9.0, 6.0}

  """
  @spec value_and_grad(function) :: (term -> {term, term})
  def value_and_grad(fun) when is_function(fun, 1), do: &value_and_grad(&1, fun)

  @doc """
  Returns a function of the same arity as `fun` that returns the expression `fun` traces to
  on its arguments (a tensor whose data is an `Nx.Defn.Expr`, or a container of them)
  instead of computing it. Nothing runs on the worker.

  ## Examples

      iex> expr = Nx.Defn.debug_expr(&Nx.add(&1, 1)).(Nx.tensor([1, 2]))
      iex> {expr.data.op, expr.shape}
      {:add, {2}}

  """
  @spec debug_expr(function, keyword) :: function
  def debug_expr(fun, opts \\ []) when is_function(fun) and is_list(opts) do
    {:arity, arity} = Function.info(fun, :arity)
    fn_of_arity(arity, fn given -> debug_expr_apply(fun, given, opts) end)
  end

  @doc """
  Traces `fun` on the list `args` and returns the expression (see `debug_expr/2`).
  """
  @spec debug_expr_apply(function, [term], keyword) :: term
  def debug_expr_apply(fun, args, _opts \\ []) when is_function(fun, length(args)) do
    Compiler.trace(fun, args)
  end

  @doc """
  Compiles `fun` for arguments like `templates` (tensors, `Nx.template/2`s, or containers
  of them) and returns a function of the same arity that must be called with arguments of
  those types and shapes; see `jit/2` for `opts`.

  ## Examples

      iex> add_one = Nx.Defn.compile(&Nx.add(&1, 1), [Nx.template({2}, :s64)])
      iex> add_one.(Nx.tensor([1, 2]))
      #Nx.Tensor<
        s64[2]
        [2, 3]
      >

  """
  @spec compile(function, [term], keyword) :: function
  def compile(fun, templates, opts \\ []) when is_function(fun, length(templates)) do
    # a list among the arguments (options) is static: given now, not at each call
    static = for {template, i} <- Enum.with_index(templates), is_list(template), do: i
    expected = for {t, i} <- Enum.with_index(templates), i not in static, do: template_of(t)

    # (a compiler other than the default one compiles now, by its __compile__/4)
    jitted =
      case Compiler.foreign_compiler(Keyword.merge(default_options(), opts)) do
        {compiler, opts} ->
          Compiler.foreign_compile(compiler, fun, templates, opts)

        nil ->
          jitted = jit(fun, opts)
          &apply(jitted, &1)
      end

    fn_of_arity(
      length(expected),
      fn args ->
        for {arg, template, i} <- Enum.zip([args, expected, 1..length(args)//1]) do
          check_argument!(arg, template, i, expected, args)
        end

        if Nx.Defn.Expr.tracing?(),
          do: raise("cannot invoke compiled function when there is a JIT compilation happening")

        jitted.(with_static(templates, static, args))
      end
    )
  end

  defp template_of(arg), do: Nx.Defn.Composite.traverse(arg, &Nx.to_template/1)

  defp with_static(templates, static, args) do
    {all, []} =
      templates
      |> Enum.with_index()
      |> Enum.map_reduce(args, fn {template, i}, rest ->
        if i in static, do: {template, rest}, else: {hd(rest), tl(rest)}
      end)

    all
  end

  # Nx 0.7.2's messages: another container shape, then a tensor of another type or shape
  # (an argument that is a lazy container, an Nx.Batch say, is checked by its templates)
  defp check_argument!(arg, template, i, expected, args) do
    skeleton = &Nx.Defn.Composite.traverse(&1, fn _ -> :tensor end)
    arg = lazy_template(arg)

    unless skeleton.(arg) == skeleton.(template) do
      raise ArgumentError,
            "cannot invoke compiled function because the given arguments do not match " <>
              "compiled arguments\n\nCompiled with:\n\n#{inspect(expected)}\n\nGot:\n\n" <>
              inspect(args)
    end

    unless compatible_leaves?(arg, template) do
      raise ArgumentError,
            "argument at position #{i} is not compatible with compiled function template." <>
              "\n\nExpected:\n\n#{inspect(template)}\n\nGot:\n\n#{inspect(template_of(arg))}"
    end
  end

  defp lazy_template(arg) do
    {template, :ok} = Nx.LazyContainer.traverse(arg, :ok, fn leaf, _build, :ok -> {leaf, :ok} end)
    template
  end

  defp compatible_leaves?(arg, template) do
    Enum.zip(Nx.Defn.Composite.flatten_list([arg]), Nx.Defn.Composite.flatten_list([template]))
    |> Enum.all?(fn {a, t} ->
      a = Nx.to_tensor(a)
      a.type == t.type and a.shape == t.shape and a.vectorized_axes == t.vectorized_axes
    end)
  end

  # a function of `arity` arguments that calls `fun` with them as a list
  for arity <- 0..8 do
    args = Macro.generate_arguments(arity, __MODULE__)

    defp fn_of_arity(unquote(arity), fun) do
      fn unquote_splicing(args) -> fun.(unquote(args)) end
    end
  end

  defp fn_of_arity(arity, _fun) do
    raise ArgumentError, "Nx.Defn supports functions of up to 8 arguments, got arity #{arity}"
  end
end
