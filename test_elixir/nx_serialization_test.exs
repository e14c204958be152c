# Nx.serialize/2 and Nx.deserialize/2 in Nx's binary format, and NumPy's .npy/.npz files
# (Nx.load_numpy!/1, Nx.load_numpy_archive!/1).
#
# test_elixir/reference/nx_0.7.2_serialized/*.nx were written by real Nx 0.7.2's
# Nx.serialize/1 (Elixir 1.14, OTP 25, little-endian); the values they must deserialize to
# are those Nx 0.7.2 prints for them. test_elixir/reference/numpy/ was written by NumPy 2.4
# (np.save, np.savez, np.savez_compressed, format.write_array version 2.0); the expected
# tensors are what Nx 0.7.2's load_numpy!/1 answers where it reads the file.
defmodule Nx.SerializationTest do
  use ExUnit.Case, async: true

  @serialized Path.join(__DIR__, "reference/nx_0.7.2_serialized")
  @numpy Path.join(__DIR__, "reference/numpy")

  # (test_elixir/support/containers.ex: containers [:w, :b], keep [:activation])
  alias NxJax.ContainerTest.Layer
  defp nx_file(name), do: File.read!(Path.join(@serialized, name <> ".nx"))
  defp npy(name), do: File.read!(Path.join(@numpy, name))

  # the data each reference file holds, as Nx 0.7.2 built it
  defp references do
    %{
      "tensor_s64_names" => Nx.tensor([[1, 2, 3], [4, 5, 6]], names: [:x, :y]),
      "container" =>
        {Nx.tensor([1.5, -2.0], type: :f64),
         %{a: Nx.tensor(7, type: :u8), b: {Nx.tensor([1, 2], type: :s16)}}},
      "numbers" => {123, 1.2},
      "vectorized" =>
        Nx.iota({2, 3, 2}, type: :f32, names: [nil, nil, :z])
        |> Nx.vectorize(:x)
        |> Nx.vectorize(:y),
      "bf16_f16" => {Nx.tensor([1.5, 2.0], type: :bf16), Nx.tensor([0.25], type: :f16)},
      "empty_map" => {%{}, Nx.tensor([1], type: :u8)}
    }
  end

  # a reference file with its description (the term after the header) decoded and written
  # again by this VM's term_to_binary with `opts`: OTP 26 and later write atoms as UTF-8
  # atoms (SMALL_ATOM_UTF8_EXT, tag 119) where the OTP 25 that wrote the files wrote ATOM_EXT
  # (tag 100); `minor_version: 2` asks OTP 25 for the newer encoding too
  defp rewritten(file, opts) do
    <<"nx", 1, endianness, size::64, term::binary-size(size), buffers::binary>> = file
    term = term |> :erlang.binary_to_term() |> :erlang.term_to_binary(opts)
    <<"nx", 1, endianness, byte_size(term)::64, term::binary, buffers::binary>>
  end

  defp maps_in_sorted_order?(%Nx.Tensor{}), do: true

  defp maps_in_sorted_order?(data) when is_map(data) and not is_struct(data),
    do:
      Map.keys(data) == Enum.sort(Map.keys(data)) and
        Enum.all?(Map.values(data), &maps_in_sorted_order?/1)

  defp maps_in_sorted_order?(data) when is_tuple(data),
    do: data |> Tuple.to_list() |> Enum.all?(&maps_in_sorted_order?/1)

  defp maps_in_sorted_order?(_number), do: true

  describe "serialize/2" do
    test "writes the bytes Nx 0.7.2 writes on this VM" do
      # Nx 0.7.2 writes the description with term_to_binary, so the atoms' encoding is the
      # running OTP's: the reference bytes themselves under OTP 25, their atoms re-encoded
      # under OTP 26 and later
      otp_25? = String.to_integer(System.otp_release()) < 26

      for {name, data} <- references() do
        written = IO.iodata_to_binary(Nx.serialize(data))

        # A map's pairs are written in the VM's order of its keys (Map.to_list/1, in Nx 0.7.2
        # as here), sorted under OTP 25 and not always since OTP 26: where this VM's order is
        # not the sorted one, the bytes differ from the OTP 25 file's (as real Nx's do on this
        # VM), and what must hold is that both read back to the same data.
        if maps_in_sorted_order?(data) do
          assert written == rewritten(nx_file(name), []), name
        else
          assert Nx.deserialize(written) == Nx.deserialize(nx_file(name)), name
        end

        if otp_25?, do: assert(written == nx_file(name), name)
      end
    end

    test "compressed: the description of the data is compressed, and it still reads back" do
      data = {Nx.iota({100}), %{w: Nx.broadcast(0.5, {10, 10})}}
      plain = IO.iodata_to_binary(Nx.serialize(data))
      compressed = IO.iodata_to_binary(Nx.serialize(data, compressed: 9))
      assert byte_size(compressed) < byte_size(plain)
      assert Nx.deserialize(compressed) == Nx.deserialize(plain)
      assert Nx.deserialize(compressed) == {Nx.iota({100}), %{w: Nx.broadcast(0.5, {10, 10})}}
    end

    test "a list, an atom or a tensor traced inside defn is refused" do
      # (the protocol and the value; the wording of the message is Elixir's own, and changed
      # in Elixir 1.18)
      for value <- [[1], :foo] do
        error = assert_raise Protocol.UndefinedError, fn -> Nx.serialize(value) end
        assert {error.protocol, error.value} == {Nx.Container, value}
      end

      assert_raise ArgumentError, ~r/cannot call Nx.to_binary on a tensor without data/, fn ->
        Nx.serialize(Nx.template({2}, :f32))
      end
    end
  end

  describe "deserialize/2" do
    test "reads what Nx 0.7.2 wrote: types, names, containers, numbers, vectorized axes" do
      assert Nx.deserialize(nx_file("tensor_s64_names")) ==
               Nx.tensor([[1, 2, 3], [4, 5, 6]], names: [:x, :y])

      assert Nx.deserialize(nx_file("container")) ==
               {Nx.tensor([1.5, -2.0], type: :f64),
                %{a: Nx.tensor(7, type: :u8), b: {Nx.tensor([1, 2], type: :s16)}}}

      # numbers come back as tensors of their default types
      assert Nx.deserialize(nx_file("numbers")) == {Nx.tensor(123), Nx.tensor(1.2)}
      assert Nx.deserialize(nx_file("bf16_f16")) == references()["bf16_f16"]
      assert Nx.deserialize(nx_file("empty_map")) == {%{}, Nx.tensor([1], type: :u8)}

      v = Nx.deserialize(nx_file("vectorized"))
      assert v.vectorized_axes == [x: 2, y: 3]
      assert v.shape == {2}
      assert v.names == [:z]
      assert Nx.to_flat_list(v) == Enum.map(0..11, &(&1 * 1.0))
    end

    test "reads files whose atoms are UTF-8 atoms, as Nx 0.7.2 writes them under OTP 26+" do
      for {name, data} <- references() do
        utf8 = rewritten(nx_file(name), minor_version: 2)
        # (every file names atoms: :t, the types' kinds, containers' modules)
        assert utf8 != nx_file(name), name
        expected = Nx.deserialize(nx_file(name))
        assert Nx.deserialize(utf8) == expected, name
        assert Nx.deserialize(utf8, [:safe]) == expected, name
        assert Nx.deserialize(Nx.serialize(data, minor_version: 2)) == expected, name
      end
    end

    test "structs: containers rebuilt, kept fields kept, the others back to their defaults" do
      layer = %Layer{w: Nx.tensor([1.0]), b: {2, Nx.tensor([3])}, activation: :relu, cache: :x}

      assert Nx.deserialize(Nx.serialize(layer)) ==
               %Layer{w: Nx.tensor([1.0]), b: {Nx.tensor(2), Nx.tensor([3])}, activation: :relu}
    end

    test "iodata in, and binary_to_term's options (:safe) passed on" do
      data = Nx.serialize(Nx.tensor([1, 2], type: :u8))
      assert is_list(data)
      assert Nx.deserialize(data, [:safe]) == Nx.tensor([1, 2], type: :u8)
    end

    test "a big-endian file is read in this machine's byte order" do
      # the reference container with its endianness byte set to big and each element's
      # bytes reversed, as a big-endian machine writes it
      little = nx_file("container")
      <<"nx", 1, 0, size::64, term::binary-size(size), buffers::binary>> = little
      swapped = for <<x::64-little <- binary_part(buffers, 0, 16)>>, into: <<>>, do: <<x::64-big>>
      # then the u8 (no order) and the two s16
      <<_::binary-size(16), u8::binary-size(1), s16::binary-size(4)>> = buffers
      s16 = for <<x::16-little <- s16>>, into: <<>>, do: <<x::16-big>>
      big = <<"nx", 1, 1, size::64, term::binary, swapped::binary, u8::binary, s16::binary>>
      assert Nx.deserialize(big) == Nx.deserialize(little)
    end

    test "the format of Nx 0.5 and earlier (a single term) is still read" do
      # {1, endianness, term} with {:tensor, shape, type, names, bytes} leaves
      legacy =
        :erlang.term_to_binary(
          {1, :little,
           {Nx.Container.Tuple,
            [
              {[], {:tensor, {2}, {:s, 16}, [:i], <<1, 0, 255, 255>>}},
              {[], {:container, %{k: {:tensor, {}, {:f, 32}, [], <<0, 0, 192, 63>>}}}}
            ], :ok}}
        )

      assert Nx.deserialize(legacy) ==
               {Nx.tensor([1, -1], type: :s16, names: [:i]), %{k: Nx.tensor(1.5)}}
    end

    test "unknown versions and terms raise Nx's errors" do
      assert_raise ArgumentError, "cannot deserialize Nx format v2", fn ->
        Nx.deserialize(<<"nx", 2, 0>>)
      end

      term = :erlang.term_to_binary(:foo)

      assert_raise ArgumentError, "unable to deserialize term to tensor: :foo", fn ->
        Nx.deserialize(<<"nx", 1, 0, byte_size(term)::64, term::binary>>)
      end

      assert_raise ArgumentError, "unable to deserialize binary term to tensor", fn ->
        Nx.deserialize(:erlang.term_to_binary({1, :little, :foo}))
      end
    end
  end

  describe "load_numpy!/1" do
    test "integer, unsigned and float arrays of any rank, as Nx 0.7.2 reads them" do
      assert Nx.load_numpy!(npy("scalar_int64.npy")) == Nx.tensor(123, type: :s64)
      assert Nx.load_numpy!(npy("vector_int64.npy")) == Nx.tensor([1, 2, 3, 4], type: :s64)

      assert Nx.load_numpy!(npy("matrix_float32.npy")) ==
               Nx.tensor([[1, 2], [3, 4], [5, 6]], type: :f32)

      assert Nx.load_numpy!(npy("vector_uint8.npy")) == Nx.tensor([1, 2, 3], type: :u8)
      assert Nx.load_numpy!(npy("vector_float16.npy")) == Nx.tensor([0.5, 2.0, -4.0], type: :f16)
    end

    test "Fortran order and format version 2.0" do
      assert Nx.load_numpy!(npy("matrix_fortran_int16.npy")) ==
               Nx.tensor([[1, -2, 3], [4, 5, -6]], type: :s16)

      assert Nx.load_numpy!(npy("vector_version2_int32.npy")) ==
               Nx.tensor([-1, 0, 7], type: :s32)
    end

    test "big-endian arrays (Nx 0.7.2 fails on these: it drops leading zero bytes)" do
      assert Nx.load_numpy!(npy("vector_big_endian_float64.npy")) ==
               Nx.tensor([0.5, -1.25, 3.0], type: :f64)

      assert Nx.load_numpy!(npy("matrix_big_endian_uint32.npy")) ==
               Nx.tensor([[1, 65536], [7, 4_294_967_295]], type: :u32)
    end

    test "bad input raises" do
      assert_raise ArgumentError,
                   "unable to parse NumPy file, it may be corrupted or invalid",
                   fn ->
                     Nx.load_numpy!("not numpy")
                   end

      truncated = binary_part(npy("vector_int64.npy"), 0, 150)

      assert_raise ArgumentError,
                   "unable to parse NumPy file, it may be corrupted or invalid",
                   fn ->
                     Nx.load_numpy!(truncated)
                   end

      assert_raise ArgumentError, "unsupported numpy type: b1", fn ->
        Nx.load_numpy!(npy("vector_bool.npy"))
      end

      assert_raise ArgumentError, "unsupported numpy type: c8", fn ->
        Nx.load_numpy!(npy("vector_complex64.npy"))
      end
    end
  end

  describe "load_numpy_archive!/1" do
    @expected [
      {"foo", Nx.tensor([1, 2, 3], type: :s64)},
      {"bar", Nx.tensor([-1, 1], type: :f32)},
      {"a_longer_name", Nx.tensor([123], type: :s64)}
    ]

    test "stored and compressed archives as NumPy writes them (Zip64 headers)" do
      assert Nx.load_numpy_archive!(npy("archive.npz")) == @expected
      assert Nx.load_numpy_archive!(npy("archive_compressed.npz")) == @expected
    end

    test "an archive without Zip64 headers (as Erlang's :zip writes it)" do
      files = for {name, _} <- @expected, do: {~c"#{name}.npy", npy_of(name)}
      {:ok, {_, zip}} = :zip.create(~c"a.npz", files, [:memory])
      assert Nx.load_numpy_archive!(zip) == @expected
    end

    test "corrupted archives raise" do
      message = "unable to parse NumPy archive, it may be corrupted or invalid"
      assert_raise ArgumentError, message, fn -> Nx.load_numpy_archive!("not a zip file") end

      # one byte of the compressed data changed: the CRC no longer matches
      archive = npy("archive_compressed.npz")
      <<head::binary-size(100), byte, rest::binary>> = archive
      broken = <<head::binary, Bitwise.bxor(byte, 0xFF), rest::binary>>
      assert_raise ArgumentError, message, fn -> Nx.load_numpy_archive!(broken) end
    end
  end

  # the .npy bytes of one member of the reference archive
  defp npy_of(name) do
    {:ok, files} = Nx.ZipReader.files(npy("archive.npz"))
    {_, bytes} = List.keyfind(files, name <> ".npy", 0)
    bytes
  end
end
