defmodule NxJax.ResidentHandlesTest do
  # async: false: counts resident tensors on the shared workers
  use ExUnit.Case, async: false
  import NxJax.TestAssertions, only: [wait_until: 1]

  defmodule MLP do
    import Nx.Defn

    defn loss({w1, w2}, x, y) do
      pred = Nx.dot(Nx.tanh(Nx.dot(x, w1)), w2)
      Nx.mean((pred - y) * (pred - y))
    end

    defn step({w1, w2}, x, y) do
      {g1, g2} = grad({w1, w2}, &loss(&1, x, y))
      {w1 - 0.1 * g1, w2 - 0.1 * g2}
    end
  end

  defp resident_count, do: NxJax.Pool.stats().resident

  defp data do
    x = Nx.divide(Nx.iota({4, 3}, type: :f32), 10)
    y = Nx.tensor([[0.5], [-0.5], [1.0], [0.0]])
    w1 = Nx.divide(Nx.subtract(Nx.iota({3, 5}, type: :f32), 7), 10)
    w2 = Nx.divide(Nx.iota({5, 1}, type: :f32), 20)
    {x, y, {w1, w2}}
  end

  test "backend_transfer makes a tensor resident and brings it back" do
    t = Nx.tensor([[1.5, -2.0], [3.0, 4.25]])
    r = Nx.backend_transfer(t, NxJax.Backend)
    assert %NxJax.Backend{handle: handle} = r.data
    assert is_integer(handle)
    assert {r.type, r.shape} == {{:f, 32}, {2, 2}}
    assert Nx.to_binary(r) == Nx.to_binary(t)
    # (regression: inspecting a resident tensor raised inside Inspect, and the Inspect.Error
    # text, which quotes the tensor, still matched a looser assertion)
    worker = inspect(r.data.worker)

    assert inspect(r) ==
             "#Nx.Tensor<\n  f32[2][2]\n  NxJax.Backend<#{worker}, #{handle}>\n  [\n" <>
               "    [1.5, -2.0],\n    [3.0, 4.25]\n  ]\n>"

    refute inspect(r) =~ "Inspect.Error"
    assert inspect(r, limit: 2) =~ "[1.5, -2.0],\n    ...\n"
    back = Nx.backend_transfer(r)
    assert back == t
    assert Nx.backend_deallocate(r) == :already_deallocated
  end

  test "backend_copy keeps the resident copy; backend_deallocate frees it" do
    before = resident_count()
    r = Nx.backend_transfer(Nx.tensor([1, 2, 3]), NxJax.Backend)
    assert resident_count() == before + 1
    assert Nx.backend_copy(r) == Nx.tensor([1, 2, 3])
    r2 = Nx.backend_copy(r, NxJax.Backend)
    assert r2.data.handle != r.data.handle
    assert resident_count() == before + 2
    assert Nx.backend_deallocate(r) == :ok
    assert Nx.backend_deallocate(r) == :already_deallocated
    assert Nx.backend_transfer(r2) == Nx.tensor([1, 2, 3])
    assert resident_count() == before
    error = assert_raise NxJax.WorkerError, fn -> Nx.to_binary(r) end
    assert error.class == "UnknownHandle"
  end

  test "eager ops on resident tensors run on the worker and stay resident" do
    r = Nx.backend_transfer(Nx.tensor([1.0, 4.0, 9.0]), NxJax.Backend)
    s = Nx.sqrt(r)
    assert %NxJax.Backend{worker: worker} = s.data
    assert worker == r.data.worker
    total = Nx.sum(Nx.add(s, 1))
    assert %NxJax.Backend{} = total.data
    assert Nx.to_number(total) == 9.0
    assert Nx.backend_transfer(s) == Nx.tensor([1.0, 2.0, 3.0])
  end

  test "a training loop with resident weights matches the one that ships them" do
    {x, y, params} = data()
    shipped = Enum.reduce(1..5, params, fn _, p -> MLP.step(p, x, y) end)

    resident =
      Enum.reduce(1..5, Nx.backend_transfer(params, NxJax.Backend), fn _, p ->
        MLP.step(p, x, y)
      end)

    assert %NxJax.Backend{} = elem(resident, 0).data
    {w1, w2} = Nx.backend_transfer(resident)
    assert w1 == elem(shipped, 0)
    assert w2 == elem(shipped, 1)
    assert Nx.to_number(MLP.loss(shipped, x, y)) < Nx.to_number(MLP.loss(params, x, y))
  end

  test "default_backend NxJax.Backend keeps results of ordinary calls resident" do
    task =
      Task.async(fn ->
        Nx.default_backend(NxJax.Backend)
        t = Nx.multiply(Nx.tensor([1, 2]), 3)
        {t.data.__struct__, Nx.backend_transfer(t)}
      end)

    assert Task.await(task, :infinity) == {NxJax.Backend, Nx.tensor([3, 6])}
  end

  test "handles owned by a process are freed when it exits (nothing leaks)" do
    before = resident_count()
    {x, y, params} = data()

    {pid, monitor} =
      spawn_monitor(fn ->
        p = Nx.backend_transfer(params, NxJax.Backend)
        p = Enum.reduce(1..3, p, fn _, p -> MLP.step(p, x, y) end)
        _loss = MLP.loss(p, x, y)
        send(self(), :done)
        exit(:normal)
      end)

    assert_receive {:DOWN, ^monitor, :process, ^pid, :normal}, NxJax.TestTime.ms(30_000)
    # the worker frees them when it sees the owner's DOWN: wait for that message to be handled
    assert wait_until(fn -> resident_count() == before end)
  end

  test "release answers from the client's records and frees without waiting for the worker" do
    before = resident_count()
    r = Nx.backend_transfer(Nx.tensor([1.0, 2.0]), NxJax.Backend)
    other = Nx.backend_transfer(Nx.tensor([3.0]), NxJax.Backend)
    %NxJax.Backend{worker: w, handle: h} = r.data
    assert w == other.data.worker
    assert resident_count() == before + 2
    # unknown handles are not counted; a handle released twice counts once
    assert NxJax.Worker.release([h, h, 987_654_321], server: w) == 1
    assert NxJax.Worker.release([h], server: w) == 0
    # the free reached the worker before this later request
    error = assert_raise NxJax.WorkerError, fn -> Nx.to_binary(r) end
    assert error.class == "UnknownHandle"
    assert resident_count() == before + 1
    assert Nx.backend_transfer(other) == Nx.tensor([3.0])
    assert resident_count() == before
  end

  test "a handle released by another process is not freed twice when its owner exits" do
    before = resident_count()
    parent = self()

    {pid, monitor} =
      spawn_monitor(fn ->
        a = Nx.backend_transfer(Nx.tensor([1, 2]), NxJax.Backend)
        b = Nx.backend_transfer(Nx.tensor([3, 4]), NxJax.Backend)
        send(parent, {:tensors, a, b})
        receive do: (:exit -> :ok)
      end)

    assert_receive {:tensors, a, b}, NxJax.TestTime.ms(30_000)
    assert Nx.backend_deallocate(a) == :ok
    assert Nx.backend_deallocate(a) == :already_deallocated
    assert resident_count() == before + 1
    send(pid, :exit)
    assert_receive {:DOWN, ^monitor, :process, ^pid, :normal}, NxJax.TestTime.ms(30_000)
    assert wait_until(fn -> resident_count() == before end)
    assert Nx.backend_deallocate(b) == :already_deallocated
  end

  test "no table shows a handle: another process that reads the live table cannot use what it finds" do
    r = Nx.backend_transfer(Nx.tensor([5.0, 6.0]), NxJax.Backend)
    %NxJax.Backend{worker: w, handle: h} = r.data
    # the table every process can read holds digests: none is the handle, none works as one
    entries = :ets.tab2list(NxJax.Worker.Caller.local(w).live)
    assert {NxJax.Worker.live_key(h)} in entries
    refute Enum.any?(entries, fn {key} -> key == h end)

    task =
      Task.async(fn ->
        for {key} <- entries do
          assert_raise NxJax.WorkerError, ~r/no resident tensor/, fn ->
            NxJax.Worker.fetch([key], server: w)
          end
        end

        # nor do they free anything
        NxJax.Worker.free(Enum.map(entries, &elem(&1, 0)), server: w)
      end)

    assert Task.await(task, NxJax.TestTime.ms(30_000)) == 0
    assert Nx.backend_transfer(r) == Nx.tensor([5.0, 6.0])
  end
end
