# Functions of Nx 0.7's API composed of existing ops (axes, byte_size, flatten, tile, linspace,
# tri/tril/triu, split, take_diagonal/put_diagonal, top_k, median, fill, complex/phase,
# weighted_mean, window_mean, to_batched): values eagerly and inside defn on the worker,
# types, gradients against finite differences, and the errors for bad input.
defmodule Nx.MoreApiTest do
  use ExUnit.Case, async: true

  defmodule Fns do
    import Nx.Defn

    defn lower(t), do: Nx.tril(t, k: -1)
    defn diag_sum(t), do: Nx.sum(Nx.take_diagonal(t, offset: 1) * Nx.take_diagonal(t, offset: 1))
    defn grad_diag_sum(t), do: grad(t, &diag_sum/1)
    defn tiled_sum(t), do: Nx.sum(Nx.tile(t, [2, 3]) * Nx.iota({4, 9}))
    defn grad_tiled_sum(t), do: grad(t, &tiled_sum/1)
    defn wmean(t), do: Nx.weighted_mean(t, Nx.tensor([1.0, 2.0, 3.0]))
    defn grad_wmean(t), do: grad(t, &wmean/1)
    defn best(t), do: Nx.top_k(t, k: 2)
    defn halves(t), do: Nx.split(t, 0.5)
    defn mid(t), do: Nx.median(t, axis: 1)
    defn ramp(a, b), do: Nx.linspace(a, b, n: 5)
  end

  defp values(t), do: Nx.to_flat_list(t)
  defp f64(list), do: Nx.tensor(list, type: :f64)

  test "axes and byte_size" do
    assert Nx.axes(Nx.iota({2, 3, 4})) == [0, 1, 2]
    assert Nx.axes({5}) == [0]
    assert Nx.axes(Nx.tensor(1.0)) == []
    assert Nx.byte_size(Nx.iota({2, 3}, type: :u8)) == 6
    assert Nx.byte_size(Nx.iota({2, 3}, type: :f64)) == 48
    assert Nx.byte_size(Nx.tensor(1.0, type: :bf16)) == 2
    assert Nx.byte_size(Nx.vectorize(Nx.iota({4, 3}, type: :f32), :rows)) == 48

    assert Nx.byte_size(Nx.iota({4, 3}, type: :f32)) ==
             Kernel.byte_size(Nx.to_binary(Nx.iota({4, 3}, type: :f32)))
  end

  test "axis_index, to_template and compatible?" do
    assert Nx.axis_index(Nx.iota({2, 3}), 1) == 1
    assert Nx.axis_index({2, 3, 4}, -3) == 0

    assert_raise ArgumentError, ~r/given axis \(2\) invalid for shape with rank 2/, fn ->
      Nx.axis_index(Nx.iota({2, 3}), 2)
    end

    assert_raise ArgumentError, ~r/name :x not found in tensor with names \[nil, nil\]/, fn ->
      Nx.axis_index(Nx.iota({2, 3}), :x)
    end

    assert Nx.axis_index(Nx.iota({2, 3}, names: [:x, :y]), :y) == 1

    t = Nx.iota({2, 3}, type: :f32)
    template = Nx.to_template(%{a: t, b: {Nx.vectorize(t, :rows), 2}})
    assert %{a: %Nx.Tensor{data: nil, shape: {2, 3}, type: {:f, 32}}} = template
    assert {%Nx.Tensor{data: nil, vectorized_axes: [rows: 2], shape: {3}}, scalar} = template.b
    assert {scalar.data, scalar.type, scalar.shape} == {nil, {:s, 64}, {}}
    assert Nx.compatible?(template, %{a: Nx.add(t, 1), b: {Nx.vectorize(t, :rows), 7}})

    refute Nx.compatible?(t, Nx.iota({3, 2}, type: :f32))
    refute Nx.compatible?(t, Nx.iota({2, 3}, type: :f64))
    refute Nx.compatible?(Nx.vectorize(t, :rows), Nx.vectorize(t, :other))
    refute Nx.compatible?({t, t}, {t})
    refute Nx.compatible?(%{a: t}, %{b: t})
    assert Nx.compatible?(1, Nx.tensor(5))
    refute Nx.compatible?(1, 1.0)
  end

  describe "flatten" do
    test "to one axis, or merging consecutive axes" do
      t = Nx.iota({2, 3, 4})
      assert Nx.flatten(t).shape == {24}
      assert values(Nx.flatten(t)) == Enum.to_list(0..23)
      assert Nx.flatten(t, axes: [1, 2]).shape == {2, 12}
      assert Nx.flatten(t, axes: [0, 1]).shape == {6, 4}
      assert Nx.flatten(t, axes: [-1, -2]).shape == {2, 12}
      assert values(Nx.flatten(t, axes: [0, 1])) == Enum.to_list(0..23)
      assert Nx.flatten(Nx.tensor(3)).shape == {1}
    end

    test "axes that are not consecutive raise" do
      assert_raise ArgumentError, ~r/flatten axes must be consecutive/, fn ->
        Nx.flatten(Nx.iota({2, 3, 4}), axes: [0, 2])
      end
    end
  end

  describe "tile" do
    test "repeats along each axis; short lists apply to the last axes, long ones add axes" do
      assert values(Nx.tile(Nx.tensor([0, 1, 2]), [2])) == [0, 1, 2, 0, 1, 2]
      m = Nx.tensor([[1, 2], [3, 4]])
      assert Nx.tile(m, [2, 3]).shape == {4, 6}

      assert values(Nx.tile(m, [2, 3])) ==
               [1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4, 1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4]

      assert Nx.tile(m, [2]) == Nx.tile(m, [1, 2])
      assert values(Nx.tile(m, [2])) == [1, 2, 1, 2, 3, 4, 3, 4]
      assert Nx.tile(Nx.tensor([0, 1, 2]), [2, 1, 2]).shape == {2, 1, 6}
      assert Nx.tile(m, [1, 1]) == m
    end

    test "in defn, with its gradient (each input element counted once per copy)" do
      t = f64([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
      iota = Nx.iota({4, 9}, type: :f64)
      expected = Nx.sum(Nx.multiply(Nx.tile(t, [2, 3]), iota))
      assert Fns.tiled_sum(t) == expected

      # d/dt[i][j] = sum of iota over the copies of (i, j): rows i, i + 2; cols j, j + 3, j + 6
      grads =
        for i <- 0..1, j <- 0..2 do
          Enum.sum(for r <- [i, i + 2], c <- [j, j + 3, j + 6], do: r * 9 + c) * 1.0
        end

      assert values(Fns.grad_tiled_sum(t)) == grads
    end

    test "bad repetitions raise" do
      for bad <- [[0], 2, [1.5], nil] do
        assert_raise ArgumentError, ~r/repetitions must be a list of integers/, fn ->
          Nx.tile(Nx.tensor([1]), bad)
        end
      end
    end
  end

  describe "linspace" do
    test "values, endpoint, types" do
      assert values(Nx.linspace(5, 8, n: 5)) == [5.0, 5.75, 6.5, 7.25, 8.0]
      assert values(Nx.linspace(0, 10, n: 4, endpoint: false)) == [0.0, 2.5, 5.0, 7.5]
      assert values(Nx.linspace(0, 24, n: 8, type: :u8)) == [0, 3, 6, 10, 13, 17, 20, 24]
      assert Nx.linspace(0, 24, n: 8, type: :u8).type == {:u, 8}
      assert values(Nx.linspace(1.0, -1.0, n: 3, type: :f64)) == [1.0, 0.0, -1.0]
      assert values(Nx.linspace(2, 9, n: 1)) == [2.0]
    end

    test "tensor ends of one shape give that shape with an axis appended" do
      out = Nx.linspace(Nx.tensor([0.0, 10.0]), Nx.tensor([4.0, 14.0]), n: 5)
      assert out.shape == {2, 5}
      assert values(out) == [0.0, 1.0, 2.0, 3.0, 4.0, 10.0, 11.0, 12.0, 13.0, 14.0]
      assert values(Fns.ramp(Nx.tensor(0.0), Nx.tensor(1.0))) == [0.0, 0.25, 0.5, 0.75, 1.0]
    end

    test "errors" do
      assert_raise ArgumentError, "expected n to be a non-negative integer, got: nil", fn ->
        Nx.linspace(0, 1, [])
      end

      assert_raise ArgumentError, "expected n to be a non-negative integer, got: 0", fn ->
        Nx.linspace(0, 1, n: 0)
      end

      assert_raise ArgumentError, ~r/same shape/, fn ->
        Nx.linspace(Nx.tensor([0, 1]), 1, n: 3)
      end
    end
  end

  describe "tri, tril, triu" do
    test "tri is a u8 mask on and below the diagonal k" do
      assert Nx.tri(2, 3).type == {:u, 8}
      assert values(Nx.tri(2, 3)) == [1, 0, 0, 1, 1, 0]
      assert values(Nx.tri(3, 2, k: -1)) == [0, 0, 1, 0, 1, 1]
    end

    test "tril and triu keep a triangle of the last two axes, batched" do
      m = Nx.tensor([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
      assert values(Nx.tril(m)) == [1, 0, 0, 4, 5, 0, 7, 8, 9]
      assert values(Nx.tril(m, k: 1)) == [1, 2, 0, 4, 5, 6, 7, 8, 9]
      assert values(Nx.triu(m)) == [1, 2, 3, 0, 5, 6, 0, 0, 9]
      assert values(Nx.triu(m, k: -1)) == [1, 2, 3, 4, 5, 6, 0, 8, 9]
      assert Nx.add(Nx.tril(m, k: -1), Nx.triu(m)) == m

      batch = Nx.iota({2, 2, 2}, type: :f32)
      assert values(Nx.tril(batch)) == [0.0, 0.0, 2.0, 3.0, 4.0, 0.0, 6.0, 7.0]
      assert Nx.tril(batch).type == {:f, 32}
      assert values(Fns.lower(Nx.iota({3, 3}, type: :f32))) == [0, 0, 0, 3, 0, 0, 6, 7, 0]
    end

    test "a tensor of rank under 2 raises" do
      # Nx 0.7.2's message shows the tensor
      assert_raise ArgumentError,
                   "tril/2 expects a tensor with at least 2 dimensions, got: " <>
                     inspect(Nx.tensor([1, 2])),
                   fn -> Nx.tril(Nx.tensor([1, 2])) end

      assert_raise ArgumentError, ~r/triu\/2 expects/, fn -> Nx.triu(Nx.tensor(1)) end
    end
  end

  describe "split" do
    test "by a size, a negative size or a fraction, along an axis" do
      t = Nx.iota({3, 4})
      {a, b} = Nx.split(t, 2)
      assert {a.shape, b.shape} == {{2, 4}, {1, 4}}
      assert values(b) == [8, 9, 10, 11]
      {a, b} = Nx.split(t, 0.75, axis: 1)
      assert {values(a), values(b)} == {[0, 1, 2, 4, 5, 6, 8, 9, 10], [3, 7, 11]}
      {a, b} = Nx.split(Nx.tensor([1, 2, 3, 4]), -1)
      assert {values(a), values(b)} == {[1, 2, 3], [4]}
      {a, b} = Fns.halves(Nx.tensor([1.0, 2.0, 3.0]))
      assert {values(a), values(b)} == {[1.0, 2.0], [3.0]}
    end

    test "a split that leaves a part empty raises (Nx 0.7.2's messages)" do
      message =
        "split must be an integer greater than zero and less than the length of the given axis"

      for bad <- [0, 4, -4] do
        assert_raise ArgumentError, message, fn -> Nx.split(Nx.tensor([1, 2, 3, 4]), bad) end
      end

      assert_raise ArgumentError, message, fn -> Nx.split(Nx.iota({10, 2}), 3, axis: 1) end

      for bad <- [1.0, 0.0, -0.5, 0.95] do
        assert_raise ArgumentError,
                     "split must be a float such that 0 < split and ceil(split * axis_size) < 1",
                     fn -> Nx.split(Nx.iota({10, 2}), bad) end
      end

      assert_raise ArgumentError, ~r/split must be an integer or a float/, fn ->
        Nx.split(Nx.tensor([1, 2]), :half)
      end
    end
  end

  describe "take_diagonal and put_diagonal" do
    test "diagonals of matrices and batches, with offsets" do
      t = Nx.iota({3, 4})
      assert values(Nx.take_diagonal(t)) == [0, 5, 10]
      assert values(Nx.take_diagonal(t, offset: 1)) == [1, 6, 11]
      assert values(Nx.take_diagonal(t, offset: 3)) == [3]
      assert values(Nx.take_diagonal(t, offset: -1)) == [4, 9]
      assert values(Nx.take_diagonal(t, offset: -2)) == [8]
      batch = Nx.iota({2, 2, 2})
      assert Nx.take_diagonal(batch).shape == {2, 2}
      assert values(Nx.take_diagonal(batch)) == [0, 3, 4, 7]
    end

    test "the gradient of a diagonal lands on it only" do
      t = Nx.iota({3, 3}, type: :f64)
      assert Nx.to_number(Fns.diag_sum(t)) == 1.0 + 25.0
      assert values(Fns.grad_diag_sum(t)) == [0.0, 2.0, 0.0, 0.0, 0.0, 10.0, 0.0, 0.0, 0.0]

      :ok =
        NxJax.GradCheck.check_grads!(
          &Fns.diag_sum/1,
          &Fns.grad_diag_sum/1,
          f64([[0.5, -1.0, 2.0], [1.5, 0.25, -3.0], [2.0, 1.0, 0.0]])
        )
    end

    test "put_diagonal writes a diagonal, merging types" do
      zeros = Nx.broadcast(0, {3, 4})
      out = Nx.put_diagonal(zeros, Nx.tensor([1, 2, 3]))
      assert values(out) == [1, 0, 0, 0, 0, 2, 0, 0, 0, 0, 3, 0]
      out = Nx.put_diagonal(zeros, Nx.tensor([1.5, 2.5]), offset: 2)
      assert out.type == {:f, 32}
      assert values(out) == [0.0, 0.0, 1.5, 0.0, 0.0, 0.0, 0.0, 2.5, 0.0, 0.0, 0.0, 0.0]
    end

    test "errors" do
      assert_raise ArgumentError,
                   "take_diagonal/2 expects tensor of rank 2 or higher, got tensor of rank: 1",
                   fn ->
                     Nx.take_diagonal(Nx.tensor([1, 2]))
                   end

      # Nx 0.7.2's messages name the matrix's axes 0 and 1, batch axes or not
      assert_raise ArgumentError,
                   "offset must be less than length of axis 1 when positive, got: 3",
                   fn -> Nx.take_diagonal(Nx.iota({2, 3}), offset: 3) end

      assert_raise ArgumentError,
                   "absolute value of offset must be less than length of axis 0 when " <>
                     "negative, got: -3",
                   fn -> Nx.take_diagonal(Nx.iota({2, 3, 4}), offset: -3) end

      assert_raise ArgumentError,
                   "offset must be less than length of axis 1 when positive, got: 4",
                   fn -> Nx.put_diagonal(Nx.iota({3, 3}), Nx.iota({3}), offset: 4) end

      assert_raise ArgumentError,
                   "absolute value of offset must be less than length of axis 0 when " <>
                     "negative, got: -3",
                   fn -> Nx.put_diagonal(Nx.iota({3, 3}), Nx.iota({3}), offset: -3) end

      assert_raise ArgumentError,
                   "expected diagonal tensor of length: 3, got diagonal tensor of length: 2",
                   fn -> Nx.put_diagonal(Nx.iota({3, 3}), Nx.tensor([1, 2])) end

      assert_raise ArgumentError,
                   "expected diagonal tensor of length: 2, got diagonal tensor of length: 3",
                   fn -> Nx.put_diagonal(Nx.iota({3, 4}), Nx.iota({3}), offset: -1) end

      assert_raise ArgumentError,
                   "put_diagonal/3 expects tensor of rank 2, got tensor of rank: 3",
                   fn ->
                     Nx.put_diagonal(Nx.iota({2, 2, 2}), Nx.tensor([1, 2]))
                   end

      assert_raise ArgumentError,
                   "put_diagonal/3 expects diagonal of rank 1, got tensor of rank: 2",
                   fn ->
                     Nx.put_diagonal(Nx.iota({2, 2}), Nx.iota({1, 2}))
                   end
    end
  end

  describe "top_k" do
    test "the k largest along the last axis and their indices, ties by index" do
      {v, i} = Nx.top_k(Nx.tensor([[1.0, 3.0, 2.0], [6.0, 4.0, 6.0]]), k: 2)
      assert v.shape == {2, 2} and i.type == {:s, 64}
      assert {values(v), values(i)} == {[3.0, 2.0, 6.0, 6.0], [1, 2, 0, 2]}
      {v, i} = Nx.top_k(Nx.tensor([4, 9, 1]))
      assert {values(v), values(i)} == {[9], [1]}
      {v, i} = Fns.best(Nx.tensor([0.5, -1.0, 7.0, 2.0]))
      assert {values(v), values(i)} == {[7.0, 2.0], [2, 3]}
    end

    test "errors" do
      # Nx 0.7.2's messages
      assert_raise ArgumentError,
                   "top_k input last axis size must be greater than or equal to k, got size=3 " <>
                     "and k=4",
                   fn -> Nx.top_k(Nx.tensor([1, 2, 3]), k: 4) end

      assert_raise ArgumentError,
                   "top_k k must be an integer greater than or equal to 1, got k=0",
                   fn -> Nx.top_k(Nx.tensor([1, 2, 3]), k: 0) end

      assert_raise ArgumentError, ~r/at least rank 1/, fn -> Nx.top_k(Nx.tensor(1)) end
    end
  end

  describe "median" do
    test "odd counts give the middle element, even ones the mean of the two middle ones" do
      assert Nx.median(Nx.tensor([3, 1, 2])) == Nx.tensor(2)
      assert Nx.median(Nx.tensor([4, 1, 3, 2])) == Nx.tensor(2.5)
      assert Nx.median(Nx.iota({2, 3, 3})) == Nx.tensor(8.5)
      assert values(Nx.median(Nx.tensor([[1, 5, 3], [4, 2, 6]]), axis: 1)) == [3, 4]
      m = Nx.median(Nx.tensor([[1, 2, 3], [4, 5, 6]]), axis: 0, keep_axis: true)
      assert m.shape == {1, 3} and values(m) == [2.5, 3.5, 4.5]
      assert values(Fns.mid(Nx.tensor([[3.0, 1.0], [0.0, 4.0]]))) == [2.0, 2.0]
    end

    test "complex input raises, naming sort/2 as Nx 0.7.2 does" do
      assert_raise ArgumentError, "Nx.sort/2 does not support complex inputs", fn ->
        Nx.median(Nx.tensor([Complex.new(1, 1)]))
      end
    end
  end

  describe "fill, complex, phase" do
    test "fill keeps the shape and vectorized axes, merges or sets the type" do
      assert values(Nx.fill(Nx.iota({2, 2}), 5)) == [5, 5, 5, 5]
      assert Nx.fill(Nx.iota({2}), 5.0).type == {:f, 32}
      assert Nx.fill(Nx.iota({2}), 5, type: :u8).type == {:u, 8}
      assert values(Nx.fill(Nx.tensor([:nan, 1.0]), 2.0)) == [2.0, 2.0]
      v = Nx.fill(Nx.vectorize(Nx.iota({3, 2}), :rows), 7)
      assert v.vectorized_axes == [rows: 3] and v.shape == {2}
    end

    test "complex builds real + imag * i; phase is the angle" do
      c = Nx.complex(Nx.tensor([1.0, -2.0]), Nx.tensor([0.5, 3.0]))
      assert c.type == {:c, 64}
      assert values(Nx.real(c)) == [1.0, -2.0] and values(Nx.imag(c)) == [0.5, 3.0]
      assert Nx.complex(1, 2).type == {:c, 64}
      assert Nx.complex(f64([1.0]), 2).type == {:c, 128}

      assert_raise ArgumentError, ~r/complex\/2 expects real tensors/, fn ->
        Nx.complex(Nx.tensor(Complex.new(1, 1)), 1)
      end

      p =
        Nx.phase(
          Nx.tensor([Complex.new(1, 1), Complex.new(0, -2), Complex.new(-1, 0)], type: :c128)
        )

      assert p.type == {:f, 64}
      assert values(p) == [:math.pi() / 4, -:math.pi() / 2, :math.pi()]

      assert values(Nx.phase(Nx.tensor([2, -3]))) == [
               0.0,
               Nx.to_number(Nx.tensor(:math.pi(), type: :f32))
             ]
    end
  end

  describe "weighted_mean and window_mean" do
    test "weighted means over all axes or some" do
      assert_in_delta Nx.to_number(Nx.weighted_mean(Nx.tensor([1, 2, 3]), Nx.tensor([3, 2, 1]))),
                      10 / 6,
                      1.0e-6

      t = Nx.iota({3, 4})
      assert values(Nx.weighted_mean(t, Nx.tensor([1, 2, 3, 4]), axes: [1])) == [2.0, 6.0, 10.0]
      out = Nx.weighted_mean(t, Nx.tensor([1, 1, 2]), axes: [0], keep_axes: true)
      assert out.shape == {1, 4}
      assert values(out) == [5.0, 6.0, 7.0, 8.0]
      assert Nx.weighted_mean(f64([1.0, 2.0]), f64([1.0, 1.0])).type == {:f, 64}
    end

    test "the gradient of a weighted mean is the normalised weights" do
      assert values(Fns.grad_wmean(f64([5.0, -1.0, 2.0]))) == [1 / 6, 2 / 6, 3 / 6]
    end

    test "weights of another shape need :axes of their rank" do
      assert_raise ArgumentError, ~r/needs :axes/, fn ->
        Nx.weighted_mean(Nx.iota({2, 2}), Nx.tensor([1, 2]))
      end

      assert_raise ArgumentError, ~r/weights of rank 2/, fn ->
        Nx.weighted_mean(Nx.iota({2, 2}), Nx.tensor([1, 2]), axes: [0, 1])
      end
    end

    test "covariance: ddof, a given mean, batches" do
      t = Nx.tensor([[1, 2], [3, 4], [5, 6]])
      assert Nx.covariance(t).type == {:f, 32}

      for {got, want} <- Enum.zip(values(Nx.covariance(t)), List.duplicate(8 / 3, 4)),
          do: assert_in_delta(got, want, 1.0e-6)

      assert values(Nx.covariance(t, ddof: 1)) == [4.0, 4.0, 4.0, 4.0]

      for {got, want} <-
            Enum.zip(values(Nx.covariance(t, Nx.tensor([4, 3]))), [11 / 3, 5 / 3, 5 / 3, 11 / 3]),
          do: assert_in_delta(got, want, 1.0e-6)

      # against the definition, in f64, for a batch of random-looking data
      x = Nx.remainder(Nx.multiply(Nx.iota({2, 5, 3}, type: :f64), 7.3), 4.1)
      cov = Nx.covariance(x, ddof: 1)
      assert cov.shape == {2, 3, 3}

      for b <- 0..1, i <- 0..2, j <- 0..2 do
        rows = Nx.to_list(x) |> Enum.at(b)
        col = fn k -> Enum.map(rows, &Enum.at(&1, k)) end
        mean = fn list -> Enum.sum(list) / length(list) end
        {ci, cj} = {col.(i), col.(j)}

        want =
          Enum.sum(Enum.zip_with(ci, cj, fn a, c -> (a - mean.(ci)) * (c - mean.(cj)) end)) / 4

        assert_in_delta Nx.to_number(cov[[b, i, j]]), want, 1.0e-12
      end
    end

    # real Nx 0.7.2's values: the first factor is conjugated, so the diagonal is real
    # (until 2026-12-02 nx_jax did not conjugate: a silently wrong complex covariance)
    test "covariance of complex observations" do
      z =
        Nx.tensor([
          [Complex.new(1, 2), Complex.new(0, 1)],
          [Complex.new(3, -1), 2],
          [Complex.new(0.5, 0.5), Complex.new(-1, 0)]
        ])

      assert Nx.covariance(z) ==
               Nx.tensor([
                 [
                   Complex.new(2.6666667461395264, 0.0),
                   Complex.new(1.8333333730697632, 0.8333333134651184)
                 ],
                 [
                   Complex.new(1.8333333730697632, -0.8333333134651184),
                   Complex.new(1.7777777910232544, 0.0)
                 ]
               ])
    end

    # real Nx 0.7.2's values: means with batch axes broadcast unbatched observations (the
    # result was a {3, 2, 3, 2} tensor of the wrong numbers)
    test "covariance of observations against a batch of means" do
      t = Nx.tensor([[4, 5], [2, 3], [1, 0]])

      assert Nx.covariance(t, Nx.tensor([[3, 2], [2, 3]])) ==
               Nx.tensor([
                 [[2.0, 2.0], [2.0, 4.666666507720947]],
                 [
                   [1.6666666269302368, 2.3333332538604736],
                   [2.3333332538604736, 4.333333492279053]
                 ]
               ])
    end

    test "covariance errors" do
      assert_raise ArgumentError, ~r/rank at least 2/, fn -> Nx.covariance(Nx.tensor([1, 2])) end

      assert_raise ArgumentError, ~r/expected mean of rank at least 1, got 0/, fn ->
        Nx.covariance(Nx.iota({3, 2}), Nx.tensor(1))
      end
    end

    test "window means, padding counting as zeros" do
      assert values(Nx.window_mean(Nx.tensor([1, 2, 3, 4]), {2})) == [1.5, 2.5, 3.5]
      assert values(Nx.window_mean(Nx.tensor([2.0, 4.0]), {2}, padding: :same)) == [3.0, 2.0]
      assert values(Nx.window_mean(Nx.iota({4, 4}), {2, 2}, strides: 2)) == [2.5, 4.5, 10.5, 12.5]
    end
  end

  describe "to_batched" do
    test "batches of the first axis, the leftover repeated or discarded" do
      t = Nx.iota({5, 2})
      stream = Nx.to_batched(t, 2)
      assert is_function(stream, 2) or is_struct(stream, Stream)
      assert Enum.map(stream, &values/1) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1]]

      assert Enum.map(Nx.to_batched(t, 2, leftover: :discard), &values/1) == [
               [0, 1, 2, 3],
               [4, 5, 6, 7]
             ]

      assert Enum.map(Nx.to_batched(t, 5), & &1.shape) == [{5, 2}]
    end

    # Nx 0.7.2's answers: the first vectorized axis is batched, each batch vectorized again
    test "a vectorized tensor is batched along its first vectorized axis" do
      t = Nx.iota({2, 2, 2}) |> Nx.vectorize(x: 2, y: 2)
      [first, second] = Nx.to_batched(t, 1) |> Enum.to_list()
      assert first.vectorized_axes == [x: 1, y: 2] and first.shape == {2}
      assert values(first) == [0, 1, 2, 3]
      assert values(second) == [4, 5, 6, 7]

      t = Nx.iota({5, 2}, names: [:x, :y]) |> Nx.vectorize(:x)
      batches = Nx.to_batched(t, 2) |> Enum.to_list()

      assert Enum.map(batches, &{&1.vectorized_axes, &1.names}) ==
               List.duplicate({[x: 2], [:y]}, 3)

      assert Enum.map(batches, &values/1) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1]]

      # a vectorized scalar can be batched
      t = Nx.tensor([1, 2, 3]) |> Nx.vectorize(:x)
      assert t |> Nx.to_batched(2) |> Enum.map(&values/1) == [[1, 2], [3, 1]]

      assert_raise ArgumentError, "cannot batch beyond original tensor", fn ->
        Nx.to_batched(t, 4)
      end
    end

    test "errors" do
      assert_raise ArgumentError, ~r/cannot batch non-vectorized scalar tensor/, fn ->
        Nx.to_batched(Nx.tensor(1), 1)
      end

      assert_raise ArgumentError, "cannot batch beyond original tensor", fn ->
        Nx.to_batched(Nx.iota({2}), 3)
      end

      assert_raise ArgumentError, ~r/:leftover to be :repeat or :discard/, fn ->
        Nx.to_batched(Nx.iota({4}), 2, leftover: :pad)
      end
    end
  end

  # the answers of real Nx 0.7.2 for the same calls
  describe "log/2, log2, log10, diff, flat_size and the type shorthands" do
    test "values and types" do
      assert Nx.log(Nx.tensor([3, 9, 27, 81]), 3) == Nx.tensor([1.0, 2.0, 3.0, 4.0])
      assert Nx.log2(Nx.tensor([1, 2, 4, 8])) == Nx.tensor([0.0, 1.0, 2.0, 3.0])
      assert Nx.to_number(Nx.log(Nx.tensor(8.0, type: :f64), 2)) == 2.9999999917564937
      assert Nx.flat_size(Nx.vectorize(Nx.iota({2, 3}), :x)) == 6
      assert Nx.diff(Nx.tensor([1, 3, 6, 10])) == Nx.tensor([2, 3, 4])
      assert Nx.diff(Nx.tensor([[1, 3, 7], [2, 2, 5]]), order: 2) == Nx.tensor([[2], [3]])
      assert Nx.diff(Nx.tensor([[1, 3], [2, 7]]), axis: 0) == Nx.tensor([[1, 4]])
      assert Nx.diff(Nx.tensor([1, 2, 4]), order: 0) == Nx.tensor([1, 2, 4])
      assert Nx.u8([1, 2]) == Nx.tensor([1, 2], type: :u8)
      assert Nx.f64(0.1) == Nx.tensor(0.1, type: :f64)
      assert Nx.bf16([1.1]) |> Nx.to_flat_list() == [1.09375]
    end

    test "errors" do
      assert_raise ArgumentError,
                   "expected base to be greater than 0 and different than 1, got: 1",
                   fn -> Nx.log(2, 1) end

      assert_raise ArgumentError, "order must be non-negative but got: -1", fn ->
        Nx.diff(Nx.tensor([1, 2]), order: -1)
      end

      assert_raise ArgumentError, ~r/diff of order 3 needs more than 3 elements/, fn ->
        Nx.diff(Nx.tensor([1, 2, 4]), order: 3)
      end
    end

    test "diff is one graph eagerly, and differentiable in defn" do
      grad =
        Nx.Defn.grad(Nx.tensor([1.0, 4.0, 9.0]), &Nx.sum(Nx.multiply(Nx.diff(&1), Nx.diff(&1))))

      # d/dx of (x1 - x0)^2 + (x2 - x1)^2 = [-2(x1 - x0), 2(x1 - x0) - 2(x2 - x1), 2(x2 - x1)]
      assert grad == Nx.tensor([-6.0, -4.0, 10.0])
    end
  end

  describe "map/3" do
    # real Nx 0.7.2 gives the same for each
    test "applies a scalar function to every element, in the tensor's type or :type" do
      t = Nx.tensor([[1, 2, 3], [4, 5, 6]])
      assert Nx.map(t, &Nx.add(&1, 1)) == Nx.tensor([[2, 3, 4], [5, 6, 7]])
      assert Nx.map(Nx.tensor(1), &Nx.add(&1, 1)) == Nx.tensor(2)
      assert Nx.map(t, [type: :f64], &Nx.add(&1, 1)) == Nx.add(t, 1) |> Nx.as_type(:f64)
      assert Nx.map(Nx.tensor([1.5, -2.0]), &Nx.multiply(&1, &1)) == Nx.tensor([2.25, 4.0])
      assert Nx.map(Nx.tensor([1, 2]), fn _ -> 7 end) == Nx.tensor([7, 7])

      vectorized = Nx.map(Nx.vectorize(t, :x), [type: :f64], &Nx.add(&1, 1))
      assert vectorized.vectorized_axes == [x: 2]
      assert Nx.devectorize(vectorized, keep_names: false) == Nx.as_type(Nx.add(t, 1), :f64)
    end

    # Nx 0.7.2's lin_alg_test rounds with such a function; real Nx gives the same numbers
    test "a function of concrete numbers is called on each element, outside defn" do
      rounded = Nx.map(Nx.tensor([1.234, 2.345]), &Float.round(Nx.to_number(&1), 1))
      assert rounded == Nx.tensor([1.2, 2.3])

      assert Nx.map(Nx.tensor([[1, 2]]), [type: :f64], &(Nx.to_number(&1) * 1.5)) ==
               Nx.tensor([[1.5, 3.0]], type: :f64)
    end

    test "an unknown option raises as in Nx" do
      assert_raise ArgumentError, "unknown key :axis in [axis: 0], expected one of [:type]", fn ->
        Nx.map(Nx.tensor([1]), [axis: 0], & &1)
      end
    end
  end
end
