defmodule Nx.Defn.SourceChecks do
  @moduledoc false
  # The checks Nx 0.7.2 makes on the source of a `defn` (its heads, its patterns, the functions
  # it calls), with Nx's messages:
  #
  #   * at macro time (`check_head!/3`, `check_patterns!/2`): arguments must be variables,
  #     tuples, maps or structs, and no pattern binds a variable twice;
  #   * when the module is compiled (`__before_compile__/1`, on the expanded definitions): a
  #     local call must be to a `defn`, `defnp` or transform of the module;
  #   * at trace time (`__remote__/3`, which `rewrite_remotes/2` puts in place of the remote
  #     calls of the body): a function of another module must be a `defn` or a transform,
  #     unless the module is one of the library's.

  @defn_attribute :__nx_defn_functions__

  ## Heads and patterns

  @doc false
  # `args` are the head's arguments as written (defaults included)
  def check_head!(args, meta, env) do
    patterns = Enum.map(args, &strip_default/1)
    Enum.each(patterns, &check_argument!(&1, meta, env))
    check_unique_vars!(patterns, meta, env)
  end

  defp strip_default({:\\, _, [pattern, _default]}), do: pattern
  defp strip_default(pattern), do: pattern

  defp check_argument!({name, _, context}, _meta, _env) when is_atom(name) and is_atom(context),
    do: :ok

  defp check_argument!({:unquote, _, [_]}, _meta, _env), do: :ok

  defp check_argument!({:%, _, [_struct, {:%{}, _, pairs}]}, meta, env),
    do: Enum.each(pairs, fn {_key, value} -> check_argument!(value, meta, env) end)

  defp check_argument!({:%{}, _, pairs}, meta, env),
    do: Enum.each(pairs, fn {_key, value} -> check_argument!(value, meta, env) end)

  defp check_argument!({op, _, args}, meta, env) when op in [:{}, :=] and is_list(args),
    do: Enum.each(args, &check_argument!(&1, meta, env))

  defp check_argument!({left, right}, meta, env) do
    check_argument!(left, meta, env)
    check_argument!(right, meta, env)
  end

  defp check_argument!(other, meta, env) do
    compile_error!(
      meta,
      env,
      "only variables, tuples, maps, and structs are allowed as patterns in defn, got: " <>
        Macro.to_string(other)
    )
  end

  @doc false
  # the left side of every `=` in the body binds each variable once (as in Nx, which refuses
  # what Elixir would take as an equality match)
  def check_patterns!(body, env) do
    Macro.prewalk(body, fn
      {:=, meta, [left, _right]} = node ->
        check_unique_vars!(left, meta, env)
        node

      {:quote, _, _} ->
        :ok

      node ->
        node
    end)

    :ok
  end

  defp check_unique_vars!(pattern, meta, env) do
    Macro.prewalk(pattern, %{}, fn
      {:^, _, _}, seen ->
        {:ok, seen}

      {name, var_meta, context} = var, seen when is_atom(name) and is_atom(context) ->
        key = {name, var_meta[:counter] || context}

        cond do
          name == :_ ->
            {var, seen}

          Map.has_key?(seen, key) ->
            compile_error!(
              if(var_meta[:line], do: var_meta, else: meta),
              env,
              "variable \"#{name}\" appears twice in pattern #{Macro.to_string(pattern)}"
            )

          true ->
            {var, Map.put(seen, key, true)}
        end

      node, seen ->
        {node, seen}
    end)

    :ok
  end

  ## Local calls, checked on the expanded definitions

  @doc false
  # module-body code that records one defn or transform (`min_arity..arity`, defaults
  # counted) and checks the module's local calls once, when it is compiled
  def register(kind, name, impl, arity, min_arity) do
    quote do
      unless Module.has_attribute?(__MODULE__, unquote(@defn_attribute)) do
        Module.register_attribute(__MODULE__, unquote(@defn_attribute), accumulate: true)
        @before_compile Nx.Defn.SourceChecks
      end

      Module.put_attribute(
        __MODULE__,
        unquote(@defn_attribute),
        {unquote(kind), unquote(name), unquote(impl), unquote(min_arity)..unquote(arity)//1}
      )
    end
  end

  @doc false
  defmacro __before_compile__(env) do
    entries = Module.get_attribute(env.module, @defn_attribute)

    allowed =
      for {_kind, name, _impl, arities} <- entries,
          arity <- arities,
          into: MapSet.new(),
          do: {name, arity}

    for {kind, _name, impl, arities} <- entries,
        kind in [:defn, :defnp],
        {:v1, _kind, _meta, clauses} <- [Module.get_definition(env.module, {impl, arities.last})],
        {_meta, _args, _guards, body} <- clauses do
      check_local_calls!(body, allowed, env)
    end

    public =
      for {kind, name, _impl, arities} <- entries,
          kind in [:defn, :transform],
          arity <- arities,
          do: {name, arity}

    quote do
      @doc false
      def __nx_defn__, do: unquote(Enum.uniq(public))
    end
  end

  # `hook(expr, ...)`, `hook_token(token, expr, ...)`: the arguments
  # after the expressions are plain Elixir
  @plain_function_args [:hook, :hook_token]
  defp plain_from(:hook_token), do: 2
  defp plain_from(:hook), do: 1

  # Special forms and the operators the expanded code keeps in local form
  @special_forms [:__block__, :=, :fn, :->, :case, :cond, :receive, :try, :for, :with, :<-] ++
                   [:^, :%{}, :{}, :%, :<<>>, :"::", :quote, :unquote, :unquote_splicing] ++
                   [:super, :when, :__aliases__, :|, :., :__cursor__, :__MODULE__, :__DIR__] ++
                   [:__ENV__, :__CALLER__, :__STACKTRACE__, :"\\\\", :require, :import, :alias]

  defp check_local_calls!({:&, _, _}, _allowed, _env), do: :ok

  # the functions given to hooks and transforms run as plain Elixir (as in Nx)
  defp check_local_calls!({{:., _, [Nx.Defn.Kernel, fun]}, _, args}, allowed, env)
       when fun in @plain_function_args do
    args |> Enum.take(plain_from(fun)) |> Enum.each(&check_local_calls!(&1, allowed, env))
  end

  # the right side of `::` in a bitstring is a type, not a call
  defp check_local_calls!({:"::", _, [value, _type]}, allowed, env),
    do: check_local_calls!(value, allowed, env)

  defp check_local_calls!({name, meta, args}, allowed, env)
       when is_atom(name) and is_list(args) and name not in @special_forms do
    arity = length(args)

    cond do
      MapSet.member?(allowed, {name, arity}) ->
        :ok

      Module.defines?(env.module, {name, arity}) ->
        compile_error!(
          meta,
          env,
          "cannot use function #{name}/#{arity} inside defn because it was not defined with defn"
        )

      # a name made by a macro of another module (hygienic): Elixir itself reports it
      meta[:context] || meta[:import] ->
        :ok

      true ->
        compile_error!(meta, env, "undefined function #{name}/#{arity} (there is no such import)")
    end

    Enum.each(args, &check_local_calls!(&1, allowed, env))
  end

  defp check_local_calls!({left, _meta, right}, allowed, env) do
    check_local_calls!(left, allowed, env)
    if is_list(right), do: Enum.each(right, &check_local_calls!(&1, allowed, env))
  end

  defp check_local_calls!({left, right}, allowed, env) do
    check_local_calls!(left, allowed, env)
    check_local_calls!(right, allowed, env)
  end

  defp check_local_calls!(list, allowed, env) when is_list(list),
    do: Enum.each(list, &check_local_calls!(&1, allowed, env))

  defp check_local_calls!(_literal, _allowed, _env), do: :ok

  ## Remote calls, checked at trace time

  @doc false
  # puts `__remote__/3` in place of the body's calls of functions of other modules (not of
  # the library's modules, not of macros the caller required)
  def rewrite_remotes(body, env), do: rewrite(body, env)

  defp rewrite({:|>, _, [left, right]}, env), do: rewrite(Macro.pipe(left, right, 0), env)
  defp rewrite({:&, _, _} = capture, _env), do: capture
  defp rewrite({:quote, _, _} = quoted, _env), do: quoted

  defp rewrite({fun, meta, args}, env) when fun in @plain_function_args and is_list(args) do
    {checked, plain} = Enum.split(args, plain_from(fun))
    {fun, meta, Enum.map(checked, &rewrite(&1, env)) ++ plain}
  end

  defp rewrite({{:., _, [{:__aliases__, _, [:Nx, :Defn, :Kernel]}, fun]} = dot, meta, args}, env)
       when fun in @plain_function_args and is_list(args) do
    {checked, plain} = Enum.split(args, plain_from(fun))
    {dot, meta, Enum.map(checked, &rewrite(&1, env)) ++ plain}
  end

  defp rewrite({{:., dot_meta, [remote, fun]}, meta, args}, env)
       when is_atom(fun) and is_list(args) do
    module = expand_alias(remote, env)
    args = Enum.map(args, &rewrite(&1, env))

    if is_atom(module) and not is_nil(module) and checked_module?(module) and
         not macro?(module, fun, length(args), env) do
      quote do
        Nx.Defn.SourceChecks.__remote__(unquote(module), unquote(fun), unquote(args))
      end
    else
      {{:., dot_meta, [rewrite(remote, env), fun]}, meta, args}
    end
  end

  defp rewrite({form, meta, args}, env) when is_list(args),
    do: {rewrite(form, env), meta, Enum.map(args, &rewrite(&1, env))}

  defp rewrite({left, right}, env), do: {rewrite(left, env), rewrite(right, env)}
  defp rewrite(list, env) when is_list(list), do: Enum.map(list, &rewrite(&1, env))
  defp rewrite(other, _env), do: other

  ## Sites, for debug_nans

  @doc false
  # Wraps each call of the body that builds nodes (a function of the library's front end, a
  # checked remote call, an arithmetic operator) in `Nx.Defn.Expr.__at__/2` with its
  # `"file:line"`, so that `debug_nans: true` names the line of the call that made a node
  # whatever the stack: a call in tail position leaves no frame of the `defn`, and the stack
  # trace the VM keeps is 8 frames deep. Patterns, guards and calls whose arguments bind
  # variables are left as they are. (Costs a closure per call at trace time only.)
  def mark_sites(body, env), do: sites(body, Path.relative_to_cwd(env.file), env)

  @operators [:+, :-, :*, :/, :**]

  defp sites({:=, meta, [pattern, value]}, file, env),
    do: {:=, meta, [pattern, sites(value, file, env)]}

  defp sites({op, meta, [left, right]}, file, env) when op in [:->, :<-],
    do: {op, meta, [left, sites(right, file, env)]}

  defp sites({form, _, _} = ast, _file, _env) when form in [:&, :quote, :^, :when], do: ast

  # (a call whose function is itself computed, `Nx.unquote(op)(a, b)`: its arguments only)
  defp sites({{_, _, _} = form, meta, args}, file, env)
       when is_list(args) and not is_atom(elem(form, 0)),
       do: {form, meta, Enum.map(args, &sites(&1, file, env))}

  defp sites({{:., _, [remote, fun]} = dot, meta, args} = call, file, env)
       when is_atom(fun) and fun not in [:unquote, :unquote_splicing] and is_list(args) do
    module = expand_alias(remote, env)

    if is_atom(module) and module != nil and marked_module?(module, fun, length(args)) do
      at({dot, meta, Enum.map(args, &sites(&1, file, env))}, call, file)
    else
      {dot, meta, Enum.map(args, &sites(&1, file, env))}
    end
  end

  defp sites({op, meta, [left, right]} = call, file, env) when op in @operators do
    at({op, meta, [sites(left, file, env), sites(right, file, env)]}, call, file)
  end

  defp sites({form, meta, args}, file, env) when is_list(args),
    do: {form, meta, Enum.map(args, &sites(&1, file, env))}

  defp sites({left, right}, file, env), do: {sites(left, file, env), sites(right, file, env)}
  defp sites(list, file, env) when is_list(list), do: Enum.map(list, &sites(&1, file, env))
  defp sites(other, _file, _env), do: other

  @doc false
  # `ast` without the marks of mark_sites/2, for messages that print the source
  def unmark(ast) do
    Macro.prewalk(ast, fn
      {{:., _, [Nx.Defn.Expr, :__at__]}, _, [_site, {:fn, _, [{:->, _, [[], call]}]}]} ->
        call

      {{:., _, [{:__aliases__, _, [:Nx, :Defn, :Expr]}, :__at__]}, _,
       [_site, {:fn, _, [{:->, _, [[], call]}]}]} ->
        call

      node ->
        node
    end)
  end

  # `marked` (the call with its arguments marked) in Nx.Defn.Expr.__at__/2, unless the call has
  # no line or its arguments bind a variable (which a closure would keep to itself)
  defp at(marked, {_, meta, args}, file) do
    if meta[:line] && not binds?(args) do
      site = "#{file}:#{meta[:line]}"
      quote do: Nx.Defn.Expr.__at__(unquote(site), fn -> unquote(marked) end)
    else
      marked
    end
  end

  defp binds?(ast) do
    {_, found} =
      Macro.prewalk(ast, false, fn
        {:=, _, _} = node, _ -> {node, true}
        node, found -> {node, found}
      end)

    found
  end

  # the front end's functions (not its macros) and the checked remote calls (__remote__/3)
  defp marked_module?(Nx.Defn.SourceChecks, :__remote__, 3), do: true

  defp marked_module?(module, fun, arity) do
    module in [Nx, Nx.LinAlg, Nx.Random, Nx.Defn.Kernel] and Code.ensure_loaded?(module) and
      not macro_exported?(module, fun, arity)
  end

  defp expand_alias({:__aliases__, _, _} = alias, env), do: Macro.expand(alias, env)
  defp expand_alias({:__MODULE__, _, context}, env) when is_atom(context), do: env.module
  defp expand_alias(module, _env) when is_atom(module), do: module
  defp expand_alias(_other, _env), do: nil

  # the modules whose calls are left as they are: the library's front end (its functions build
  # expressions; the library's other modules are recognized at trace time), and what Elixir's
  # own expansions call (`opts[:key]` is `Access.get/2`)
  @unchecked [Nx, Nx.Defn, Nx.Defn.Kernel, Nx.LinAlg, Nx.Random, Nx.Constants, Nx.Type] ++
               [Nx.Shape, Kernel, Access, Complex]

  defp checked_module?(module), do: module not in @unchecked

  defp macro?(module, fun, arity, env) do
    module in env.requires and Code.ensure_loaded?(module) and
      macro_exported?(module, fun, arity)
  end

  @doc false
  def __remote__(module, fun, args) do
    arity = length(args)

    if Code.ensure_loaded?(module) and function_exported?(module, fun, arity) and
         not defn_function?(module, fun, arity) and not library_module?(module) do
      hint =
        if module == IO,
          do:
            ". To print the runtime value of a tensor, use print_value/2. " <>
              "To print the tensor expression, use print_expr/2",
          else: ""

      raise "cannot invoke #{Exception.format_mfa(module, fun, arity)} inside defn " <>
              "because it was not defined with defn" <> hint
    else
      # a defn or transform, a function of the library, or no such function (then Elixir's
      # own UndefinedFunctionError)
      apply(module, fun, args)
    end
  end

  defp defn_function?(module, fun, arity) do
    function_exported?(module, :__nx_defn__, 0) and {fun, arity} in module.__nx_defn__()
  end

  # Nx's modules and those of the default compiler's application (its helpers for defn)
  defp library_module?(module) do
    case Application.get_application(module) do
      :nx -> true
      nil -> false
      app -> app == Nx.Defn.Compiler.runtime_application()
    end
  end

  defp compile_error!(meta, env, description) do
    raise CompileError,
      file: env.file,
      line: meta[:line] || env.line,
      description: description
  end
end
