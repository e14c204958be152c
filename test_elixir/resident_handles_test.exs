defmodule NxJax.ResidentHandlesTest do
  # async: false: the pool's workers are shared; counts are read on workers of the tests' own
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

  defmodule Steps do
    import Nx.Defn

    defn inc(w), do: w + 1
    defn inc_both(w, v), do: {w + 1, v + w}
    defn pair(a, b), do: {a + 1, b * 2}
  end

  # a worker of the test's own, so that its resident count is the test's alone
  defp own_worker(env \\ []) do
    name = :"resident_#{System.unique_integer([:positive])}"
    start_supervised!({NxJax.Worker, name: name, env: env}, id: name)
    GenServer.whereis(name)
  end

  defp resident(worker), do: NxJax.Worker.stats(server: worker).resident

  defp put_on(worker, %Nx.Tensor{} = t) do
    [{:ref, handle, guard}] =
      NxJax.Worker.put([{t.type, t.shape, Nx.to_binary(t)}], server: worker)

    %Nx.Tensor{t | data: %NxJax.Backend{worker: worker, handle: handle, guard: guard}}
  end

  # every process of this node collected, and what their guards sent handled by the worker
  defp collect_everything(worker) do
    for pid <- Process.list(), do: :erlang.garbage_collect(pid)
    # (the collector's flush and the worker's free are requests queued before this ping)
    :sys.get_state(NxJax.Worker.Collector)
    :sys.get_state(worker)
    :pong = NxJax.Worker.call(:ping, [], server: worker)
  end

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

  test "backend_copy keeps the resident copy; backend_deallocate frees it at once" do
    w = own_worker()
    r = put_on(w, Nx.tensor([1, 2, 3]))
    assert resident(w) == 1
    assert Nx.backend_copy(r) == Nx.tensor([1, 2, 3])
    r2 = Nx.backend_copy(r, NxJax.Backend)
    assert r2.data.handle != r.data.handle
    assert Nx.backend_deallocate(r) == :ok
    assert Nx.backend_deallocate(r) == :already_deallocated
    assert Nx.backend_transfer(r2) == Nx.tensor([1, 2, 3])
    assert resident(w) == 0
    error = assert_raise NxJax.WorkerError, fn -> Nx.to_binary(r) end
    assert error.class == "UnknownHandle"
    assert error.message =~ "freed with Nx.backend_deallocate/1"
  end

  # issue 49 item 4: the public ETS table of live handles is gone; the application's processes
  # own no table of handles another process could write, and a tensor's life is decided by its
  # guard, which only a holder of the tensor can disarm
  test "no public ETS table of the application decides a tensor's life; deallocate is a holder's" do
    w = own_worker()
    r = put_on(w, Nx.tensor([1, 2, 3]))
    ours = MapSet.new([w | tree(NxJax.Supervisor)])
    assert MapSet.size(ours) > 3

    writable =
      for t <- :ets.all(),
          :ets.info(t, :protection) == :public,
          MapSet.member?(ours, :ets.info(t, :owner)),
          do: t

    # (but the counts of calls in flight to remote workers, which callers bump themselves:
    # writing them only changes where the next calls go)
    assert writable -- [:nx_jax_remote_in_flight] == []
    # a process that was sent the tensor holds it too: its deallocate frees it for everyone,
    # as EXLA's does; one that was not cannot name it
    assert Task.await(Task.async(fn -> Nx.backend_deallocate(r) end)) == :ok
    assert resident(w) == 0
  end

  defp tree(supervisor) do
    for {_id, pid, type, _} <- Supervisor.which_children(supervisor), is_pid(pid), reduce: [] do
      acc -> if type == :supervisor, do: [pid | tree(pid)] ++ acc, else: [pid | acc]
    end
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

  test "10,000 steps on a resident 256x256 tensor: resident count and worker RSS stay bounded" do
    # (8 MiB between pressure notices: 32 of these tensors)
    w = own_worker([{"NX_JAX_RESIDENT_GC_BYTES", "8388608"}])
    inc = Nx.Defn.jit(&Steps.inc/1, server: w)
    start = put_on(w, Nx.iota({256, 256}, type: :s32))

    {t, probes} =
      Enum.reduce(1..10_000, {start, []}, fn i, {t, probes} ->
        t = inc.(t)

        if i in [1_000, 10_000] do
          %{rss: rss} = NxJax.Worker.call(:memory, [false], server: w)
          {t, [{i, rss, resident(w)} | probes]}
        else
          {t, probes}
        end
      end)

    [{10_000, rss_end, resident_end}, {1_000, rss_1000, resident_1000}] = probes
    assert Nx.backend_copy(t) == Nx.add(Nx.iota({256, 256}, type: :s32), 10_000)
    # without collection: 10,001 tensors of 256 KiB
    assert resident_1000 < 200 and resident_end < 200
    assert rss_end - rss_1000 < 32 * 1_048_576
    stats = NxJax.Worker.stats(server: w)
    assert stats.resident_bytes == stats.resident * 262_144
  end

  test "a tensor dropped by the process that made it lives on in another that holds it" do
    w = own_worker()
    parent = self()
    table = :ets.new(:holder, [:public])

    # one maker sends its tensor here, another leaves its own in an ETS table; both exit
    for target <- [:message, :table] do
      {maker, monitor} =
        spawn_monitor(fn ->
          t = put_on(w, Nx.tensor([1.0, 2.0, 3.0]))
          if target == :message, do: send(parent, {:tensor, t}), else: :ets.insert(table, {:t, t})
        end)

      assert_receive {:DOWN, ^monitor, :process, ^maker, :normal}, NxJax.TestTime.ms(30_000)
    end

    assert_receive {:tensor, t}
    collect_everything(w)
    assert resident(w) == 2
    assert Nx.backend_copy(t) == Nx.tensor([1.0, 2.0, 3.0])
    [{:t, kept}] = :ets.lookup(table, :t)
    assert Nx.backend_copy(kept) == Nx.tensor([1.0, 2.0, 3.0])

    # dropped from the table, the one it held goes
    :ets.delete(table)
    kept = nil
    collect_everything(w)
    assert wait_until(fn -> resident(w) == 1 end)
    assert Nx.backend_copy(t) == Nx.tensor([1.0, 2.0, 3.0])
    _ = kept
  end

  test "when the last holder exits, or collects, the tensor is freed" do
    w = own_worker()
    parent = self()

    # (each holder keeps its tensor in its process dictionary only: no variable of its code
    # can hold on to it after it is deleted)
    holder =
      spawn(fn ->
        Process.put(:t, put_on(w, Nx.iota({64})))
        send(parent, :made)
        receive(do: (:drop -> Process.delete(:t)))
        :erlang.garbage_collect()
        send(parent, :dropped)
        receive(do: (:exit -> :ok))
      end)

    second =
      spawn(fn ->
        Process.put(:t, put_on(w, Nx.iota({32})))
        send(parent, :made)
        Process.sleep(:infinity)
      end)

    assert_receive :made, NxJax.TestTime.ms(30_000)
    assert_receive :made, NxJax.TestTime.ms(30_000)
    assert resident(w) == 2
    send(holder, :drop)
    assert_receive :dropped, NxJax.TestTime.ms(30_000)
    assert wait_until(fn -> resident(w) == 1 end)
    Process.exit(second, :kill)
    assert wait_until(fn -> resident(w) == 0 end)
    send(holder, :exit)
  end

  test "a handle is never given out twice; a freed one used later is a clear error, never " <>
         "another tensor's data" do
    w = own_worker()
    a = put_on(w, Nx.tensor([1, 2]))
    handle = a.data.handle
    assert Nx.backend_deallocate(a) == :ok

    others = for i <- 1..200, do: put_on(w, Nx.tensor([i, i]))
    refute Enum.any?(others, &(&1.data.handle == handle))
    assert length(Enum.uniq_by(others, & &1.data.handle)) == 200

    error = assert_raise NxJax.WorkerError, fn -> Nx.backend_copy(a) end
    assert error.class == "UnknownHandle"
    assert error.message =~ "freed with Nx.backend_deallocate/1"

    inc = Nx.Defn.jit(&Steps.inc/1, server: w)
    error = assert_raise NxJax.WorkerError, fn -> inc.(a) end
    assert error.message =~ "freed with Nx.backend_deallocate/1"
    assert Nx.backend_copy(inc.(hd(others))) == Nx.tensor([2, 2])
  end

  test "deallocating twice, from two processes, or after the worker was replaced is harmless" do
    w = own_worker()
    a = put_on(w, Nx.tensor([1.0]))
    task = Task.async(fn -> Nx.backend_deallocate(a) end)
    here = Nx.backend_deallocate(a)
    results = Enum.sort([here, Task.await(task, NxJax.TestTime.ms(30_000))])
    assert results == [:already_deallocated, :ok]
    assert wait_until(fn -> resident(w) == 0 end)

    # tensors whose worker died: deallocated, or collected (their guards send to a dead pid)
    {name, sup} = restartable_worker()
    old = GenServer.whereis(name)
    b = put_on(old, Nx.tensor([2.0]))
    parent = self()

    holder =
      spawn(fn ->
        Process.put(:t, put_on(old, Nx.tensor([3.0])))
        send(parent, :made)
        receive(do: (:exit -> :ok))
      end)

    assert_receive :made, NxJax.TestTime.ms(30_000)
    ref = Process.monitor(old)
    System.cmd("kill", ["-KILL", Integer.to_string(NxJax.Worker.os_pid(old))])
    assert_receive {:DOWN, ^ref, :process, ^old, _}, NxJax.TestTime.ms(30_000)
    assert Nx.backend_deallocate(b) == :already_deallocated
    error = assert_raise NxJax.WorkerError, fn -> Nx.backend_copy(b) end
    assert error.class == "WorkerExited"
    assert wait_until(fn -> is_pid(GenServer.whereis(name)) end)
    new = GenServer.whereis(name)
    fresh = put_on(new, Nx.tensor([4.0]))
    send(holder, :exit)
    collect_everything(new)
    assert resident(new) == 1
    assert Nx.backend_copy(fresh) == Nx.tensor([4.0])
    Supervisor.stop(sup)
  end

  defp restartable_worker do
    name = :"resident_restart_#{System.unique_integer([:positive])}"
    {:ok, sup} = Supervisor.start_link([{NxJax.Worker, name: name}], strategy: :one_for_one)
    Process.unlink(sup)
    {name, sup}
  end

  test "the tensors of one collection reach the worker as one free" do
    w = own_worker()
    :erlang.trace(w, true, [:receive])
    # The collector is held (`:sys.suspend/1`: it answers only system messages) while the
    # process exits, so that all 100 guards' messages are in its mailbox when it goes on,
    # however slowly the dead process's heap is freed on a loaded machine: they must then make
    # one free (it flushes behind the burst it finds).
    collector = Process.whereis(NxJax.Worker.Collector)
    :ok = :sys.suspend(collector)

    try do
      {pid, monitor} =
        spawn_monitor(fn ->
          tensors = for i <- 1..100, do: put_on(w, Nx.tensor([i]))
          NxJax.Guard.keep(tensors)
        end)

      assert_receive {:DOWN, ^monitor, :process, ^pid, :normal}, NxJax.TestTime.ms(30_000)
      # (the worker's GenServer may still hold its last reply, a guard in it, until it collects)
      :erlang.garbage_collect(w)

      assert wait_until(fn ->
               {:messages, messages} = Process.info(collector, :messages)
               Enum.count(messages, &match?({:nx_jax_collected, ^w, _}, &1)) == 100
             end)
    after
      :ok = :sys.resume(collector)
    end

    assert wait_until(fn -> resident(w) == 0 end)
    :erlang.trace(w, false, [:receive])

    assert traced_frees(w) == [100]
  end

  # the sizes of the {:nx_jax_released, handles} messages `w` received (traced), taken out of
  # the mailbox with every other trace message
  defp traced_frees(w) do
    receive do
      {:trace, ^w, :receive, {:nx_jax_released, handles}} -> [length(handles) | traced_frees(w)]
      {:trace, ^w, :receive, _other} -> traced_frees(w)
    after
      0 -> []
    end
  end

  test "a holder that allocates almost nothing is collected when the worker's bytes grow" do
    # 1 MiB tensors; a notice every 4 MiB
    w = own_worker([{"NX_JAX_RESIDENT_GC_BYTES", "4194304"}])
    never = own_worker([{"NX_JAX_RESIDENT_GC_BYTES", "17179869184"}])

    held = fn worker ->
      task =
        Task.async(fn ->
          # a heap large enough that 60 steps never collect it on their own
          Process.flag(:min_heap_size, 4_000_000)
          inc = Nx.Defn.jit(&Steps.inc/1, server: worker)
          start = put_on(worker, Nx.iota({262_144}, type: :f32))
          last = Enum.reduce(1..60, start, fn _, t -> inc.(t) end)
          {resident(worker), Nx.to_number(last[5])}
        end)

      Task.await(task, NxJax.TestTime.ms(60_000))
    end

    {grown, value} = held.(never)
    assert value == 65.0
    assert grown == 61
    {bounded, value} = held.(w)
    assert value == 65.0
    assert bounded <= 30
    assert NxJax.Worker.stats(server: w).pressure_notices >= 1
  end

  test "donate: the donated arguments' memory goes to the results; reading one later says so" do
    w = own_worker()
    step = Nx.Defn.jit(&Steps.inc_both/2, server: w, donate: [0])
    v = put_on(w, Nx.tensor([10.0, 20.0]))
    a = put_on(w, Nx.tensor([1.0, 2.0]))

    {a2, v2} = step.(a, v)
    assert Nx.backend_copy(a2) == Nx.tensor([2.0, 3.0])
    assert Nx.backend_copy(v2) == Nx.tensor([11.0, 22.0])
    error = assert_raise NxJax.WorkerError, fn -> Nx.backend_copy(a) end
    assert error.class == "UnknownHandle"
    assert error.message =~ "donated to an earlier call"
    error = assert_raise NxJax.WorkerError, fn -> step.(a, v) end
    assert error.message =~ "donated to an earlier call"
    assert Nx.backend_deallocate(a) == :already_deallocated

    # a loop that donates its state holds one state at a time, whatever its collections
    inc = Nx.Defn.jit(&Steps.inc/1, server: w, donate: [0])
    assert Nx.backend_deallocate(v2) == :ok
    # (v and a2 are all that is resident now)
    assert wait_until(fn -> resident(w) == 2 end)
    last = Enum.reduce(1..50, a2, fn _, t -> inc.(t) end)
    assert resident(w) == 2
    assert Nx.backend_copy(last) == Nx.tensor([52.0, 53.0])

    # a tensor that is not resident is not donated (as JAX does with a host array)
    host = Nx.tensor([5.0, 6.0])
    {r, _} = step.(host, v)
    assert Nx.backend_copy(r) == Nx.tensor([6.0, 7.0])
    assert host == Nx.tensor([5.0, 6.0])

    # a tensor the call takes twice (one zeros tensor as two moments) is not donated
    zeros = put_on(w, Nx.tensor([0.0, 0.0]))
    both = Nx.Defn.jit(fn {a, b} -> {Nx.add(a, 1), Nx.add(b, 2)} end, server: w, donate: [0])
    {b1, b2} = both.({zeros, zeros})
    assert Nx.backend_copy(b1) == Nx.tensor([1.0, 1.0])
    assert Nx.backend_copy(b2) == Nx.tensor([2.0, 2.0])
    assert Nx.backend_copy(zeros) == Nx.tensor([0.0, 0.0])

    assert_raise ArgumentError, ~r/donate option takes a list of argument positions/, fn ->
      Nx.Defn.jit(&Steps.inc_both/2, server: w, donate: [2]).(last, v)
    end
  end

  test "a small resident result is read without a request; freed, it cannot be read" do
    w = own_worker()
    step = Nx.Defn.jit(&Steps.pair/2, server: w)
    {small, large} = step.(put_on(w, Nx.tensor([1.0, 2.0])), put_on(w, Nx.iota({64})))
    assert is_binary(small.data.copy) and large.data.copy == nil
    :erlang.trace(w, true, [:receive])
    assert Nx.to_flat_list(small) == [2.0, 3.0]
    :erlang.trace(w, false, [:receive])
    assert traced_requests(w) == 0
    assert Nx.backend_copy(large) == Nx.multiply(Nx.iota({64}), 2)

    assert Nx.backend_deallocate(small) == :ok
    error = assert_raise NxJax.WorkerError, fn -> Nx.to_flat_list(small) end
    assert error.message =~ "freed with Nx.backend_deallocate/1"
  end

  defp traced_requests(w) do
    receive do
      {:trace, ^w, :receive, {:nx_jax_request, _, _, _}} -> 1 + traced_requests(w)
      {:trace, ^w, :receive, _other} -> traced_requests(w)
    after
      0 -> 0
    end
  end

  test "guards: sent when the last holder drops them, once; disarmed, never" do
    me = self()
    holder = spawn(fn -> receive(do: (:drop -> :ok)) end)
    # (made in a process of its own, which hands it to the holder and exits)
    spawn(fn -> send(holder, {:hold, NxJax.Guard.new(me, {:gone, 1})}) end)
    refute_receive {:gone, 1}, 200
    send(holder, :drop)
    assert_receive {:gone, 1}, NxJax.TestTime.ms(10_000)
    refute_receive {:gone, 1}, 100

    spawn(fn ->
      d = NxJax.Guard.new(me, {:gone, 2})
      send(me, {:disarmed, NxJax.Guard.disarm(d, :deallocated), NxJax.Guard.disarm(d, :donated)})
      send(me, {:status, NxJax.Guard.status(d)})
    end)

    assert_receive {:disarmed, true, false}, NxJax.TestTime.ms(10_000)
    assert_receive {:status, :deallocated}
    refute_receive {:gone, 2}, 200
    assert_raise ArgumentError, fn -> NxJax.Guard.new(:not_a_pid, :x) end
  end
end
