defmodule NxJax.RealNx.BackendTest do
  # NxJax.Backend under real Nx: resident tensors and eager ops as one-op jits on the worker,
  # each result compared with real Nx's binary backend
  use ExUnit.Case, async: true

  import Nx.Defn

  defp binary(t), do: Nx.backend_copy(t, Nx.BinaryBackend)

  defp assert_same_as_binary(fun, args) do
    ours = apply(fun, Enum.map(args, &Nx.backend_copy(&1, NxJax.Backend)))
    theirs = apply(fun, args)

    for {a, b} <-
          Enum.zip(
            Nx.Defn.Composite.flatten_list([ours]),
            Nx.Defn.Composite.flatten_list([theirs])
          ) do
      assert %NxJax.Backend{} = a.data
      a = binary(a)
      assert {a.type, a.shape, a.names} == {b.type, b.shape, b.names}

      if Nx.Type.float?(a.type),
        do: assert(Nx.to_number(Nx.all_close(a, b, atol: 1.0e-5)) == 1, inspect({a, b})),
        else: assert(a == b)
    end
  end

  test "transfers there and back, inspect, deallocate" do
    t = Nx.tensor([[1.0, 2.0], [3.0, 4.0]], names: [:x, :y])
    r = Nx.backend_transfer(t, NxJax.Backend)
    assert %NxJax.Backend{} = r.data
    assert Nx.to_binary(r) == Nx.to_binary(t)
    assert Nx.to_number(r[0][1]) == 2.0
    assert inspect(r) =~ "[1.0, 2.0]"
    assert Nx.backend_transfer(r) == t
    copy = Nx.backend_copy(t, NxJax.Backend)
    assert Nx.backend_deallocate(copy) == :ok
    assert_raise NxJax.WorkerError, ~r/freed with/, fn -> Nx.to_binary(copy) end
  end

  test "creation and eager ops under Nx.default_backend(NxJax.Backend)" do
    Nx.default_backend(NxJax.Backend)
    x = Nx.iota({2, 3}, type: :f32)
    assert %NxJax.Backend{} = x.data
    y = Nx.add(Nx.exp(x), Nx.eye(2) |> Nx.sum())
    assert %NxJax.Backend{} = y.data
    expected = Nx.add(Nx.exp(Nx.iota({2, 3}, type: :f32, backend: Nx.BinaryBackend)), 2.0)
    assert Nx.to_number(Nx.all_close(binary(y), expected)) == 1
    assert Nx.to_flat_list(Nx.tensor([1, 2, 3]) |> Nx.multiply(2)) == [2, 4, 6]
  end

  test "element-wise, reductions, shape and indexing ops, linear algebra" do
    a = Nx.tensor([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])
    v = Nx.tensor([1.0, -2.0, 3.0])
    i = Nx.tensor([2, 0, 1])

    assert_same_as_binary(&Nx.sin/1, [a])
    assert_same_as_binary(&Nx.subtract/2, [a, v])
    assert_same_as_binary(&Nx.sum(&1, axes: [1]), [a])
    assert_same_as_binary(&Nx.argmax(&1, axis: 0), [a])
    assert_same_as_binary(&Nx.dot/2, [a, v])
    assert_same_as_binary(&Nx.transpose/1, [a])
    assert_same_as_binary(&Nx.slice(&1, [1, 0], [2, 2]), [a])
    assert_same_as_binary(&Nx.put_slice(&1, [0, 1], Nx.tensor([[9.0, 9.0]])), [a])
    assert_same_as_binary(&Nx.take(&1, &2), [a, i])
    assert_same_as_binary(&Nx.concatenate([&1, &1]), [v])
    assert_same_as_binary(&Nx.sort(&1, direction: :desc), [v])
    assert_same_as_binary(&Nx.cumulative_sum/1, [v])
    assert_same_as_binary(&Nx.LinAlg.determinant/1, [a])
    assert_same_as_binary(&Nx.LinAlg.lu/1, [a])
    assert_same_as_binary(fn v -> Nx.reduce(v, 0.0, &Nx.add/2) end, [v])
    assert_same_as_binary(&Nx.stack([&1, &1], axis: 1), [v])
    assert_same_as_binary(&Nx.top_k(&1, k: 2), [v])
    assert_same_as_binary(&Nx.fft2/1, [a])

    # (Nx 0.9 has no Nx.map)
    if function_exported?(Nx, :map, 2),
      do: assert_same_as_binary(fn v -> apply(Nx, :map, [v, &Nx.multiply(&1, &1)]) end, [v])
  end

  defn step(w, x), do: w - 0.1 * grad(w, fn w -> Nx.sum((Nx.dot(x, w) - 1) ** 2) end)

  test "a jit keeps resident arguments' results resident, and a loop of them" do
    x = Nx.tensor([[1.0, 2.0], [3.0, 4.0]])
    w0 = Nx.tensor([0.1, -0.1])
    w = Nx.backend_transfer(w0, NxJax.Backend)

    w = Enum.reduce(1..5, w, fn _, w -> step(w, x) end)
    assert %NxJax.Backend{} = w.data

    expected =
      Enum.reduce(1..5, w0, fn _, w ->
        Nx.Defn.jit_apply(&step/2, [w, x], compiler: Nx.Defn.Evaluator)
      end)

    assert Nx.to_number(Nx.all_close(Nx.backend_transfer(w), expected, atol: 1.0e-5)) == 1
  end
end
