defmodule NxSuite.Peers do
  @moduledoc false
  # What Nx 0.7.2's test_helper.exs sets up for serving_test.exs, for the clean room: this node
  # as primary@127.0.0.1 and two peers, secondary@127.0.0.1 and tertiary@127.0.0.1 (hidden),
  # each with this node's code paths and nx_jax's application (a pool of one worker, its own
  # Python process), and Nx's test/support/distributed_servings.ex, compiled here, loaded on
  # them. Returns the peers' nodes, or [] where this node cannot be distributed (no epmd).

  def start(src) do
    if distribution?() do
      support = Code.compile_file(Path.join(src, "test/support/distributed_servings.ex"))

      [
        start_peer(:"secondary@127.0.0.1", [], support),
        start_peer(:"tertiary@127.0.0.1", [~c"-hidden"], support)
      ]
    else
      IO.puts("nx_suite: no distribution here (epmd or Node.start failed)")
      []
    end
  end

  def stop(nodes), do: for(node <- nodes, do: :erpc.call(node, :init, :stop, []))

  # (`epmd -daemon` returns before the new epmd listens: it is waited for, 10 s at most)
  defp distribution? do
    {"", 0} == System.cmd("epmd", ["-daemon"]) and
      Enum.any?(1..100, fn _ ->
        match?({:ok, _}, :erl_epmd.names({127, 0, 0, 1})) or (Process.sleep(100) && false)
      end) and
      (Node.alive?() or match?({:ok, _}, Node.start(:"primary@127.0.0.1", :longnames)))
  end

  defp start_peer(name, args, support) do
    cookie = Atom.to_charlist(Node.get_cookie())
    {:ok, _peer, node} = :peer.start(%{name: name, args: [~c"-setcookie", cookie | args]})
    true = :erpc.call(node, :code, :set_path, [:code.get_path()])

    for {key, value} <- Application.get_all_env(:nx_jax), key != :pool_size do
      :ok = :erpc.call(node, Application, :put_env, [:nx_jax, key, value])
    end

    :ok = :erpc.call(node, Application, :put_env, [:nx_jax, :pool_size, 1])
    {:ok, _} = :erpc.call(node, Application, :ensure_all_started, [:nx_jax], 120_000)

    for {module, binary} <- support do
      {:module, ^module} = :erpc.call(node, :code, :load_binary, [module, ~c"nofile", binary])
    end

    node
  end
end
