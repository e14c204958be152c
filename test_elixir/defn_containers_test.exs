defmodule NxJax.DefnContainersTest do
  # Tuples and maps as defn arguments and results, and grad/value_and_grad with respect to
  # them (inside and outside defn), checked against central differences in f64.
  use ExUnit.Case, async: true
  # the tests tagged :seam run under NxJax.Test.SeamCompiler too (make test-seam)
  setup context, do: NxJax.Test.SeamRun.watch(context)

  import Nx.Defn

  @f64 {:f, 64}

  defp f64(value), do: Nx.tensor(value, type: @f64)

  defn swap({a, b}), do: {b, a}
  defn scale_map(%{x: x, y: y} = m, k), do: %{m | x: x * k, y: y + k}
  defn nested({a, %{b: b, c: {c, d}}}), do: %{sum: a + b + c + d, pair: {a * b, c * d}}

  defn predict(params, x) do
    hidden = Nx.tanh(Nx.dot(x, params.w1) + params.b1)
    Nx.dot(hidden, params.w2) + params.b2
  end

  defn loss(params, x, y), do: Nx.mean((predict(params, x) - y) ** 2)
  defn grad_loss(params, x, y), do: grad(params, &loss(&1, x, y))
  defn value_and_grad_loss(params, x, y), do: value_and_grad(params, &loss(&1, x, y))

  defn grad_tuple(a, b), do: grad({a, b}, fn {a, b} -> Nx.sum(a * Nx.sin(b)) end)

  defn step(params, x, y) do
    grads = grad(params, &loss(&1, x, y))
    %{params | w1: params.w1 - 0.1 * grads.w1, b1: params.b1 - 0.1 * grads.b1}
  end

  defp mlp_params do
    %{
      w1: f64([[0.1, -0.2, 0.3], [0.4, 0.5, -0.6]]),
      b1: f64([0.01, -0.02, 0.03]),
      w2: f64([[0.7], [-0.8], [0.9]]),
      b2: f64([0.05])
    }
  end

  defp data do
    {f64([[1.0, 2.0], [-1.0, 0.5], [0.3, -0.7], [2.0, 1.0]]), f64([[0.5], [-0.5], [0.1], [1.0]])}
  end

  describe "containers as arguments and results" do
    @tag :seam
    test "tuples, maps and nestings of them round-trip" do
      assert swap({Nx.tensor(1), Nx.tensor([2.0])}) == {Nx.tensor([2.0]), Nx.tensor(1)}

      assert scale_map(%{x: Nx.tensor([1, 2]), y: 1.5}, 2) ==
               %{x: Nx.tensor([2, 4]), y: Nx.tensor(3.5)}

      assert nested({1.0, %{b: 2.0, c: {3.0, 4.0}}}) ==
               %{sum: Nx.tensor(10.0), pair: {Nx.tensor(2.0), Nx.tensor(12.0)}}
    end
  end

  describe "grad with respect to containers" do
    test "a tuple, inside defn and outside" do
      a = f64([1.0, 2.0])
      b = f64([0.5, -0.3])
      {ga, gb} = grad_tuple(a, b)
      assert ga == Nx.sin(b)
      assert gb == Nx.multiply(a, Nx.cos(b))

      assert Nx.Defn.grad({a, b}, fn {a, b} -> Nx.sum(Nx.multiply(a, Nx.sin(b))) end) == {ga, gb}
    end

    test "a map of MLP parameters: every gradient matches finite differences" do
      params = mlp_params()
      {x, y} = data()
      grads = grad_loss(params, x, y)
      # (sorted: the VM keeps no order of a map's keys, OTP 26 and later none for small maps)
      assert Enum.sort(Map.keys(grads)) == [:b1, :b2, :w1, :w2]

      for key <- Map.keys(params) do
        assert grads[key].shape == params[key].shape
        assert grads[key].type == @f64

        :ok =
          NxJax.GradCheck.check_grads!(
            fn leaf -> loss(Map.put(params, key, leaf), x, y) end,
            fn leaf -> grad_loss(Map.put(params, key, leaf), x, y)[key] end,
            params[key]
          )
      end
    end

    test "value_and_grad and Nx.Defn.grad agree on a map, and a step updates it" do
      params = mlp_params()
      {x, y} = data()
      {value, grads} = value_and_grad_loss(params, x, y)
      assert value == loss(params, x, y)
      assert grads == grad_loss(params, x, y)
      assert Nx.Defn.grad(params, &loss(&1, x, y)) == grads

      stepped = step(params, x, y)
      assert stepped.w2 == params.w2
      # the step fuses w1 - 0.1 * g as XLA sees fit (a fused multiply-add on CPUs that have
      # one: the last bit differed on a Xeon), so to within rounding, not bit for bit
      NxJax.TestAssertions.assert_close(
        stepped.w1,
        Nx.to_flat_list(Nx.subtract(params.w1, Nx.multiply(0.1, grads.w1))),
        1.0e-15
      )

      assert Nx.to_number(loss(stepped, x, y)) < Nx.to_number(value)
    end

    test "a map carried through a while loop and a cond" do
      params = %{a: f64(1.5), b: f64(-0.5)}

      f = fn p -> looped_map(p) end
      {value, grads} = Nx.Defn.value_and_grad(params, f)
      # a * 2^3 + (b > 0 ? b : -b) -> 12 + 0.5
      assert value == f64(12.5)
      assert grads == %{a: f64(8.0), b: f64(-1.0)}

      for key <- [:a, :b] do
        :ok =
          NxJax.GradCheck.check_grads!(
            fn leaf -> looped_map(Map.put(params, key, leaf)) end,
            fn leaf -> Nx.Defn.grad(Map.put(params, key, leaf), f)[key] end,
            params[key]
          )
      end
    end
  end

  defn looped_map(p) do
    p =
      while p, _i <- 1..3 do
        %{p | a: p.a * 2}
      end

    p.a + if(p.b > 0, do: p.b, else: -p.b)
  end
end
