defmodule NxJax.PoolTest do
  # async: false: replaces the application's pool with a two-worker one for this module
  use ExUnit.Case, async: false

  defmodule Fns do
    import Nx.Defn
    defn twice(x), do: x * 2
  end

  setup_all do
    NxJax.TestPool.replace_application_pool(2)
  end

  test "the pool runs the configured number of named workers" do
    assert NxJax.Pool.size() == 2
    assert [w0, w1] = NxJax.Pool.workers()
    assert w0 == Process.whereis(NxJax.Worker)
    assert w1 == Process.whereis(NxJax.Pool.name(1))
    # the names are made once at the pool's start; one past the pool is made on demand
    assert NxJax.Pool.name(1) == :"Elixir.NxJax.Worker.1"
    assert NxJax.Pool.name(7) == :"Elixir.NxJax.Worker.7"
  end

  test "independent concurrent calls are spread over the workers" do
    runs = fn -> Enum.map(NxJax.Pool.workers(), &NxJax.Worker.stats(server: &1).runs) end
    before = runs.()

    1..8
    |> Enum.map(fn i ->
      Task.async(fn -> for j <- 1..25, do: Fns.twice(Nx.tensor(i * j)) end)
    end)
    |> Enum.each(fn task ->
      assert Enum.map(Task.await(task, :infinity), &Nx.to_number/1) |> length() == 25
    end)

    [a, b] = Enum.zip_with(runs.(), before, &-/2)
    assert a + b == 200
    assert a > 0 and b > 0
  end

  test "a call whose argument is resident runs on that worker" do
    for _ <- 1..4 do
      r = Nx.backend_transfer(Nx.tensor([1, 2, 3]), NxJax.Backend)
      result = Fns.twice(r)
      assert result.data.worker == r.data.worker
      assert Nx.backend_transfer(result) == Nx.tensor([2, 4, 6])
    end
  end

  test "arguments resident on different workers are brought together" do
    [w0, w1] = NxJax.Pool.workers()
    a = put_on(w0, Nx.tensor([1.0, 2.0]))
    b = put_on(w1, Nx.tensor([10.0, 20.0]))
    sum = Nx.add(a, b)
    assert sum.data.worker == w0
    assert Nx.backend_transfer(sum) == Nx.tensor([11.0, 22.0])
  end

  defp put_on(worker, t) do
    [{:ref, handle, guard}] =
      NxJax.Worker.put([{t.type, t.shape, Nx.to_binary(t)}], server: worker)

    %Nx.Tensor{t | data: %NxJax.Backend{worker: worker, handle: handle, guard: guard}}
  end
end
