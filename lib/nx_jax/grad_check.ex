defmodule NxJax.GradCheck do
  @moduledoc """
  Checks gradients against central finite differences. It lives here, not in `Nx.Defn`
  (which Nx 0.7.2 does not give such a function), so that code importing both `Nx.Defn` and
  a `check_grads!` of its own (as Nx's own test helpers do) compiles.

  For every element `x_i` of `x` the finite difference is
  `(fun(x + h e_i) - fun(x - h e_i)) / 2h`; all the `fun` evaluations run in one jitted
  graph. Use `f64` inputs: with `f32` the rounding error of the difference
  (about `1.0e-7 * |fun| / h`) is larger than the default tolerance.

  ## Examples

      x = Nx.tensor(0.5, type: {:f, 64})
      NxJax.GradCheck.check_grads!(&MyMath.log1pexp/1, &MyMath.grad_log1pexp/1, x)
      #=> :ok
  """

  alias Nx.Defn.Composite
  alias NxJax.Autodiff.Checks

  defmodule Error do
    @moduledoc "Raised by `NxJax.GradCheck.check_grads!/4` when a gradient is off."
    defexception [:message]
  end

  @defaults [step: 1.0e-4, rtol: 1.0e-4, atol: 1.0e-7]

  ## Checking JAX's derivatives, as jax.test_util.check_grads

  # jax.test_util's default gradient tolerances, by input type (atol = rtol = this)
  @tolerance %{{:f, 16} => 1.0e-2, {:bf, 16} => 1.0e-1, {:f, 32} => 2.0e-3, {:f, 64} => 1.0e-5}
  # the finite-difference step by input type: rounding error ~ ulp * |f| / eps and truncation
  # error ~ eps^2 balance near these
  @eps %{{:f, 16} => 1.0e-2, {:bf, 16} => 1.0e-1, {:f, 32} => 1.0e-3, {:f, 64} => 1.0e-5}

  @doc """
  Checks the derivatives the worker computes for `fun` at `args` (a list of its arguments,
  each a tensor, number or container of them) against finite differences, as
  `jax.test_util.check_grads` does; raises `NxJax.GradCheck.Error` naming the mode, the order
  and both values, else returns `:ok`.

    * `:fwd` - along a random tangent `v` (a seeded normal draw), the tangent of
      `NxJax.Autodiff.jvp/3` equals `(fun(x + eps v) - fun(x - eps v)) / 2 eps`;
    * `:rev` - for a random output cotangent `u`, the vector-Jacobian product (the `grad` of
      `<fun(x), u>`) paired with `v` equals `<u, finite difference along v>`.

  With `order: 2` the same checks run again on the derivative functions themselves (the
  tangent of `jvp` as a function of `x` for `:fwd`, the vector-Jacobian product for `:rev`),
  so second derivatives are checked too. `fun` may return a tensor or a container.

  Options: `:order` (1 or 2, default 1), `:modes` (default `[:fwd, :rev]`), `:atol` and
  `:rtol` (default by the widest input type, JAX's: 2.0e-3 for f32, 1.0e-5 for f64, 1.0e-2
  for f16, 1.0e-1 for bf16), `:eps` (default 1.0e-3 for f32, 1.0e-5 for f64), `:seed`
  (of the random directions, default 0).

  ## Examples

      iex> f = fn x, y -> Nx.sum(Nx.multiply(Nx.sin(x), y)) end
      iex> x = Nx.tensor([0.5, 1.0, 2.0], type: :f64)
      iex> NxJax.GradCheck.check_grads!(f, [x, Nx.tensor(3.0, type: :f64)], order: 2)
      :ok
  """
  @spec check_grads!(function, [term], keyword) :: :ok
  def check_grads!(fun, args, opts \\ [])

  # (check_grads!/4 with its default options)
  def check_grads!(fun, grad_fun, x) when is_function(fun, 1) and is_function(grad_fun, 1),
    do: check_grads!(fun, grad_fun, x, [])

  def check_grads!(fun, args, opts)
      when is_list(args) and is_function(fun, length(args)) and is_list(opts) do
    opts =
      Keyword.validate!(opts,
        order: 1,
        modes: [:fwd, :rev],
        atol: nil,
        rtol: nil,
        eps: nil,
        seed: 0
      )

    unless opts[:order] in [1, 2] do
      raise ArgumentError,
            "check_grads!/3 expects :order to be 1 or 2, got: #{inspect(opts[:order])}"
    end

    unless is_list(opts[:modes]) and opts[:modes] != [] and
             Enum.all?(opts[:modes], &(&1 in [:fwd, :rev])) do
      raise ArgumentError,
            "check_grads!/3 expects :modes to be a non-empty list of :fwd and :rev, got: " <>
              inspect(opts[:modes])
    end

    x = args |> List.to_tuple() |> Composite.traverse(&float_arg!/1)
    type = [x] |> Composite.flatten_list() |> Enum.map(& &1.type) |> Enum.reduce(&Nx.Type.merge/2)

    limits = %{
      atol: opts[:atol] || Map.get(@tolerance, type, 1.0e-5),
      rtol: opts[:rtol] || Map.get(@tolerance, type, 1.0e-5),
      eps: opts[:eps] || Map.get(@eps, type, 1.0e-5)
    }

    f = fn x -> apply(fun, Tuple.to_list(x)) end
    check_orders(f, x, opts[:order], opts[:modes], limits, :rand.seed_s(:exsss, opts[:seed]))
  end

  # The functions checked run on the compiler (one graph each); the directions, the finite
  # differences and the comparisons are a few numbers each, computed here in Elixir, so that
  # a check compiles only the graphs of the derivatives it checks.
  defp check_orders(f, x, order, modes, limits, seed) do
    {v, seed} = random_like(x, seed)
    y = jit(f, x)
    {u, seed} = random_like(y, seed)

    if :fwd in modes do
      {_value, tangent} = NxJax.Autodiff.jvp(f, x, v)
      close!(tangent, numerical_jvp(f, x, v, limits.eps), limits, "fwd", order)
    end

    if :rev in modes do
      ct = vjp(f, x, u)
      got = pairing(ct, v)
      want = pairing(u, numerical_jvp(f, x, v, limits.eps))
      close!(Nx.tensor(got, type: :f64), Nx.tensor(want, type: :f64), limits, "rev", order)
    end

    if order > 1 do
      if :fwd in modes do
        tangent_of = fn x -> elem(NxJax.Autodiff.jvp(f, x, v), 1) end
        check_orders(tangent_of, x, order - 1, modes, limits, seed)
      end

      if :rev in modes, do: check_orders(&vjp(f, &1, u), x, order - 1, modes, limits, seed)
    end

    :ok
  end

  # J^T u: the gradient of <f(x), u> with respect to x
  defp vjp(f, x, u), do: Nx.Defn.grad(x, fn x -> tensor_pairing(f.(x), u) end)

  defp jit(f, x), do: Nx.Defn.jit_apply(f, [x])

  defp numerical_jvp(f, x, v, eps) do
    shifted = fn sign -> zip_values(x, v, &(&1 + sign * eps * &2)) end
    plus = jit(f, shifted.(1))
    minus = jit(f, shifted.(-1))
    zip_values(plus, minus, &((&1 - &2) / (2 * eps)))
  end

  # the sum over leaves of sum(a * b) (real parts), inside the traced function
  defp tensor_pairing(a, b) do
    [Composite.flatten_list([a]), Composite.flatten_list([b])]
    |> Enum.zip_with(fn [p, q] -> Nx.sum(Nx.multiply(p, q)) end)
    |> Enum.reduce(&Nx.add/2)
  end

  # the same of concrete containers, a float
  defp pairing(a, b) do
    Enum.zip_with(values(a), values(b), fn p, q ->
      p |> Enum.zip_with(q, &(&1 * &2)) |> Enum.sum()
    end)
    |> Enum.sum()
  end

  # each leaf of a concrete container as its list of (real) values
  defp values(container) do
    for leaf <- Composite.flatten_list([container]) do
      for value <- Nx.to_flat_list(leaf), do: real(value)
    end
  end

  defp real(%Complex{re: re}), do: real(re)
  defp real(value) when is_number(value), do: value / 1
  defp real(:nan), do: :nan
  defp real(:infinity), do: :infinity
  defp real(:neg_infinity), do: :neg_infinity

  # `a` (concrete) with `fun` applied to its leaves' values and `b`'s, element by element
  defp zip_values(a, b, fun) do
    leaves =
      Enum.zip_with([Composite.flatten_list([a]), values(a), values(b)], fn [leaf, p, q] ->
        %Nx.Tensor{type: type, shape: shape} = Nx.to_tensor(leaf)
        type = if Nx.Type.float?(type), do: type, else: {:f, 32}
        p |> Enum.zip_with(q, &arith(fun, &1, &2)) |> encode_as(type, shape)
      end)

    Checks.fill(a, leaves)
  end

  defp arith(fun, p, q) when is_number(p) and is_number(q), do: fun.(p, q)
  defp arith(_fun, _p, _q), do: :nan

  defp random_like(container, seed) do
    {leaves, seed} =
      [container]
      |> Composite.flatten_list()
      |> Enum.map_reduce(seed, fn leaf, seed ->
        %Nx.Tensor{type: type, shape: shape} = Nx.to_tensor(leaf)
        type = if Nx.Type.float?(type), do: type, else: {:f, 32}

        {draw, seed} =
          Enum.map_reduce(1..max(Tuple.product(shape), 1)//1, seed, fn _, seed ->
            :rand.normal_s(seed)
          end)

        {encode_as(Enum.take(draw, Tuple.product(shape)), type, shape), seed}
      end)

    {Checks.fill(container, leaves), seed}
  end

  defp encode_as(values, type, shape) do
    case shape do
      {} -> Nx.tensor(hd(values), type: type, backend: Nx.BinaryBackend)
      _ -> values |> Nx.tensor(type: type, backend: Nx.BinaryBackend) |> Nx.reshape(shape)
    end
  end

  defp close!(got, want, limits, mode, order) do
    Enum.zip_with(values(got), values(want), fn g, w ->
      off? =
        Enum.zip_with(g, w, fn a, b ->
          not (is_number(a) and is_number(b) and abs(a - b) <= limits.atol + limits.rtol * abs(b))
        end)
        |> Enum.any?()

      if off? do
        raise Error,
              "#{mode}-mode derivative of order #{order} is off " <>
                "(atol: #{limits.atol}, rtol: #{limits.rtol}, eps: #{limits.eps}):\n" <>
                "  computed:           #{inspect(g)}\n" <>
                "  finite differences: #{inspect(w)}"
      end
    end)

    :ok
  end

  defp float_arg!(value) do
    tensor = concrete(value)

    case tensor.type do
      {kind, _} when kind in [:f, :bf] ->
        tensor

      type ->
        raise ArgumentError,
              "check_grads!/3 needs floating-point arguments, got: #{inspect(type)}"
    end
  end

  @doc """
  Raises `NxJax.GradCheck.Error` (showing both values) unless `grad_fun.(x)` (a gradient
  function of your own) is within
  `atol + rtol * |grad|` of the central differences of `fun` at `x`, element by element.

  `fun` must return a scalar; `x` is a floating-point tensor (or a float, taken as
  `f32`); a complex gradient of it (as Nx 0.7.2 gives where the backward pass meets complex
  values) passes when its real part does and its imaginary part is 0 within the tolerance.
  Options: `:step` (default `1.0e-4`), `:rtol` (`1.0e-4`), `:atol` (`1.0e-7`).
  Returns `:ok`.
  """
  @spec check_grads!(function, function, Nx.Tensor.t() | float, keyword) :: :ok
  def check_grads!(fun, grad_fun, x, opts)
      when is_function(fun, 1) and is_function(grad_fun, 1) do
    opts = Keyword.validate!(opts, @defaults)
    %Nx.Tensor{type: type, shape: shape} = x = concrete(x)
    float_type!(type)
    values = decode(x)
    step = opts[:step]

    perturbed =
      for index <- 0..(length(values) - 1)//1, delta <- [step, -step] do
        values |> List.update_at(index, &(&1 + delta)) |> encode(x)
      end

    outputs =
      Nx.Defn.jit_apply(
        fn xs -> xs |> Tuple.to_list() |> Enum.map(&scalar!(fun.(&1))) |> List.to_tuple() end,
        [List.to_tuple(perturbed)]
      )

    approx =
      outputs
      |> Tuple.to_list()
      |> Enum.map(&(&1 |> decode() |> hd()))
      |> Enum.chunk_every(2)
      |> Enum.map(fn [plus, minus] -> difference(plus, minus, step) end)

    grad = grad_fun.(x)

    case grad do
      %Nx.Tensor{shape: ^shape} ->
        :ok

      other ->
        raise Error,
              "expected grad_fun to return a tensor of shape #{inspect(shape)}, got: #{inspect(other)}"
    end

    exact = decode(grad)
    check!(exact, approx, opts, {type, shape, values})
  end

  defp check!(exact, approx, opts, {type, shape, values}) do
    bad =
      [exact, approx]
      |> Enum.zip()
      |> Enum.with_index()
      |> Enum.reject(fn {{e, a}, _} -> close?(e, a, opts[:rtol], opts[:atol]) end)

    case bad do
      [] ->
        :ok

      [{{e, a}, index} | _] ->
        raise Error,
              "gradient check failed at element #{index} of x (#{inspect(type)} #{inspect(shape)}): " <>
                "grad_fun gave #{inspect(e)}, finite differences give #{inspect(a)} " <>
                "(rtol: #{opts[:rtol]}, atol: #{opts[:atol]}, step: #{opts[:step]})\n" <>
                "  x:                  #{inspect(values)}\n" <>
                "  grad_fun:           #{inspect(exact)}\n" <>
                "  finite differences: #{inspect(approx)}"
    end
  end

  defp close?(e, a, rtol, atol) when is_number(e) and is_number(a),
    do: abs(e - a) <= atol + rtol * abs(e)

  # a complex gradient of a real x (Nx 0.7.2 gives one where the backward pass meets complex
  # values, as through fft): its real part is the derivative, its imaginary part must be 0
  defp close?(%Complex{re: re, im: im}, a, rtol, atol)
       when is_number(re) and is_number(im) and is_number(a),
       do: close?(re, a, rtol, atol) and abs(im) <= atol + rtol * abs(re)

  defp close?(e, a, _rtol, _atol), do: e == a

  defp difference(plus, minus, step) when is_number(plus) and is_number(minus),
    do: (plus - minus) / (2 * step)

  defp difference(_plus, _minus, _step), do: :nan

  defp scalar!(%Nx.Tensor{shape: {}} = y), do: y
  defp scalar!(y) when is_number(y), do: y

  defp scalar!(other) do
    raise ArgumentError,
          "check_grads!/4 expects fun to return a scalar tensor, got: #{inspect(other)}"
  end

  defp float_type!({:f, _}), do: :ok

  defp float_type!(type) do
    raise ArgumentError, "check_grads!/4 needs x of type f16, f32 or f64, got: #{inspect(type)}"
  end

  # (Nx's public API only, so that the module builds under real Nx 0.7.2 as well as the clean room)
  defp concrete(%Nx.Tensor{data: %Nx.BinaryBackend{}} = tensor), do: tensor
  defp concrete(value), do: value |> Nx.to_tensor() |> Nx.backend_copy(Nx.BinaryBackend)

  defp decode(tensor), do: Nx.to_flat_list(tensor)

  defp encode(values, %Nx.Tensor{type: type, shape: shape}) do
    values |> Nx.tensor(type: type, backend: Nx.BinaryBackend) |> Nx.reshape(shape)
  end
end
