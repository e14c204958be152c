defmodule NxJax.Autodiff.Checks do
  @moduledoc false
  # The toolbox's checks of its arguments and options, with their messages, and the small
  # container helpers its functions share. Compiled under both front ends (mix.exs): the clean
  # room's NxJax.Autodiff (lib/nx_jax/autodiff.ex, autodiff/implicit.ex, autodiff/checkpoint.ex) and real
  # Nx's (lib/nx_jax/real_nx/autodiff.ex, implicit.ex) build their graphs each their own way and
  # call these for everything that does not depend on how, so each check exists once. Only
  # Nx's public API and Nx.Defn.Composite here: nothing of either Nx's expressions. Where a
  # leaf must become a tensor, the caller says how (`to_tensor`: an expression in the clean
  # room, a tensor under real Nx).

  alias Nx.Defn.Composite

  ## Functions and containers

  @doc false
  # `fun` called on `arg`, or, for a tuple, on one argument per element
  def call!(fun, arg) do
    cond do
      is_function(fun, 1) ->
        fun.(arg)

      is_tuple(arg) and is_function(fun, tuple_size(arg)) ->
        apply(fun, Tuple.to_list(arg))

      true ->
        raise ArgumentError,
              "expected a function of one argument (or, for a tuple, of one argument per " <>
                "element), got: #{inspect(fun)}"
    end
  end

  @doc false
  # `container` with its leaves replaced by `leaves`, in order
  def fill(container, leaves) do
    {filled, []} =
      Composite.traverse(container, leaves, fn _leaf, [leaf | rest] -> {leaf, rest} end)

    filled
  end

  @doc false
  def same_structure?(left, right), do: Composite.compatible?(left, right, fn _, _ -> true end)

  @doc false
  # the leaves of what `fun` given to `name` returned: at least one
  def outputs!(out, name) do
    leaves =
      try do
        Composite.flatten_list([out])
      rescue
        Protocol.UndefinedError -> nil
      end

    if leaves in [nil, []] do
      raise ArgumentError,
            "#{name} expects the function to return a tensor or a tuple of tensors, got: " <>
              inspect(out)
    end

    leaves
  end

  ## Differentiated values, tangents and cotangents

  @doc false
  # `kinds`: the type kinds `name` differentiates with respect to (`[:f, :bf]`, and `:c` for
  # jvp/3 where complex values are taken)
  def differentiable!(type, name, kinds) do
    unless elem(type, 0) in kinds do
      what = if :c in kinds, do: "floating-point or complex", else: "floating-point"

      raise ArgumentError,
            "#{name} differentiates with respect to #{what} tensors only (as JAX does), " <>
              "got one of type #{Nx.Type.to_string(type)}. Pass a float (3.0, not 3) or " <>
              "convert it with Nx.as_type/2"
    end

    :ok
  end

  @doc false
  def floating_output!(type, name) do
    unless elem(type, 0) in [:f, :bf] do
      raise ArgumentError,
            "#{name} differentiates functions with floating-point outputs (as JAX does " <>
              "without its holomorphic option), got an output of type " <>
              "#{Nx.Type.to_string(type)}. Convert it with Nx.as_type/2"
    end

    :ok
  end

  @doc false
  # an output `y` of a function differentiated with respect to values vectorized along
  # `names` (not empty): vectorized along those axes only, so that its entries are the
  # entries' own (a vectorized value read from outside cannot be batched with them)
  def output_vectorized_within!(y, names, name) do
    case Keyword.keys(y.vectorized_axes) -- names do
      [] ->
        :ok

      extra ->
        raise ArgumentError,
              "#{name} differentiates with respect to values vectorized along " <>
                "#{inspect(names)}, and the function's output is also vectorized along " <>
                "#{inspect(extra)} (it reads a vectorized value that is not an argument). " <>
                "Pass that value as an argument too, or devectorize it"
    end
  end

  @doc false
  # jvp/3's tangents `ts` (the leaves of `tangents`) for the primals `xs` (the leaves of
  # `primals`): one per primal, in the same container, each of its primal's shape; returned
  # cast to the primals' types
  def tangents!(primals, tangents, xs, ts) do
    unless length(xs) == length(ts) and same_structure?(primals, tangents) do
      raise ArgumentError,
            "jvp/3 expects one tangent per primal, in the same container, got primals " <>
              "#{inspect(primals)} and tangents #{inspect(tangents)}"
    end

    Enum.zip_with(xs, ts, fn x, t ->
      unless Nx.shape(t) == Nx.shape(x) do
        raise ArgumentError,
              "jvp/3 expects each tangent to have its primal's shape, got a primal of shape " <>
                "#{inspect(Nx.shape(x))} and a tangent of shape #{inspect(Nx.shape(t))}"
      end

      Nx.as_type(t, Nx.type(x))
    end)
  end

  @doc false
  # <y, u>: the sum over the leaves of sum(y * u), `us` the leaves of a cotangent in the
  # container of `y`
  def pairing(y, us, name) do
    ys = Composite.flatten_list([y])

    if length(ys) != length(us) do
      raise ArgumentError,
            "#{name} expects a cotangent in the container of the output, got #{inspect(us)} " <>
              "for #{inspect(y)}"
    end

    Enum.zip_with(ys, us, fn y, u ->
      unless Nx.shape(u) == Nx.shape(y) do
        raise ArgumentError,
              "#{name} expects each cotangent to have its output's shape, got an output of " <>
                "shape #{inspect(Nx.shape(y))} and a cotangent of shape #{inspect(Nx.shape(u))}"
      end

      Nx.sum(Nx.multiply(y, u))
    end)
    |> Enum.reduce(&Nx.add/2)
  end

  ## custom_jvp/3

  @doc false
  # the inputs of custom_jvp/3, a non-empty list or tuple of tensors, as a list
  def custom_jvp_inputs!(inputs) do
    list =
      cond do
        is_list(inputs) -> inputs
        is_tuple(inputs) -> Tuple.to_list(inputs)
        true -> []
      end

    unless list != [] and Enum.all?(list, &(is_number(&1) or is_struct(&1, Nx.Tensor))) do
      raise ArgumentError,
            "custom_jvp/3 expects a non-empty list or tuple of tensors as its inputs (the " <>
              "values whose tangents the rule receives), got: #{inspect(inputs)}"
    end

    list
  end

  @doc false
  # `values` (a list, one per input) in the container of the inputs: what the rule receives
  def like_inputs(inputs, values) when is_tuple(inputs), do: List.to_tuple(values)
  def like_inputs(_inputs, values), do: values

  @doc false
  # the rule of custom_jvp/3 applied to the tangents (and the inputs), each in the inputs'
  # container
  def apply_rule(jvp_fun, inputs, tangents) do
    tangents = like_inputs(inputs, tangents)
    if is_function(jvp_fun, 1), do: jvp_fun.(tangents), else: jvp_fun.(inputs, tangents)
  end

  @doc false
  def custom_jvp_rule!(jvp_fun) do
    raise ArgumentError,
          "custom_jvp/3 expects a function of the tangents (fn {t1, ...} -> tangent end) or of " <>
            "the inputs and the tangents (fn inputs, tangents -> tangent end), got: " <>
            inspect(jvp_fun)
  end

  @doc false
  # the value of custom_jvp/3: `expr_or_fun`, or the function called on the inputs (a list),
  # as a tensor or a tuple of them (`to_tensor` makes each leaf one)
  def custom_jvp_value!(fun, inputs, to_tensor) when is_function(fun) do
    unless is_function(fun, length(inputs)) do
      raise ArgumentError,
            "custom_jvp/3 calls its function with the #{length(inputs)} inputs, got a function " <>
              "of another arity: #{inspect(fun)}"
    end

    fun |> apply(inputs) |> custom_jvp_value!(to_tensor)
  end

  def custom_jvp_value!(value, _inputs, to_tensor), do: custom_jvp_value!(value, to_tensor)

  defp custom_jvp_value!(tuple, to_tensor) when is_tuple(tuple) and tuple_size(tuple) > 0 do
    tuple |> Tuple.to_list() |> Enum.map(&custom_jvp_value!(&1, to_tensor)) |> List.to_tuple()
  end

  defp custom_jvp_value!(leaf, to_tensor) when is_number(leaf) or is_struct(leaf, Nx.Tensor),
    do: to_tensor.(leaf)

  defp custom_jvp_value!(other, _to_tensor) do
    raise ArgumentError,
          "custom_jvp/3 expects a tensor or a tuple of tensors as its value, got: #{inspect(other)}"
  end

  @doc false
  # the rule's tangents, one per leaf of the value, each made by `fit_leaf.(tangent, leaf)`
  def fit_tangents!(returned, value, fit_leaf) when is_tuple(value) do
    unless is_tuple(returned) and tuple_size(returned) == tuple_size(value) do
      raise ArgumentError,
            "the jvp function given to custom_jvp/3 must return a tuple of " <>
              "#{tuple_size(value)} tangents (one per element of the value), got: " <>
              inspect(returned)
    end

    Enum.zip_with(Tuple.to_list(returned), Tuple.to_list(value), &tangent!(&1, &2, fit_leaf))
  end

  def fit_tangents!(returned, value, fit_leaf), do: [tangent!(returned, value, fit_leaf)]

  defp tangent!(tangent, value, fit_leaf)
       when is_number(tangent) or is_struct(tangent, Nx.Tensor),
       do: fit_leaf.(tangent, value)

  defp tangent!(other, value, _fit_leaf) do
    raise ArgumentError,
          "the jvp function given to custom_jvp/3 must return a tensor or a number for a " <>
            "value of shape #{inspect(Nx.shape(value))}, got: #{inspect(other)}"
  end

  @doc false
  # a tangent the rule returned, broadcast to its value's shape and cast to `type`
  def broadcast_tangent!(tangent, shape, type) do
    tangent |> Nx.broadcast(shape) |> Nx.as_type(type)
  rescue
    ArgumentError ->
      reraise ArgumentError,
              "the tangent returned by the custom_jvp/3 function has shape " <>
                "#{inspect(Nx.shape(tangent))}, which cannot be broadcast to the value's " <>
                "shape #{inspect(shape)}",
              __STACKTRACE__
  end

  ## custom_root/4 and custom_linear_solve/5

  @doc false
  def linear_solve_options!(opts) do
    opts = Keyword.validate!(opts, symmetric: false)

    unless is_boolean(opts[:symmetric]) do
      raise ArgumentError,
            "custom_linear_solve/5 expects :symmetric to be a boolean, got: " <>
              inspect(opts[:symmetric])
    end

    opts[:symmetric]
  end

  @doc false
  # the unknown of `fun` (its initial guess or b, `what`) as a real floating-point tensor
  def unknown!(value, fun, what, to_tensor) do
    tensor =
      case value do
        %Nx.Tensor{} ->
          to_tensor.(value)

        number when is_number(number) ->
          to_tensor.(number)

        other ->
          raise ArgumentError, "#{fun} expects #{what} to be a tensor, got: #{inspect(other)}"
      end

    case tensor.type do
      {kind, _} when kind in [:f, :bf] -> tensor
      {:c, _} -> raise ArgumentError, "#{fun} expects #{what} to be real, got: #{inspect(value)}"
      type -> Nx.as_type(tensor, Nx.Type.to_floating(type))
    end
  end

  @doc false
  # what a function given to the solvers returned (`what`), as a tensor of `like`'s shape (a
  # scalar where `scalar_ok`), not yet cast or broadcast
  def returned!(value, like, what, to_tensor, scalar_ok \\ false) do
    tensor =
      case value do
        %Nx.Tensor{} -> to_tensor.(value)
        number when is_number(number) -> to_tensor.(number)
        other -> raise ArgumentError, "#{what} must return a tensor, got: #{inspect(other)}"
      end

    unless tensor.shape == like.shape or (scalar_ok and tensor.shape == {}) do
      raise ArgumentError,
            "#{what} must have the shape of the unknown, #{inspect(like.shape)}, got: " <>
              inspect(tensor.shape)
    end

    tensor
  end

  @doc false
  # what a function given to the solvers returned (`what`, the `tensor` made of `value`),
  # vectorized along no axis the unknown `like` lacks
  def unknown_vectorized_within!(tensor, like, what, value) do
    extra = Keyword.keys(tensor.vectorized_axes) -- Keyword.keys(like.vectorized_axes)

    unless extra == [] do
      raise ArgumentError,
            "#{what} is vectorized along #{inspect(extra)}, which the unknown (vectorized " <>
              "along #{inspect(Keyword.keys(like.vectorized_axes))}) is not: it reads a " <>
              "vectorized value that neither the initial guess (or b) nor the equation " <>
              "has. Give the initial guess (or b) those axes too, or devectorize it, got: " <>
              inspect(value)
    end

    :ok
  end

  ## checkpoint/3 and checkpoint_name/2

  @policies [
    everything_saveable: "every value (no recomputation)",
    nothing_saveable: "nothing but the inputs (recompute everything; JAX's default)",
    dots_saveable: "the results of dot products (`Nx.dot/2` and friends)",
    dots_with_no_batch_dims_saveable: "the results of dot products without batch axes"
  ]
  @named_policies [:save_only, :save_anything_except]

  @doc false
  def policies, do: @policies

  @doc false
  # `{policy, prevent_cse}` of checkpoint/3's options, the policy's names as strings
  def checkpoint_options!(opts) do
    opts = Keyword.validate!(opts, policy: nil, prevent_cse: true)
    policy = policy!(opts[:policy])

    unless is_boolean(opts[:prevent_cse]) do
      raise ArgumentError,
            "checkpoint/3 expects :prevent_cse to be a boolean, got: #{inspect(opts[:prevent_cse])}"
    end

    {policy, opts[:prevent_cse]}
  end

  defp policy!(nil), do: nil

  defp policy!(name) when is_atom(name) do
    if Keyword.has_key?(@policies, name), do: name, else: bad_policy!(name)
  end

  defp policy!({kind, names}) when kind in @named_policies and is_list(names) do
    {kind, Enum.map(names, &checkpoint_name!(&1, "checkpoint/3's #{inspect(kind)} policy"))}
  end

  defp policy!(other), do: bad_policy!(other)

  defp bad_policy!(policy) do
    atoms = @policies |> Keyword.keys() |> Enum.map_join(", ", &inspect/1)

    raise ArgumentError,
          "checkpoint/3 expects :policy to be nil, one of #{atoms}, {:save_only, names} or " <>
            "{:save_anything_except, names} (names: a list of atoms or strings given to " <>
            "checkpoint_name/2), got: #{inspect(policy)}"
  end

  @doc false
  # a name of checkpoint_name/2 (`where`: who asks), as a string
  def checkpoint_name!(name, _where) when is_binary(name) and name != "", do: name

  def checkpoint_name!(name, _where) when is_atom(name) and name not in [nil, true, false],
    do: Atom.to_string(name)

  def checkpoint_name!(other, where) do
    raise ArgumentError,
          "#{where} expects a name to be an atom or a non-empty string, got: #{inspect(other)}"
  end

  @doc false
  # {a function of the filled containers, the containers}: a list is the arguments of `fun`,
  # anything else its one argument
  def checkpoint_arguments!(fun, _args) when not is_function(fun) do
    raise ArgumentError, "checkpoint/3 expects a function, got: #{inspect(fun)}"
  end

  def checkpoint_arguments!(fun, args) when is_list(args) do
    {:arity, arity} = Function.info(fun, :arity)

    if arity != length(args) do
      raise ArgumentError,
            "checkpoint/3 expects a function of #{length(args)} arguments for the list of " <>
              "#{length(args)} arguments given, got a function of arity #{arity}"
    end

    {&apply(fun, &1), args}
  end

  def checkpoint_arguments!(fun, args) do
    unless is_function(fun, 1) do
      {:arity, arity} = Function.info(fun, :arity)

      raise ArgumentError,
            "checkpoint/3 expects a function of one argument for #{inspect(args)} (give a " <>
              "list of arguments for a function of several), got a function of arity #{arity}"
    end

    {fn [filled] -> fun.(filled) end, [args]}
  end
end
