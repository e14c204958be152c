defmodule NxJax.PlannedCallTest do
  # The plan a process keeps of a repeated call (Nx.Defn.Compiler, "Planned calls"): a planned
  # call gives what the general path gives, and every call the plan does not fit takes the
  # general path. async: false: counts calls node-wide and shrinks the trace cache.
  use ExUnit.Case, async: false

  defmodule Fns do
    import Nx.Defn

    defn affine(x, y), do: x * 2 + y
    # (called by one test only: its first call traces)
    defn direct(x, y), do: x * 3 - y
    defn second_only(_x, y), do: Nx.exp(y)
    defn several(x), do: {x + 1, %{total: Nx.sum(x), same: x}}
  end

  # the calls that took the general path (a lookup of the trace cache, Nx.Defn.TraceCache.fetch/1)
  # while `fun` ran, and what it returned
  defp general_calls(fun) do
    mfa = {Nx.Defn.TraceCache, :fetch, 1}
    Code.ensure_loaded!(Nx.Defn.TraceCache)
    1 = :erlang.trace_pattern(mfa, true, [:call_count])

    try do
      result = fun.()
      {:call_count, n} = :erlang.trace_info(mfa, :call_count)
      {n, result}
    after
      :erlang.trace_pattern(mfa, false, [:call_count])
    end
  end

  defp plans, do: Enum.count(Process.get(), &match?({{{Nx.Defn.Compiler, :plans}, _}, _}, &1))

  test "a repeated call follows its plan from the third call on, with the values of each call" do
    # (a function of this test's own: its first call traces)
    f = Nx.Defn.jit(fn x, y -> Nx.add(Nx.multiply(x, 2), y) end)
    before = Nx.Defn.Compiler.counters()

    {general, results} =
      general_calls(fn ->
        for k <- 1..10, do: f.(Nx.tensor([k, 2.0 * k]), Nx.tensor(0.5)) |> Nx.to_flat_list()
      end)

    assert results == for(k <- 1..10, do: [2.0 * k + 0.5, 4.0 * k + 0.5])
    assert general == 2
    counters = Nx.Defn.Compiler.counters()
    # (every call after the first is a hit of the trace cache, planned or not)
    assert counters.traces - before.traces == 1
    assert counters.trace_cache_hits - before.trace_cache_hits == 9

    # a defn called directly plans the same way; numbers are never planned (each call of
    # numbers takes the general path)
    {general, results} =
      general_calls(fn -> for k <- 1..5, do: Nx.to_number(Fns.direct(k * 1.0, 1.0)) end)

    assert results == [2.0, 5.0, 8.0, 11.0, 14.0]
    assert general == 5

    x = Nx.tensor([1.0])
    {general, results} = general_calls(fn -> for k <- 1..5, do: Fns.direct(x, Nx.tensor(k)) end)
    assert Enum.map(results, &Nx.to_flat_list/1) == [[2.0], [1.0], [0.0], [-1.0], [-2.0]]
    assert general == 2
  end

  test "planned_calls: false keeps calls off plans: each takes the general path, same values" do
    x = Nx.tensor([1.0, -2.0])
    calls = fn f -> for k <- 1..6, do: f.(x, Nx.tensor(k * 1.0)) |> Nx.to_flat_list() end
    want = for k <- 1..6, do: [5.0 - k, -10.0 - k]
    # (functions of this test's own, of the same code: each traced once)
    on = Nx.Defn.jit(fn x, y -> Nx.subtract(Nx.multiply(x, 5), y) end)
    off = Nx.Defn.jit(fn x, y -> Nx.subtract(Nx.multiply(x, 5), y) end, planned_calls: false)
    by_default = Nx.Defn.jit(fn x, y -> Nx.subtract(Nx.multiply(x, 5), y) end)

    before = plans()
    assert {2, ^want} = general_calls(fn -> calls.(on) end)
    assert plans() == before + 1
    assert {6, ^want} = general_calls(fn -> calls.(off) end)
    assert plans() == before + 1

    # from this process's defaults too
    previous = Nx.Defn.default_options(planned_calls: false)

    try do
      assert {6, ^want} = general_calls(fn -> calls.(by_default) end)
      assert plans() == before + 1
    after
      Nx.Defn.default_options(previous)
    end

    assert_raise ArgumentError, ~r/the :planned_calls option must be a boolean/, fn ->
      Nx.Defn.jit(&Fns.affine/2, planned_calls: :no).(x, x)
    end
  end

  test "containers, unused arguments and axis names come back as the general path gives them" do
    x = Nx.tensor([[1.0, 2.0], [3.0, 4.0]], names: [:rows, :cols])
    several = Nx.Defn.jit(&Fns.several/1)
    second = Nx.Defn.jit(&Fns.second_only/2)
    [first | rest] = for _ <- 1..4, do: several.(x)
    assert Enum.all?(rest, &(&1 == first))
    assert {%Nx.Tensor{names: [:rows, :cols]} = plus, %{total: total, same: same}} = first
    assert Nx.to_flat_list(plus) == [2.0, 3.0, 4.0, 5.0]
    assert Nx.to_number(total) == 10.0
    assert same == x

    {general, results} =
      general_calls(fn -> for k <- 1..4, do: second.(x, Nx.tensor(k * 1.0)) end)

    for {r, k} <- Enum.with_index(results, 1),
        do: assert_in_delta(Nx.to_number(r), :math.exp(k), 1.0e-5 * :math.exp(k))

    assert general == 2
  end

  test "container arguments follow a plan too; one made otherwise takes the general path" do
    # (an order-sensitive function of nested tuples and maps: which leaf is which matters)
    f =
      Nx.Defn.jit(fn {a, %{z: z, b: b}}, c ->
        {Nx.subtract(a, Nx.multiply(b, 10)), Nx.add(Nx.multiply(z, 100), c)}
      end)

    t = &Nx.tensor/1
    args = fn k -> [{t.([k, 2.0]), %{z: t.(3.0 * k), b: t.([4.0, 5.0])}}, t.(1.0)] end
    expected = fn k -> [[k - 40.0, 2.0 - 50.0], [300.0 * k + 1.0]] end
    values = fn {x, y} -> [Nx.to_flat_list(x), Nx.to_flat_list(y)] end

    {general, results} = general_calls(fn -> for k <- 1..6, do: values.(apply(f, args.(k))) end)
    assert results == for(k <- 1..6, do: expected.(k))
    assert general == 2

    # another map key, an extra key, a tuple of another size, a number leaf, another shape
    # inside: each takes the general path once and gives its own answer
    others = [
      {[{t.([1.0, 2.0]), %{z: t.(3.0), b: t.([4.0, 5.0]), y: t.(0.0)}}, t.(1.0)],
       [[-39.0, -48.0], [301.0]]},
      {[{t.([1.0, 2.0]), %{z: 3.0, b: t.([4.0, 5.0])}}, t.(1.0)], [[-39.0, -48.0], [301.0]]},
      {[{t.([1.0, 2.0, 3.0]), %{z: t.(3.0), b: t.([4.0, 5.0, 6.0])}}, t.(1.0)],
       [[-39.0, -48.0, -57.0], [301.0]]}
    ]

    for {call_args, want} <- others do
      assert {1, result} = general_calls(fn -> apply(f, call_args) end)
      assert values.(result) == want
    end

    # (a missing key, a tuple of three: traced anew, where the function does not match them)
    assert_raise FunctionClauseError, fn ->
      f.({t.([1.0, 2.0]), %{b: t.([4.0, 5.0])}}, t.(1.0))
    end

    assert_raise FunctionClauseError, fn ->
      f.({t.([1.0, 2.0]), %{z: t.(3.0), b: t.([4.0, 5.0])}, t.(9.0)}, t.(1.0))
    end

    # and the planned signature again
    assert {general, result} = general_calls(fn -> apply(f, args.(2.0)) end)
    assert values.(result) == expected.(2.0) and general <= 1
  end

  test "a call the plan was not made for takes the general path and gives its result" do
    f = Nx.Defn.jit(&Fns.affine/2)
    x = Nx.tensor([1.0, 2.0])
    y = Nx.tensor(1.0)
    for _ <- 1..3, do: f.(x, y)
    assert plans() >= 1
    planned = fn -> general_calls(fn -> f.(x, y) end) end
    assert {0, %Nx.Tensor{data: %Nx.BinaryBackend{}}} = planned.()

    # another shape; other names; a vectorized argument; a number
    assert {1, r} = general_calls(fn -> f.(Nx.tensor([1.0, 2.0, 3.0]), y) end)
    assert Nx.to_flat_list(r) == [3.0, 5.0, 7.0]
    assert {1, r} = general_calls(fn -> f.(Nx.tensor([1.0, 2.0], names: [:i]), y) end)
    assert r.names == [:i]
    assert {1, r} = general_calls(fn -> f.(Nx.vectorize(Nx.tensor([[1.0, 2.0]]), :v), y) end)
    assert r.vectorized_axes == [v: 1] and Nx.to_flat_list(Nx.devectorize(r)) == [3.0, 5.0]
    assert {1, r} = general_calls(fn -> f.(x, 1) end)
    assert Nx.to_flat_list(r) == [3.0, 5.0]

    # a resident argument, and resident results by default: the plan's signature, and the
    # results stay on the worker as in the general path
    resident = Nx.backend_copy(x, NxJax.Backend)
    assert {0, %Nx.Tensor{data: %NxJax.Backend{}} = r} = general_calls(fn -> f.(resident, y) end)
    assert Nx.to_flat_list(r) == [3.0, 5.0]

    Nx.with_default_backend(NxJax.Backend, fn ->
      assert {0, %Nx.Tensor{data: %NxJax.Backend{}} = r} = general_calls(fn -> f.(x, y) end)
      assert Nx.to_flat_list(r) == [3.0, 5.0]
    end)

    assert {0, %Nx.Tensor{data: %Nx.BinaryBackend{}}} = planned.()

    # this process's default options changed since the plan was made
    previous = Nx.Defn.default_options(compiler: Nx.Defn.Debug)

    try do
      assert {0, %Nx.Tensor{data: %Nx.Defn.Expr{}}} = general_calls(fn -> f.(x, y) end)
    after
      Nx.Defn.default_options(previous)
    end

    # and the plan is followed again (the shape of the last general calls was the plan's)
    for _ <- 1..2, do: f.(x, y)
    assert {0, r} = planned.()
    assert Nx.to_flat_list(r) == [3.0, 5.0]
  end

  test "a trace evicted from the cache is traced again, not run from the plan" do
    NxJax.TestAppEnv.put(:trace_cache_size, 4, :nx)

    x = Nx.tensor([1.0, 2.0])
    f = Nx.Defn.jit(&Nx.multiply(&1, 7))
    for _ <- 1..3, do: assert(Nx.to_flat_list(f.(x)) == [7.0, 14.0])
    assert {0, _} = general_calls(fn -> f.(x) end)

    # 12 functions never seen before: the cache of 4 evicts f's trace
    for k <- 1..12, do: Nx.Defn.jit(fn t -> Nx.add(t, k) end).(x)
    before = Nx.Defn.Compiler.counters()
    assert {1, r} = general_calls(fn -> f.(x) end)
    assert Nx.to_flat_list(r) == [7.0, 14.0]
    assert Nx.Defn.Compiler.counters().traces - before.traces == 1
  end

  test "a process keeps plans for at most 64 functions" do
    x = Nx.tensor([1.0, 2.0])

    fs =
      for k <- 1..70 do
        # (a closure over k: a function of its own)
        f = Nx.Defn.jit(fn t -> Nx.subtract(t, k) end)
        for _ <- 1..3, do: assert(Nx.to_flat_list(f.(x)) == [1.0 - k, 2.0 - k])
        assert plans() <= 64
        f
      end

    # the newest are kept
    assert {0, r} = general_calls(fn -> List.last(fs).(x) end)
    assert Nx.to_flat_list(r) == [-69.0, -68.0]
  end

  test "a planned call on a worker that was replaced goes to the new worker, graph and all" do
    worker = start_supervised!({NxJax.Worker, [name: :prepared_call_worker]}, id: :first)
    f = Nx.Defn.jit(&Fns.affine/2, server: :prepared_call_worker)
    x = Nx.tensor([1.0, 2.0])
    y = Nx.tensor(1.5)
    for _ <- 1..3, do: assert(Nx.to_flat_list(f.(x, y)) == [3.5, 5.5])
    assert {0, _} = general_calls(fn -> f.(x, y) end)
    :ok = stop_supervised!(:first)
    refute Process.alive?(worker)
    fresh = start_supervised!({NxJax.Worker, [name: :prepared_call_worker]}, id: :fresh)

    # (the new worker does not know the graph: the planned call sends it, as any call does)
    for _ <- 1..3 do
      assert {0, r} = general_calls(fn -> f.(x, y) end)
      assert Nx.to_flat_list(r) == [3.5, 5.5]
    end

    assert %{graph_sends: 1, lent_calls: lent} = NxJax.Worker.stats(server: fresh)
    assert lent >= 1
  end
end
