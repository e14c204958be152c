defmodule Nx.Type do
  @moduledoc """
  Tensor types and the rules that combine them, as in Nx 0.7.

  A type is a tuple `{class, bits}`: `{:u, 8 | 16 | 32 | 64}`, `{:s, 8 | 16 | 32 | 64}`,
  `{:f, 16 | 32 | 64}`, `{:bf, 16}` or the complex `{:c, 64 | 128}` (two f32 or two f64
  parts). Atoms such as `:f32` or `:u8` are accepted as shorthands wherever a type is given.
  """

  @types [
    {:u, 8},
    {:u, 16},
    {:u, 32},
    {:u, 64},
    {:s, 8},
    {:s, 16},
    {:s, 32},
    {:s, 64},
    {:f, 16},
    {:f, 32},
    {:f, 64},
    {:bf, 16},
    {:c, 64},
    {:c, 128}
  ]

  @shorthands Map.new(@types, fn {class, bits} = type ->
                {String.to_atom("#{class}#{bits}"), type}
              end)

  @type t :: {:u | :s | :f | :bf | :c, pos_integer}

  @doc """
  Returns every supported type.

  ## Examples

      iex> length(Nx.Type.all())
      14

  """
  def all, do: @types

  @doc """
  Validates and normalizes a type, accepting the shorthand atoms.

  ## Examples

      iex> Nx.Type.normalize!({:f, 32})
      {:f, 32}
      iex> Nx.Type.normalize!(:bf16)
      {:bf, 16}
      iex> Nx.Type.normalize!(:u8)
      {:u, 8}
      iex> Nx.Type.normalize!({:f, 8})
      ** (ArgumentError) invalid numerical type: {:f, 8} (see Nx.Type docs for all supported types)

  """
  def normalize!(type) when type in @types, do: type

  def normalize!(type) when is_map_key(@shorthands, type), do: Map.fetch!(@shorthands, type)

  def normalize!(type) do
    raise ArgumentError,
          "invalid numerical type: #{inspect(type)} (see Nx.Type docs for all supported types)"
  end

  @doc """
  Infers the type of a number: integers are `{:s, 64}`, floats (and the non-finite atoms)
  `{:f, 32}`, `Complex` numbers `{:c, 64}`.

  ## Examples

      iex> Nx.Type.infer(1)
      {:s, 64}
      iex> Nx.Type.infer(1.0)
      {:f, 32}
      iex> Nx.Type.infer(:nan)
      {:f, 32}

  """
  def infer(value) when is_integer(value), do: {:s, 64}
  def infer(value) when is_float(value), do: {:f, 32}
  def infer(value) when value in [:nan, :infinity, :neg_infinity], do: {:f, 32}
  def infer(value) when is_boolean(value), do: {:u, 8}
  def infer(%Complex{}), do: {:c, 64}

  def infer(value) do
    raise ArgumentError, "cannot infer the numerical type of #{inspect(value)}"
  end

  @doc """
  Merges two types into the type that can hold both.

  Two types of the same kind merge into the wider one. Otherwise the kind ranked higher
  (complex, then `f`, then `bf`, then signed, then unsigned integers) wins with its own
  width, as in Nx 0.7.2: `c64` with `f64` is `c64`, `bf16` with `f16` is `f16`, `s64`
  with `f16` is `f16`. Signed and unsigned integers merge into a signed type big enough
  for both (at most 64 bits).

  ## Examples

      iex> Nx.Type.merge({:s, 8}, {:f, 32})
      {:f, 32}
      iex> Nx.Type.merge({:f, 32}, {:f, 64})
      {:f, 64}
      iex> Nx.Type.merge({:bf, 16}, {:f, 16})
      {:f, 16}
      iex> Nx.Type.merge({:u, 8}, {:s, 8})
      {:s, 16}
      iex> Nx.Type.merge({:u, 64}, {:s, 32})
      {:s, 64}
      iex> Nx.Type.merge({:u, 8}, {:u, 16})
      {:u, 16}
      iex> Nx.Type.merge({:c, 64}, {:f, 64})
      {:c, 64}
      iex> Nx.Type.merge({:s, 64}, {:c, 64})
      {:c, 64}

  A number on either side is merged with `merge_number/2`:

      iex> Nx.Type.merge({:u, 8}, 2.0)
      {:f, 32}

  """
  def merge(type, number) when is_tuple(type) and not is_tuple(number),
    do: merge_number(type, number)

  def merge(number, type) when is_tuple(type) and not is_tuple(number),
    do: merge_number(type, number)

  def merge(type, type), do: type
  def merge({:c, a}, {:c, b}), do: {:c, max(a, b)}
  def merge({:c, _} = type, _), do: type
  def merge(_, {:c, _} = type), do: type
  def merge({:bf, 16}, {:f, _} = right), do: right
  def merge({:f, _} = left, {:bf, 16}), do: left
  def merge({:f, a}, {:f, b}), do: {:f, max(a, b)}
  def merge({left, _} = type, {_, _}) when left in [:f, :bf], do: type
  def merge({_, _}, {right, _} = type) when right in [:f, :bf], do: type
  def merge({class, a}, {class, b}), do: {class, max(a, b)}
  def merge({:s, s}, {:u, u}), do: signed_unsigned(s, u)
  def merge({:u, u}, {:s, s}), do: signed_unsigned(s, u)

  defp signed_unsigned(s, u) when u < s, do: {:s, s}
  defp signed_unsigned(_s, u), do: {:s, min(u * 2, 64)}

  @doc """
  Merges a tensor type with a number, with Nx's weak typing of numbers.

  An integer keeps an integer type when it fits, else widens it as Nx 0.7.2 does: an
  unsigned type grows to the unsigned size that holds a non-negative integer, and becomes
  signed, twice as wide (at most 64 bits), for a negative one; a signed type grows to the
  signed size that holds the integer. An integer keeps a floating or complex type. A float
  turns an integer type into `{:f, 32}` and keeps a floating or complex type; a `Complex`
  number makes the type complex (`to_complex/1`).

  ## Examples

      iex> Nx.Type.merge_number({:u, 8}, 3)
      {:u, 8}
      iex> Nx.Type.merge_number({:u, 8}, 300)
      {:u, 16}
      iex> Nx.Type.merge_number({:u, 8}, -1)
      {:s, 16}
      iex> Nx.Type.merge_number({:s, 8}, -200)
      {:s, 16}
      iex> Nx.Type.merge_number({:u, 32}, -1)
      {:s, 64}
      iex> Nx.Type.merge_number({:s, 32}, 1.5)
      {:f, 32}
      iex> Nx.Type.merge_number({:f, 16}, 1.5)
      {:f, 16}
      iex> Nx.Type.merge_number({:f, 64}, Complex.new(0, 1))
      {:c, 128}

  """
  def merge_number({:u, size}, integer) when is_integer(integer) and integer >= 0,
    do: {:u, max(integer_size(integer, 0), size)}

  def merge_number({:u, size}, integer) when is_integer(integer),
    do: merge_number({:s, min(size * 2, 64)}, integer)

  def merge_number({:s, size}, integer) when is_integer(integer),
    do: {:s, max(integer_size(integer, 1), size)}

  def merge_number(type, number) when is_integer(number) or is_boolean(number), do: type

  def merge_number(type, number)
      when is_float(number) or number in [:nan, :infinity, :neg_infinity] do
    if float?(type) or complex?(type), do: type, else: {:f, 32}
  end

  def merge_number(type, %Complex{}), do: to_complex(type)

  # the fewest of 8, 16, 32, 64 bits that hold `integer` (with a sign bit when `sign` is 1);
  # 64 for anything larger (it wraps there, as in Nx)
  defp integer_size(integer, sign) do
    Enum.find([8, 16, 32], 64, fn bits ->
      integer >= -sign * Bitwise.bsl(1, bits - 1) and
        integer < Bitwise.bsl(1, bits - sign)
    end)
  end

  @doc """
  The floating type a computation on `type` produces: integers become `{:f, 32}`, floats and
  complex types stay.

  ## Examples

      iex> Nx.Type.to_floating({:s, 64})
      {:f, 32}
      iex> Nx.Type.to_floating({:f, 64})
      {:f, 64}
      iex> Nx.Type.to_floating({:bf, 16})
      {:bf, 16}

  """
  def to_floating({class, _} = type) when class in [:f, :bf, :c], do: type
  def to_floating(_), do: {:f, 32}

  @doc """
  The real type of a complex type (`{:c, 64}` -> `{:f, 32}`, `{:c, 128}` -> `{:f, 64}`); a
  real type gives `to_floating/1` of it.

  ## Examples

      iex> Nx.Type.to_real({:c, 64})
      {:f, 32}
      iex> Nx.Type.to_real({:c, 128})
      {:f, 64}
      iex> Nx.Type.to_real({:s, 8})
      {:f, 32}
  """
  def to_real({:c, bits}), do: {:f, div(bits, 2)}
  def to_real(type), do: to_floating(type)

  @doc """
  The complex type holding `type`: `{:f, 64}` gives `{:c, 128}`, complex types stay, anything
  else gives `{:c, 64}`.

  ## Examples

      iex> Nx.Type.to_complex({:f, 64})
      {:c, 128}
      iex> Nx.Type.to_complex({:u, 8})
      {:c, 64}
  """
  def to_complex({:c, _} = type), do: type
  def to_complex({:f, 64}), do: {:c, 128}
  def to_complex(_), do: {:c, 64}

  @doc """
  Whether the type is complex.

  ## Examples

      iex> Nx.Type.complex?({:c, 64})
      true
      iex> Nx.Type.complex?({:f, 64})
      false
  """
  def complex?({class, _}), do: class == :c

  @doc """
  The type of a sum or product over `type`: signed integers become `{:s, 64}`, unsigned
  `{:u, 64}`, floats and complex types stay.

  ## Examples

      iex> Nx.Type.to_aggregate({:s, 8})
      {:s, 64}
      iex> Nx.Type.to_aggregate({:u, 8})
      {:u, 64}
      iex> Nx.Type.to_aggregate({:f, 16})
      {:f, 16}

  """
  def to_aggregate({:s, _}), do: {:s, 64}
  def to_aggregate({:u, _}), do: {:u, 64}
  def to_aggregate(type), do: type

  @doc """
  Whether the type is a floating-point type. As in Nx 0.7.2 the complex types count as
  floating point here (their parts are floats); `complex?/1` tells them apart.

  ## Examples

      iex> Nx.Type.float?({:bf, 16})
      true
      iex> Nx.Type.float?({:c, 64})
      true
      iex> Nx.Type.float?({:s, 64})
      false

  """
  def float?({class, _}), do: class in [:f, :bf, :c]

  @doc """
  Whether the type is an integer type.

  ## Examples

      iex> Nx.Type.integer?({:u, 8})
      true
      iex> Nx.Type.integer?({:f, 32})
      false

  """
  def integer?({class, _}), do: class in [:s, :u]

  @doc """
  The largest finite value of `type` (an integer for integer types).

  ## Examples

      iex> Nx.Type.max_finite({:u, 8})
      255
      iex> Nx.Type.max_finite({:f, 16})
      65504.0

  """
  def max_finite({:u, bits}), do: Integer.pow(2, bits) - 1
  def max_finite({:s, bits}), do: Integer.pow(2, bits - 1) - 1
  def max_finite(type), do: (2 - epsilon(type)) * :math.pow(2, max_exponent(type))

  @doc """
  The smallest (most negative) finite value of `type`.

  ## Examples

      iex> Nx.Type.min_finite({:s, 8})
      -128
      iex> Nx.Type.min_finite({:f, 64})
      -1.7976931348623157e308

  """
  def min_finite({:u, _}), do: 0
  def min_finite({:s, bits}), do: -Integer.pow(2, bits - 1)
  def min_finite(type), do: -max_finite(type)

  @doc """
  The distance from 1.0 to the next value of a floating-point `type`.

  ## Examples

      iex> Nx.Type.epsilon({:f, 32})
      1.1920928955078125e-7
      iex> Nx.Type.epsilon({:bf, 16})
      0.0078125

  """
  def epsilon(type), do: :math.pow(2, -mantissa_bits(type))

  @doc """
  The smallest positive normal value of a floating-point `type`.

  ## Examples

      iex> Nx.Type.smallest_positive_normal({:f, 16})
      6.103515625e-5

  """
  def smallest_positive_normal(type), do: :math.pow(2, 1 - max_exponent(type))

  # {stored mantissa bits, largest exponent} of each floating-point type (IEEE 754; bfloat16
  # has f32's exponent); complex types have their parts' values
  defp float_format({:f, 16}), do: {10, 15}
  defp float_format({:bf, 16}), do: {7, 127}
  defp float_format({:f, 32}), do: {23, 127}
  defp float_format({:f, 64}), do: {52, 1023}
  defp float_format({:c, bits}), do: float_format({:f, div(bits, 2)})

  defp float_format(type),
    do: raise(ArgumentError, "expected a floating-point type, got: #{inspect(type)}")

  defp mantissa_bits(type), do: elem(float_format(type), 0)
  defp max_exponent(type), do: elem(float_format(type), 1)

  @doc """
  The type's name as Nx prints it.

  ## Examples

      iex> Nx.Type.to_string({:f, 32})
      "f32"
      iex> Nx.Type.to_string({:bf, 16})
      "bf16"

  """
  def to_string({class, bits}), do: "#{class}#{bits}"

  @doc """
  The size of one element of `type` in bytes.

  ## Examples

      iex> Nx.Type.byte_size({:f, 64})
      8
      iex> Nx.Type.byte_size({:bf, 16})
      2

  """
  def byte_size({_, bits}), do: div(bits, 8)
end
