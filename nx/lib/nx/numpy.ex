defmodule Nx.NumPy do
  @moduledoc false
  # Reading NumPy's files (Nx.load_numpy!/1, Nx.load_numpy_archive!/1). An .npy file is
  #
  #     "\x93NUMPY", major, minor, header length (u16 little-endian in version 1.0, u32 in
  #     2.0 and 3.0), the header, then the array's bytes
  #
  # where the header is a Python dict literal: 'descr' (byte order, kind and byte size, as
  # '<i8' or '|u1'), 'fortran_order' (True: column-major) and 'shape' (a tuple). An .npz
  # archive is a zip file of .npy files, stored or deflated (Nx.ZipReader reads it).

  @corrupted "unable to parse NumPy file, it may be corrupted or invalid"

  @spec load!(binary) :: Nx.Tensor.t()
  def load!(<<"\x93NUMPY", major, _minor, rest::binary>>) when major in 1..3 do
    {header, data} =
      case {major, rest} do
        {1, <<size::16-little, header::binary-size(size), data::binary>>} -> {header, data}
        {_, <<size::32-little, header::binary-size(size), data::binary>>} -> {header, data}
        _ -> raise ArgumentError, @corrupted
      end

    {endianness, type} = descr!(header)
    shape = shape!(header)
    bytes = Nx.Type.byte_size(type) * Nx.Shape.size(shape)

    unless byte_size(data) == bytes, do: raise(ArgumentError, @corrupted)

    tensor =
      data
      |> Nx.Serialization.native_order(type, endianness)
      |> Nx.from_binary(type)

    if fortran_order!(header) do
      # column-major: the reversed shape in row-major order, its axes reversed back
      reversed = shape |> Tuple.to_list() |> Enum.reverse() |> List.to_tuple()
      tensor |> Nx.reshape(reversed) |> Nx.transpose()
    else
      Nx.reshape(tensor, shape)
    end
  end

  def load!(_data), do: raise(ArgumentError, @corrupted)

  defp descr!(header) do
    case Regex.run(~r/'descr':\s*'([<>|=])([a-z])(\d+)'/, header) do
      [_, order, kind, bytes] -> {endianness(order), type!(kind, String.to_integer(bytes))}
      nil -> raise ArgumentError, @corrupted
    end
  end

  # '|' is for one-byte types (no order), '=' this machine's order
  defp endianness("<"), do: :little
  defp endianness(">"), do: :big
  defp endianness(_native), do: System.endianness()

  defp type!(kind, bytes) do
    case {kind, bytes} do
      {"u", bytes} when bytes in [1, 2, 4, 8] -> {:u, bytes * 8}
      {"i", bytes} when bytes in [1, 2, 4, 8] -> {:s, bytes * 8}
      {"f", bytes} when bytes in [2, 4, 8] -> {:f, bytes * 8}
      _ -> raise ArgumentError, "unsupported numpy type: #{kind}#{bytes}"
    end
  end

  defp fortran_order!(header) do
    case Regex.run(~r/'fortran_order':\s*(True|False)/, header) do
      [_, "True"] -> true
      [_, "False"] -> false
      nil -> raise ArgumentError, @corrupted
    end
  end

  defp shape!(header) do
    case Regex.run(~r/'shape':\s*\(([\d,\s]*)\)/, header) do
      [_, dims] ->
        dims
        |> String.split(",", trim: true)
        |> Enum.map(&String.trim/1)
        |> Enum.reject(&(&1 == ""))
        |> Enum.map(&String.to_integer/1)
        |> List.to_tuple()

      nil ->
        raise ArgumentError, @corrupted
    end
  end

  @spec load_archive!(binary) :: [{String.t(), Nx.Tensor.t()}]
  def load_archive!(archive) do
    case Nx.ZipReader.files(archive) do
      {:ok, files} ->
        for {name, data} <- files, do: {String.replace_suffix(name, ".npy", ""), load!(data)}

      :error ->
        raise ArgumentError, "unable to parse NumPy archive, it may be corrupted or invalid"
    end
  end
end
