defmodule NxJax.ByteBudgetTest do
  # A call that would take its worker past the worker's byte budget (NX_JAX_MAX_BYTES,
  # `config :nx_jax, max_bytes:`; py_backend/budget.py) in its arguments, its results or XLA's
  # temporary memory fails with an "OverBudget" error naming the figures, the budget and the
  # setting, before it runs; the same worker serves the next call.
  # async: false: one test sets the application's config, which every worker started
  # meanwhile would read
  use ExUnit.Case, async: false

  @budget 1_000_000

  setup do
    worker = start_supervised!({NxJax.Worker, env: [{"NX_JAX_MAX_BYTES", "#{@budget}"}]})
    %{worker: worker, os_pid: NxJax.Worker.os_pid(worker)}
  end

  # the refusal of `fun.(args)`: its message names the budget and the setting
  defp refused(fun, args, budget \\ @budget) do
    error = assert_raise NxJax.WorkerError, fn -> apply(fun, args) end
    assert error.class == "OverBudget"
    assert error.message =~ "over this worker's byte budget of #{budget} bytes"
    assert error.message =~ "NX_JAX_MAX_BYTES (config :nx_jax, max_bytes:)"
    assert error.traceback == ""
    error.message
  end

  defp figure(message, name) do
    [_, n] = Regex.run(~r/#{name} (\d+)/, message)
    String.to_integer(n)
  end

  defp serves_on(worker, os_pid) do
    assert NxJax.Worker.os_pid(worker) == os_pid
    assert NxJax.Worker.call(:ping, [], server: worker) == :pong
  end

  test "over the budget in its arguments", %{worker: worker, os_pid: os_pid} do
    first = Nx.Defn.jit(&Nx.slice(&1, [0], [1]), server: worker)
    message = refused(first, [Nx.iota({300_000}, type: :f32)])
    assert message =~ "this call needs "
    assert figure(message, "arguments") == 1_200_000
    assert figure(message, "results") == 4
    assert first.(Nx.add(Nx.iota({10}, type: :f32), 5)) == Nx.tensor([5.0])
    serves_on(worker, os_pid)
  end

  test "over the budget in its results", %{worker: worker, os_pid: os_pid} do
    # 13 outputs from one scalar, as in an f32 broadcast of 2 * 10^9 elements, scaled down
    copies = fn n ->
      Nx.Defn.jit(
        fn x -> List.to_tuple(for k <- 1..13, do: Nx.add(Nx.broadcast(x, {n}), k)) end,
        server: worker
      )
    end

    message = refused(copies.(100_000), [Nx.tensor(1.0)])
    assert figure(message, "arguments") == 4
    assert figure(message, "results") == 13 * 100_000 * 4
    small = copies.(3).(Nx.tensor(1.0))
    assert elem(small, 12) == Nx.tensor([14.0, 14.0, 14.0])
    serves_on(worker, os_pid)
  end

  test "over the budget in XLA's temporary memory", %{worker: worker, os_pid: os_pid} do
    # a scalar from a vector through a square intermediate XLA has to hold
    squared_sum =
      Nx.Defn.jit(
        fn x ->
          n = Nx.size(x)
          x |> Nx.broadcast({n, n}, axes: [1]) |> Nx.cumulative_sum(axis: 0) |> Nx.sum()
        end,
        server: worker
      )

    message = refused(squared_sum, [Nx.iota({1024}, type: :f32)])
    assert figure(message, "arguments") == 4096
    assert figure(message, "results") == 4
    assert figure(message, "XLA temporary memory") >= 1024 * 1024 * 4
    assert squared_sum.(Nx.tensor([1.0, 2.0])) == Nx.tensor(9.0)
    serves_on(worker, os_pid)
  end

  test "resident tensors count, and freeing them lets the call run", %{worker: worker} do
    t = Nx.iota({200_000}, type: :f32)

    [{:ref, handle, guard}] =
      NxJax.Worker.put([{t.type, t.shape, Nx.to_binary(t)}], server: worker)

    held = %Nx.Tensor{t | data: %NxJax.Backend{worker: worker, handle: handle, guard: guard}}
    first = Nx.Defn.jit(&Nx.slice(&1, [0], [1]), server: worker)
    message = refused(first, [Nx.iota({100_000}, type: :f32)])
    assert figure(message, "resident tensors") == 800_000
    assert figure(message, "arguments") == 400_000
    assert Nx.backend_deallocate(held) == :ok
    assert first.(Nx.iota({100_000}, type: :f32)) == Nx.tensor([0.0])
  end

  test "config :nx_jax, max_bytes: is the budget of workers whose env sets none" do
    previous = Application.fetch_env(:nx_jax, :max_bytes)
    Application.put_env(:nx_jax, :max_bytes, 2_000_000)

    on_exit(fn ->
      case previous do
        {:ok, value} -> Application.put_env(:nx_jax, :max_bytes, value)
        :error -> Application.delete_env(:nx_jax, :max_bytes)
      end
    end)

    worker = start_supervised!({NxJax.Worker, []}, id: :configured)
    first = Nx.Defn.jit(&Nx.slice(&1, [0], [1]), server: worker)
    message = refused(first, [Nx.iota({600_000}, type: :f32)], 2_000_000)
    assert figure(message, "arguments") == 2_400_000
    assert first.(Nx.iota({400_000}, type: :f32)) == Nx.tensor([0.0])

    Application.put_env(:nx_jax, :max_bytes, "lots")
    Process.flag(:trap_exit, true)

    assert {:error, {%ArgumentError{message: text}, _}} =
             NxJax.Worker.start_link(name: :badly_configured)

    assert text =~ "config :nx_jax, max_bytes: must be a positive integer of bytes"
  end
end
