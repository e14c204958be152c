defmodule NxJax.GradTypesTest do
  # The type of a gradient is Nx 0.7.2's (the type its backward pass computes in), not the
  # input's; each expected tensor below is what real Nx 0.7.2 returns for the same call.
  use ExUnit.Case, async: true

  import Nx.Defn

  @f64 Nx.tensor([1.0, 2.0], type: :f64)
  @c64 Nx.tensor([Complex.new(1.0, 1.0), Complex.new(2.0, 0.5)])
  @f16 Nx.tensor([1.0, 2.0], type: :f16)

  test "a gradient that only moves or sums the seed is f32, whatever the input's type" do
    for x <- [@f64, @c64, @f16, Nx.tensor([1, 2])] do
      assert Nx.Defn.grad(x, &Nx.sum/1) == Nx.tensor([1.0, 1.0])
      assert Nx.Defn.grad(x, &Nx.mean/1) == Nx.tensor([0.5, 0.5])
      assert Nx.Defn.grad(x, &Nx.sum(Nx.multiply(&1, 2.0))) == Nx.tensor([2.0, 2.0])
      assert Nx.Defn.grad(x, &Nx.sum(Nx.reverse(&1))) == Nx.tensor([1.0, 1.0])
      assert Nx.Defn.grad(x, &Nx.sum(Nx.concatenate([&1, &1]))) == Nx.tensor([2.0, 2.0])
      assert Nx.Defn.grad(x, &Nx.sum(Nx.cumulative_sum(&1))) == Nx.tensor([2.0, 1.0])
    end
  end

  test "an input nothing depends on gets f32 zeros" do
    assert Nx.Defn.grad(@f64, fn _ -> Nx.tensor(1.0) end) == Nx.tensor([0.0, 0.0])
    assert Nx.Defn.grad(@c64, fn _ -> Nx.tensor(1.0) end) == Nx.tensor([0.0, 0.0])
  end

  test "a gradient that multiplies by values of the forward pass has their type" do
    assert Nx.Defn.grad(@f64, &Nx.sum(Nx.multiply(&1, &1))) ==
             Nx.tensor([2.0, 4.0], type: :f64)

    assert Nx.Defn.grad(@c64, &Nx.dot(&1, &1)) ==
             Nx.tensor([Complex.new(2.0, 2.0), Complex.new(4.0, 1.0)])

    # f16 forward values merged with the f32 seed: f32
    assert Nx.Defn.grad(@f16, &Nx.sum(Nx.exp(&1))) == Nx.tensor([2.71875, 7.390625])
    # take scatters into zeros of the operand's type
    assert Nx.Defn.grad(@f64, &Nx.sum(Nx.take(&1, Nx.tensor([0, 0])))) ==
             Nx.tensor([2.0, 0.0], type: :f64)
  end

  test "real, imag and a complex-to-real as_type give a real gradient" do
    assert Nx.Defn.grad(@c64, &Nx.sum(Nx.real(&1))) == Nx.tensor([1.0, 1.0])
    # Nx's imag(g) of the real seed: the derivative along the real axis
    assert Nx.Defn.grad(@c64, &Nx.sum(Nx.imag(&1))) == Nx.tensor([0.0, 0.0])

    assert Nx.Defn.grad(@c64, &Nx.sum(Nx.cos(Nx.as_type(&1, :f32)))) ==
             Nx.tensor([-0.8414709568023682, -0.9092974066734314])

    # abs of a complex z keeps z's type
    assert Nx.Defn.grad(Nx.tensor([Complex.new(3.0, 4.0)]), &Nx.sum(Nx.abs(&1))) ==
             Nx.tensor([Complex.new(0.6000000238418579, -0.800000011920929)])
  end

  test "a real input whose backward pass goes through fft gets a complex gradient" do
    g = Nx.Defn.grad(Nx.iota({2, 6}, type: :f64), &Nx.sum(Nx.real(Nx.fft(&1))))
    # Nx 0.7.2's is c64 (its fft rule starts from the f32 seed); ours merges with fft's c128
    # output: complex as Nx's, and never narrower than the values it was computed from
    assert g.type == {:c, 128}
    assert Nx.real(g) == Nx.tensor([[6.0, 0, 0, 0, 0, 0], [6.0, 0, 0, 0, 0, 0]], type: :f64)
    assert Nx.imag(g) == Nx.broadcast(Nx.tensor(0.0, type: :f64), {2, 6})
  end

  defn grad_window_scatter_max(t, source, init) do
    grad({t, source, init}, fn {t, source, init} ->
      Nx.window_scatter_max(t, source, init, {2, 3}, strides: [2, 3], padding: :valid)
    end)
  end

  test "window_scatter_max's operand gets s64 zeros (Nx.broadcast(0, t) in Nx's rule)" do
    t = Nx.tensor([[7.0, 2, 5, 3, 10, 2], [3, 8, 9, 3, 4, 2]])
    {dt, dsource, dinit} = grad_window_scatter_max(t, Nx.tensor([[2.0, 6.0]]), 0.0)
    assert dt == Nx.broadcast(0, {2, 6})
    assert dsource == Nx.tensor([[1.0, 1.0]])
    assert dinit == Nx.tensor(12.0)
  end
end
