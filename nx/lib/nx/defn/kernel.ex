defmodule Nx.Defn.Kernel do
  @moduledoc """
  The functions available inside `defn` bodies in place of `Kernel`'s numeric
  operators, plus the gradient and tracing helpers. It exports what Nx 0.7.2's module does,
  name by name (`test_elixir/kernel_exports_test.exs`), since defn bodies import it: a name
  more would clash with a function of that name defined beside a `defn`. `grad/1,2` and
  `value_and_grad/1,2,3` are `Nx.Defn`'s, imported with it (as in Nx).

  `+`, `-`, `*`, `/`, `**` and unary `-` work on tensors and numbers: two numbers fold
  to a plain number (as in `Kernel`), anything else becomes the `Nx` operation
  (`Nx.add/2`, `Nx.subtract/2`, `Nx.multiply/2`, `Nx.divide/2`, `Nx.pow/2`,
  `Nx.negate/1`). `==`, `!=`, `<`, `<=`, `>`, `>=` compare element-wise when a side is
  a tensor, and give a `u8` scalar tensor for two numbers or booleans (as Nx does). `if/2` on a tensor condition selects between branches (see `if/2`); `defn`
  rewrites `cond` into the same conditional, clause by clause. A `defn` body imports this module
  in place of `Kernel`, whose other functions (`length/1`, `apply/3`, ...) belong in a
  `deftransform`; the closures the body writes (`fn`, `&(...)`, given to `hook/2` say) see
  `Kernel` too. `use Nx.Defn.Kernel` does the same for any code.

  ## Examples

  In a `defn` body, or after `use Nx.Defn.Kernel`:

      iex> 1 + 2 * 3
      7
      iex> 1 / 4
      0.25
  """

  import Kernel,
    except: [
      {:.., 2},
      {:"..//", 3},
      +: 2,
      -: 2,
      *: 2,
      /: 2,
      **: 2,
      -: 1,
      +: 1,
      ==: 2,
      !=: 2,
      <: 2,
      <=: 2,
      >: 2,
      >=: 2,
      elem: 2,
      if: 2,
      then: 2,
      tap: 2,
      max: 2,
      min: 2,
      rem: 2,
      div: 2,
      and: 2,
      or: 2,
      not: 1
    ]

  alias Nx.Defn.{ControlFlow, Expr, Grad}

  @doc """
  `use Nx.Defn.Kernel` makes the caller's code read as a `defn` body does: `Kernel`'s
  functions are no longer imported, this module's are, and `Kernel` names this module (so
  `Kernel.+(a, b)` is the tensor-aware `+`). Nx's own tests use it around
  `doctest Nx.Defn.Kernel`.
  """
  defmacro __using__(_opts) do
    quote do
      import Kernel, only: []
      import Nx.Defn.Kernel, except: unquote(Nx.Defn.kernel_special_forms()), warn: false
      alias Nx.Defn.Kernel, as: Kernel
    end
  end

  # The operators are macros, as in Nx: in a guard (`case` clauses inside defn, defn heads)
  # they are Kernel's, elsewhere they call the tensor-aware function named after them.
  @binary_operators [
    ==: {:__equal__, "Equal, element-wise when a side is a tensor (`Nx.equal/2`)."},
    !=: {:__not_equal__, "Not equal, element-wise when a side is a tensor (`Nx.not_equal/2`)."},
    <: {:__less_than__, "Less than, element-wise when a side is a tensor (`Nx.less/2`)."},
    <=:
      {:__less_than_equal_to__,
       "At most, element-wise when a side is a tensor (`Nx.less_equal/2`)."},
    >: {:__more_than__, "Greater than, element-wise when a side is a tensor (`Nx.greater/2`)."},
    >=:
      {:__more_than_equal_to__,
       "At least, element-wise when a side is a tensor (`Nx.greater_equal/2`)."}
  ]

  for {op, {fun, doc}} <- @binary_operators do
    @doc """
    #{doc} Two numbers (`true`/`false` counting as 1/0) give a `u8` scalar tensor, as
    in Nx; a guard gives `Kernel.#{op}/2`.
    """
    defmacro unquote(op)(left, right) do
      Kernel.if(Macro.Env.in_guard?(__CALLER__),
        do: {{:., [], [Kernel, unquote(op)]}, [], [left, right]},
        else: {{:., [], [Nx.Defn.Kernel, unquote(fun)]}, [], [left, right]}
      )
    end
  end

  @doc "Negates `value`; see `Nx.negate/1` (`Kernel.-/1` for a number and in a guard)."
  defmacro -value do
    cond do
      # a number literal folds now, so `-2` is also a pattern (`case x do -2 -> ... end`)
      is_number(value) -> Kernel.-(value)
      Macro.Env.in_guard?(__CALLER__) -> quote(do: Kernel.-(unquote(value)))
      true -> quote(do: Nx.Defn.Kernel.__unary_minus__(unquote(value)))
    end
  end

  @doc "Returns `value` unchanged (`Kernel.+/1` in a guard)."
  defmacro +value do
    cond do
      is_number(value) -> value
      Macro.Env.in_guard?(__CALLER__) -> quote(do: Kernel.+(unquote(value)))
      true -> quote(do: Nx.Defn.Kernel.__unary_plus__(unquote(value)))
    end
  end

  @doc false
  def __unary_plus__(value), do: value

  # `+ - * /` are functions, as in Nx 0.7.2 (so `&+/2` captures them; they are not guards)
  @doc "Adds `left` and `right`; see `Nx.add/2`. Two numbers give `Kernel.+/2`."
  def left + right when Kernel.and(is_number(left), is_number(right)), do: Kernel.+(left, right)
  def left + right, do: Nx.add(left, right)

  @doc "Subtracts `right` from `left`; see `Nx.subtract/2`. Two numbers give `Kernel.-/2`."
  def left - right when Kernel.and(is_number(left), is_number(right)), do: Kernel.-(left, right)
  def left - right, do: Nx.subtract(left, right)

  @doc "Multiplies `left` and `right`; see `Nx.multiply/2`. Two numbers give `Kernel.*/2`."
  def left * right when Kernel.and(is_number(left), is_number(right)), do: Kernel.*(left, right)
  def left * right, do: Nx.multiply(left, right)

  @doc """
  Divides `left` by `right` (always a float division); see `Nx.divide/2`. Two numbers give
  `Kernel.//2`.
  """
  def left / right when Kernel.and(is_number(left), is_number(right)), do: Kernel./(left, right)
  def left / right, do: Nx.divide(left, right)

  @doc false
  def __unary_minus__(value) when is_number(value), do: Kernel.-(value)
  def __unary_minus__(value), do: Nx.negate(value)

  @doc "Raises `left` to the power `right`; see `Nx.pow/2`."
  def left ** right when Kernel.and(is_number(left), is_number(right)), do: Kernel.**(left, right)
  def left ** right, do: Nx.pow(left, right)

  for {fun, nx_fun, op} <- [
        {:__equal__, :equal, :==},
        {:__not_equal__, :not_equal, :!=},
        {:__less_than__, :less, :<},
        {:__less_than_equal_to__, :less_equal, :<=},
        {:__more_than__, :greater, :>},
        {:__more_than_equal_to__, :greater_equal, :>=}
      ] do
    @doc false
    def unquote(fun)(%Nx.Tensor{} = left, right), do: Nx.unquote(nx_fun)(left, right)
    def unquote(fun)(left, %Nx.Tensor{} = right), do: Nx.unquote(nx_fun)(left, right)

    # as in Nx: true/false count as 1/0, and two numbers give a u8 scalar tensor
    def unquote(fun)(left, right) when Kernel.or(is_boolean(left), is_boolean(right)),
      do: unquote(fun)(truth(left), truth(right))

    def unquote(fun)(left, right) when Kernel.and(is_number(left), is_number(right)),
      do: Nx.tensor(Kernel.if(Kernel.unquote(op)(left, right), do: 1, else: 0), type: {:u, 8})

    def unquote(fun)(left, right), do: Kernel.unquote(op)(left, right)
  end

  for {fun, {nx_fun, doc}} <- [
        max: {:max, "The element-wise maximum"},
        min: {:min, "The element-wise minimum"},
        rem: {:remainder, "The element-wise remainder of the division (sign of `left`)"},
        div: {:quotient, "The element-wise integer division, truncated towards zero"}
      ] do
    @doc """
    #{doc} of `left` and `right` when either is a tensor (`Nx.#{nx_fun}/2`); two
    numbers give `Kernel.#{fun}/2`.

    ## Examples

        iex> Nx.Defn.Kernel.#{fun}(7, 2)
        #{apply(Kernel, fun, [7, 2])}
    """
    def unquote(fun)(left, right) when Kernel.and(is_number(left), is_number(right)),
      do: Kernel.unquote(fun)(left, right)

    def unquote(fun)(left, right), do: Nx.unquote(nx_fun)(left, right)
  end

  @doc """
  Element-wise logical AND: a `u8` tensor, 1 where both sides are nonzero. Both sides are
  evaluated (no short circuit); `true`/`false` count as 1/0, and two numbers give a scalar
  `u8` tensor. In a guard it is `Kernel.and/2`.

  ## Examples

      defn both_positive(a, b), do: a > 0 and b > 0
  """
  defmacro left and right do
    Kernel.if(Macro.Env.in_guard?(__CALLER__),
      do: quote(do: Kernel.and(unquote(left), unquote(right))),
      else: quote(do: Nx.Defn.Kernel.__and__(unquote(left), unquote(right)))
    )
  end

  @doc """
  Element-wise logical OR: a `u8` tensor, 1 where either side is nonzero (both sides are
  evaluated); see `and/2`. In a guard it is `Kernel.or/2`.
  """
  defmacro left or right do
    Kernel.if(Macro.Env.in_guard?(__CALLER__),
      do: quote(do: Kernel.or(unquote(left), unquote(right))),
      else: quote(do: Nx.Defn.Kernel.__or__(unquote(left), unquote(right)))
    )
  end

  @doc """
  Element-wise logical NOT: a `u8` tensor, 1 where `value` is zero; `true`/`false` give
  0/1. In a guard it is `Kernel.not/1`.
  """
  defmacro not value do
    Kernel.if(Macro.Env.in_guard?(__CALLER__),
      do: quote(do: Kernel.not(unquote(value))),
      else: quote(do: Nx.Defn.Kernel.__not__(unquote(value)))
    )
  end

  # As in Nx 0.7.2: `true`/`false` count as 1/0; numbers (and, here, scalars known at trace
  # time, such as the `u8` that `n == 3` gives for a number `n`) give a `u8` scalar known at
  # trace time, so that an `if`/`cond` on them still picks its branch while tracing; anything
  # else is the element-wise `Nx` operation. (`not` of a tensor is always the operation: Nx
  # 0.7.2 does not fold it.)
  @doc false
  def __and__(left, right) do
    case {ControlFlow.known(left), ControlFlow.known(right)} do
      {{:ok, l}, {:ok, r}} -> u8(Kernel.and(l, r))
      _ -> Nx.logical_and(truth(left), truth(right))
    end
  end

  @doc false
  def __or__(left, right) do
    case {ControlFlow.known(left), ControlFlow.known(right)} do
      {{:ok, l}, {:ok, r}} -> u8(Kernel.or(l, r))
      _ -> Nx.logical_or(truth(left), truth(right))
    end
  end

  @doc false
  def __not__(value) when Kernel.or(is_boolean(value), is_number(value)) do
    {:ok, known} = ControlFlow.known(value)
    u8(Kernel.not(known))
  end

  def __not__(value), do: Nx.logical_not(value)

  defp u8(true), do: Nx.tensor(1, type: {:u, 8})
  defp u8(false), do: Nx.tensor(0, type: {:u, 8})

  defp truth(true), do: 1
  defp truth(false), do: 0
  defp truth(value), do: value

  for {op, nx_fun, bitwise} <- [
        {:&&&, :bitwise_and, "AND"},
        {:|||, :bitwise_or, "OR"},
        {:<<<, :left_shift, "left shift"},
        {:>>>, :right_shift, "right shift (arithmetic for signed types)"}
      ] do
    @doc """
    Element-wise bitwise #{bitwise} (`Nx.#{nx_fun}/2`); two integers give `Bitwise.#{op}/2`.
    """
    def unquote(op)(left, right) when Kernel.and(is_integer(left), is_integer(right)),
      do: Bitwise.unquote(op)(left, right)

    def unquote(op)(left, right), do: Nx.unquote(nx_fun)(left, right)
  end

  @doc "Element-wise bitwise NOT (`Nx.bitwise_not/1`); an integer gives `Bitwise.~~~/1`."
  def ~~~value when is_integer(value), do: Bitwise.~~~(value)
  def ~~~value, do: Nx.bitwise_not(value)

  @doc """
  Returns the element at zero-based `index` of the Elixir tuple `tuple`.

  ## Examples

      iex> Nx.Defn.Kernel.elem({:a, :b}, 1)
      :b
  """
  def elem(tuple, index) when is_tuple(tuple), do: :erlang.element(Kernel.+(index, 1), tuple)

  @doc """
  `if` that also works on tensor conditions (`cond/1` inside `defn` follows the same rules,
  clause by clause).

  A condition known at trace time (`true`, `false`, a number, a concrete scalar such as the
  `u8` that `n == 3` gives for a number `n`, `and`/`or` of those) picks its branch while
  tracing: the other branch is not traced, as in Nx. A scalar tensor condition traces both
  branches into a conditional node (`lax.cond` on the worker): only the taken branch runs,
  for values and for gradients, so `if x > 0, do: Nx.sqrt(x), else: 0.0` has gradient 0 at
  `x = 0`. The branches must return the same container (tuples and maps of tensors); each
  leaf gets the broadcast shape of the branches' leaves and their merged type, a number
  literal merging into the type of the tensors as in Nx 0.7.2 (`Nx.Type.merge_number/2`:
  `if x > 0, do: u8_tensor` is `u8`, the missing `else` being `0`). A nonzero condition picks
  `do`.

  A non-scalar tensor condition selects element by element (`Nx.select/3` over both
  branches, an extension of Nx): both branches are computed, so a branch with an infinite
  derivative still poisons the gradient with NaN there. `nil` and any other term raise, as in
  Nx.

  ## Examples

      defn relu(x), do: if(x > 0, do: x, else: 0.0)
  """
  defmacro if(condition, clauses) do
    inside_defn!(__CALLER__, :if, 2)

    unless Kernel.and(Keyword.keyword?(clauses), Keyword.has_key?(clauses, :do)) do
      Kernel.raise(ArgumentError, "if/2 inside defn expects `do` and optionally `else` clauses")
    end

    # the condition is evaluated first, on its own, so a variable it binds is visible in the
    # branches; without `else`, the else branch is 0, as in Nx
    quote do
      condition = unquote(condition)

      Nx.Defn.ControlFlow.at_site({unquote(__CALLER__.file), unquote(__CALLER__.line)}, fn ->
        Nx.Defn.ControlFlow.branch(
          condition,
          fn -> unquote(clauses[:do]) end,
          fn -> unquote(Keyword.get(clauses, :else, 0)) end
        )
      end)
    end
  end

  # `if` and `while` trace tensors, so they belong to defn bodies (and `cond`, which defn
  # rewrites into `if`): anywhere else they raise as in Nx, instead of silently tracing
  defp inside_defn!(%Macro.Env{function: {name, _arity}}, fun, arity) do
    Kernel.unless String.starts_with?(Atom.to_string(name), "__defn:") do
      not_inside_defn!(fun, arity)
    end
  end

  defp inside_defn!(%Macro.Env{}, fun, arity), do: not_inside_defn!(fun, arity)

  defp not_inside_defn!(fun, arity) do
    Kernel.raise("cannot invoke Nx.Defn.Kernel.#{fun}/#{arity} because you are not inside a defn")
  end

  @doc """
  The range `first..last` (`Range.new/2`), as `Kernel.../2` builds it; inside defn it gives
  the ranges of `while` generators and of slicing (`t[1..2]`).

  ## Examples

      iex> Nx.Defn.Kernel.".."(1, 3)
      1..3
  """
  def first..last, do: Range.new(first, last)

  @doc """
  The range `first..last//step` (`Range.new/3`).

  ## Examples

      iex> Nx.Defn.Kernel."..//"(1, 5, 2)
      1..5//2
  """
  def first..last//step, do: Range.new(first, last, step)

  @doc """
  Loops inside `defn`; see `Nx.Defn.ControlFlow.while/4` and `while_range/4`.

      while {x, i = 0}, i < 10 do
        {x * 2, i + 1}
      end

      while {acc = 0.0, x}, i <- 1..5 do
        {acc + x * i, x}
      end

  `initial` is the state: a variable, `pattern = value`, or a tuple of these; `name = value`
  inside it binds `name` in the condition and the body to the state leaf that starts as
  `value`, and after the loop to `value` itself (as in Nx). The body returns the next state (same container, types and shapes); the loop returns the
  final state. With a condition, the loop runs while it is nonzero (a `lax.while_loop`;
  pass `max_iterations: n` to make it differentiable, see `Nx.Defn.ControlFlow.while/4`).
  With `i <- first..last//step` (integers known at trace time) it runs once per element
  (a `lax.scan`, differentiable); with `part <- tensor`, once per entry of the tensor's first
  axis. `unroll:` is accepted with generators only.
  """
  defmacro while(initial, condition_or_generator, opts \\ [], clauses) do
    inside_defn!(__CALLER__, :while, length(opts) + 3)

    body =
      case clauses do
        [do: body] ->
          body

        other ->
          source = Macro.to_string(Nx.Defn.SourceChecks.unmark(other))

          Kernel.raise(
            ArgumentError,
            "expected last argument of \"while\" to be a do-block, got: #{source}"
          )
      end

    initial_pattern!(initial)

    pattern =
      Macro.prewalk(initial, fn
        {:=, _, [pattern, _value]} -> pattern
        other -> other
      end)

    # the state is evaluated where the while is, so `name = value` in it also binds `name`
    # there (to the initial value), as in Nx
    touch = touch_vars(pattern)

    # one function for the condition and the body (`which` picks), as Nx's __while__/6 takes
    {generator, fun} =
      case condition_or_generator do
        {:<-, _, [index, range]} ->
          {quote(do: {:generator, unquote(range)}),
           quote do
             fn :body, {unquote(pattern), unquote(index)} ->
               unquote(touch)
               unquote(body)
             end
           end}

        condition ->
          {:condition,
           quote do
             fn
               :condition, unquote(pattern) ->
                 unquote(touch)
                 unquote(condition)

               :body, unquote(pattern) ->
                 unquote(touch)
                 unquote(body)
             end
           end}
      end

    quote do
      initial_state = unquote(initial)
      unquote(touch)

      Nx.Defn.Kernel.__while__(
        unquote(__CALLER__.file),
        unquote(__CALLER__.line),
        initial_state,
        unquote(generator),
        unquote(fun),
        unquote(opts)
      )
    end
  end

  @doc false
  # the loop of while/4: `generator` is :condition (`fun.(:condition, state)` decides) or
  # {:generator, range_or_tensor} (`fun.(:body, {state, element})`)
  def __while__(file, line, initial, generator, fun, opts) do
    Nx.Defn.ControlFlow.at_site({file, line}, fn ->
      case generator do
        :condition ->
          Nx.Defn.ControlFlow.while(initial, &fun.(:condition, &1), &fun.(:body, &1), opts)

        {:generator, range} ->
          Nx.Defn.ControlFlow.while_range(initial, range, &fun.(:body, {&1, &2}), opts)
      end
    end)
  end

  # the state: a variable, `pattern = value`, or a tuple of these (as Nx 0.7.2 accepts)
  defp initial_pattern!(initial) do
    valid? = fn
      _valid?, {name, _meta, context} when Kernel.and(is_atom(name), is_atom(context)) -> true
      _valid?, {:=, _meta, [_pattern, _value]} -> true
      valid?, {:{}, _meta, elements} -> Enum.all?(elements, &valid?.(valid?, &1))
      valid?, {left, right} -> Kernel.and(valid?.(valid?, left), valid?.(valid?, right))
      _valid?, _other -> false
    end

    Kernel.unless valid?.(valid?, initial) do
      source = Macro.to_string(Nx.Defn.SourceChecks.unmark(initial))

      Kernel.raise(
        ArgumentError,
        "invalid initial argument for \"while\". Expected a variable, a variable assignment, or a tuple of the same, got: #{source}"
      )
    end
  end

  # `_ = {a, b}` for the pattern's variables: a condition need not use them all
  defp touch_vars(pattern) do
    {_, vars} =
      Macro.prewalk(pattern, [], fn
        {name, _meta, context} = var, acc when is_atom(name) and is_atom(context) ->
          Kernel.if(String.starts_with?(Atom.to_string(name), "_"),
            do: {var, acc},
            else: {var, [var | acc]}
          )

        other, acc ->
          {other, acc}
      end)

    quote do: _ = {unquote_splicing(Enum.reverse(vars))}
  end

  @doc """
  Calls `fun` on `value` at trace time and returns `value` (for side effects in a
  pipeline, such as printing an expression).

      x |> Nx.exp() |> tap(&print_expr/1) |> Nx.sum()
  """
  defmacro tap(value, fun) do
    quote bind_quoted: [value: value, fun: fun] do
      _ = fun.(value)
      value
    end
  end

  @doc """
  Calls `fun` on `value` at trace time and returns the result: a way to run plain Elixir
  over the trace (on shapes, types, options or expressions) in a pipeline.

      x |> Nx.exp() |> then(&Nx.subtract(1, &1))
  """
  defmacro then(value, fun) do
    quote do: unquote(fun).(unquote(value))
  end

  @doc """
  Validates the keyword list `keyword` against `values` (atoms, or `{key, default}`
  tuples) and returns it with the defaults filled in, in the order of `values`; raises for
  a key that `values` does not list. Runs at trace time, on options of a `defn`.

  ## Examples

      iex> Nx.Defn.Kernel.keyword!([axis: 1], [:axis, keep_axis: false])
      [axis: 1, keep_axis: false]

      iex> Nx.Defn.Kernel.keyword!([axes: 1], [:axis])
      ** (ArgumentError) unknown key :axes in [axes: 1], expected one of [:axis]
  """
  def keyword!(keyword, values) when is_list(keyword) and is_list(values) do
    unless Keyword.keyword?(keyword) do
      Kernel.raise(
        ArgumentError,
        "expected a keyword list as the first argument of keyword!/2, got: #{Kernel.inspect(keyword)}"
      )
    end

    keys =
      Enum.map(values, fn
        {key, _default} -> key
        key when is_atom(key) -> key
      end)

    case Enum.find(keyword, fn {key, _} -> Kernel.not(key in keys) end) do
      {key, _} ->
        Kernel.raise(
          ArgumentError,
          "unknown key #{Kernel.inspect(key)} in #{Kernel.inspect(keyword)}, expected one of #{Kernel.inspect(keys)}"
        )

      nil ->
        Enum.flat_map(values, fn
          {key, default} ->
            [{key, Keyword.get(keyword, key, default)}]

          key ->
            case Keyword.fetch(keyword, key) do
              {:ok, value} -> [{key, value}]
              :error -> []
            end
        end)
    end
  end

  def keyword!(keyword, _values) do
    Kernel.raise(
      ArgumentError,
      "expected a keyword list as the first argument of keyword!/2, got: #{Kernel.inspect(keyword)}"
    )
  end

  @doc """
  Stops gradients: the value of `expr` is unchanged, its gradient is zero.

  `expr` may be a tensor or a tuple/map of tensors. It is
  `Nx.Defn.Expr.metadata(expr, %{stop_grad: true})`.

  ## Examples

      defn f(x), do: stop_grad(Nx.exp(x)) + x * x
      # Nx.Defn.grad(3.0, &f/1) => 6.0 (the exp term contributes nothing)
  """
  def stop_grad(expr), do: Expr.metadata(expr, %{stop_grad: true})

  @doc """
  Gives `expr` a custom gradient with respect to `inputs`.

  The value is that of `expr` (a tensor or a tuple of tensors). In the backward pass,
  `fun` receives the incoming gradient `g` (a tuple when `expr` is a tuple) and returns
  a list with one gradient per input, in order; nothing else `expr` depends on gets a
  gradient through it. `fun` runs at trace time, on parameters standing for `g`.

  ## Examples

      defn log1pexp(t), do: Nx.log1p(Nx.exp(t))

      defn custom_log1pexp(t) do
        custom_grad(log1pexp(t), [t], fn g -> [g * (1 - 1 / (1 + Nx.exp(t)))] end)
      end

      # Nx.Defn.grad(100.0, &custom_log1pexp/1) => 1.0 (plain autodiff gives NaN)
  """
  def custom_grad(expr, inputs, fun), do: Grad.custom_grad(expr, inputs, fun)

  @doc """
  Prints the expression `expr` (as `IO.inspect/2` does, with `opts`) and returns it. With
  `dot: true` it prints the graph as Graphviz DOT text instead (`Nx.Defn.Dot`; `:title`).
  """
  def print_expr(expr, opts \\ []) do
    case Keyword.get(opts, :dot, false) do
      true ->
        IO.puts(Nx.Defn.Dot.to_dot(expr, Keyword.take(opts, [:title])))
        expr

      _ ->
        IO.inspect(expr, Keyword.delete(opts, :dot))
    end
  end

  @doc """
  Hooks `expr`: returns it unchanged, and when its value is computed on the worker calls a
  function with it in the process that called the `defn` (or jitted function).

  `hook(expr, fun)` calls `fun`; `hook(expr, name)` calls the function the jit's `hooks:`
  option gives for `name` (`Nx.Defn.jit(f, hooks: %{name => fun})`) and does nothing without
  one; `hook(expr, name, fun)` calls `fun` unless `hooks:` overrides `name`. `expr` may be a
  tensor or a tuple/map of tensors (the function gets the same container of concrete tensors).
  The function's result is ignored.

  A hook fires each time its value is computed: once per call, once per iteration inside a
  `while` loop, only in the taken branch of an `if`/`cond`. For gradients it is the identity:
  a hook inside a `grad`'ed function fires once, with the forward value; a hook on
  `grad(...)` gets the gradient; a hook inside a `custom_grad/3` gradient function gets its
  backward value. If the function raises, the worker finishes the computation and the call
  raises that error once the result arrives (later hooks of that call are skipped).

  ## Examples

      defn f(x), do: x |> Nx.exp() |> hook(&IO.inspect/1) |> Nx.sum()

      Nx.Defn.jit(fn x -> hook(x * 2, :doubled) end, hooks: %{doubled: &send(pid, &1)})
  """
  def hook(expr, name_or_fun)
  def hook(expr, fun) when is_function(fun, 1), do: Expr.hook(expr, unnamed_hook(), fun)
  def hook(expr, name) when is_atom(name), do: Expr.hook(expr, name, nil)

  @doc "Hooks `expr` under `name` with the default function `fun`; see `hook/2`."
  def hook(expr, name, fun) when is_atom(name) and is_function(fun, 1),
    do: Expr.hook(expr, name, fun)

  @doc """
  Hooks `expr` through `token` (a `Nx.Defn.Token` from `create_token/0`) and returns
  `{token, expr}`: the new token and `expr` itself, not hooked. The hook fires only once the
  token is attached to a value that is computed (`attach_token/2`), so it may hook a value
  the result does not use.

  With an atom it is a named hook (the jit's `hooks:` option gives its function, as for
  `hook/2`); with a function, an unnamed hook calling it. `hook_token/4` gives both.

  ## Examples

      defn add_and_mult(a, b) do
        token = create_token()
        {token, _add} = hook_token(token, a + b, :add, &IO.inspect({:add, &1}))
        {token, mult} = hook_token(token, a * b, :mult, &IO.inspect({:mult, &1}))
        attach_token(token, mult)
      end
  """
  def hook_token(token, expr, name_or_fun)

  def hook_token(%Nx.Defn.Token{} = token, expr, name) when is_atom(name),
    do: add_token_hook(token, expr, name, nil)

  def hook_token(%Nx.Defn.Token{} = token, expr, fun) when is_function(fun, 1),
    do: add_token_hook(token, expr, unnamed_hook(), fun)

  @doc "Hooks `expr` through `token` under `name` with the default function `fun`; see `hook_token/3`."
  def hook_token(%Nx.Defn.Token{} = token, expr, name, fun)
      when Kernel.and(is_atom(name), is_function(fun, 1)),
      do: add_token_hook(token, expr, name, fun)

  # a hook given only a function gets a name of its own, as in Nx (`:hook_` and a unique
  # integer), so the jit's `hooks:` option cannot replace it by accident
  defp unnamed_hook, do: :"hook_#{System.unique_integer([:positive])}"

  # while tracing, numbers become tensors (Nx returns the container of expressions)
  defp add_token_hook(token, expr, name, fun) do
    expr =
      Kernel.if(Expr.tracing?(),
        do: Nx.Defn.Composite.traverse(expr, &Expr.to_expr/1),
        else: expr
      )

    {Nx.Defn.Token.add_hook(token, expr, name, fun), expr}
  end

  @doc """
  Creates an empty token of hooks; see `hook_token/3` and `attach_token/2`.

  ## Examples

      iex> Nx.Defn.Kernel.create_token()
      #Nx.Defn.Token<[]>
  """
  def create_token, do: Nx.Defn.Token.new()

  @doc """
  Returns `expr` (a tensor or a container) with the hooks of `token` attached: when any of
  its tensors is computed, the token's hooks fire first, in the order `hook_token/3,4` added
  them (each once per computation). Attach the token to the value that is returned, inside
  the `if`/`cond` branch or `while` body the hooks belong to; a token never attached fires
  nothing.
  """
  def attach_token(%Nx.Defn.Token{} = token, expr), do: Nx.Defn.Token.attach(token, expr)

  @doc """
  Prints the value of `expr` when it is computed (with `IO.inspect/2` and `opts`, so
  `label: "x"` prints `x: ` before it) and returns `expr`; a `hook/2`. Given a function
  `fun`, it prints `fun.(expr)` instead (traced with `expr`), and returns `expr`.

  ## Examples

      defn f(x), do: x |> Nx.exp() |> print_value(label: "exp") |> Nx.sum()

      defn g(x), do: x |> Nx.exp() |> print_value(&Nx.sum/1) |> Nx.multiply(2)
  """
  def print_value(expr, fun_or_opts \\ [])

  def print_value(expr, fun) when is_function(fun, 1), do: print_value(expr, fun, [])

  def print_value(expr, opts) when is_list(opts) do
    Expr.hook(expr, nil, &IO.inspect(&1, opts))
  end

  @doc "Prints `fun.(expr)` when `expr` is computed (`IO.inspect/2` with `opts`); returns `expr`."
  def print_value(expr, fun, opts) when Kernel.and(is_function(fun, 1), is_list(opts)) do
    {token, _} = hook_token(create_token(), fun.(expr), &IO.inspect(&1, opts))
    attach_token(token, expr)
  end

  @doc """
  The full-slice range `0..-1//1`: `t[..]` is `t`, and enumerated it is empty.
  """
  def (..), do: Range.new(0, Kernel.-(1), 1)

  @doc """
  Returns `keyword` if it has every key of `keys`, raises otherwise (at trace time).

  ## Examples

      iex> Nx.Defn.Kernel.assert_keys([one: 1, two: 2], [:one, :two])
      [one: 1, two: 2]

      iex> Nx.Defn.Kernel.assert_keys([one: 1, two: 2], [:three])
      ** (ArgumentError) expected key :three in keyword list, got: [one: 1, two: 2]
  """
  def assert_keys(keyword, keys) when Kernel.and(is_list(keyword), is_list(keys)) do
    case Enum.reject(keys, &Keyword.has_key?(keyword, &1)) do
      [] ->
        keyword

      [key | _] ->
        Kernel.raise(
          ArgumentError,
          "expected key #{Kernel.inspect(key)} in keyword list, got: #{Kernel.inspect(keyword)}"
        )
    end
  end

  @doc """
  The text of `term` (`Kernel.inspect/2`), for error messages built at trace time; to see
  values as they are computed use `print_value/2`, to see expressions `print_expr/2`.
  """
  def inspect(term, opts \\ []), do: Kernel.inspect(term, opts)

  @doc """
  Raises `message` at trace time (`Kernel.raise/1`): inside `defn` it runs while the
  expression is built, so a raise in a branch of a tensor `if` always raises.
  """
  defmacro raise(message) do
    quote do: Kernel.raise(unquote(message))
  end

  @doc "Raises `exception` with `arguments` at trace time (`Kernel.raise/2`); see `raise/1`."
  defmacro raise(exception, arguments) do
    quote do: Kernel.raise(unquote(exception), unquote(arguments))
  end

  @doc "Pipes `left` into the call `right` (`Kernel.|>/2`)."
  defmacro left |> right do
    Enum.reduce(Macro.unpipe(right), left, fn {call, position}, acc ->
      Macro.pipe(acc, call, position)
    end)
  end

  @doc "Reads a module attribute at compile time (`Kernel.@/1`), to put constants in `defn`."
  defmacro @expr do
    quote do: Kernel.@(unquote(expr))
  end

  @doc "Concatenates two binaries (`Kernel.<>/2`)."
  defmacro left <> right do
    quote do: Kernel.<>(unquote(left), unquote(right))
  end

  # Documentation only, as in Nx: these are Elixir's special forms, which work inside defn
  # as anywhere (`cond` with tensor conditions: defn rewrites it into `if/2`s); they are
  # never imported (Nx.Defn.kernel_special_forms/0).

  @doc "Elixir's `alias/2`, as anywhere."
  defmacro alias(module, opts \\ []), do: special_form!([module, opts])
  @doc "Elixir's `import/2`, as anywhere."
  defmacro import(module, opts \\ []), do: special_form!([module, opts])
  @doc "Elixir's `require/2`, as anywhere."
  defmacro require(module, opts \\ []), do: special_form!([module, opts])

  @doc """
  `cond` inside `defn`: the first clause whose condition is true or a nonzero scalar tensor
  (the conditions are traced into nested `if/2`s).
  """
  defmacro cond(clauses), do: special_form!([clauses])

  @doc "Elixir's `case/2`, on values known at trace time (shapes, types, options)."
  defmacro case(expr, clauses), do: special_form!([expr, clauses])

  defp special_form!(_args) do
    Kernel.raise("special forms must not be imported and exist for documentation purposes")
  end
end
