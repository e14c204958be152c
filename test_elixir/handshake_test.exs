defmodule NxJax.HandshakeTest do
  # The worker checks at start that it speaks this protocol and runs the Python sources this
  # code was compiled with (docs/PROTOCOL.md 2.3); one that does not refuses work, saying why.
  use ExUnit.Case, async: true

  @root Path.expand("..", __DIR__)

  defp start_worker(env) do
    name = :"handshake_#{System.unique_integer([:positive])}"
    start_supervised!({NxJax.Worker, [name: name, env: env]}, id: name)
    name
  end

  defp exp_graph do
    x = Nx.Defn.Expr.parameter(0, {:f, 32}, {})
    {graph, _, _} = Nx.Defn.WireEncoder.encode(Nx.Defn.Expr.expr(:exp, [x], %{}, x))
    :erlang.term_to_binary(graph)
  end

  @one {{:f, 32}, {}, <<1.0::float-32-native>>}

  test "the pool's workers run this project's py_backend, with the compiled digest" do
    assert NxJax.Worker.Sources.project_root() == @root
    info = NxJax.Worker.call(:info, [])
    assert info.package == Path.join(@root, "py_backend")
    assert info.sources == NxJax.Worker.Sources.digest()
    assert info.refusal == nil
  end

  test "a worker whose sources differ refuses work, naming both digests and the fix" do
    w = start_worker([{"NX_JAX_EXPECT_SOURCES", String.duplicate("0", 32)}])
    assert NxJax.Worker.call(:ping, [], server: w) == :pong

    error =
      assert_raise NxJax.WorkerError, fn -> NxJax.Worker.run(exp_graph(), [@one], server: w) end

    assert error.class == "WorkerMismatch"
    assert error.message =~ "its Python sources (#{Path.join(@root, "py_backend")}, digest "
    assert error.message =~ NxJax.Worker.Sources.digest()
    assert error.message =~ "compiled with (digest #{String.duplicate("0", 32)})"
    assert error.message =~ "mix compile --force"
    assert NxJax.Worker.call(:info, [], server: w).refusal =~ "not the one nx_jax was built with"
  end

  test "a worker of another protocol version refuses work" do
    w = start_worker([{"NX_JAX_EXPECT_PROTOCOL", "2"}])

    error =
      assert_raise NxJax.WorkerError, fn -> NxJax.Worker.run(exp_graph(), [@one], server: w) end

    assert error.class == "WorkerMismatch"
    assert error.message =~ "the Elixir side speaks protocol 2, this worker 1"
    # and one with the right expectations computes
    ok = start_worker([])
    assert [{{:f, 32}, {}, value}] = NxJax.Worker.run(exp_graph(), [@one], server: ok)
    assert value == <<:math.exp(1.0)::float-32-native>>
  end
end
