defmodule Nx.ZipReader do
  @moduledoc false
  # Reads the files of a zip archive held in memory, for Nx.load_numpy_archive!/1. Erlang's
  # :zip (OTP 25) does not read the Zip64 headers that NumPy's savez writes for every entry
  # (force_zip64), so this reader follows the central directory itself:
  #
  #     end of central directory ("PK\5\6", the last 22+ bytes; "PK\6\6" for Zip64)
  #       -> central directory entries ("PK\1\2": method, sizes, name, local offset;
  #          sizes of 0xFFFFFFFF given in the Zip64 extra field, id 1)
  #       -> local headers ("PK\3\4", then name and extra field) -> the data
  #
  # Entries are stored (method 0) or deflated (method 8); each is checked against its CRC-32.

  @max 0xFFFFFFFF

  @doc false
  # `{:ok, [{name, bytes}]}` in the archive's order, or `:error`
  @spec files(binary) :: {:ok, [{String.t(), binary}]} | :error
  def files(archive) when is_binary(archive) do
    {count, offset} = central_directory(archive)
    {entries, _} = Enum.map_reduce(1..count//1, offset, fn _, at -> entry(archive, at) end)
    {:ok, Enum.map(entries, &contents(archive, &1))}
  rescue
    _ in [MatchError, ArgumentError, CaseClauseError, ErlangError, FunctionClauseError] ->
      :error
  end

  def files(_archive), do: :error

  # the number of entries and where the first one starts
  defp central_directory(archive) do
    tail_start = max(byte_size(archive) - 65_557, 0)
    tail = binary_part(archive, tail_start, byte_size(archive) - tail_start)
    {at, _} = tail |> :binary.matches("PK\x05\x06") |> List.last()
    end_at = tail_start + at

    <<"PK\x05\x06", _disks::32, count::16-little, _total::16, _size::32, offset::32-little,
      _::binary>> = binary_part(archive, end_at, byte_size(archive) - end_at)

    if count == 0xFFFF or offset == @max do
      # the Zip64 locator (20 bytes) precedes, and points at the Zip64 end record
      <<"PK\x06\x07", _disk::32, zip64_end::64-little, _::binary>> =
        binary_part(archive, end_at - 20, 20)

      <<"PK\x06\x06", _size::64, _versions::32, _disks::64, count::64-little, _total::64,
        _cd_size::64, offset::64-little,
        _::binary>> = binary_part(archive, zip64_end, byte_size(archive) - zip64_end)

      {count, offset}
    else
      {count, offset}
    end
  end

  defp entry(archive, at) do
    <<"PK\x01\x02", _made::16, _needed::16, _flags::16, method::16-little, _time::32,
      crc::32-little, compressed::32-little, size::32-little, name_size::16-little,
      extra_size::16-little, comment_size::16-little, _disk::16, _internal::16, _external::32,
      local::32-little, name::binary-size(name_size), extra::binary-size(extra_size),
      _comment::binary-size(comment_size),
      _::binary>> = binary_part(archive, at, byte_size(archive) - at)

    # the Zip64 extra field holds, in this order, those of the three that overflowed
    wide = zip64_field(extra)

    {[size, compressed, local], _} =
      Enum.map_reduce([size, compressed, local], wide, fn
        @max, <<value::64-little, rest::binary>> -> {value, rest}
        value, rest -> {value, rest}
      end)

    entry = %{name: name, method: method, crc: crc, compressed: compressed, size: size, at: local}
    {entry, at + 46 + name_size + extra_size + comment_size}
  end

  defp zip64_field(<<1::16-little, size::16-little, data::binary-size(size), _::binary>>),
    do: data

  defp zip64_field(<<_id::16, size::16-little, _::binary-size(size), rest::binary>>),
    do: zip64_field(rest)

  defp zip64_field(_none), do: <<>>

  defp contents(archive, %{at: at} = entry) do
    <<"PK\x03\x04", _::binary-size(22), name_size::16-little, extra_size::16-little, _::binary>> =
      binary_part(archive, at, 30)

    data = binary_part(archive, at + 30 + name_size + extra_size, entry.compressed)

    bytes =
      case entry.method do
        0 -> data
        8 -> inflate(data)
      end

    true = byte_size(bytes) == entry.size and :erlang.crc32(bytes) == entry.crc
    {entry.name, bytes}
  end

  defp inflate(data) do
    z = :zlib.open()

    try do
      # negative window bits: raw deflate data, no zlib header
      :ok = :zlib.inflateInit(z, -15)
      bytes = z |> :zlib.inflate(data) |> IO.iodata_to_binary()
      :zlib.inflateEnd(z)
      bytes
    after
      :zlib.close(z)
    end
  end
end
