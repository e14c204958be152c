defmodule NxJax.RealNx.DonateTest do
  # `donate: [position]` under real Nx: the donated resident arguments' memory goes to the
  # results, and reading a donated tensor afterwards says so (as under the clean room,
  # test_elixir/resident_handles_test.exs)
  use ExUnit.Case, async: true

  defmodule Steps do
    import Nx.Defn

    defn inc(w), do: w + 1
    defn inc_both(w, v), do: {w + 1, v + w}
    defn adam_like({p, m}, g, opts \\ []), do: {{p - opts[:lr] * m, m * 0.5 + g}, Nx.sum(p)}
  end

  # a worker of the test's own, so that its resident count is the test's alone
  defp own_worker do
    name = :"donate_#{System.unique_integer([:positive])}"
    start_supervised!({NxJax.Worker, name: name}, id: name)
    GenServer.whereis(name)
  end

  defp resident(worker), do: NxJax.Worker.stats(server: worker).resident

  defp put_on(worker, %Nx.Tensor{} = t) do
    [{:ref, handle, guard}] =
      NxJax.Worker.put([{t.type, t.shape, Nx.to_binary(t)}], server: worker)

    %Nx.Tensor{t | data: %NxJax.Backend{worker: worker, handle: handle, guard: guard}}
  end

  defp wait_until(fun, tries \\ 200) do
    cond do
      fun.() -> true
      tries == 0 -> false
      true -> Process.sleep(10) && wait_until(fun, tries - 1)
    end
  end

  defp jit(fun, opts), do: Nx.Defn.jit(fun, [compiler: NxJax] ++ opts)

  test "donated arguments' memory goes to the results; reading one later says so" do
    w = own_worker()
    step = jit(&Steps.inc_both/2, server: w, donate: [0])
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

    # a loop that donates its state holds one state at a time
    inc = jit(&Steps.inc/1, server: w, donate: [0])
    assert Nx.backend_deallocate(v2) == :ok
    assert wait_until(fn -> resident(w) == 2 end)
    last = Enum.reduce(1..50, a2, fn _, t -> inc.(t) end)
    assert resident(w) == 2
    assert Nx.backend_copy(last) == Nx.tensor([52.0, 53.0])

    # without donate: every state of the loop is resident until collected
    keep = jit(&Steps.inc/1, server: w)
    states = Enum.scan(1..5, last, fn _, t -> keep.(t) end)
    assert resident(w) == 2 + 5
    assert Nx.backend_copy(List.last(states)) == Nx.tensor([57.0, 58.0])
    # (read at the end, so that neither is garbage before the count above)
    assert Nx.backend_copy(last) == Nx.tensor([52.0, 53.0])
    assert Nx.backend_copy(v) == Nx.tensor([10.0, 20.0])
  end

  test "a donated container gives all its leaves; a keyword argument is no position" do
    w = own_worker()
    step = jit(&Steps.adam_like/3, server: w, donate: [0])
    p = put_on(w, Nx.tensor([1.0, 2.0]))
    m = put_on(w, Nx.tensor([4.0, 8.0]))
    g = put_on(w, Nx.tensor([0.5, 0.5]))

    {{p2, m2}, sum} = step.({p, m}, g, lr: 0.25)
    assert Nx.backend_copy(p2) == Nx.tensor([0.0, 0.0])
    assert Nx.backend_copy(m2) == Nx.tensor([2.5, 4.5])
    assert Nx.to_number(sum) == 3.0

    for gone <- [p, m] do
      assert_raise NxJax.WorkerError, ~r/donated to an earlier call/, fn -> Nx.to_binary(gone) end
    end

    assert Nx.backend_copy(g) == Nx.tensor([0.5, 0.5])
  end

  test "what is not resident, or read twice by the call, is not donated" do
    w = own_worker()
    step = jit(&Steps.inc_both/2, server: w, donate: [0, 1])
    v = put_on(w, Nx.tensor([10.0, 20.0]))

    # a host tensor (as JAX does with a host array)
    host = Nx.tensor([5.0, 6.0])
    {r, v2} = step.(host, v)
    assert Nx.backend_copy(r) == Nx.tensor([6.0, 7.0])
    assert Nx.backend_copy(v2) == Nx.tensor([15.0, 26.0])
    assert host == Nx.tensor([5.0, 6.0])
    assert_raise NxJax.WorkerError, ~r/donated/, fn -> Nx.to_binary(v) end

    # one tensor as two arguments
    zeros = put_on(w, Nx.tensor([0.0, 0.0]))
    {b1, b2} = step.(zeros, zeros)
    assert Nx.backend_copy(b1) == Nx.tensor([1.0, 1.0])
    assert Nx.backend_copy(b2) == Nx.tensor([0.0, 0.0])
    assert Nx.backend_copy(zeros) == Nx.tensor([0.0, 0.0])
  end

  test "Nx.Defn.compile donates too" do
    w = own_worker()

    compiled =
      Nx.Defn.compile(&Steps.inc/1, [Nx.template({2}, :f32)],
        compiler: NxJax,
        donate: [0],
        server: w
      )

    a = put_on(w, Nx.tensor([1.0, 2.0]))
    assert Nx.backend_copy(compiled.(a)) == Nx.tensor([2.0, 3.0])
    assert_raise NxJax.WorkerError, ~r/donated/, fn -> Nx.to_binary(a) end
  end

  test "donate: positions out of range, or not a list of them, are an ArgumentError" do
    for bad <- [[2], [-1], 0, [:a]] do
      assert_raise ArgumentError, ~r/donate option takes a list of argument positions/, fn ->
        jit(&Steps.inc_both/2, donate: bad).(Nx.tensor(1.0), Nx.tensor(2.0))
      end
    end
  end
end
