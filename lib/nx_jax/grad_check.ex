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

  defmodule Error do
    @moduledoc "Raised by `NxJax.GradCheck.check_grads!/4` when a gradient is off."
    defexception [:message]
  end

  @defaults [step: 1.0e-4, rtol: 1.0e-4, atol: 1.0e-7]

  @doc """
  Raises `NxJax.GradCheck.Error` (showing both values) unless `grad_fun.(x)` is within
  `atol + rtol * |grad|` of the central differences of `fun` at `x`, element by element.

  `fun` must return a scalar; `x` is a floating-point tensor (or a float, taken as
  `f32`); a complex gradient of it (as Nx 0.7.2 gives where the backward pass meets complex
  values) passes when its real part does and its imaginary part is 0 within the tolerance.
  Options: `:step` (default `1.0e-4`), `:rtol` (`1.0e-4`), `:atol` (`1.0e-7`).
  Returns `:ok`.
  """
  @spec check_grads!(function, function, Nx.Tensor.t() | float, keyword) :: :ok
  def check_grads!(fun, grad_fun, x, opts \\ [])
      when is_function(fun, 1) and is_function(grad_fun, 1) do
    opts = Keyword.validate!(opts, @defaults)
    %Nx.Tensor{type: type, shape: shape} = x = Nx.Defn.Compiler.to_concrete(x)
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

  defp decode(%Nx.Tensor{type: type, data: %Nx.BinaryBackend{state: binary}}) do
    Nx.BinaryBackend.to_list(binary, type)
  end

  defp encode(values, %Nx.Tensor{type: type} = x) do
    %Nx.Tensor{x | data: %Nx.BinaryBackend{state: Nx.BinaryBackend.from_list(values, type)}}
  end
end
