defmodule Nx.BinaryBackendTest do
  use ExUnit.Case, async: true
  doctest Nx.BinaryBackend

  alias Nx.BinaryBackend, as: B

  defp round_trip(list, type), do: list |> B.from_list(type) |> B.to_list(type)

  test "integers round trip in every integer type" do
    for type <- [u: 8, u: 16, u: 32, u: 64] do
      assert round_trip([0, 1, 200], type) == [0, 1, 200]
    end

    for type <- [s: 8, s: 16, s: 32, s: 64] do
      assert round_trip([-128, 0, 127], type) == [-128, 0, 127]
    end
  end

  test "integers out of range wrap around" do
    assert round_trip([128, -129], {:s, 8}) == [-128, 127]
    assert round_trip([65536 + 5], {:u, 16}) == [5]
    assert round_trip([-1], {:u, 64}) == [18_446_744_073_709_551_615]
  end

  test "floats stored in integer types are truncated" do
    assert round_trip([1.9, -1.9], {:s, 32}) == [1, -1]
  end

  test "non-finite values round trip in every float type" do
    for type <- [f: 16, f: 32, f: 64, bf: 16] do
      assert round_trip([:nan, :infinity, :neg_infinity, 1.5, -2, 0], type) ==
               [:nan, :infinity, :neg_infinity, 1.5, -2.0, 0.0]
    end
  end

  test "bit patterns of non-finite floats" do
    assert B.from_list([:infinity], {:f, 32}) == <<0x7F800000::32-native>>
    assert B.from_list([:neg_infinity], {:f, 64}) == <<0xFFF0000000000000::64-native>>
    assert B.from_list([:infinity], {:f, 16}) == <<0x7C00::16-native>>
    assert B.from_list([:infinity], {:bf, 16}) == <<0x7F80::16-native>>

    assert B.to_list(<<0x7FC00001::32-native, 0xFFF8000000000000::64-native>>, {:f, 32}) |> hd() ==
             :nan

    assert B.to_list(<<0xFE01::16-native>>, {:f, 16}) == [:nan]
    assert B.to_list(<<0xFFC1::16-native>>, {:bf, 16}) == [:nan]
  end

  test "values too large for the type become infinity" do
    assert round_trip([1.0e40, -1.0e40], {:f, 32}) == [:infinity, :neg_infinity]
    assert round_trip([70000.0], {:f, 16}) == [:infinity]
  end

  # Nx 0.7.2's binary backend keeps the top half of the f32 (it rounded to nearest before)
  test "bf16 truncates the f32, as Nx 0.7.2" do
    # 1.1 in f32 is 0x3F8CCCCD: its top half is 0x3F8C (1.09375)
    assert B.from_list([1.1], {:bf, 16}) == <<0x3F8C::16-native>>
    assert round_trip([1.1], {:bf, 16}) == [1.09375]
    <<halfway::float-32>> = <<0x3F80FFFF::32>>
    assert B.from_list([halfway], {:bf, 16}) == <<0x3F80::16-native>>
    assert B.from_list([-1.1], {:bf, 16}) == <<0xBF8C::16-native>>
  end

  test "f16 subnormals decode" do
    assert B.to_list(<<1::16-native>>, {:f, 16}) == [5.960464477539063e-8]
  end

  test "first_out_of_range/3 finds the first element outside its cycling bound, every integer type" do
    for type <- [s: 8, s: 16, s: 32, s: 64, u: 8, u: 16, u: 32, u: 64] do
      assert B.first_out_of_range(B.from_list([0, 1, 2, 0], type), type, {3}) == nil
      assert B.first_out_of_range(B.from_list([0, 1, 2, 3, 9], type), type, {3}) == 3
      # rows of (row, column) positions into a 2 x 3 matrix: the 3 in column 0 is out
      assert B.first_out_of_range(B.from_list([1, 2, 0, 2, 3, 0], type), type, {2, 3}) == 4
    end

    assert B.first_out_of_range(B.from_list([0, -1], {:s, 64}), {:s, 64}, {5}) == 1
    # an unsigned 255 is no negative number
    assert B.first_out_of_range(<<255>>, {:u, 8}, {256}) == nil
  end
end
