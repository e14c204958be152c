defmodule NxJax.DevicesTest do
  # config :nx_jax, platform:, device: and pool_size: :per_device, on this CPU-only machine:
  # what the worker reports, and the clear errors for a platform or device JAX does not have
  use ExUnit.Case, async: true

  defp start_worker(opts) do
    name = :"devices_#{System.unique_integer([:positive])}"
    start_supervised!({NxJax.Worker, [name: name] ++ opts}, id: name)
    name
  end

  defp exp_graph do
    x = Nx.Defn.Expr.parameter(0, {:f, 32}, {})
    {graph, _, _} = Nx.Defn.WireEncoder.encode(Nx.Defn.Expr.expr(:exp, [x], %{}, x))
    :erlang.term_to_binary(graph)
  end

  @one {{:f, 32}, {}, <<1.0::float-32-native>>}

  test "NxJax.devices/0: the platform and device the pool's worker computes on" do
    assert NxJax.devices() == %{platform: "cpu", device: "cpu:0", devices: ["cpu:0"]}
  end

  test "platform: \"cpu\", device: 0 computes there" do
    w = start_worker(platform: "cpu", device: 0)
    assert NxJax.devices(server: w) == %{platform: "cpu", device: "cpu:0", devices: ["cpu:0"]}
    assert [{{:f, 32}, {}, _}] = NxJax.Worker.run(exp_graph(), [@one], server: w)
  end

  test "a platform JAX does not have is refused, listing what it has and how to install" do
    w = start_worker(platform: "cuda")

    error =
      assert_raise NxJax.WorkerError, fn -> NxJax.Worker.run(exp_graph(), [@one], server: w) end

    assert error.class == "WorkerMismatch"
    assert error.message =~ "JAX has no platform 'cuda' here"
    assert error.message =~ "it reports cpu: cpu:0"
    assert error.message =~ "pip install -e '.[cuda12]'"
  end

  test "a device index past the platform's devices is refused" do
    w = start_worker(device: 3)

    error =
      assert_raise NxJax.WorkerError, fn -> NxJax.Worker.run(exp_graph(), [@one], server: w) end

    assert error.message =~ "device 3 of platform 'cpu' does not exist: JAX reports 1 (cpu:0)"
  end

  test "settings of the wrong kind are refused before a worker starts" do
    assert NxJax.Worker.Placement.env(platform: :cuda, device: 1) ==
             [{"NX_JAX_PLATFORM", "cuda"}, {"NX_JAX_DEVICE", "1"}]

    assert_raise ArgumentError, ~r/platform must be a name/, fn ->
      NxJax.Worker.Placement.env(platform: 7)
    end

    assert_raise ArgumentError, ~r/device must be a non-negative index/, fn ->
      NxJax.Worker.Placement.env(device: -1)
    end
  end

  test "pool_size: :per_device counts the platform's devices, or says why it cannot" do
    python = NxJax.Worker.python_executable()
    assert NxJax.Worker.Placement.count(python, "cpu") == 1
    assert NxJax.Worker.Placement.count(python, nil) == 1

    assert_raise ArgumentError,
                 ~r/pool_size: :per_device needs the devices of platform "tpu"/,
                 fn ->
                   NxJax.Worker.Placement.count(python, "tpu")
                 end
  end
end
