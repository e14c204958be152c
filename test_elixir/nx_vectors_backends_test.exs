# Nx.reshape_vectors/2 (and broadcast_vectors/2 beside it), Nx.vectorize/devectorize of
# containers, Nx.with_default_backend/2 and Nx.tensor/2's backend check. Expected values are
# real Nx 0.7.2's answers to the same calls (where we differ, the test says so).
defmodule Nx.VectorsBackendsTest do
  use ExUnit.Case, async: true

  alias NxJax.ContainerTest.Layer

  defp described(tensors),
    do: Enum.map(tensors, &{&1.vectorized_axes, &1.shape, Nx.to_flat_list(&1)})

  describe "reshape_vectors/2" do
    test "every tensor gets the union of the vectorized axes, its own sizes and 1 elsewhere" do
      x = Nx.iota({1}, vectorized_axes: [x: 1])
      xy = Nx.iota({1}, vectorized_axes: [x: 1, y: 2])
      x2 = Nx.iota({1}, vectorized_axes: [x: 2])

      assert described(Nx.reshape_vectors([x, xy, x2])) == [
               {[x: 1, y: 1], {1}, [0]},
               {[x: 1, y: 2], {1}, [0, 0]},
               {[x: 2, y: 1], {1}, [0, 0]}
             ]

      a = Nx.vectorize(Nx.tensor([1, 2, 3]), :x)
      b = Nx.vectorize(Nx.tensor([4]), :y)

      assert described(Nx.reshape_vectors([a, b])) == [
               {[x: 3, y: 1], {}, [1, 2, 3]},
               {[x: 1, y: 1], {}, [4]}
             ]

      assert described(Nx.reshape_vectors([b, a])) == [
               {[y: 1, x: 1], {}, [4]},
               {[y: 1, x: 3], {}, [1, 2, 3]}
             ]
    end

    test "align_ranks pads the inner shapes with leading 1s; inner axis names are kept" do
      x = Nx.iota({2}, vectorized_axes: [x: 2])
      y = Nx.iota({2, 2, 2}, vectorized_axes: [y: 1])

      assert described(Nx.reshape_vectors([x, y], align_ranks: true)) == [
               {[x: 2, y: 1], {1, 1, 2}, [0, 1, 0, 1]},
               {[x: 1, y: 1], {2, 2, 2}, Enum.to_list(0..7)}
             ]

      [one, _] = Nx.reshape_vectors([1, Nx.vectorize(Nx.iota({3, 2, 1}), :y)], align_ranks: true)
      assert {one.vectorized_axes, one.shape, Nx.to_flat_list(one)} == {[y: 1], {1, 1}, [1]}

      a = Nx.iota({2, 3}, names: [:a, :b]) |> Nx.vectorize(:x)
      b = Nx.iota({3}, names: [:c]) |> Nx.vectorize(:y)
      [ra, rb] = Nx.reshape_vectors([a, b])

      assert {ra.vectorized_axes, ra.names, rb.vectorized_axes, rb.names} ==
               {[x: 2, y: 1], [:b], [x: 1, y: 3], []}
    end

    test "no vectorized tensor, or a single one: back as they are; options checked otherwise" do
      assert Nx.reshape_vectors([1, Nx.iota({2})], align_ranks: true) == [
               Nx.tensor(1),
               Nx.iota({2})
             ]

      assert Nx.reshape_vectors([1]) == [Nx.tensor(1)]

      assert_raise ArgumentError,
                   "unknown key :foo in [foo: 1], expected one of [:align_ranks]",
                   fn ->
                     Nx.reshape_vectors([1, 2], foo: 1)
                   end
    end

    test "axes in another order are reinterpreted in the first's order, as Nx 0.7.2" do
      a = Nx.iota({2, 3}) |> Nx.vectorize([:x, :y])
      b = Nx.iota({3, 2}) |> Nx.vectorize([:y, :x])
      [_, rb] = Nx.reshape_vectors([a, b])
      # b's data read as [x: 2, y: 3] (a reshape, not a transpose; real Nx 0.7.2's value)
      assert Nx.devectorize(rb, keep_names: false) == Nx.tensor([[0, 1, 2], [3, 4, 5]])
    end

    test "inside defn" do
      f =
        Nx.Defn.jit(fn a, b ->
          [a, b] = Nx.reshape_vectors([a, b])
          Nx.add(a, b)
        end)

      result = f.(Nx.vectorize(Nx.tensor([1, 2]), :x), Nx.vectorize(Nx.tensor([10, 20, 30]), :y))
      assert result == Nx.vectorize(Nx.tensor([[11, 21, 31], [12, 22, 32]]), [:x, :y])
    end

    test "broadcast_vectors/2 keeps inner axis names and leaves unvectorized lists alone" do
      a = Nx.iota({2, 3}, names: [:a, :b]) |> Nx.vectorize(:x)
      b = Nx.iota({3}, names: [:c]) |> Nx.vectorize(:y)

      assert Enum.map(Nx.broadcast_vectors([a, b]), &{&1.vectorized_axes, &1.names, &1.shape}) ==
               [{[x: 2, y: 3], [:b], {3}}, {[x: 2, y: 3], [], {}}]

      assert Enum.map(Nx.broadcast_vectors([1, Nx.iota({2})], align_ranks: true), & &1.shape) ==
               [{}, {2}]
    end
  end

  describe "vectorize/2 and devectorize/2 of containers" do
    test "each tensor of a tuple or map, numbers made tensors" do
      container = {Nx.tensor([1]), %{a: Nx.tensor([2]), b: {Nx.tensor([3]), Nx.tensor([[4, 5]])}}}
      vectorized = Nx.vectorize(container, x: 1)

      assert vectorized ==
               {Nx.vectorize(Nx.tensor([1]), x: 1),
                %{
                  a: Nx.vectorize(Nx.tensor([2]), x: 1),
                  b: {Nx.vectorize(Nx.tensor([3]), x: 1), Nx.vectorize(Nx.tensor([[4, 5]]), x: 1)}
                }}

      assert Nx.devectorize({1, vectorized}, keep_names: false) == {Nx.tensor(1), container}
      {one, two, three} = Nx.devectorize({1, 2.0, Nx.iota({2}, vectorized_axes: [x: 1])})
      assert {one, two} == {Nx.tensor(1), Nx.tensor(2.0)}
      assert three == Nx.tensor([[0, 1]], names: [:x, nil])
    end

    test "structs deriving Nx.Container: the fields it does not keep get their defaults" do
      layer = %Layer{
        w: Nx.tensor([1, 2]),
        b: {Nx.tensor([[1, 2], [3, 4]])},
        activation: :y,
        cache: :x
      }

      assert Nx.vectorize(layer, :x) == %Layer{
               w: Nx.vectorize(Nx.tensor([1, 2]), :x),
               b: {Nx.vectorize(Nx.tensor([[1, 2], [3, 4]]), :x)},
               activation: :y
             }

      assert Nx.devectorize(%Layer{w: Nx.vectorize(Nx.tensor([1, 2]), :k), b: {3}, activation: :y}) ==
               %Layer{w: Nx.tensor([1, 2], names: [:k]), b: {Nx.tensor(3)}, activation: :y}
    end

    test "inside defn" do
      f =
        Nx.Defn.jit(fn t ->
          {a, b} = Nx.vectorize({t, Nx.multiply(t, 2)}, :x)
          Nx.devectorize({Nx.sum(a), b}, keep_names: false)
        end)

      assert f.(Nx.tensor([[1, 2], [3, 4]])) == {Nx.tensor([3, 7]), Nx.tensor([[2, 4], [6, 8]])}
    end
  end

  describe "with_default_backend/2" do
    test "the backend is the default while the function runs, the previous one after" do
      # as `{module, options}`, as in Nx 0.7.2
      assert Nx.default_backend() == {Nx.BinaryBackend, []}

      assert Nx.with_default_backend(NxJax.Backend, fn -> Nx.default_backend() end) ==
               {NxJax.Backend, []}

      assert Nx.default_backend() == {Nx.BinaryBackend, []}

      nested =
        Nx.with_default_backend(Nx.BinaryBackend, fn ->
          Nx.with_default_backend({Nx.BinaryBackend, []}, fn -> :inner end)
        end)

      assert nested == :inner

      assert_raise RuntimeError, "boom", fn ->
        Nx.with_default_backend(NxJax.Backend, fn -> raise "boom" end)
      end

      assert Nx.default_backend() == {Nx.BinaryBackend, []}
    end

    test "results of the function are computed as usual" do
      result = Nx.with_default_backend(NxJax.Backend, fn -> Nx.iota({4}) |> Nx.multiply(2) end)
      assert Nx.backend_transfer(result) == Nx.tensor([0, 2, 4, 6])
    end

    test "bad arguments raise Nx's errors" do
      assert_raise ArgumentError,
                   ~s(backend must be an atom or a tuple {backend, options}, got: "x"),
                   fn -> Nx.with_default_backend("x", fn -> 1 end) end

      assert_raise BadFunctionError, "expected a function, got: 1", fn ->
        Nx.with_default_backend(Nx.BinaryBackend, 1)
      end
    end
  end

  describe "tensor/2 of a tensor and :backend" do
    test "the tensor must already be on that backend" do
      t = Nx.tensor([1, 2, 3])
      assert Nx.tensor(t, backend: Nx.BinaryBackend) == t
      assert Nx.tensor(t, backend: {Nx.BinaryBackend, []}) == t

      assert_raise ArgumentError,
                   "Nx.tensor/2 wants to allocate on backend NxJax.Backend but it was given a tensor allocated on Nx.BinaryBackend",
                   fn -> Nx.tensor(t, backend: NxJax.Backend) end

      assert_raise ArgumentError,
                   ~s(backend must be an atom or a tuple {backend, options}, got: "x"),
                   fn -> Nx.tensor(t, backend: "x") end
    end
  end
end
