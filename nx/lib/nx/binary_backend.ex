defmodule Nx.BinaryBackend do
  @moduledoc """
  The data of a concrete tensor: its bytes, row-major and native-endian, in `state`.

  The functions here convert between flat lists of numbers and those bytes, and scan the
  bytes of integer indices for a value out of range (without building a list). Non-finite
  floats are the atoms `:nan`, `:infinity` and `:neg_infinity` (Erlang floats cannot hold
  them).
  """
  @enforce_keys [:state]
  defstruct [:state]

  @type t :: %__MODULE__{state: binary}

  @doc false
  # Nx.backend_copy/2 and Nx.backend_transfer/2 of a tensor in Elixir memory to Elixir memory:
  # the tensor itself (its binary is immutable).
  def copy(%Nx.Tensor{data: %__MODULE__{}} = tensor, _backend), do: tensor
  def transfer(%Nx.Tensor{data: %__MODULE__{}} = tensor, _backend), do: tensor

  @doc """
  Encodes a flat list of numbers as a binary of `type`.

  Integers out of an integer type's range wrap around (two's complement), as in Nx; floats
  given to an integer type are truncated toward zero.

  ## Examples

      iex> Nx.BinaryBackend.from_list([1, 2], {:u, 8})
      <<1, 2>>
      iex> Nx.BinaryBackend.from_list([256, -1], {:u, 8})
      <<0, 255>>
      iex> Nx.BinaryBackend.from_list([:nan, :infinity], {:f, 32}) |> Nx.BinaryBackend.to_list({:f, 32})
      [:nan, :infinity]

  """
  def from_list(list, type) when is_list(list) do
    for x <- list, into: <<>>, do: number_to_binary(x, type)
  end

  @doc """
  Encodes one number (or non-finite atom) as the bytes of one element of `type`.

  ## Examples

      iex> Nx.BinaryBackend.number_to_binary(1.0, {:f, 16}) |> Nx.BinaryBackend.to_list({:f, 16})
      [1.0]

  """
  def number_to_binary(true, type), do: number_to_binary(1, type)
  def number_to_binary(false, type), do: number_to_binary(0, type)

  # complex: the real part, then the imaginary part, each a float of half the size
  def number_to_binary(%Complex{re: re, im: im}, {:c, size}) do
    number_to_binary(re, {:f, div(size, 2)}) <> number_to_binary(im, {:f, div(size, 2)})
  end

  def number_to_binary(x, {:c, size}) when is_number(x) or is_atom(x) do
    number_to_binary(x, {:f, div(size, 2)}) <> number_to_binary(0.0, {:f, div(size, 2)})
  end

  def number_to_binary(%Complex{} = x, type) do
    raise ArgumentError,
          "cannot store the complex number #{inspect(x)} in a tensor of type #{inspect(type)}, " <>
            "use a complex type (:c64 or :c128)"
  end

  def number_to_binary(x, {:s, size}) when is_integer(x), do: <<x::signed-size(size)-native>>
  def number_to_binary(x, {:u, size}) when is_integer(x), do: <<x::unsigned-size(size)-native>>

  def number_to_binary(x, {class, _} = type) when is_float(x) and class in [:s, :u],
    do: number_to_binary(trunc(x), type)

  def number_to_binary(x, {class, _}) when is_atom(x) and class in [:s, :u] do
    raise ArgumentError, "cannot store #{inspect(x)} in an integer tensor"
  end

  def number_to_binary(x, {:bf, 16}) do
    <<bits::32-native>> = number_to_binary(x, {:f, 32})
    <<bf16_bits(bits)::16-native>>
  end

  def number_to_binary(:nan, {:f, size}), do: <<nan_bits(size)::size(size)-native>>
  def number_to_binary(:infinity, {:f, size}), do: <<inf_bits(size)::size(size)-native>>

  def number_to_binary(:neg_infinity, {:f, size}),
    do: <<inf_bits(size) + sign_bit(size)::size(size)-native>>

  def number_to_binary(x, {:f, size}) when is_number(x), do: <<x::float-size(size)-native>>

  def number_to_binary(x, type) do
    raise ArgumentError, "cannot store #{inspect(x)} in a tensor of type #{inspect(type)}"
  end

  # f32 bits -> bf16 bits by truncation, as Nx 0.7.2's binary backend stores a bf16 (its
  # top 16 bits: Nx.tensor(1 / 3, type: :bf16) holds 0.33203125, not the nearest 0.333984375);
  # the worker's results are rounded to nearest by XLA. A NaN stays a (quiet) NaN.
  defp bf16_bits(bits) do
    if Bitwise.band(bits, 0x7F800000) == 0x7F800000 and Bitwise.band(bits, 0x7FFFFF) != 0 do
      Bitwise.bor(Bitwise.bsr(bits, 16), 0x40)
    else
      Bitwise.bsr(bits, 16)
    end
  end

  defp nan_bits(16), do: 0x7E00
  defp nan_bits(32), do: 0x7FC00000
  defp nan_bits(64), do: 0x7FF8000000000000
  defp inf_bits(16), do: 0x7C00
  defp inf_bits(32), do: 0x7F800000
  defp inf_bits(64), do: 0x7FF0000000000000
  defp sign_bit(size), do: Bitwise.bsl(1, size - 1)

  @doc """
  Decodes a binary of `type` into a flat list of numbers; non-finite floats come back as
  `:nan`, `:infinity` or `:neg_infinity`, complex elements as `Complex` numbers.

  ## Examples

      iex> Nx.BinaryBackend.to_list(<<1, 255>>, {:s, 8})
      [1, -1]
      iex> Nx.BinaryBackend.to_list(<<0xFF800000::32-native>>, {:f, 32})
      [:neg_infinity]

  """
  def to_list(binary, {:s, size}), do: for(<<x::signed-size(size)-native <- binary>>, do: x)
  def to_list(binary, {:u, size}), do: for(<<x::unsigned-size(size)-native <- binary>>, do: x)

  def to_list(binary, {:bf, 16}) do
    for <<bits::16-native <- binary>>, do: decode_float(Bitwise.bsl(bits, 16), 32)
  end

  def to_list(binary, {:c, size}) do
    half = div(size, 2)

    for <<re::bitstring-size(half), im::bitstring-size(half) <- binary>> do
      [re] = to_list(re, {:f, half})
      [im] = to_list(im, {:f, half})
      Complex.new(re, im)
    end
  end

  def to_list(binary, {:f, size}) do
    for <<bits::size(size)-native <- binary>>, do: decode_float(bits, size)
  end

  @doc """
  The flat (row-major) position of the first element of an integer binary outside
  `[0, limit)`, or `nil`. `limits` is a tuple of exclusive upper bounds that the elements
  cycle through: element `i` is held to `elem(limits, rem(i, tuple_size(limits)))` (the
  positions along several axes, one per element of each row of indices). One pass over the
  bytes, no list built.

  ## Examples

      iex> Nx.BinaryBackend.first_out_of_range(<<0, 2, 1, 3>>, {:s, 8}, {2, 4})
      nil
      iex> Nx.BinaryBackend.first_out_of_range(<<0, 2, 1, 4>>, {:s, 8}, {2, 4})
      3
      iex> Nx.BinaryBackend.first_out_of_range(<<0, 255>>, {:s, 8}, {10})
      1

  """
  # one loop per integer type, each a bare binary match on a literal size (the binary first,
  # so that the match context is reused from one element to the next)
  for size <- [8, 16, 32, 64] do
    signed = :"scan_s#{size}"
    unsigned = :"scan_u#{size}"

    def first_out_of_range(binary, {:s, unquote(size)}, limits),
      do: unquote(signed)(binary, limits, 0, 0, tuple_size(limits))

    def first_out_of_range(binary, {:u, unquote(size)}, limits),
      do: unquote(unsigned)(binary, limits, 0, 0, tuple_size(limits))

    defp unquote(signed)(<<x::signed-unquote(size)-native, rest::binary>>, limits, k, i, n)
         when x >= 0 and x < elem(limits, k) do
      if k + 1 == n,
        do: unquote(signed)(rest, limits, 0, i + 1, n),
        else: unquote(signed)(rest, limits, k + 1, i + 1, n)
    end

    defp unquote(signed)(<<>>, _limits, _k, _i, _n), do: nil
    defp unquote(signed)(_out_of_range, _limits, _k, i, _n), do: i

    defp unquote(unsigned)(<<x::unsigned-unquote(size)-native, rest::binary>>, limits, k, i, n)
         when x < elem(limits, k) do
      if k + 1 == n,
        do: unquote(unsigned)(rest, limits, 0, i + 1, n),
        else: unquote(unsigned)(rest, limits, k + 1, i + 1, n)
    end

    defp unquote(unsigned)(<<>>, _limits, _k, _i, _n), do: nil
    defp unquote(unsigned)(_out_of_range, _limits, _k, i, _n), do: i
  end

  defp decode_float(bits, size) do
    # all exponent bits set: the bit pattern of +Inf
    exp_mask = inf_bits(size)
    sign = Bitwise.band(bits, sign_bit(size)) != 0

    cond do
      Bitwise.band(bits, exp_mask) != exp_mask ->
        <<x::float-size(size)>> = <<bits::size(size)>>
        x

      Bitwise.band(bits, Bitwise.bsl(1, mantissa_bits(size)) - 1) != 0 ->
        :nan

      sign ->
        :neg_infinity

      true ->
        :infinity
    end
  end

  defp mantissa_bits(16), do: 10
  defp mantissa_bits(32), do: 23
  defp mantissa_bits(64), do: 52
end
