defmodule Nx.Constants do
  @moduledoc """
  Scalar tensors of common constants, as in Nx 0.7: mathematical constants, the special
  floating-point values and the limits of each type. Every function takes the type (`{:f, 32}`
  by default where the type is optional) and options: `:backend` moves the tensor to that
  backend (`Nx.backend_transfer/2`; by default it is a plain tensor, as `Nx.tensor/2` makes).

      iex> Nx.Constants.pi()
      #Nx.Tensor<
        f32
        3.1415927410125732
      >
      iex> Nx.Constants.max_finite({:s, 8})
      #Nx.Tensor<
        s8
        127
      >
  """

  @doc "π, in a floating-point (or complex) type."
  def pi(type \\ {:f, 32}, opts \\ []), do: float_constant(:math.pi(), type, opts, "pi")

  @doc "Euler's number e."
  def e(type \\ {:f, 32}, opts \\ []), do: float_constant(:math.exp(1), type, opts, "e")

  @doc "The Euler-Mascheroni constant γ."
  def euler_gamma(type \\ {:f, 32}, opts \\ []),
    do: float_constant(0.5772156649015329, type, opts, "euler_gamma")

  @doc "Not a number."
  def nan(type \\ {:f, 32}, opts \\ []), do: float_constant(:nan, type, opts, "nan")

  @doc "Positive infinity."
  def infinity(type \\ {:f, 32}, opts \\ []),
    do: float_constant(:infinity, type, opts, "infinity")

  @doc "Negative infinity."
  def neg_infinity(type \\ {:f, 32}, opts \\ []),
    do: float_constant(:neg_infinity, type, opts, "neg_infinity")

  @doc "The imaginary unit `i`, in a complex type (`{:c, 64}` by default)."
  def i(type \\ {:c, 64}, opts \\ []) do
    type = Nx.Type.normalize!(type)

    unless Nx.Type.complex?(type) do
      raise ArgumentError, "Nx.Constants.i expects a complex type, got: #{inspect(type)}"
    end

    build(Complex.new(0.0, 1.0), type, opts)
  end

  @doc """
  The largest finite value of `type`.

      iex> Nx.Constants.max_finite({:f, 16})
      #Nx.Tensor<
        f16
        65504.0
      >
  """
  def max_finite(type, opts \\ []), do: limit(&Nx.Type.max_finite/1, type, opts)

  @doc "The smallest (most negative) finite value of `type`."
  def min_finite(type, opts \\ []), do: limit(&Nx.Type.min_finite/1, type, opts)

  @doc "The largest value of `type`: infinity for floating-point types."
  def max(type, opts \\ []) do
    type = Nx.Type.normalize!(type)
    if Nx.Type.integer?(type), do: max_finite(type, opts), else: build(:infinity, type, opts)
  end

  @doc "The smallest value of `type`: negative infinity for floating-point types."
  def min(type, opts \\ []) do
    type = Nx.Type.normalize!(type)
    if Nx.Type.integer?(type), do: min_finite(type, opts), else: build(:neg_infinity, type, opts)
  end

  @doc """
  The distance from 1.0 to the next value of a floating-point `type`.

      iex> Nx.Constants.epsilon({:f, 64})
      #Nx.Tensor<
        f64
        2.220446049250313e-16
      >
  """
  def epsilon(type, opts \\ []), do: float_limit(&Nx.Type.epsilon/1, type, opts, "epsilon")

  @doc "The smallest positive normal value of a floating-point `type`."
  def smallest_positive_normal(type, opts \\ []),
    do: float_limit(&Nx.Type.smallest_positive_normal/1, type, opts, "smallest_positive_normal")

  defp float_constant(value, type, opts, name) do
    type = Nx.Type.normalize!(type)

    if Nx.Type.integer?(type) do
      raise ArgumentError,
            "Nx.Constants.#{name} expects a floating-point or complex type, got: " <>
              inspect(type)
    end

    build(value, type, opts)
  end

  defp float_limit(fun, type, opts, name) do
    type = Nx.Type.normalize!(type)

    cond do
      # Nx 0.7.2's message for a complex type (Nx.Type.float?/1 counts complex as floating)
      Nx.Type.complex?(type) ->
        raise ArgumentError, "only floating types are supported, got: #{inspect(type)}"

      not Nx.Type.float?(type) ->
        raise ArgumentError,
              "Nx.Constants.#{name} expects a floating-point type, got: #{inspect(type)}"

      true ->
        :ok
    end

    build(fun.(type), type, opts)
  end

  defp limit(fun, type, opts) do
    type = Nx.Type.normalize!(type)

    if Nx.Type.complex?(type) do
      raise ArgumentError, "expected a real type, got: #{inspect(type)}"
    end

    build(fun.(type), type, opts)
  end

  defp build(value, type, opts) do
    opts = Keyword.validate!(opts, [:backend])
    tensor = Nx.tensor(value, type: type)
    if backend = opts[:backend], do: Nx.backend_transfer(tensor, backend), else: tensor
  end
end
