defmodule NxJax.NanBitsTest do
  # Nx 0.7.2's binary backend writes every NaN it computes as the quiet NaN with a clear sign
  # bit (f32 0x7FC00000), and moves the bits of elements it only moves (reshape, transpose);
  # tensors compare with ==, bit for bit. XLA on x86-64 computes the NaN with the sign bit set,
  # so the worker (numerics mode :nx) rewrites computed NaNs at the graph's outputs. The bytes
  # expected here are real Nx 0.7.2's.
  use ExUnit.Case, async: true

  import Nx.Defn

  test "computed NaNs are Nx's: sum of Inf and -Inf, min with NaN, 0 / 0" do
    assert Nx.sum(Nx.tensor([:infinity, :neg_infinity])) == Nx.tensor(:nan)
    assert Nx.min(Nx.tensor([:neg_infinity]), Nx.tensor([:nan])) == Nx.tensor([:nan])
    assert Nx.negate(Nx.tensor(:nan)) == Nx.tensor(:nan)
    # (Nx's binary backend raises here, from :math.sqrt; the NaN the worker gives is Nx's NaN,
    # though XLA's CPU code takes a square root for never NaN)
    assert Nx.to_binary(Nx.sqrt(Nx.tensor(-1.0))) == <<0x00, 0x00, 0xC0, 0x7F>>
  end

  test "every floating type, and complex parts each" do
    expected = %{
      f16: <<0x00, 0x7E>>,
      bf16: <<0xC0, 0x7F>>,
      f32: <<0x00, 0x00, 0xC0, 0x7F>>,
      f64: <<0, 0, 0, 0, 0, 0, 0xF8, 0x7F>>,
      c64: <<0x00, 0x00, 0xC0, 0x7F, 0x00, 0x00, 0xC0, 0x7F>>
    }

    for {type, bytes} <- expected do
      zero = Nx.tensor(0.0, type: type)
      assert Nx.to_binary(Nx.divide(zero, zero)) == bytes
    end
  end

  test "moved elements keep their bits; computing on them gives Nx's NaN" do
    # a NaN with the sign bit set, and one with a payload
    x = Nx.from_binary(<<0x00, 0x00, 0xC0, 0xFF, 0x01, 0x00, 0xC0, 0x7F>>, :f32)
    moved = <<0x00, 0x00, 0xC0, 0xFF, 0x01, 0x00, 0xC0, 0x7F>>
    nan2 = <<0x00, 0x00, 0xC0, 0x7F, 0x00, 0x00, 0xC0, 0x7F>>
    assert Nx.to_binary(Nx.reshape(x, {2, 1})) == moved
    assert Nx.to_binary(Nx.transpose(Nx.reshape(x, {2, 1}))) == moved
    assert Nx.to_binary(Nx.add(x, 0.0)) == nan2
    assert Nx.to_binary(Nx.abs(x)) == nan2
    assert Nx.to_binary(Nx.select(Nx.tensor([1, 1]), x, 0.0)) == nan2

    assert Nx.to_binary(Nx.bitcast(Nx.tensor([0xFFC00000], type: :u32), :f32)) ==
             <<0, 0, 0xC0, 0xFF>>
  end

  defn moved_after_computing(t), do: Nx.transpose(Nx.divide(t, t))

  test "inside defn, a computed NaN moved afterwards is Nx's too" do
    assert Nx.to_binary(moved_after_computing(Nx.tensor([[0.0]]))) == <<0x00, 0x00, 0xC0, 0x7F>>
  end

  test "gradients see through the rewrite" do
    assert Nx.Defn.grad(Nx.tensor(2.0), &Nx.multiply(&1, &1)) == Nx.tensor(4.0)
  end
end
