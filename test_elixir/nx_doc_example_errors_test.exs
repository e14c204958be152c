defmodule NxJax.NxDocExampleErrorsTest do
  # Error messages of Nx 0.7.2's own doc examples (nx/nx_suite/doc_examples.exs compares them),
  # with the texts real Nx 0.7.2 gives for the same calls.
  use ExUnit.Case, async: true

  defp message(fun) do
    fun.()
    flunk("expected an ArgumentError")
  rescue
    e in ArgumentError -> e.message
  end

  test "tile, linspace, flatten" do
    assert message(fn -> Nx.tile(Nx.tensor([1, 2]), [1, 1.0]) end) ==
             "repetitions must be a list of integers, got: [1, 1.0]"

    assert message(fn -> Nx.tile(Nx.tensor([1, 2]), [0]) end) ==
             "repetitions must be a list of integers, got: [0]"

    assert message(fn -> Nx.linspace(0, 24, n: 1.0) end) ==
             "expected n to be a non-negative integer, got: 1.0"

    assert message(fn -> Nx.linspace(Nx.tensor([[0, 1]]), Nx.tensor([1, 2, 3]), n: 2) end) ==
             "expected start and stop to have the same shape. Got shapes {1, 2} and {3}"

    assert message(fn -> Nx.flatten(Nx.iota({1, 2, 3}), axes: [0, 2]) end) ==
             "flatten axes must be consecutive"
  end

  test "to_number, from_binary, bitcast, tensor/2 of a tensor" do
    assert message(fn -> Nx.to_number(Nx.vectorize(Nx.tensor([[1, 2]]), :x)) end) ==
             "cannot convert vectorized tensor with axes [x: 1] and shape {2} to number"

    assert message(fn -> Nx.from_binary(<<1, 2, 3, 4>>, :f64) end) ==
             "binary does not match the given size"

    assert message(fn -> Nx.bitcast(Nx.tensor([0], type: :s64), :c64) end) ==
             "Nx.bitcast/2 does not support complex inputs"

    assert message(fn -> Nx.tensor(Nx.tensor([1, 2, 3]), type: :f32) end) ==
             "Nx.tensor/2 expects a tensor with type :f32 but it was given a tensor of type " <>
               "{:s, 64}"

    assert Nx.tensor(Nx.tensor([1, 2, 3]), type: :s64) == Nx.tensor([1, 2, 3])
  end

  test "concatenate shows the first shape with * on the axis" do
    assert message(fn -> Nx.concatenate([Nx.iota({1, 2, 3}), Nx.iota({1, 1, 3})], axis: 0) end) ==
             "expected all shapes to match {*, 2, 3}, got unmatching shape: {1, 1, 3}"

    assert message(fn -> Nx.concatenate([Nx.iota({1, 2, 3}), Nx.iota({1, 1})]) end) ==
             "expected all shapes to match {*, 2, 3}, got unmatching shape: {1, 1}"

    assert message(fn -> Nx.concatenate([Nx.iota({2, 3}), Nx.iota({3, 2})], axis: 1) end) ==
             "expected all shapes to match {2, *}, got unmatching shape: {3, 2}"
  end

  test "top_k checks k, then the rank, then the last axis" do
    assert message(fn -> Nx.top_k(Nx.tensor(1), k: 0) end) ==
             "top_k k must be an integer greater than or equal to 1, got k=0"

    assert message(fn -> Nx.top_k(Nx.tensor([1]), k: 1.5) end) ==
             "top_k k must be an integer greater than or equal to 1, got k=1.5"

    assert message(fn -> Nx.top_k(Nx.iota({5}), k: 6) end) ==
             "top_k input last axis size must be greater than or equal to k, got size=5 and k=6"
  end
end
