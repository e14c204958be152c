defmodule Nx.TypeTest do
  use ExUnit.Case, async: true
  doctest Nx.Type

  test "normalize! accepts every shorthand atom" do
    for {class, bits} = type <- Nx.Type.all() do
      assert Nx.Type.normalize!(String.to_atom("#{class}#{bits}")) == type
      assert Nx.Type.normalize!(type) == type
    end
  end

  test "normalize! rejects unknown types" do
    assert_raise ArgumentError, ~r/invalid numerical type: :f8/, fn -> Nx.Type.normalize!(:f8) end
  end

  test "merge is symmetric" do
    for a <- Nx.Type.all(), b <- Nx.Type.all() do
      assert Nx.Type.merge(a, b) == Nx.Type.merge(b, a), "#{inspect(a)} #{inspect(b)}"
    end
  end

  test "merge of signed and unsigned integers" do
    assert Nx.Type.merge({:s, 8}, {:u, 8}) == {:s, 16}
    assert Nx.Type.merge({:s, 16}, {:u, 8}) == {:s, 16}
    assert Nx.Type.merge({:s, 8}, {:u, 32}) == {:s, 64}
    assert Nx.Type.merge({:s, 64}, {:u, 64}) == {:s, 64}
  end

  test "merge of floats with integers and floats" do
    assert Nx.Type.merge({:s, 64}, {:f, 16}) == {:f, 16}
    assert Nx.Type.merge({:u, 8}, {:bf, 16}) == {:bf, 16}
    assert Nx.Type.merge({:bf, 16}, {:f, 64}) == {:f, 64}
    # (Nx 0.7.2: the higher-ranked kind wins with its own width)
    assert Nx.Type.merge({:bf, 16}, {:f, 16}) == {:f, 16}
    assert Nx.Type.merge({:f, 16}, {:bf, 16}) == {:f, 16}
    assert Nx.Type.merge({:f, 64}, {:c, 64}) == {:c, 64}
    assert Nx.Type.merge({:f, 16}, {:f, 32}) == {:f, 32}
  end

  test "merge_number follows weak typing, widening integer types as Nx 0.7.2 does" do
    assert Nx.Type.merge_number({:u, 8}, 255) == {:u, 8}
    assert Nx.Type.merge_number({:u, 8}, 1000) == {:u, 16}
    assert Nx.Type.merge_number({:u, 8}, -1) == {:s, 16}
    assert Nx.Type.merge_number({:u, 16}, 70_000) == {:u, 32}
    assert Nx.Type.merge_number({:u, 64}, -1) == {:s, 64}
    assert Nx.Type.merge_number({:s, 8}, 127) == {:s, 8}
    assert Nx.Type.merge_number({:s, 8}, -129) == {:s, 16}
    assert Nx.Type.merge_number({:s, 16}, 2 ** 40) == {:s, 64}
    assert Nx.Type.merge_number({:f, 16}, 100_000) == {:f, 16}
    assert Nx.Type.merge_number({:s, 64}, 1.0) == {:f, 32}
    assert Nx.Type.merge_number({:f, 64}, 1.0) == {:f, 64}
    assert Nx.Type.merge_number({:bf, 16}, 1) == {:bf, 16}
    assert Nx.Type.merge_number({:s, 8}, :nan) == {:f, 32}
  end

  test "to_floating, to_aggregate, predicates and sizes" do
    assert Nx.Type.to_floating({:u, 8}) == {:f, 32}
    assert Nx.Type.to_floating({:f, 16}) == {:f, 16}
    assert Nx.Type.to_aggregate({:s, 16}) == {:s, 64}
    assert Nx.Type.to_aggregate({:u, 16}) == {:u, 64}
    assert Nx.Type.to_aggregate({:bf, 16}) == {:bf, 16}
    assert Nx.Type.float?({:f, 64})
    # as Nx 0.7.2: complex types are floating point for float?/1 (Nx's own tests draw their
    # random inputs through it)
    assert Nx.Type.float?({:c, 64})
    assert Nx.Type.float?({:c, 128})
    refute Nx.Type.float?({:u, 8})
    refute Nx.Type.integer?({:bf, 16})
    assert Nx.Type.to_string({:u, 64}) == "u64"

    assert Enum.map(Nx.Type.all(), &Nx.Type.byte_size/1) ==
             [1, 2, 4, 8, 1, 2, 4, 8, 2, 4, 8, 2, 8, 16]
  end

  # Regression (2026-12-02): an integer number was wrapped into the tensor's type, so
  # `Nx.max(u8, -1)` gave 255 and `Nx.add(u8 200, 300)` 244. Values and types of real Nx 0.7.2.
  test "integer numbers widen integer tensors in binary ops, select and clip, as in Nx 0.7.2" do
    u8 = Nx.tensor([200, 5], type: :u8)
    s8 = Nx.tensor([100, -3], type: :s8)

    cases = [
      {Nx.add(u8, 300), {:u, 16}, [500, 305]},
      {Nx.add(300, u8), {:u, 16}, [500, 305]},
      {Nx.multiply(u8, -1), {:s, 16}, [-200, -5]},
      {Nx.subtract(u8, 1), {:u, 8}, [199, 4]},
      {Nx.add(s8, 100), {:s, 8}, [-56, 97]},
      {Nx.add(s8, -200), {:s, 16}, [-100, -203]},
      {Nx.subtract(Nx.tensor([1, 2], type: :u16), 70_000), {:u, 32},
       [4_294_897_297, 4_294_897_298]},
      {Nx.max(u8, -1), {:s, 16}, [200, 5]},
      {Nx.remainder(u8, 300), {:u, 16}, [200, 5]},
      {Nx.bitwise_and(u8, 256), {:u, 16}, [0, 0]},
      {Nx.quotient(u8, -2), {:s, 16}, [-100, -2]},
      {Nx.add(Nx.tensor([1], type: :u64), -1), {:s, 64}, [0]},
      {Nx.select(Nx.tensor([1, 0], type: :u8), u8, 300), {:s, 64}, [200, 300]},
      {Nx.clip(u8, -1, 300), {:s, 64}, [200, 5]},
      {Nx.Defn.jit(&Nx.multiply(&1, 300)).(u8), {:u, 16}, [60_000, 1500]}
    ]

    for {result, type, values} <- cases do
      assert {result.type, Nx.to_flat_list(result)} == {type, values}
    end
  end
end
