defmodule Nx.Defn.ControlFlow do
  @moduledoc """
  Builds the nodes that carry sub-graphs: `:cond` (`if/2` and `cond/1` on a scalar
  tensor condition), `:while` and `:range_loop` (`Nx.Defn.Kernel.while/4`), `:reduce` and
  `:window_reduce` (`Nx.reduce/4`, `Nx.window_reduce/5`). See `docs/PROTOCOL.md` (4.3).

  A branch, loop condition, loop body or reducer is an Elixir function: it is called once,
  at trace time, on fresh parameter expressions (one per state leaf, loop index or
  reduced scalar) inside `Nx.Defn.Expr.with_scope/1`. The nodes created during that call
  form the sub-graph; any other expression it reaches (a value of the enclosing trace the
  function closes over) becomes a *capture*: an explicit input of the node and an extra
  parameter of the sub-graph, so every sub-graph is closed. Constants, literal tensors and
  iotas of the enclosing trace are copied into the sub-graph instead.

  In the node's `opts` a sub-graph is `{:subgraph, outputs, params}`: `params` lists the
  expressions that stand for the sub-graph's parameters `0..k-1` (its own parameters, then
  the captures); `Nx.Defn.WireEncoder` encodes it as a graph term of its own.
  """

  alias Nx.Defn.{Composite, Expr}

  ## if / cond

  @site_key {__MODULE__, :site}
  # the entries a vectorized if/cond branch being traced runs for (a vectorized u8)
  @open_key {__MODULE__, :open_entries}

  @doc false
  # `if`/`while` of a defn body run here with their place in the source, so that a mistake
  # in them raises a CompileError naming that place, as Nx does
  def at_site(site, fun), do: Expr.with_process_value(@site_key, site, fun)

  # inside a defn body (at_site/2): a CompileError at its place; a direct call of this
  # module's functions: an ArgumentError
  defp invalid!(message) do
    case Process.get(@site_key) do
      {file, line} -> raise CompileError, file: file, line: line, description: message
      nil -> raise ArgumentError, message
    end
  end

  @doc false
  # invalid!/1 for Nx.Defn.Kernel's `if` (a predicate that is no tensor, number or boolean)
  def __invalid__(message), do: invalid!(message)

  @doc false
  # the branch of a defn `cond` after its last clause: reached (traced) when no clause is
  # known to hold
  def __no_true_clause__ do
    invalid!(
      "cond/if expects at least one branch to always evaluate to true: end the cond with " <>
        "a `true ->` clause"
    )
  end

  @doc false
  # `if` inside defn (Nx.Defn.Kernel.if/2): a cond of two clauses
  def branch(condition, on_true, on_false),
    do: cond_clauses([{condition, on_true}, {true, on_false}])

  @doc false
  # `cond` (and `if`) inside defn (Nx.Defn.Kernel's, and defn's rewrite of `cond`), as Nx 0.7.2's: `clauses` are `{predicate, branch}` in
  # order, every predicate already evaluated. Clauses whose predicate is known to be false
  # are dropped; when the first one left is known to be true, only its branch is traced.
  # Otherwise every branch left is traced and they become one conditional (their types
  # merged together, numbers as literals), whose last clause must be known to be true.
  def cond_clauses(clauses) do
    clauses =
      for {predicate, branch} <- clauses,
          predicate = predicate(predicate),
          Kernel.!=(predicate, false),
          do: {predicate, branch}

    case clauses do
      [] -> __no_true_clause__()
      [{true, branch} | _] -> branch.()
      _ -> dynamic_cond(clauses)
    end
  end

  # true/false when known at trace time, else the tensor
  defp predicate(%Nx.Tensor{} = tensor) do
    case known(tensor) do
      {:ok, known} -> known
      :error -> constant_predicate(tensor)
    end
  end

  defp predicate(value) when Kernel.or(is_boolean(value), is_number(value)) do
    {:ok, known} = known(value)
    known
  end

  defp predicate(%Complex{} = value), do: nonzero?(value)

  # (Nx 0.7.2 refuses nil and any other term: `if opts[:flag]` with the option missing must
  # not silently take the else branch)
  defp predicate(value) do
    __invalid__(
      "cond in defn expects the predicate to be true, false, or a scalar tensor, got: " <>
        inspect(value)
    )
  end

  # a scalar constant expression is known too (Nx 0.7.2 eliminates those clauses)
  defp constant_predicate(
         %Nx.Tensor{shape: {}, vectorized_axes: [], data: %Expr{op: :constant}} = tensor
       ),
       do: nonzero?(tensor.data.opts.value)

  defp constant_predicate(tensor), do: tensor

  defp dynamic_cond(clauses) do
    {last_predicate, _} = List.last(clauses)

    cond do
      Kernel.!=(last_predicate, true) ->
        __no_true_clause__()

      Enum.all?(clauses, fn {predicate, _} ->
        Kernel.or(
          Kernel.==(predicate, true),
          match?(%Nx.Tensor{shape: {}, vectorized_axes: []}, predicate)
        )
      end) ->
        {dynamic, [{true, last} | _]} = Enum.split_while(clauses, &Kernel.!=(elem(&1, 0), true))
        # (the clauses after the first one known to hold are traced, and take part in the
        # type of the result, as in Nx)
        ignored = Enum.drop(clauses, Kernel.+(length(dynamic), 1))
        cond_(dynamic, last, Enum.map(ignored, &elem(&1, 1)))

      true ->
        # a vectorized or non-scalar predicate: one if at a time
        {dynamic, [{true, last} | _]} = Enum.split_while(clauses, &Kernel.!=(elem(&1, 0), true))

        dynamic
        |> Enum.reverse()
        |> Enum.reduce(last, fn {predicate, branch}, otherwise ->
          fn -> tensor_if(predicate, branch, otherwise) end
        end)
        |> then(& &1.())
    end
  end

  defp tensor_if(%Nx.Tensor{shape: {}} = condition, on_true, on_false),
    do: if_(condition, on_true, on_false)

  defp tensor_if(condition, on_true, on_false), do: select(condition, on_true, on_false)

  defp select(condition, on_true, on_false) do
    {on_true, on_false} = {on_true.(), on_false.()}
    true_leaves = Nx.Defn.Composite.flatten_list([on_true])
    false_leaves = Nx.Defn.Composite.flatten_list([on_false])

    Kernel.if Kernel.or(
                Kernel.!=(length(true_leaves), length(false_leaves)),
                Kernel.==(true_leaves, [])
              ) do
      raise ArgumentError,
            "both branches of an if/cond on a tensor condition must return tensors in the " <>
              "same container (the else branch is required), got: #{inspect(on_true)} and #{inspect(on_false)}"
    end

    selected = Enum.zip_with(true_leaves, false_leaves, &aligned_select(condition, &1, &2))
    Nx.Defn.Composite.fill(on_true, selected)
  end

  @doc false
  # whether `value` is nonzero, when that is known at trace time: a boolean, a number, a
  # concrete (not vectorized) scalar tensor
  def known(value) when is_boolean(value), do: {:ok, value}
  def known(value) when is_number(value), do: {:ok, Kernel.!=(value, 0)}

  def known(%Nx.Tensor{shape: {}, vectorized_axes: [], data: %Nx.BinaryBackend{}} = tensor),
    do: {:ok, nonzero?(Nx.to_number(tensor))}

  def known(_value), do: :error

  @doc false
  def nonzero?(value) when is_number(value), do: Kernel.!=(value, 0)
  def nonzero?(%Complex{re: re, im: im}), do: Kernel.or(nonzero?(re), nonzero?(im))
  # (:nan, :infinity, :neg_infinity)
  def nonzero?(_non_finite), do: true

  @doc """
  `if` on a scalar condition: only the taken branch runs (a `:cond` node; JAX `lax.cond`),
  so the other one cannot poison values or gradients.

  Both branches must return the same container; each leaf gets the merged type and the
  broadcast shape of the two branches' leaves, and the union of their vectorized axes
  (branches may use vectorized values: the node takes them devectorized).

  A vectorized condition (one scalar per entry) selects entry by entry instead
  (`Nx.select/3` over the branches' leaves); a branch runs only when some entry takes it (as
  in Nx 0.7.2: its hooks fire then only), and where it runs, a branch with an infinite
  derivative poisons the gradient of the entries that do not take it.
  """
  @spec if_(Nx.Tensor.t() | number, (() -> term), (() -> term)) :: term
  def if_(condition, on_true, on_false) do
    pred = Expr.to_expr(condition)

    if pred.shape != {} do
      raise ArgumentError,
            "a cond/if condition must be a scalar tensor, got shape #{inspect(pred.shape)}"
    end

    if pred.vectorized_axes == [] do
      cond_node(pred, on_true, on_false)
    else
      # each branch runs (a scalar cond) only when some entry takes it, as in Nx; inside a
      # branch, the entries that took it are the open ones (for the ifs and conds nested there)
      open = Process.get(@open_key)
      takes_true = if open, do: Nx.logical_and(open, pred), else: Nx.not_equal(pred, 0)
      takes_false = if open, do: Nx.logical_and(open, Nx.equal(pred, 0)), else: Nx.equal(pred, 0)
      true_result = open_branch(takes_true, on_true)
      false_result = open_branch(takes_false, on_false)
      same_branches!(true_result, false_result)
      true_leaves = Composite.flatten_list([true_result])
      false_leaves = Composite.flatten_list([false_result])
      selected = Enum.zip_with(true_leaves, false_leaves, &aligned_select(pred, &1, &2))
      Composite.fill(true_result, selected)
    end
  end

  # Nx.select/3 with its operands' vectorized axes first put in one order (that of their
  # union): Nx's element-wise ops pair the axes of operands that have the same vectorized
  # axes in different orders by position, not by name (as Nx 0.7.2 does), which would mix
  # the entries of branches vectorized on several axes
  defp aligned_select(pred, on_true, on_false) do
    axes = Expr.vectorized_union(Enum.map([pred, on_true, on_false], &Expr.to_expr/1))
    Nx.select(in_order(pred, axes), in_order(on_true, axes), in_order(on_false, axes))
  end

  # `leaf` with its vectorized axes in the order they have in `axes` (which holds them all)
  defp in_order(%Nx.Tensor{vectorized_axes: [_, _ | _] = own} = leaf, axes) do
    names = Keyword.keys(own)
    order = for {name, _size} <- axes, name in names, do: name

    if names == order do
      leaf
    else
      moved = Enum.map(order, fn name -> Enum.find_index(names, &(&1 == name)) end)
      inner = Enum.to_list(length(names)..(length(names) + tuple_size(leaf.shape) - 1)//1)

      leaf
      |> Nx.devectorize(keep_names: false)
      |> Nx.transpose(axes: moved ++ inner)
      |> Nx.vectorize(Enum.map(order, &{&1, Keyword.fetch!(own, &1)}))
    end
  end

  defp in_order(leaf, _axes), do: leaf

  defp open_branch(takes, branch) do
    any = takes |> Nx.devectorize(keep_names: false) |> Nx.any()
    cond_node(any, fn -> Expr.with_process_value(@open_key, takes, branch) end, :zeros)
  end

  defp same_branches!(true_result, false_result) do
    if skeleton(true_result) != skeleton(false_result) do
      invalid!(
        "cond/if expects all branches to return compatible tensor types: both branches of " <>
          "an if/cond on a tensor condition must return the same container (tensors or " <>
          "numbers in the same tuples and maps), got: #{inspect(true_result)} and " <>
          inspect(false_result)
      )
    end
  end

  @doc false
  # `cond` with scalar, not vectorized predicates (cond_clauses/1): `clauses` are
  # `{predicate, branch}`, `last` the branch taken when none holds, `ignored` branches after
  # it (traced, and part of the type, as in Nx 0.7.2, never taken). Every branch is traced
  # once, in order; each leaf of the result gets the merged type of all the branches' leaves
  # (numbers merged as literals) and their broadcast shape. The clauses become nested `:cond`
  # nodes, the else branch of each one holding the next.
  def cond_(clauses, last, ignored \\ []) do
    traced = Enum.map(clauses, fn {predicate, branch} -> {predicate, trace(branch)} end)
    {last_result, _} = last_traced = trace(last)
    ignored = Enum.map(ignored, &trace/1)
    results = Enum.map(traced, fn {_, {result, _}} -> result end) ++ [last_result]
    results = results ++ Enum.map(ignored, &elem(&1, 0))
    [first | rest] = results
    Enum.each(rest, &same_branches!(first, &1))

    if Composite.flatten_list([first]) == [] do
      first
    else
      leaves = Enum.map(results, &Composite.flatten_list([&1]))
      # (Nx folds the types from the last clause's, then the others' in order)
      templates = Enum.zip_with([List.last(leaves) | Enum.drop(leaves, -1)], &merge_templates/1)

      {outs, _scope} =
        traced
        |> Enum.reverse()
        |> Enum.reduce(leaves_of(last_traced), fn {predicate, branch}, otherwise ->
          {outs, built} =
            Expr.with_scope(fn ->
              predicate
              |> Expr.to_expr()
              |> build_cond(leaves_of(branch), otherwise, templates)
              |> elem(0)
            end)

          {_, true_scope} = branch
          {_, false_scope} = otherwise
          {outs, built |> MapSet.union(true_scope) |> MapSet.union(false_scope)}
        end)

      Composite.fill(first, outs)
    end
  end

  defp leaves_of({result, scope}), do: {Composite.flatten_list([result]), scope}

  # `on_false` :zeros: the other branch gives zeros shaped like `on_true`'s result
  defp cond_node(pred, on_true, on_false) do
    {true_result, true_scope} = trace(on_true)
    on_false = if on_false == :zeros, do: fn -> zeros_like(true_result) end, else: on_false
    {false_result, false_scope} = trace(on_false)
    same_branches!(true_result, false_result)

    true_leaves = Composite.flatten_list([true_result])
    false_leaves = Composite.flatten_list([false_result])

    if true_leaves == [] do
      true_result
    else
      templates = Enum.zip_with(false_leaves, true_leaves, &merge_templates([&1, &2]))

      {outs, _scope} =
        build_cond(pred, {true_leaves, true_scope}, {false_leaves, false_scope}, templates)

      Composite.fill(true_result, outs)
    end
  end

  # the `:cond` node over traced branches (their leaves and scopes) with the output
  # `templates`: its outputs, and the scope of the nodes made to fit the branches to them
  defp build_cond(pred, {true_leaves, true_scope}, {false_leaves, false_scope}, templates) do
    {[true_leaves, false_leaves], fit_scope} =
      Expr.with_scope(fn ->
        Enum.map([true_leaves, false_leaves], fn leaves ->
          Enum.zip_with(leaves, templates, &fit(&1, &2))
        end)
      end)

    scope = true_scope |> MapSet.union(false_scope) |> MapSet.union(fit_scope)
    captures = captures(true_leaves ++ false_leaves, scope)

    branches = [
      {:subgraph, true_leaves, captures},
      {:subgraph, false_leaves, captures}
    ]

    inputs = [pred | Enum.map(captures, &node_input/1)]
    outs = Expr.tuple(:cond, inputs, %{branches: branches}, templates)
    {Tuple.to_list(outs), fit_scope}
  end

  defp zeros_like(container) do
    Composite.traverse(container, fn leaf ->
      %Nx.Tensor{type: type, shape: shape, vectorized_axes: axes} = Expr.to_expr(leaf)
      zeros = Nx.broadcast(Nx.tensor(0, type: type), shape)
      if axes == [], do: zeros, else: vectorize_as(zeros, axes)
    end)
  end

  # The template of one leaf of a cond's result from that leaf of each branch: the type as
  # Nx 0.7.2 folds it over the branches (from the first given, `Nx.Shared.binary_type/2`: a
  # number merges into a tensor's type as a literal, two numbers give the type of their sum),
  # the broadcast shape, the union of the vectorized axes.
  defp merge_templates([first | rest] = leaves) do
    type = Enum.reduce(rest, first, &binary_type(&2, &1)) |> leaf_type()
    exprs = Enum.map(leaves, &Expr.to_expr/1)
    shape = exprs |> Enum.map(& &1.shape) |> Enum.reduce(&Nx.Shape.binary_broadcast(&2, &1))
    axes = Expr.vectorized_union(exprs)
    %{Expr.template(type, shape) | vectorized_axes: axes}
  end

  defp binary_type(left, right) when is_number(left) and is_number(right),
    do: Nx.Type.infer(left + right)

  defp binary_type(left, right) when is_number(left),
    do: Nx.Type.merge_number(leaf_type(right), left)

  defp binary_type(left, right) when is_number(right),
    do: Nx.Type.merge_number(leaf_type(left), right)

  defp binary_type(left, right), do: Nx.Type.merge(leaf_type(left), leaf_type(right))

  defp leaf_type({_kind, _size} = type), do: type
  defp leaf_type(%Nx.Tensor{type: type}), do: type
  defp leaf_type(number) when is_number(number), do: Nx.Type.infer(number)
  defp leaf_type(other), do: Expr.to_expr(other).type

  defp fit(leaf, %Nx.Tensor{type: type, shape: shape, vectorized_axes: axes}) do
    # (a number literal is a constant of the merged type, which holds it)
    leaf =
      if is_number(leaf) and elem(type, 0) != :c,
        do: Expr.constant(leaf, type, {}),
        else: leaf |> Expr.to_expr() |> Nx.as_type(type)

    leaf = if leaf.shape == shape, do: leaf, else: Nx.broadcast(leaf, shape)
    if leaf.vectorized_axes == axes, do: leaf, else: leaf |> in_order(axes) |> vectorize_as(axes)
  end

  # `leaf` with exactly the vectorized axes `axes` (a superset of its own, in that order):
  # a select on a vectorized all-true predicate broadcasts it without touching a value
  defp vectorize_as(leaf, axes) do
    sizes = axes |> Keyword.values() |> List.to_tuple()
    all = 1 |> Nx.tensor(type: {:u, 8}) |> Nx.broadcast(sizes) |> Nx.vectorize(axes)
    Nx.select(all, leaf, leaf)
  end

  defp skeleton(container), do: Composite.traverse(container, fn _ -> :leaf end)

  ## while

  @doc """
  `while initial, condition do body end`: `condition.(state)` (a scalar) is evaluated
  before every iteration; `body.(state)` returns the next state, the same container with
  the same types and shapes. Returns the final state.

  Options: `:max_iterations` (a positive integer) bounds the loop: it then lowers to a
  `lax.scan` of that length that stops updating the state once the condition is false,
  which JAX can reverse-differentiate; without it the loop is a `lax.while_loop` whose
  reverse mode recomputes the steps from checkpoints kept by the forward pass (the exact
  gradient of the steps taken, each step run about three times; see docs/COMPATIBILITY.md,
  "Control flow").
  `:unroll` belongs to generators: with a condition it is refused, as in Nx.
  """
  @spec while(term, (term -> term), (term -> term), keyword) :: term
  def while(initial, condition, body, opts \\ []) do
    if Keyword.has_key?(opts, :unroll) do
      invalid!(
        "options are not supported on while with conditions, only with generators, got: " <>
          inspect(Keyword.take(opts, [:unroll]))
      )
    end

    opts = Keyword.validate!(opts, [:max_iterations])
    max = opts[:max_iterations]

    unless max == nil or (is_integer(max) and max > 0) do
      raise ArgumentError,
            "while/4 expects :max_iterations to be a positive integer, got: #{inspect(max)}"
    end

    init = state_leaves!(initial)

    traced =
      trace(fn ->
        params = parameters(init)
        state = Composite.fill(initial, params)

        case condition.(state) do
          %Nx.Tensor{shape: {}, vectorized_axes: [_ | _] = axes} ->
            {:vectorized, axes}

          pred ->
            {params, predicate!(pred), body_leaves!(body.(state), initial, init)}
        end
      end)

    case traced do
      {{:vectorized, axes}, _scope} -> while_vectorized(initial, condition, body, opts, axes)
      {traced, scope} -> while_traced(initial, init, traced, scope, max)
    end
  end

  # A condition with one scalar per entry of vectorized axes (Nx 0.7.2's vectorized while):
  # every state tensor gains those axes (first, where it lacks them), the loop runs while any
  # entry's condition holds, and an entry whose condition no longer holds keeps its state.
  defp while_vectorized(initial, condition, body, opts, axes) do
    initial = with_vectorized_axes(initial, axes)

    any_entry = fn state ->
      state |> condition.() |> Nx.devectorize(keep_names: false) |> Nx.any()
    end

    step = fn state ->
      holds = condition.(state)
      next = body.(state)

      if skeleton(next) != skeleton(state) do
        body_leaves!(next, initial, state_leaves!(initial))
      end

      kept =
        Enum.zip_with(Composite.flatten_list([next]), Composite.flatten_list([state]), fn new,
                                                                                          old ->
          Nx.select(holds, new, old)
        end)

      Composite.fill(state, kept)
    end

    while(initial, any_entry, step, opts)
  end

  # every tensor of the container broadcast to hold the vectorized `axes` (those it lacks
  # come first, in their order)
  defp with_vectorized_axes(container, []), do: container

  defp with_vectorized_axes(container, axes) do
    sizes = axes |> Keyword.values() |> List.to_tuple()
    entries = Nx.vectorize(Nx.broadcast(Nx.tensor(0, type: {:u, 8}), sizes), axes)

    Composite.traverse(container, fn leaf ->
      [_entries, leaf] = Nx.broadcast_vectors([entries, leaf])
      leaf
    end)
  end

  defp while_traced(initial, init, {params, pred, next}, scope, max) do
    captures = captures([pred | next], scope)
    sub = params ++ captures

    opts = %{
      condition: {:subgraph, [pred], sub},
      body: {:subgraph, next, sub},
      max_iterations: max
    }

    outs = Expr.tuple(:while, Enum.map(init ++ captures, &node_input/1), opts, templates(init))
    Composite.fill(initial, Tuple.to_list(outs))
  end

  @doc """
  `while initial, i <- first..last//step do body end`: runs `body.(state, i)` once per
  element of the range (integers known at trace time; `i` is an `s64` scalar). Lowers to
  `lax.scan`, so gradients flow through it. `while initial, part <- tensor do ... end` runs
  once per entry of the tensor's first axis, `part` being that entry (as in Nx 0.7.2).
  """
  @spec while_range(term, Range.t() | Nx.Tensor.t(), (term, Nx.Tensor.t() -> term), keyword) ::
          term
  def while_range(initial, range_or_tensor, body, opts \\ [])

  # `part <- tensor`: once per entry of the tensor's first axis, `part` that entry
  def while_range(initial, %Nx.Tensor{shape: shape} = tensor, body, opts) do
    if shape == {} do
      raise ArgumentError,
            "while/3 with a tensor generator expects a tensor of rank 1 or more (it walks " <>
              "the first axis), got a scalar: #{inspect(tensor)}"
    end

    entry = fn index ->
      tensor |> Nx.slice_along_axis(index, 1, axis: 0) |> Nx.squeeze(axes: [0])
    end

    # a vectorized generator gives every state tensor its vectorized axes (first), as in Nx
    initial = with_vectorized_axes(initial, tensor.vectorized_axes)
    while_range(initial, 0..(elem(shape, 0) - 1)//1, &body.(&1, entry.(&2)), opts)
  end

  def while_range(initial, range, body, opts) do
    Keyword.validate!(opts, unroll: false)

    {first, step} =
      case range do
        %Range{first: first, step: step} when is_integer(first) and is_integer(step) ->
          {first, step}

        other ->
          raise ArgumentError,
                "while/3 with a generator expects a range of integers known at trace time " <>
                  "(first..last//step), got: #{inspect(other)}. Use the condition form " <>
                  "(while state, i < n do ... end) for bounds computed inside defn"
      end

    init = state_leaves!(initial)
    count = Range.size(range)

    if count == 0 do
      Composite.fill(initial, init)
    else
      {{params, index, next}, scope} =
        trace(fn ->
          params = parameters(init)
          index = Expr.parameter(length(params), {:s, 64}, {})
          state = Composite.fill(initial, params)
          {params, index, body_leaves!(body.(state, index), initial, init)}
        end)

      captures = captures(next, scope)
      opts = %{body: {:subgraph, next, params ++ [index | captures]}, first: first, step: step}
      opts = Map.put(opts, :count, count)
      inputs = Enum.map(init ++ captures, &node_input/1)
      outs = Expr.tuple(:range_loop, inputs, opts, templates(init))
      Composite.fill(initial, Tuple.to_list(outs))
    end
  end

  defp state_leaves!(initial) do
    case Composite.flatten_list([initial]) do
      [] ->
        raise ArgumentError,
              "the initial state of while must hold at least one tensor or number, got: " <>
                inspect(initial)

      leaves ->
        Enum.map(leaves, &Expr.to_expr/1)
    end
  end

  defp parameters(leaves) do
    leaves
    |> Enum.with_index()
    |> Enum.map(fn {leaf, index} ->
      Expr.parameter(index, leaf.type, leaf.shape, leaf.vectorized_axes)
    end)
  end

  defp templates(leaves) do
    Enum.map(leaves, &%{Expr.template(&1.type, &1.shape) | vectorized_axes: &1.vectorized_axes})
  end

  defp predicate!(pred) do
    case pred do
      %Nx.Tensor{shape: {}, vectorized_axes: [_ | _]} ->
        raise ArgumentError,
              "the condition of while must not be vectorized (one scalar for every entry), " <>
                "got: #{inspect(pred)}. Reduce it to one scalar with Nx.all/1 or Nx.any/1"

      %Nx.Tensor{shape: {}, type: {kind, _}} when kind != :tuple ->
        Expr.to_expr(pred)

      number when is_number(number) ->
        Expr.to_expr(number)

      other ->
        invalid!(
          "condition must be a scalar tensor, got: #{inspect(other)}, consider using " <>
            "Nx.all/1 or Nx.any/1 to obtain a scalar predicate from tensor"
        )
    end
  end

  defp body_leaves!(result, initial, init) do
    if skeleton(result) != skeleton(initial) do
      body_mismatch!(
        "the body must return the same container as the initial state " <>
          "(#{inspect(skeleton(initial))}), got: #{inspect(result)}"
      )
    end

    result
    |> then(&Composite.flatten_list([&1]))
    |> Enum.zip(init)
    |> Enum.with_index()
    |> Enum.map(fn {{leaf, %Nx.Tensor{type: type, shape: shape} = start}, index} ->
      leaf = Expr.to_expr(leaf)

      cond do
        leaf.shape != shape ->
          body_mismatch!(
            "the body must keep the shape of state leaf #{index}: expected " <>
              "#{inspect(shape)}, got #{inspect(leaf.shape)}"
          )

        leaf.vectorized_axes != start.vectorized_axes ->
          body_mismatch!(
            "the body must keep the vectorized axes of state leaf #{index}: " <>
              "expected #{inspect(start.vectorized_axes)}, got " <>
              "#{inspect(leaf.vectorized_axes)}. Vectorize the initial state the same way"
          )

        leaf.type == type ->
          leaf

        is_number(Enum.at(Composite.flatten_list([initial]), index)) ->
          body_mismatch!(
            type_message(index, type, leaf.type, " (the number in the initial state)")
          )

        true ->
          body_mismatch!(type_message(index, type, leaf.type, ""))
      end
    end)
  end

  defp body_mismatch!(detail) do
    invalid!(
      "the do-block in while must return tensors with the same shape, type, and names as " <>
        "the initial arguments: " <> detail
    )
  end

  defp type_message(index, type, got, where) do
    "the body must keep the type of state leaf #{index}#{where}: expected " <>
      "#{Nx.Type.to_string(type)}, got #{Nx.Type.to_string(got)}. Give the initial value " <>
      "the type the body computes (for example Nx.tensor(0.0, type: #{inspect(got)})) or " <>
      "convert the result with Nx.as_type/2"
  end

  ## reduce and window_reduce

  @doc false
  # Called by Nx.reduce/4 and Nx.window_reduce/5 with `tensor` and `acc` already cast to the
  # output type: traces `fun` on two scalars of that type and builds the node.
  def reduce(op, tensor, acc, fun, opts, %Nx.Tensor{type: type} = out) do
    {{params, result}, scope} =
      trace(fn ->
        params = [Expr.parameter(0, type, {}), Expr.parameter(1, type, {})]

        result =
          case apply(fun, params) do
            %Nx.Tensor{shape: {}} = result ->
              Nx.as_type(Expr.to_expr(result), type)

            number when is_number(number) ->
              Expr.constant(number, type, {})

            # (Nx 0.7.2 raises a RuntimeError naming the shape in this case)
            %Nx.Tensor{shape: shape} ->
              raise "#{op} function must return a scalar tensor, got: #{inspect(shape)}"

            other ->
              raise ArgumentError,
                    "the function given to Nx.#{op} must return a scalar tensor, got: " <>
                      inspect(other)
          end

        {params, result}
      end)

    captures = captures([result], scope)
    opts = Map.put(opts, :reducer, {:subgraph, [result], params ++ captures})
    Expr.expr(op, [Expr.to_expr(tensor), Expr.to_expr(acc) | captures], opts, out)
  end

  ## sub-graphs

  defp trace(fun), do: Expr.with_scope(fn -> Expr.with_tracing(fun) end)

  @doc """
  Traces `fun.(params)` in a scope of its own, `params` being one parameter expression per
  tensor of `templates` (its type, shape and vectorized axes, numbered from 0): returns
  `{{params, result}, scope}`, what a sub-graph is made of (its outputs come from `result`,
  its captures from `captures/2` with `scope`). For ops of other modules that carry sub-graphs.
  """
  @spec trace_on_parameters([Nx.Tensor.t()], ([Nx.Tensor.t()] -> result)) ::
          {{[Nx.Tensor.t()], result}, MapSet.t()}
        when result: term
  def trace_on_parameters(templates, fun) when is_function(fun, 1) do
    trace(fn ->
      params = parameters(templates)
      {params, fun.(params)}
    end)
  end

  @doc """
  `tensor` as a node carrying sub-graphs takes it as an input: a vectorized value travels
  devectorized, the same node seen whole (docs/PROTOCOL.md 4.4); the sub-graph's parameter
  for it (`trace_on_parameters/2`) and the node's outputs keep the vectorized axes.
  """
  @spec node_input(Nx.Tensor.t()) :: Nx.Tensor.t()
  def node_input(%Nx.Tensor{vectorized_axes: []} = tensor), do: tensor
  def node_input(tensor), do: Nx.devectorize(tensor, keep_names: false)

  @doc """
  The expressions `outputs` reach that were not created in `scope` (a set of node ids from
  `Nx.Defn.Expr.with_scope/1`), in the order they are first reached: the values a sub-graph
  closes over. Constants, literal tensors and iotas are not captured (they are copied).
  """
  @spec captures([Nx.Tensor.t()], MapSet.t()) :: [Nx.Tensor.t()]
  def captures(outputs, scope) do
    {captures, _seen} =
      Enum.reduce(outputs, {[], MapSet.new()}, &collect(Expr.to_expr(&1), &2, scope))

    Enum.reverse(captures)
  end

  defp collect(%Nx.Tensor{data: %Expr{id: id} = expr} = tensor, {captures, seen}, scope) do
    cond do
      MapSet.member?(seen, id) ->
        {captures, seen}

      MapSet.member?(scope, id) ->
        Enum.reduce(refs(expr), {captures, MapSet.put(seen, id)}, &collect(&1, &2, scope))

      expr.op in [:constant, :tensor, :iota] ->
        {captures, MapSet.put(seen, id)}

      true ->
        {[tensor | captures], MapSet.put(seen, id)}
    end
  end

  defp refs(%Expr{op: :metadata, args: args, opts: %{metadata: %{custom_grad: {i, c, g}}}}),
    do: args ++ i ++ c ++ g

  defp refs(%Expr{args: args}), do: args
end
