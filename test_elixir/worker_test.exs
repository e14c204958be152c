defmodule NxJax.WorkerTest do
  use ExUnit.Case, async: true

  # A worker of our own for the tests that kill or misuse it, so the application's worker used
  # by the other test modules is never disturbed.
  setup do
    worker = start_supervised!({NxJax.Worker, []})
    %{worker: worker}
  end

  defp f32(x), do: <<x::float-32-native>>

  defp graph(nodes, outputs), do: :erlang.term_to_binary({:nx_jax_graph, 1, nodes, outputs})

  test "answers ping and info", %{worker: w} do
    assert NxJax.Worker.call(:ping, [], server: w) == :pong
    info = NxJax.Worker.call(:info, [], server: w)
    assert info[:protocol] == 1
    assert is_binary(info[:jax_version])
  end

  test "runs a graph on wire tensors", %{worker: w} do
    g =
      graph(
        [
          {0, :parameter, [], %{index: 0}, {{:f, 32}, {2}}},
          {1, :exp, [0], %{}, {{:f, 32}, {2}}}
        ],
        [1]
      )

    assert [{{:f, 32}, {2}, data}] =
             NxJax.Worker.run(g, [{{:f, 32}, {2}, f32(0.0) <> f32(1.0)}], server: w)

    <<a::float-32-native, b::float-32-native>> = data
    assert a == 1.0
    assert_in_delta b, 2.7182817, 1.0e-6
  end

  test "a bad graph is an error reply and the worker keeps serving", %{worker: w} do
    bad = graph([{0, :no_such_op, [], %{}, {{:f, 32}, {}}}], [0])

    error = assert_raise NxJax.WorkerError, fn -> NxJax.Worker.run(bad, [], server: w) end
    assert error.class == "GraphError"
    assert error.message =~ "no_such_op"

    assert_raise NxJax.WorkerError, ~r/UnknownFunction/, fn ->
      NxJax.Worker.call(:system, ["echo hi"], server: w)
    end

    assert NxJax.Worker.call(:ping, [], server: w) == :pong
  end

  test "concurrent callers each get their own reply", %{worker: w} do
    g =
      graph(
        [
          {0, :parameter, [], %{index: 0}, {{:f, 64}, {}}},
          {1, :multiply, [0, 0], %{}, {{:f, 64}, {}}}
        ],
        [1]
      )

    results =
      1..40
      |> Task.async_stream(
        fn i ->
          [{_, _, <<y::float-64-native>>}] =
            NxJax.Worker.run(g, [{{:f, 64}, {}, <<i * 1.0::float-64-native>>}], server: w)

          {i, y}
        end,
        max_concurrency: 20
      )
      |> Enum.map(fn {:ok, r} -> r end)

    for {i, y} <- results, do: assert(y == i * i * 1.0)
  end

  test "a worker whose Python process dies fails its pending callers and is restarted" do
    name = :"worker_restart_#{System.unique_integer([:positive])}"
    {:ok, sup} = Supervisor.start_link([{NxJax.Worker, name: name}], strategy: :one_for_one)
    old = Process.whereis(name)
    assert NxJax.Worker.call(:ping, [], server: name) == :pong

    # a slow call in flight when the process is killed gets an error, not a hang
    graph =
      graph(
        [
          {0, :parameter, [], %{index: 0}, {{:f, 64}, {1000, 1000}}},
          {1, :dot, [0, 0], %{contract_axes: {[1], [0]}, batch_axes: {[], []}},
           {{:f, 64}, {1000, 1000}}}
        ],
        [1]
      )

    arg = {{:f, 64}, {1000, 1000}, :binary.copy(<<1.0::float-64-native>>, 1_000_000)}
    caller = Task.async(fn -> catch_error(NxJax.Worker.run(graph, [arg], server: name)) end)
    Process.sleep(50)
    System.cmd("kill", ["-9", Integer.to_string(NxJax.Worker.os_pid(name))])

    assert %NxJax.WorkerError{class: class} = Task.await(caller, 5_000)
    assert class in ["WorkerExited"]

    new = wait_for_new_pid(name, old)
    assert NxJax.Worker.call(:ping, [], server: new) == :pong
    Supervisor.stop(sup)
  end

  defp wait_for_new_pid(name, old, tries \\ 100) do
    case Process.whereis(name) do
      pid when is_pid(pid) and pid != old -> pid
      _ when tries > 0 -> Process.sleep(50) && wait_for_new_pid(name, old, tries - 1)
    end
  end
end
