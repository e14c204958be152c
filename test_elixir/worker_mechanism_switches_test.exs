defmodule NxJax.WorkerMechanismSwitchesTest do
  # The worker option `off:` (NxJax.Worker.Config.mechanisms_off/1; measured by
  # bench/mechanisms.exs): each Elixir-side latency mechanism switched off no longer fires, and
  # the results stay the same. async: false: traces a BIF.
  use ExUnit.Case, async: false
  import NxJax.TestAssertions, only: [wait_until: 2]
  alias NxJax.Worker.{Caller, Config}

  defmodule Fns do
    import Nx.Defn
    defn affine(x, k), do: x * 2 + k
  end

  defp start_worker(opts) do
    name = :"mechanism_switches_#{System.unique_integer([:positive])}"
    pid = start_supervised!({NxJax.Worker, [name: name] ++ opts}, id: name)
    {name, pid}
  end

  # `fun` run in a process of its own (a fresh process dictionary: no kept alias, no count of
  # late replies)
  defp fresh(fun), do: fun |> Task.async() |> Task.await(NxJax.TestTime.ms(60_000))

  # the values of 8 calls of the small defn on worker `name` (options `opts`): borrowed calls
  # after the first two
  defp affine_calls(name, opts \\ []) do
    f = Nx.Defn.jit(&Fns.affine/2, [server: name] ++ opts)
    for k <- 1..8, do: f.(Nx.tensor([1.0, -2.0]), Nx.tensor(k * 1.0)) |> Nx.to_flat_list()
  end

  @affine for k <- 1..8, do: [2.0 + k, -4.0 + k]

  test "off: takes the names of Config.mechanisms/0 and refuses any other" do
    assert Config.mechanisms_off([]) == []
    names = Keyword.keys(Config.mechanisms())
    assert names == [:keeper, :kept_alias, :poll_reductions, :late_replies]
    assert Config.mechanisms_off(off: names ++ [:keeper]) == names

    for bad <- [[:keeper, :spin_move], :keeper, ["keeper"]] do
      assert_raise ArgumentError,
                   ~r/the worker option :off takes a list of latency mechanisms, of \[:keeper,/,
                   fn -> Config.mechanisms_off(off: bad) end
    end
  end

  test "without the keeper the port rests with the GenServer; calls still borrow it" do
    for {off, keeper?} <- [{[], true}, {[:keeper], false}] do
      {name, pid} = start_worker(off: off)
      assert fresh(fn -> affine_calls(name) end) == @affine
      assert NxJax.Worker.stats(server: name).lent_calls >= 5
      local = fresh(fn -> Caller.local(pid) end)
      assert local.off == off
      # (at rest: connected to its suspended keeper, or to the GenServer itself)
      at_rest = if keeper?, do: local.keeper, else: pid
      assert local.keeper != pid == keeper?

      assert wait_until(
               fn -> Port.info(local.port, :connected) == {:connected, at_rest} end,
               5_000
             )

      if keeper?, do: assert(Process.info(local.keeper, :status) == {:status, :suspended})
      # a request of the GenServer's own after borrowed calls
      assert NxJax.Worker.call(:ping, [], server: name) == :pong
      assert fresh(fn -> affine_calls(name) end) == @affine
    end
  end

  # the reply addresses of the requests this process sent to GenServer `pid` while `fun` ran
  # (a process of the test's own traces the sends)
  defp reply_addresses(pid, fun) do
    me = self()

    tracer =
      spawn_link(fn ->
        collect = fn collect, acc ->
          receive do
            {:trace, ^me, :send, {:nx_jax_request, {to, _tag}, _, _}, ^pid} ->
              collect.(collect, [to | acc])

            {:trace, _, _, _, _} ->
              collect.(collect, acc)

            {:done, from} ->
              send(from, {:addresses, Enum.reverse(acc)})
          end
        end

        collect.(collect, [])
      end)

    :erlang.trace(me, true, [:send, {:tracer, tracer}])

    try do
      fun.()
    after
      :erlang.trace(me, false, [:send])
    end

    ref = :erlang.trace_delivered(me)
    assert_receive {:trace_delivered, _, ^ref}, NxJax.TestTime.ms(5_000)
    send(tracer, {:done, me})
    assert_receive {:addresses, addresses}, NxJax.TestTime.ms(5_000)
    addresses
  end

  test "without the kept alias each call through the GenServer replies to an alias of its own" do
    # (lend_port: false: every call goes through the GenServer)
    for {off, kept?} <- [{[], true}, {[:kept_alias], false}] do
      {name, pid} = start_worker(lend_port: false, off: off)

      {addresses, values, kept} =
        fresh(fn ->
          addresses = reply_addresses(pid, fn -> affine_calls(name) end)
          values = affine_calls(name)
          {addresses, values, Process.get({Caller, :reply_alias})}
        end)

      assert values == @affine
      assert length(addresses) == 8
      assert length(Enum.uniq(addresses)) == if(kept?, do: 1, else: 8)
      assert kept != nil == kept?
    end
  end

  # `fun`'s value in a process of its own, and how many times that process called
  # :erlang.bump_reductions/1 (its calls alone are traced)
  defp with_bumps(fun) do
    me = self()
    mfa = {:erlang, :bump_reductions, 1}

    tracer =
      spawn_link(fn ->
        count = fn count, n ->
          receive do
            {:trace, _, :call, {:erlang, :bump_reductions, _}} -> count.(count, n + 1)
            {:done, from} -> send(from, {:bumps, n})
          end
        end

        count.(count, 0)
      end)

    task =
      Task.async(fn ->
        receive do
          :go -> fun.()
        end
      end)

    1 = :erlang.trace(task.pid, true, [:call, {:tracer, tracer}])
    1 = :erlang.trace_pattern(mfa, true, [:global])

    try do
      send(task.pid, :go)
      value = Task.await(task, NxJax.TestTime.ms(60_000))
      ref = :erlang.trace_delivered(:all)
      assert_receive {:trace_delivered, _, ^ref}, NxJax.TestTime.ms(5_000)
      send(tracer, {:done, me})
      assert_receive {:bumps, n}, NxJax.TestTime.ms(5_000)
      {value, n}
    after
      :erlang.trace_pattern(mfa, false, [:global])
    end
  end

  test "without poll_reductions a polling caller counts no time slice per poll" do
    for {off, bumps?} <- [{[], true}, {[:poll_reductions], false}] do
      {name, _pid} = start_worker(off: off)
      # (the first calls send the graph)
      assert fresh(fn -> affine_calls(name) end) == @affine
      # (each call polls for its reply, which takes tens of microseconds)
      {values, n} = with_bumps(fn -> affine_calls(name, reply_spin_us: 100_000) end)
      assert values == @affine
      assert n > 0 == bumps?
    end
  end

  test "without late_replies a caller whose replies come late goes on polling" do
    for {off, counted?} <- [{[], true}, {[:late_replies], false}] do
      {name, _pid} = start_worker(off: off)

      {values, late} =
        fresh(fn ->
          # (a reply takes longer than the 1 us of polling: each one is late)
          values = affine_calls(name, reply_spin_us: 1)
          {values, Process.get({Caller, :late_replies})}
        end)

      assert values == @affine
      if counted?, do: assert(late == 8), else: assert(late == nil)
    end
  end
end
