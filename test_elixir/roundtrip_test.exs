defmodule NxJax.RoundTripTest do
  # Every supported type, with its extreme and non-finite values (NaN with sign and payload
  # bits, +Inf, -Inf, -0.0, subnormals) and empty tensors, travels to the worker and back
  # bit for bit: through a graph that returns its parameter, an eager op (reshape) and a
  # resident tensor (put, fetch).
  use ExUnit.Case, async: true

  # bit patterns, little-endian as on the wire
  @patterns %{
    {:u, 8} => [0, 1, 0x7F, 0xFF],
    {:u, 16} => [0, 1, 0xFFFF],
    {:u, 32} => [0, 1, 0xFFFF_FFFF],
    {:u, 64} => [0, 1, 0xFFFF_FFFF_FFFF_FFFF],
    {:s, 8} => [0, 0x80, 0x7F, 0xFF],
    {:s, 16} => [0, 0x8000, 0x7FFF, 0xFFFF],
    {:s, 32} => [0, 0x8000_0000, 0x7FFF_FFFF, 0xFFFF_FFFF],
    {:s, 64} => [0, 0x8000_0000_0000_0000, 0x7FFF_FFFF_FFFF_FFFF, 0xFFFF_FFFF_FFFF_FFFF],
    # 0, -0, +inf, -inf, NaN, -NaN, NaN with payload, smallest subnormal, largest finite
    {:f, 16} => [0, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7E01, 0x0001, 0x7BFF],
    {:bf, 16} => [0, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7FC1, 0x0001, 0x7F7F],
    {:f, 32} => [
      0,
      0x8000_0000,
      0x7F80_0000,
      0xFF80_0000,
      0x7FC0_0000,
      0xFFC0_0000,
      0x7FC0_0001,
      0x0000_0001,
      0x7F7F_FFFF
    ],
    {:f, 64} => [
      0,
      0x8000_0000_0000_0000,
      0x7FF0_0000_0000_0000,
      0xFFF0_0000_0000_0000,
      0x7FF8_0000_0000_0000,
      0xFFF8_0000_0000_0000,
      0x7FF8_0000_0000_0001,
      0x0000_0000_0000_0001,
      0x7FEF_FFFF_FFFF_FFFF
    ]
  }

  defp binary_of({:c, 64}), do: pairs({:f, 32})
  defp binary_of({:c, 128}), do: pairs({:f, 64})

  defp binary_of({_, bits} = type),
    do: for(p <- @patterns[type], into: <<>>, do: <<p::size(bits)-little>>)

  # every (re, im) combination of the float patterns: all non-finite mixes in both parts
  defp pairs({:f, bits} = type) do
    ps = @patterns[type]
    for re <- ps, im <- ps, into: <<>>, do: <<re::size(bits)-little, im::size(bits)-little>>
  end

  @types Map.keys(@patterns) ++ [{:c, 64}, {:c, 128}]

  defp tensor(type) do
    binary = binary_of(type)
    {_, bits} = type
    Nx.from_binary(binary, type) |> Nx.reshape({div(byte_size(binary) * 8, bits)})
  end

  defp identity_graph(type, shape) do
    :erlang.term_to_binary(
      {:nx_jax_graph, 1, [{0, :parameter, [], %{index: 0}, {type, shape}}], [0]}
    )
  end

  for type <- @types do
    test "#{inspect(type)}: every bit pattern survives a graph, an eager op and residency" do
      type = unquote(Macro.escape(type))
      t = tensor(type)
      bin = Nx.to_binary(t)
      {n} = t.shape

      # a graph whose output is its parameter
      assert [{^type, {^n}, ^bin}] =
               NxJax.Worker.run(identity_graph(type, {n}), [{type, {n}, bin}])

      # an eager op on the worker
      reshaped = Nx.reshape(t, {1, n})
      assert reshaped.type == type and reshaped.shape == {1, n}
      assert Nx.to_binary(reshaped) == bin

      # resident on a worker and back
      resident = Nx.backend_transfer(t, NxJax.Backend)
      assert %NxJax.Backend{} = resident.data
      assert Nx.to_binary(resident) == bin
      assert Nx.to_binary(Nx.backend_transfer(resident)) == bin
    end

    test "#{inspect(type)}: empty arrays round-trip through the worker" do
      type = unquote(Macro.escape(type))

      # the wire carries them, though Nx 0.7.2 (and so the front end) builds no empty tensor
      for shape <- [{0}, {2, 0, 3}] do
        assert [{^type, ^shape, <<>>}] =
                 NxJax.Worker.run(identity_graph(type, shape), [{type, shape, <<>>}])
      end

      assert_raise ArgumentError, "cannot build an empty tensor", fn ->
        Nx.from_binary(<<>>, type)
      end
    end
  end

  test "non-finite results read back as Nx's atoms and -0.0 keeps its sign" do
    t = Nx.divide(Nx.tensor([1.0, -1.0, 0.0, -0.0]), Nx.tensor([0.0, 0.0, 0.0, 1.0]))

    assert <<0x7F80_0000::32-little, 0xFF80_0000::32-little, nan::32-little,
             0x8000_0000::32-little>> = Nx.to_binary(t)

    assert Bitwise.band(nan, 0x7F80_0000) == 0x7F80_0000 and Bitwise.band(nan, 0x7F_FFFF) != 0
    assert [:infinity, :neg_infinity, :nan, neg_zero] = Nx.to_flat_list(t)
    assert neg_zero == 0.0
  end
end
