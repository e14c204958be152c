defmodule NxJax.GradCheck do
  @moduledoc """
  Checks gradients against central finite differences (also reachable as
  `Nx.Defn.check_grads!/4`).

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
  `f32`). Options: `:step` (default `1.0e-4`), `:rtol` (`1.0e-4`), `:atol` (`1.0e-7`).
  Returns `:ok`.
  """
  @spec check_grads!(function, function, Nx.Tensor.t() | float, keyword) :: :ok
  def check_grads!(fun, grad_fun, x, opts \\ [])
      when is_function(fun, 1) and is_function(grad_fun, 1) do
    opts = Keyword.validate!(opts, @defaults)
    %Nx.Tensor{type: type, shape: shape} = x = Nx.Defn.Compiler.to_concrete(x)
    size = float_size!(type)
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
    check!(exact, approx, opts, {type, size, shape, values})
  end

  defp check!(exact, approx, opts, {type, _size, shape, values}) do
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

  defp close?(e, a, rtol, atol) when is_float(e) and is_float(a),
    do: abs(e - a) <= atol + rtol * abs(e)

  defp close?(e, a, _rtol, _atol), do: e == a

  defp difference(plus, minus, step) when is_float(plus) and is_float(minus),
    do: (plus - minus) / (2 * step)

  defp difference(_plus, _minus, _step), do: :nan

  defp scalar!(%Nx.Tensor{shape: {}} = y), do: y
  defp scalar!(y) when is_number(y), do: y

  defp scalar!(other) do
    raise ArgumentError,
          "check_grads!/4 expects fun to return a scalar tensor, got: #{inspect(other)}"
  end

  defp float_size!({:f, size}) when size in [16, 32, 64], do: size

  defp float_size!(type) do
    raise ArgumentError, "check_grads!/4 needs x of type f16, f32 or f64, got: #{inspect(type)}"
  end

  defp decode(%Nx.Tensor{type: {:f, size}, data: %Nx.BinaryBackend{state: binary}}) do
    for <<bits::bitstring-size(size) <- binary>>, do: decode_float(bits, size)
  end

  defp decode(%Nx.Tensor{type: {:s, size}, data: %Nx.BinaryBackend{state: binary}}) do
    for <<value::signed-integer-size(size)-native <- binary>>, do: value * 1.0
  end

  defp decode(%Nx.Tensor{type: {:u, size}, data: %Nx.BinaryBackend{state: binary}}) do
    for <<value::unsigned-integer-size(size)-native <- binary>>, do: value * 1.0
  end

  defp decode_float(bits, size) do
    case bits do
      <<value::float-size(size)-native>> -> value
      _ -> non_finite(bits, size)
    end
  end

  defp non_finite(bits, size) do
    <<int::unsigned-integer-size(size)-native>> = bits
    mantissa_bits = %{16 => 10, 32 => 23, 64 => 52}[size]

    cond do
      Bitwise.band(int, Bitwise.bsl(1, mantissa_bits) - 1) != 0 -> :nan
      Bitwise.bsr(int, size - 1) == 1 -> :neg_infinity
      true -> :infinity
    end
  end

  defp encode(values, %Nx.Tensor{type: {:f, size}} = x) do
    binary = for value <- values, into: <<>>, do: <<value::float-size(size)-native>>
    %Nx.Tensor{x | data: %Nx.BinaryBackend{state: binary}}
  end
end
