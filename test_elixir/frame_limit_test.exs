defmodule NxJax.FrameLimitTest do
  # A request over the worker's frame limit is refused by its caller before anything is sent,
  # with an error naming the limit and the setting; the worker and other calls go on. (A frame
  # that reaches the worker anyway is answered under its own request id: tests/test_request_loop.py.)
  use ExUnit.Case, async: true

  @limit 100_000

  setup do
    worker = start_supervised!({NxJax.Worker, env: [{"NX_JAX_MAX_FRAME", "#{@limit}"}]})
    %{worker: worker, os_pid: NxJax.Worker.os_pid(worker)}
  end

  test "the limit is the worker's: from its env, the config or a quarter of the memory" do
    assert NxJax.Worker.max_frame(env: [{"NX_JAX_MAX_FRAME", "1234"}]) == 1234
    {:ok, text} = File.read("/proc/meminfo")
    [_, kb] = Regex.run(~r/^MemTotal:\s+(\d+) kB/m, text)
    assert NxJax.Worker.max_frame() == min(4_294_967_295, div(String.to_integer(kb) * 1024, 4))

    assert_raise ArgumentError, ~r/must be an integer of bytes in 1..4294967295/, fn ->
      NxJax.Worker.max_frame(env: [{"NX_JAX_MAX_FRAME", "lots"}])
    end
  end

  test "an oversize request fails at once, names the limit and the setting, sends nothing",
       %{worker: worker, os_pid: os_pid} do
    big = {{:f, 32}, {50_000}, :binary.copy(<<0, 0, 128, 63>>, 50_000)}
    stats = NxJax.Worker.stats(server: worker)

    error = assert_raise NxJax.WorkerError, fn -> NxJax.Worker.put([big], server: worker) end

    assert error.class == "FrameTooLarge"
    assert error.message =~ "frame limit of #{@limit} bytes; nothing was sent"
    assert error.message =~ "config :nx_jax, max_frame:"
    assert error.message =~ "NX_JAX_MAX_FRAME"

    # the worker saw nothing, still serves, and was not replaced
    assert NxJax.Worker.stats(server: worker).errors == stats.errors
    small = {{:f, 32}, {2}, <<0, 0, 128, 63, 0, 0, 0, 64>>}
    [{:ref, handle, guard}] = NxJax.Worker.put([small], server: worker)
    assert NxJax.Worker.fetch([handle], server: worker) == [small]
    NxJax.Guard.keep(guard)
    assert NxJax.Worker.os_pid(worker) == os_pid

    # a defn call with a large argument: the same error through Nx
    x = Nx.iota({50_000}, type: :f32)
    fun = Nx.Defn.jit(&Nx.multiply(&1, 2), server: worker)

    assert %NxJax.WorkerError{class: "FrameTooLarge"} = catch_error(fun.(x))
    assert Nx.to_flat_list(fun.(Nx.tensor([1.0, 2.0]))) == [2.0, 4.0]
  end
end
