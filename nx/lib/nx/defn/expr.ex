defmodule Nx.Defn.Expr do
  @moduledoc """
  The expression node behind every tensor traced inside `defn`.

  An expression tensor is an ordinary `%Nx.Tensor{}` whose `data` is an
  `%Nx.Defn.Expr{}`: the tensor carries the output type and shape, the expression
  carries the operation that produces it.

    * `id` - a reference unique to this node; two tensors with the same `id` are the
      same node (the graph encoder shares them)
    * `op` - the operation, an atom from the op table of `docs/PROTOCOL.md` (4.1), or
      `:metadata` for `metadata/2` nodes (which `Nx.Defn.WireEncoder` writes as `:stop_grad`,
      `:custom_grad` or `:metadata`)
    * `args` - the input tensors, all expression tensors
    * `opts` - the op's options, exactly as on the wire (`%{index: 0}` for a
      parameter, `%{axes: [0], keep_axes: false}` for a sum, ...); for `:metadata`
      nodes `%{metadata: map}`

  A node whose value is a tuple (a `:grad` node, or a `custom_grad/3` over a tuple)
  has type `{:tuple, n}` and shape `{}`; its elements are read with `:elem` nodes.

  Every `Nx` operation computes its output type and shape and then calls
  `apply_op/4`. While `defn` code is being traced (or when an input already is an
  expression) that builds a node; otherwise the operation runs eagerly on the worker.

  ## Examples

      iex> x = Nx.Defn.Expr.parameter(0, {:f, 32}, {})
      iex> Nx.Defn.Expr.expr?(x)
      true
      iex> {x.type, x.shape}
      {{:f, 32}, {}}
  """

  @enforce_keys [:id, :op]
  defstruct [:id, :op, args: [], opts: %{}, outs: nil]

  @type t :: %__MODULE__{
          id: reference,
          op: atom,
          args: [Nx.Tensor.t()],
          opts: map,
          outs: [Nx.Tensor.t()] | nil
        }

  @tracing_key {__MODULE__, :tracing}

  ## Tracing state

  @doc """
  Returns true while `defn` code is being traced in this process.

  ## Examples

      iex> Nx.Defn.Expr.tracing?()
      false
      iex> Nx.Defn.Expr.with_tracing(fn -> Nx.Defn.Expr.tracing?() end)
      true
  """
  @spec tracing?() :: boolean
  def tracing?, do: Process.get(@tracing_key, false)

  @doc """
  Runs `fun` with tracing enabled in this process and restores the previous state.

  Every `Nx` operation called inside `fun` builds an expression instead of computing.
  """
  @spec with_tracing((() -> result)) :: result when result: term
  def with_tracing(fun) when is_function(fun, 0), do: with_process_value(@tracing_key, true, fun)

  @doc false
  # runs `fun` as if no trace were open (a nested jit forced to run now)
  def without_tracing(fun) when is_function(fun, 0),
    do: with_process_value(@tracing_key, false, fun)

  @doc false
  # runs `fun` with `key` set to `value` in the process dictionary, then puts back what was
  # there before (nothing, or the value of an enclosing call)
  def with_process_value(key, value, fun) do
    previous = Process.put(key, value)

    try do
      fun.()
    after
      if previous, do: Process.put(key, previous), else: Process.delete(key)
    end
  end

  ## Building nodes

  @doc """
  Returns true if `tensor` is an expression tensor.
  """
  @spec expr?(term) :: boolean
  def expr?(%Nx.Tensor{data: %__MODULE__{}}), do: true
  def expr?(_), do: false

  @doc false
  # The integer type of the grad/2 input (Nx.Defn.Grad marks the float copy it differentiates
  # an integer input through) that `tensor` is computed from, or nil
  @spec integer_input_type(Nx.Tensor.t()) :: Nx.Tensor.type() | nil
  def integer_input_type(tensor) do
    {type, _seen} = find_integer_input([tensor], MapSet.new())
    type
  end

  defp find_integer_input([], seen), do: {nil, seen}

  defp find_integer_input([%Nx.Tensor{data: %__MODULE__{id: id} = expr} | rest], seen) do
    cond do
      MapSet.member?(seen, id) ->
        find_integer_input(rest, seen)

      match?(%{op: :metadata, opts: %{metadata: %{integer_input: _}}}, expr) ->
        {expr.opts.metadata.integer_input, seen}

      true ->
        tensors = for %Nx.Tensor{data: %__MODULE__{}} = arg <- expr.args, do: arg
        find_integer_input(tensors ++ rest, MapSet.put(seen, id))
    end
  end

  defp find_integer_input([_other | rest], seen), do: find_integer_input(rest, seen)

  @doc """
  Builds an expression tensor for `op` over the expression tensors `args`, with the
  type, shape and axis names of the template `out`.
  """
  @spec expr(atom, [Nx.Tensor.t()], map, Nx.Tensor.t()) :: Nx.Tensor.t()
  def expr(op, args, opts, %Nx.Tensor{} = out) when is_atom(op) and is_map(opts) do
    %Nx.Tensor{
      out
      | data: %__MODULE__{id: new_id(), op: op, args: args, opts: opts},
        names: names_of(out)
    }
  end

  # axis names are front-end metadata: they never travel, and a template without one name
  # per axis has its axes unnamed
  defp names_of(%Nx.Tensor{names: names, shape: shape}) when length(names) == tuple_size(shape),
    do: names

  defp names_of(%Nx.Tensor{shape: shape}), do: names(shape)

  @scope_key {__MODULE__, :scope}
  @sites_key {__MODULE__, :sites}

  # A fresh node id, recorded in the innermost open scope (see with_scope/1), and with the
  # place of the code that made it while with_sites/1 runs.
  defp new_id do
    id = make_ref()

    case Process.get(@scope_key) do
      nil -> :ok
      scope -> Process.put(@scope_key, [id | scope])
    end

    case Process.get(@sites_key) do
      nil -> :ok
      sites -> Process.put(@sites_key, Map.put(sites, id, site()))
    end

    id
  end

  @doc """
  Runs `fun` and returns `{result, sites}`: `sites` maps the id of every node created
  meanwhile to the `"file:line"` of the code that created it (the innermost stack frame of a
  module outside Elixir, OTP and this library, usually the line of a `defn` body), or `nil`.
  Costly (a stack trace per node): for debugging (`debug_nans: true`).
  """
  @spec with_sites((() -> result)) :: {result, %{reference => String.t() | nil}}
        when result: term
  def with_sites(fun) when is_function(fun, 0) do
    previous = Process.put(@sites_key, %{})

    try do
      result = fun.()
      {result, Process.get(@sites_key)}
    after
      if previous, do: Process.put(@sites_key, previous), else: Process.delete(@sites_key)
    end
  end

  # (and the default compiler's application: its helpers called inside defn are library code)
  @library_apps [:nx, :elixir, :stdlib, :kernel, :compiler, :ex_unit, :iex, :mix, :logger]

  @site_key {__MODULE__, :site}

  @doc false
  # Runs `fun` (a call of a defn body, which Nx.Defn.SourceChecks.mark_sites/2 wrapped) with
  # `site` as the place of the nodes it makes, while with_sites/1 records them.
  def __at__(site, fun) do
    case Process.get(@sites_key) do
      nil ->
        fun.()

      _recording ->
        previous = Process.put(@site_key, site)

        try do
          fun.()
        after
          if previous, do: Process.put(@site_key, previous), else: Process.delete(@site_key)
        end
    end
  end

  # the innermost marked call of a defn body, else the innermost frame of user code
  defp site, do: Process.get(@site_key) || stack_site()

  defp stack_site do
    {:current_stacktrace, frames} = Process.info(self(), :current_stacktrace)

    Enum.find_value(frames, fn {module, _fun, _arity, info} ->
      with false <- library?(module), file when file != nil <- info[:file] do
        "#{file}:#{info[:line]}"
      else
        _ -> nil
      end
    end)
  end

  defp library?(module) do
    case :application.get_application(module) do
      {:ok, app} -> app in @library_apps or app == Nx.Defn.Compiler.runtime_application()
      :undefined -> false
    end
  end

  @doc """
  Runs `fun` and returns `{result, ids}`: `ids` is the set of the ids of every node
  created while `fun` ran (nested scopes included). `Nx.Defn.ControlFlow` uses it to tell
  the nodes of a branch or loop body from the values it closes over.
  """
  @spec with_scope((() -> result)) :: {result, MapSet.t()} when result: term
  def with_scope(fun) when is_function(fun, 0) do
    previous = Process.put(@scope_key, [])

    try do
      result = fun.()
      {result, MapSet.new(Process.get(@scope_key))}
    after
      created = Process.get(@scope_key)

      if previous,
        do: Process.put(@scope_key, created ++ previous),
        else: Process.delete(@scope_key)
    end
  end

  @doc """
  The `index`-th parameter of a traced function, a tensor of `type` and `shape`.

  ## Examples

      iex> a = Nx.Defn.Expr.parameter(1, {:s, 64}, {2})
      iex> {a.data.op, a.data.opts}
      {:parameter, %{index: 1}}
  """
  @spec parameter(non_neg_integer, Nx.Tensor.type(), tuple, keyword, [atom | nil] | nil) ::
          Nx.Tensor.t()
  def parameter(index, type, shape, vectorized_axes \\ [], names \\ nil)
      when is_integer(index) and index >= 0 do
    out = %Nx.Tensor{template(type, shape) | vectorized_axes: vectorized_axes}
    out = if names, do: %Nx.Tensor{out | names: names}, else: out
    expr(:parameter, [], %{index: index}, out)
  end

  @doc """
  A `:cotangent` leaf of `type` and `shape`: the incoming gradient inside a
  `custom_grad/3` backward function.
  """
  @spec cotangent(Nx.Tensor.type(), tuple) :: Nx.Tensor.t()
  def cotangent(type, shape), do: expr(:cotangent, [], %{}, template(type, shape))

  @doc """
  A tensor of `type` and `shape` filled with `value` (a number, `:nan`, `:infinity`
  or `:neg_infinity`).
  """
  @spec constant(number | atom, Nx.Tensor.type(), tuple) :: Nx.Tensor.t()
  def constant(value, type, shape) do
    value = normalize_value(value, type)
    %Nx.Tensor{data: data} = tensor = expr(:constant, [], %{value: value}, template(type, shape))
    # one id per value, type and shape (as in Nx): equal constants are equal expressions
    %{tensor | data: %{data | id: {:constant, value, type, shape}}}
  end

  @doc """
  The expression of a tensor or a number, as Nx 0.7.2's `Nx.Defn.Expr.tensor/1`: an
  expression is returned as it is; a concrete tensor or a number becomes a literal (see
  `to_expr/1`).

  ## Examples

      iex> Nx.Defn.Expr.tensor(Nx.tensor([1, 2])).shape
      {2}
  """
  @spec tensor(Nx.Tensor.t() | number) :: Nx.Tensor.t()
  def tensor(tensor_or_number), do: to_expr(tensor_or_number)

  @doc """
  Converts a tensor or a number to an expression tensor.

  Expressions are returned unchanged; a concrete scalar becomes a `:constant` node, any
  other concrete tensor a `:tensor` literal node; an integer becomes an `s64` constant
  and a float an `f32` constant, as `Nx.tensor/1` would type them.

  ## Examples

      iex> Nx.Defn.Expr.to_expr(2.5).data.opts
      %{value: 2.5}
      iex> Nx.Defn.Expr.to_expr(3).type
      {:s, 64}
  """
  @spec to_expr(Nx.Tensor.t() | number) :: Nx.Tensor.t()
  def to_expr(%Nx.Tensor{data: %__MODULE__{}} = tensor), do: tensor

  def to_expr(%Nx.Tensor{data: %Nx.BinaryBackend{}, vectorized_axes: [_ | _]} = tensor) do
    # the literal holds the devectorized data
    tensor
    |> Nx.devectorize(keep_names: false)
    |> to_expr()
    |> Nx.vectorize(tensor.vectorized_axes)
  end

  def to_expr(%Nx.Tensor{data: %Nx.BinaryBackend{state: binary}, type: type, shape: {}}) do
    [value] = Nx.BinaryBackend.to_list(binary, type)
    constant(value, type, {})
  end

  def to_expr(%Nx.Tensor{data: %Nx.BinaryBackend{state: binary}, type: type, shape: shape}) do
    expr(:tensor, [], %{data: binary}, template(type, shape))
  end

  # data kept elsewhere (an Nx.Backend): a literal of its values
  def to_expr(%Nx.Tensor{data: %_backend{}} = resident) do
    to_expr(Nx.backend_copy(resident))
  end

  def to_expr(number) when is_number(number) or number in [:nan, :infinity, :neg_infinity] do
    constant(number, Nx.Type.infer(number), {})
  end

  def to_expr(other) do
    raise ArgumentError,
          "expected a tensor or a number inside defn, got: #{inspect(other)}. " <>
            "Convert it with Nx.tensor/1, or use deftransform to work with non-tensor values"
  end

  defp normalize_value(value, {:f, _}) when is_integer(value), do: value * 1.0
  defp normalize_value(value, {:bf, _}) when is_integer(value), do: value * 1.0
  defp normalize_value(value, _type), do: value

  @doc false
  def template(type, shape),
    do: %Nx.Tensor{data: nil, type: type, shape: shape, names: names(shape)}

  @doc false
  # the template of a tensor: type, shape, axis names and vectorized axes, no data
  def template_of(%Nx.Tensor{type: type, shape: shape, vectorized_axes: axes} = tensor),
    do: %Nx.Tensor{template(type, shape) | vectorized_axes: axes, names: names_of(tensor)}

  defp names(shape), do: List.duplicate(nil, tuple_size(shape))

  ## The entry point used by every Nx operation

  @doc """
  Applies `op` (with `opts`, as in PROTOCOL 4.1) to `inputs`, producing a tensor shaped
  like the template `out`.

  While tracing, or when any input is an expression, returns an expression tensor (
  concrete inputs become `:constant` or `:tensor` nodes). Otherwise the operation runs
  eagerly: the inputs become parameters of a one-node graph that runs on the worker,
  and the result is a concrete tensor.
  """
  @spec apply_op(atom, [Nx.Tensor.t() | number], map, Nx.Tensor.t()) :: Nx.Tensor.t()
  def apply_op(op, inputs, opts, %Nx.Tensor{} = out) when is_atom(op) and is_list(inputs) do
    if tracing?() or Enum.any?(inputs, &expr?/1) do
      vectorized_expr(op, Enum.map(inputs, &to_expr/1), opts, out)
    else
      # traced once per op, options, output and argument signature
      eager = fn inputs -> apply_op(op, Tuple.to_list(inputs), opts, out) end
      key = {op, opts, out.type, out.shape}
      # the trace is shared by calls whose names differ: the result takes this call's names
      case Nx.Defn.Compiler.__eager__(key, eager, [List.to_tuple(inputs)]) do
        %Nx.Tensor{shape: shape} = result when shape == out.shape ->
          %Nx.Tensor{result | names: names_of(out)}

        result ->
          result
      end
    end
  end

  ## Vectorization

  # Builds the node of `op` for inputs that may be vectorized (see Nx.vectorize/2). The
  # output is vectorized over the union of the inputs' vectorized axes (by name, in order of
  # appearance); every vectorized input is brought to exactly those axes, in that order
  # (reshape and broadcast nodes on its devectorized data: as Nx 0.7.2 does, an input whose
  # own axes come in another order is reshaped, not transposed, so its data is read in the
  # union's order), and the node gets the wire options `vectorized: k` (the number of leading
  # vectorized axes of the output and of every vectorized input) and `vectorized_inputs` (which
  # inputs have them): the worker applies the op under k nested jax.vmap (PROTOCOL 4.4).
  defp vectorized_expr(op, inputs, opts, out) do
    case vectorized_union(inputs) do
      [] ->
        expr(op, inputs, opts, out)

      axes ->
        {inputs, flags} = inputs |> Enum.map(&align_input(&1, axes)) |> Enum.unzip()
        opts = Map.merge(opts, %{vectorized: length(axes), vectorized_inputs: flags})
        expr(op, inputs, opts, %Nx.Tensor{out | vectorized_axes: axes})
    end
  end

  @doc false
  # The vectorized axes of the result of an op over `tensors`: their union by name, in order
  # of appearance; a size-1 axis broadcasts against a larger one of its name (as in Nx), any
  # other pair of sizes raises.
  def vectorized_union(tensors) do
    Enum.reduce(tensors, [], fn tensor, acc ->
      Enum.reduce(vectorized_axes(tensor), acc, fn {name, size}, acc ->
        case Keyword.fetch(acc, name) do
          :error ->
            acc ++ [{name, size}]

          {:ok, ^size} ->
            acc

          {:ok, 1} ->
            Keyword.replace!(acc, name, size)

          {:ok, _other} when size == 1 ->
            acc

          {:ok, other} ->
            raise ArgumentError,
                  "cannot broadcast vectorized axis #{inspect(name)}: it has size #{other} in " <>
                    "one input and #{size} in another. Vectorized axes with the same name " <>
                    "must have the same size; rename one with Nx.revectorize/3 or " <>
                    "devectorize it with Nx.devectorize/2"
        end
      end)
    end)
  end

  defp vectorized_axes(%Nx.Tensor{vectorized_axes: axes}), do: axes
  defp vectorized_axes(_number), do: []

  @doc false
  # `tensor` (an expression) vectorized over exactly `axes`, a superset of its own vectorized
  # axes: reshaped (as Nx 0.7.2: not transposed) and broadcast as needed.
  def align_vectorized(%Nx.Tensor{vectorized_axes: axes} = tensor, axes), do: tensor

  def align_vectorized(%Nx.Tensor{vectorized_axes: []} = tensor, axes) do
    full = List.to_tuple(Keyword.values(axes) ++ Tuple.to_list(tensor.shape))
    rank = tuple_size(tensor.shape)
    bax = Enum.to_list(length(axes)..(length(axes) + rank - 1)//1)
    tensor = expr(:broadcast, [tensor], %{axes: bax}, template(tensor.type, full))
    Nx.vectorize(tensor, axes)
  end

  def align_vectorized(tensor, axes), do: elem(align_input(tensor, axes), 0)

  # {input with exactly `axes` as vectorized axes (or none), whether it has them}
  defp align_input(%Nx.Tensor{vectorized_axes: []} = input, _axes), do: {input, false}
  defp align_input(%Nx.Tensor{vectorized_axes: axes} = input, axes), do: {input, true}

  defp align_input(%Nx.Tensor{vectorized_axes: own, shape: shape} = input, axes) do
    inner = Tuple.to_list(shape)
    k = length(own)
    inner_axes = Enum.to_list(k..(k + length(inner) - 1)//1)
    # own axes in the order of `axes`
    order = Enum.sort_by(Enum.with_index(own), fn {{name, _}, _} -> position(axes, name) end)
    perm = Enum.map(order, &elem(&1, 1))
    data = Nx.devectorize(input, keep_names: false)

    data =
      if perm == Enum.to_list(0..(k - 1)) do
        data
      else
        sizes = Enum.map(order, fn {{_, size}, _} -> size end)

        expr(:reshape, [data], %{}, template(input.type, List.to_tuple(sizes ++ inner)))
      end

    full = List.to_tuple(Keyword.values(axes) ++ inner)
    kept = Enum.map(order, fn {{name, _}, _} -> position(axes, name) end)
    bax = kept ++ Enum.map(inner_axes, &(&1 - k + length(axes)))
    data = expr(:broadcast, [data], %{axes: bax}, template(input.type, full))
    {Nx.vectorize(data, axes), true}
  end

  defp position(axes, name), do: Enum.find_index(axes, fn {n, _} -> n == name end)

  ## Tuples

  @doc """
  Builds a tuple-valued node (`op` over `args`) with one element per template in
  `outs` and returns the tuple of its `:elem` expressions.
  """
  @spec tuple(atom, [Nx.Tensor.t()], map, [Nx.Tensor.t()]) :: tuple
  def tuple(op, args, opts, outs) when op in [:grad, :metadata, :hook] do
    tuple_node(op, args, opts, outs)
  end

  def tuple(op, args, opts, outs) do
    case vectorized_union(args) do
      [] ->
        tuple_node(op, args, opts, outs)

      _axes when op in [:cond, :while, :range_loop] ->
        raise ArgumentError,
              "#{op} is not supported with vectorized tensors yet (a vectorized tensor reaches " <>
                "it as a predicate, state or captured value). Devectorize first with " <>
                "Nx.devectorize/2, or use Nx.select/3 instead of if/cond"

      axes ->
        {args, flags} = args |> Enum.map(&align_input(&1, axes)) |> Enum.unzip()
        opts = Map.merge(opts, %{vectorized: length(axes), vectorized_inputs: flags})
        outs = Enum.map(outs, &%Nx.Tensor{&1 | vectorized_axes: axes})
        tuple_node(op, args, opts, outs)
    end
  end

  defp tuple_node(op, args, opts, outs) do
    node = expr(op, args, opts, template({:tuple, length(outs)}, {}))
    # the element templates travel with the node: Nx.Defn.WireEncoder declares them as its
    # `out`
    node = put_in(node.data.outs, Enum.map(outs, &template_of/1))

    outs
    |> Enum.with_index()
    |> Enum.map(fn {out, index} -> expr(:elem, [node], %{index: index}, out) end)
    |> List.to_tuple()
  end

  ## Metadata

  @doc """
  Wraps `expr` in a metadata node carrying `metadata` (a map).

  The node is the identity for evaluation. The keys `:stop_grad` and `:custom_grad`
  change differentiation (see `Nx.Defn.Kernel.stop_grad/1` and
  `Nx.Defn.Kernel.custom_grad/3`); any other key lets gradients through unchanged.
  `expr` may be a tensor or a tuple/map of tensors; a tuple with `:custom_grad` becomes
  one tuple-valued node, anything else one node per tensor.

  ## Examples

      iex> x = Nx.Defn.Expr.parameter(0, {:f, 32}, {})
      iex> m = Nx.Defn.Expr.metadata(x, %{oops: true})
      iex> {m.data.op, m.data.opts}
      {:metadata, %{metadata: %{oops: true}}}
  """
  @spec metadata(term, map) :: term
  def metadata(expr, metadata) when is_map(metadata) do
    case expr do
      tuple when is_tuple(tuple) and is_map_key(metadata, :custom_grad) ->
        args = tuple |> Tuple.to_list() |> Enum.map(&to_expr/1)

        tuple(
          :metadata,
          args,
          %{metadata: metadata},
          Enum.map(args, &template_of/1)
        )

      _ ->
        Nx.Defn.Composite.traverse(expr, fn tensor ->
          tensor = to_expr(tensor)
          expr(:metadata, [tensor], %{metadata: metadata}, tensor)
        end)
    end
  end

  ## Hooks

  @hooks_key {__MODULE__, :hooks}

  @doc """
  Hooks `expr` (a tensor or a container of tensors): returns the same values, and while the
  traced function runs on the worker, `fun` (or the function the jit's `hooks:` option gives
  for `name`) is called in the calling process with their concrete values, in the same
  container. One `:hook` node carries every tensor of `expr` (PROTOCOL 4.5); the hook is the
  identity for gradients.

  At trace time the function is recorded under the node's index (see `with_hooks/1`); outside a trace
  `fun` is called at once on `expr`.
  """
  @spec hook(term, atom | nil, (term -> term) | nil) :: term
  def hook(expr, name, fun) when is_atom(name) and (is_function(fun, 1) or is_nil(fun)) do
    leaves = Nx.Defn.Composite.flatten_list([expr])

    cond do
      leaves == [] ->
        raise ArgumentError,
              "hook/3 expects a tensor or a container of tensors, got: #{Kernel.inspect(expr)}"

      tracing?() or Enum.any?(leaves, &expr?/1) ->
        args = Enum.map(leaves, &to_expr/1)
        hooks = Process.get(@hooks_key, %{})
        index = map_size(hooks)
        template = Nx.Defn.Composite.traverse(expr, &template_of(to_expr(&1)))
        Process.put(@hooks_key, Map.put(hooks, index, {name, fun, template}))
        elems = tuple(:hook, args, %{index: index, name: name}, Enum.map(args, &template_of/1))
        Nx.Defn.Composite.fill(expr, Tuple.to_list(elems))

      true ->
        if fun, do: fun.(expr)
        expr
    end
  end

  @doc """
  Runs `fun` with a fresh hook table and returns `{result, hooks}`: every hook created while
  `fun` ran, `%{index => {name, fun, template}}` (`template` is the hooked container with
  template tensors).
  """
  @spec with_hooks((() -> result)) :: {result, map} when result: term
  def with_hooks(fun) when is_function(fun, 0) do
    with_process_value(@hooks_key, %{}, fn ->
      result = fun.()
      {result, Process.get(@hooks_key)}
    end)
  end

  ## Inspection

  @doc """
  Renders an expression tensor as an Nx-like listing: the parameters, then one line per
  node in topological order, each with its type and shape. Scalar constants appear
  inline as their value. The sub-graphs of control flow (`cond` branches, loop bodies,
  reducers) are listed indented under their node, with their own names and a `return` line;
  a vectorized node shows its vectorized sizes before its type (`vectorized[2] f32[3]`).

  ## Examples

      iex> a = Nx.Defn.Expr.parameter(0, {:f, 32}, {})
      iex> b = Nx.Defn.Expr.expr(:exp, [a], %{}, a)
      iex> Nx.Defn.Expr.inspect(b, %Inspect.Opts{}) |> String.split("\\n")
      ["Nx.Defn.Expr", "parameter a:0  f32", "b = exp a      f32"]
  """
  @spec inspect(Nx.Tensor.t(), Inspect.Opts.t()) :: String.t()
  def inspect(%Nx.Tensor{} = tensor, %Inspect.Opts{} = _opts) do
    {nodes, outputs} = Nx.Defn.WireEncoder.nodes(tensor)
    Enum.join(["Nx.Defn.Expr" | listing(nodes, outputs, "")], "\n")
  end

  defp listing(nodes, outputs, indent) do
    {names, listed} = listed_names(nodes, outputs)

    lines =
      Enum.map(listed, fn {id, op, inputs, opts, out} ->
        {subgraphs, opts} = Enum.split_with(opts, &subgraph_opt?/1)
        {vectorized, opts} = Map.pop(Map.new(opts), :vectorized, 0)
        # (operand_type: the wire's copy of what the inputs' types already say)
        opts = Map.drop(opts, [:vectorized_inputs, :operand_type])
        left = describe(names[id], op, Enum.map(inputs, &names[&1]), opts, names)
        {left, out_string(out, vectorized), subgraph_lines(subgraphs, indent)}
      end)

    width = lines |> Enum.map(fn {left, _, _} -> String.length(left) end) |> Enum.max(fn -> 0 end)

    Enum.flat_map(lines, fn {left, right, nested} ->
      [indent <> String.pad_trailing(left, width + 2) <> right | nested]
    end)
  end

  defp subgraph_opt?({_key, {:nx_jax_graph, _, _, _}}), do: true
  defp subgraph_opt?({_key, [{:nx_jax_graph, _, _, _} | _]}), do: true
  defp subgraph_opt?(_), do: false

  # each sub-graph under its node: a header, its own listing, the names it returns
  defp subgraph_lines(subgraphs, indent) do
    subgraphs
    |> Enum.sort()
    |> Enum.flat_map(fn
      {key, graphs} when is_list(graphs) ->
        graphs
        |> Enum.with_index()
        |> Enum.flat_map(fn {graph, i} -> subgraph_block("#{key}[#{i}]", graph, indent) end)

      {key, graph} ->
        subgraph_block(Atom.to_string(key), graph, indent)
    end)
  end

  defp subgraph_block(title, {:nx_jax_graph, _, nodes, outputs}, indent) do
    inner = indent <> "    "
    lines = listing(nodes, outputs, inner)
    {listed_names, _} = listed_names(nodes, outputs)
    returned = Enum.map_join(outputs, ", ", &listed_names[&1])
    ["#{indent}  #{title}:" | lines] ++ ["#{inner}return #{returned}"]
  end

  # the names of a graph's nodes and the nodes listed; scalar constants used as inputs are
  # printed inline, as their value
  defp listed_names(nodes, outputs) do
    {inline, listed} =
      Enum.split_with(nodes, fn {id, op, _, _, out} ->
        op == :constant and match?({_, {}}, out) and id not in outputs
      end)

    names =
      Map.new(inline, fn {id, _, _, %{value: value}, {type, {}}} ->
        {id, Inspect.Nx.Tensor.format_number(value, type)}
      end)

    {listed |> Enum.with_index() |> Enum.into(names, fn {n, i} -> {elem(n, 0), var_name(i)} end),
     listed}
  end

  defp describe(name, :parameter, [], %{index: index}, _names), do: "parameter #{name}:#{index}"

  defp describe(name, op, inputs, opts, names) do
    details =
      opts
      |> Enum.sort()
      |> Enum.map(fn {key, value} -> "#{key}: #{describe_opt(key, value, names)}" end)

    case Enum.join(inputs ++ details, ", ") do
      "" -> "#{name} = #{op}"
      rest -> "#{name} = #{op} #{rest}"
    end
  end

  defp describe_opt(key, ids, names) when key in [:wrt, :cotangents, :grads] do
    "[" <> Enum.map_join(ids, ", ", &names[&1]) <> "]"
  end

  defp describe_opt(:data, binary, _names) when is_binary(binary),
    do: "<#{byte_size(binary)} bytes>"

  defp describe_opt(_key, value, _names), do: Kernel.inspect(value)

  defp out_string(out, 0), do: out_string(out)

  defp out_string(outs, k) when is_list(outs),
    do: "{" <> Enum.map_join(outs, ", ", &out_string(&1, k)) <> "}"

  defp out_string({type, shape}, k) do
    {sizes, inner} = shape |> Tuple.to_list() |> Enum.split(k)

    "vectorized" <>
      Enum.map_join(sizes, &"[#{&1}]") <> " " <> out_string({type, List.to_tuple(inner)})
  end

  defp out_string(outs) when is_list(outs),
    do: "{" <> Enum.map_join(outs, ", ", &out_string/1) <> "}"

  defp out_string({{kind, size}, shape}) do
    "#{kind}#{size}" <> Enum.map_join(Tuple.to_list(shape), &"[#{&1}]")
  end

  # a, b, ..., z, aa, ab, ...
  defp var_name(index) when index < 26, do: <<?a + index>>
  defp var_name(index), do: var_name(div(index, 26) - 1) <> <<?a + rem(index, 26)>>
end
