defmodule Nx.Serialization do
  @moduledoc false
  # Nx's binary format of a tensor or a container of tensors (Nx.serialize/2 and
  # Nx.deserialize/2), the same bytes as Nx 0.7.2 reads and writes:
  #
  #     "nx", version 1, endianness (0 little, 1 big), byte size of the term::64,
  #     the term (external term format), then the tensors' bytes one after another
  #
  # where the term describes the data: a tensor is
  # `{:t, shape, type, names, vectorized_axes, offset, size}` (`shape` and `names` those of
  # its devectorized form, `offset` and `size` where its bytes lie after the term) and a
  # container `{impl, [{key, term}], extra}`, what `Nx.Container.serialize/1` answers, rebuilt
  # with `impl.deserialize(pairs, extra)`.
  #
  # Nx 0.5 and earlier wrote one term, `{1, endianness, term}`, where a tensor is
  # `{:tensor, shape, type, names, bytes}`; it is still read.

  @prefix "nx"
  @version 1

  @spec serialize(term, list) :: iodata
  def serialize(data, opts) do
    {term, {buffers, _size}} = describe(data, {[], 0})
    term = :erlang.term_to_iovec(term, opts)

    # (the term is one binary when compressed, a list of them otherwise)
    header =
      <<@prefix, @version, endianness_byte(System.endianness()), IO.iodata_length(term)::64>>

    [header, term | Enum.reverse(buffers)]
  end

  defp describe(data, {buffers, offset} = acc) do
    if leaf?(data) do
      tensor = Nx.to_tensor(data)
      %Nx.Tensor{shape: shape, names: names} = Nx.devectorize(tensor)
      bytes = Nx.to_binary(tensor)
      size = byte_size(bytes)
      term = {:t, shape, tensor.type, names, tensor.vectorized_axes, offset, size}
      {term, {[bytes | buffers], offset + size}}
    else
      {impl, pairs, extra} = Nx.Container.serialize(data)

      {pairs, acc} =
        Enum.map_reduce(pairs, acc, fn {key, value}, acc ->
          {term, acc} = describe(value, acc)
          {{key, term}, acc}
        end)

      {{impl, pairs, extra}, acc}
    end
  end

  defp leaf?(%Nx.Tensor{}), do: true
  defp leaf?(%Complex{}), do: true
  defp leaf?(number), do: is_number(number)

  @spec deserialize(iodata, list) :: term
  def deserialize(data, opts) do
    case IO.iodata_to_binary(data) do
      <<@prefix, @version, endianness, size::64, term::binary-size(size), buffers::binary>> ->
        term |> :erlang.binary_to_term(opts) |> rebuild(byte_endianness(endianness), buffers)

      <<@prefix, version, _::binary>> ->
        raise ArgumentError, "cannot deserialize Nx format v#{version}"

      legacy ->
        {1, endianness, term} = :erlang.binary_to_term(legacy, opts)
        rebuild_legacy(term, endianness)
    end
  end

  defp rebuild(term, endianness, buffers) do
    case term do
      {:t, shape, type, names, vectorized_axes, offset, size} ->
        buffers
        |> binary_part(offset, size)
        |> tensor(type, endianness, shape, names)
        |> vectorize(vectorized_axes)

      {impl, pairs, extra} when is_atom(impl) and is_list(pairs) ->
        impl.deserialize(
          Enum.map(pairs, fn {k, v} -> {k, rebuild(v, endianness, buffers)} end),
          extra
        )

      _ ->
        raise ArgumentError, "unable to deserialize term to tensor: #{inspect(term)}"
    end
  end

  defp rebuild_legacy(term, endianness) do
    case term do
      {:tensor, shape, type, names, bytes} ->
        tensor(bytes, type, endianness, shape, names)

      {:container, container} ->
        {rebuilt, :ok} =
          Nx.Container.traverse(container, :ok, &{rebuild_legacy(&1, endianness), &2})

        rebuilt

      {impl, pairs, extra} when is_atom(impl) and is_list(pairs) ->
        impl.deserialize(
          Enum.map(pairs, fn {k, v} -> {k, rebuild_legacy(v, endianness)} end),
          extra
        )

      _ ->
        raise ArgumentError, "unable to deserialize binary term to tensor"
    end
  end

  defp tensor(bytes, type, endianness, shape, names) do
    bytes
    |> native_order(type, endianness)
    |> Nx.from_binary(type)
    |> Nx.reshape(shape, names: names)
  end

  defp vectorize(tensor, []), do: tensor
  defp vectorize(tensor, vectorized_axes), do: Nx.vectorize(tensor, vectorized_axes)

  @doc false
  # `bytes` of elements of `type` written in `endianness`, in this machine's order (the
  # parts of a complex number each swapped)
  def native_order(bytes, type, endianness) do
    if endianness == System.endianness() do
      bytes
    else
      bits =
        case type do
          {:c, bits} -> div(bits, 2)
          {_, bits} -> bits
        end

      for <<element::binary-size(div(bits, 8)) <- bytes>>, into: <<>>, do: reverse(element)
    end
  end

  defp reverse(bytes),
    do: bytes |> :binary.bin_to_list() |> Enum.reverse() |> :binary.list_to_bin()

  defp endianness_byte(:little), do: 0
  defp endianness_byte(:big), do: 1

  defp byte_endianness(0), do: :little
  defp byte_endianness(1), do: :big
end
