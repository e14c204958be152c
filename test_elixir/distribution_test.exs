defmodule NxJax.DistributionTest do
  # A second BEAM node started with :peer on loopback runs nx_jax with one worker; this node
  # places calls on it through the :pg group (remote: true), then the peer goes down while
  # calls are in flight. async: false: it makes this node distributed.
  use ExUnit.Case, async: false
  import NxJax.TestAssertions, only: [wait_until: 2, wait_for: 2]

  @moduletag timeout: NxJax.TestTime.ms(300_000)

  defmodule Fns do
    import Nx.Defn
    defn twice_plus(x, k), do: x * 2 + k
  end

  setup_all do
    {_, 0} = System.cmd("epmd", ["-daemon"])
    # `epmd -daemon` returns before a new epmd listens: Node.start/2 would fail to register
    # (econnrefused), as it did once here when this module ran first
    assert wait_until(fn -> match?({:ok, _}, :erl_epmd.names({127, 0, 0, 1})) end, 10_000)

    started_here =
      if Node.alive?() do
        false
      else
        name = :"nx_jax_test_#{System.unique_integer([:positive])}@127.0.0.1"
        {:ok, _} = Node.start(name, :longnames)
        true
      end

    {:ok, peer, node} =
      :peer.start_link(%{
        name: :"nx_jax_peer_#{System.unique_integer([:positive])}",
        host: ~c"127.0.0.1",
        longnames: true,
        # (:peer's own bound on the peer's boot, 15 s by default)
        wait_boot: NxJax.TestTime.ms(15_000),
        args: [~c"-setcookie", Atom.to_charlist(Node.get_cookie())]
      })

    Process.unlink(peer)
    :ok = :erpc.call(node, :code, :add_paths, [:code.get_path()])

    {:ok, _} =
      :erpc.call(node, Application, :ensure_all_started, [:nx_jax], NxJax.TestTime.ms(60_000))

    on_exit(fn ->
      if Process.alive?(peer), do: :peer.stop(peer)
      if started_here, do: Node.stop()
    end)

    remote =
      wait_for(
        fn -> Enum.find(NxJax.Distribution.remote_members(), &(node(&1) == node)) end,
        30_000
      )

    %{peer: peer, node: node, remote: remote || flunk("no worker of #{node} joined the group")}
  end

  defp expected(i, k), do: Nx.tensor([i * 2.0 + k, -i * 2.0 + k])

  defp call(i, k, opts) do
    Nx.Defn.jit(&Fns.twice_plus/2, opts).(Nx.tensor([i * 1.0, -i * 1.0]), k)
  end

  test "a worker on a peer node joins the :pg group and serves calls; when the peer goes " <>
         "down, callers get a WorkerError or are retried on the remaining workers",
       %{peer: peer, node: node, remote: remote} do
    assert node(remote) == node
    assert remote in NxJax.Distribution.members()
    # the local pool's workers are members too
    assert Enum.all?(NxJax.Pool.workers(), &(&1 in NxJax.Distribution.members()))

    before = NxJax.Worker.stats(server: remote).runs

    1..16
    |> Enum.map(fn i ->
      Task.async(fn -> for k <- 1..10, do: assert(call(i, k, remote: true) == expected(i, k)) end)
    end)
    |> Enum.each(&Task.await(&1, :infinity))

    assert NxJax.Worker.stats(server: remote).runs > before

    # and a call placed on it explicitly
    assert call(7, 1, server: remote) == expected(7, 1)

    # a resident result made by a process of the peer (its guard is the peer's) and read
    # here: while the peer holds it, its worker answers; once the peer let go of it, the
    # error says where it was made (before: ArgumentError from the guard's NIF)
    local = Nx.tensor([2.0, 3.0])
    {:ok, holder} = :erpc.call(node, Agent, :start, [Nx, :backend_copy, [local, NxJax.Backend]])
    made_there = Agent.get(holder, Function, :identity, [])
    assert node(made_there.data.guard) == node
    assert Nx.to_binary(made_there) == Nx.to_binary(Nx.tensor([2.0, 3.0]))
    assert Nx.to_flat_list(made_there) == [2.0, 3.0]
    :ok = Agent.stop(holder)

    assert wait_until(
             fn ->
               try do
                 Nx.to_binary(made_there)
                 false
               rescue
                 error in NxJax.WorkerError ->
                   error.class == "UnknownHandle" and error.message =~ "made on another node"
               end
             end,
             10_000
           )

    assert Nx.backend_deallocate(made_there) == :ok

    # the peer goes down while calls are in flight: each gets its result (retried on a
    # remaining worker) or a WorkerError, and later calls are served locally
    remote_python = NxJax.Worker.os_pid(remote)

    tasks =
      for i <- 1..16 do
        Task.async(fn ->
          for k <- 1..100 do
            try do
              {:ok, call(i, k, remote: true) == expected(i, k)}
            rescue
              error in NxJax.WorkerError -> {:error, error.class}
            end
          end
        end)
      end

    # stop the peer once it has served some of these calls
    runs = NxJax.Worker.stats(server: remote).runs + 20
    assert wait_until(fn -> NxJax.Worker.stats(server: remote).runs >= runs end, 10_000)
    :ok = :peer.stop(peer)

    outcomes = Enum.flat_map(tasks, &Task.await(&1, :infinity))
    assert length(outcomes) == 16 * 100
    # (WorkerDied would be the call a killed Python process was running)
    assert Enum.all?(
             outcomes,
             &(&1 in [{:ok, true}, {:error, "WorkerExited"}, {:error, "WorkerDied"}])
           )

    refute node in Node.list()
    assert wait_until(fn -> remote not in NxJax.Distribution.members() end, 10_000)

    for i <- 1..10, do: assert(call(i, 3, remote: true) == expected(i, 3))

    # the peer's Python worker saw EOF and exited: no orphan on this host
    assert wait_until(fn -> python_gone?(remote_python) end, 10_000)
  end

  # gone, or a zombie waiting to be reaped
  defp python_gone?(os_pid) do
    case File.read("/proc/#{os_pid}/stat") do
      {:ok, stat} -> String.contains?(stat, ") Z ")
      {:error, _} -> true
    end
  end
end
