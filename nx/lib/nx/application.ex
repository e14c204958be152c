defmodule Nx.Application do
  @moduledoc false
  # The :nx application: the :pg scope in which serving processes of every node find each
  # other (Nx.Serving, "Distribution"), and its introductions to hidden nodes.
  use Application

  @impl true
  def start(_type, _args) do
    children = [
      %{id: Nx.Serving.PG, start: {:pg, :start_link, [Nx.Serving.PG]}},
      %{id: Nx.Serving.Hidden, start: {Nx.Serving.Hidden, :start_link, [Nx.Serving.PG]}}
    ]

    Supervisor.start_link(children, strategy: :one_for_all, name: Nx.Supervisor)
  end
end

defmodule Nx.Serving.Hidden do
  @moduledoc false
  # A :pg scope meets the scopes of the same name on the visible nodes it connects to, not on
  # hidden ones. This process introduces the scope to each hidden node connected (now and
  # later) with the message a scope sends to another one it meets, {:discover, scope_pid}
  # (:pg's own protocol: the one place here that leans on an OTP internal), so that servings
  # of hidden nodes are found too.
  use GenServer

  def start_link(scope), do: GenServer.start_link(__MODULE__, scope)

  @impl true
  def init(scope) do
    :ok = :net_kernel.monitor_nodes(true, node_type: :hidden)
    for node <- Node.list(:hidden), do: introduce(scope, node)
    {:ok, scope}
  end

  @impl true
  def handle_info({:nodeup, node, _info}, scope) do
    introduce(scope, node)
    {:noreply, scope}
  end

  def handle_info(_nodedown_or_other, scope), do: {:noreply, scope}

  defp introduce(scope, node), do: send({scope, node}, {:discover, Process.whereis(scope)})
end
