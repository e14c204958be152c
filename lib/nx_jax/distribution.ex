defmodule NxJax.Distribution do
  @moduledoc """
  Workers on several BEAM nodes, over Erlang distribution.

  The application starts a `:pg` scope of its own (`NxJax.PG`); every worker of an
  `NxJax.Pool` joins its group `:nx_jax_workers`. When nodes running nx_jax are connected
  (`Node.connect/1`, or `-connect_all`), their scopes find each other and every node sees every
  worker: `members/0`. A client places calls on remote workers with `config :nx_jax, remote:
  true` or the call option `remote: true` (`NxJax.Pool.with_worker/3`); a call then goes to the
  member with the fewest calls in flight from this node. Arguments and results travel as
  ordinary Erlang messages to the worker's GenServer on the other node, which talks to its own
  Python process. A worker that dies, or whose node goes down, leaves the group.

  See docs/DEPLOYMENT.md for running workers on other hosts (TLS distribution, cookies).
  """

  use Supervisor

  @scope NxJax.PG
  @group :nx_jax_workers
  @in_flight :nx_jax_remote_in_flight

  @doc """
  Starts the `:pg` scope under a supervisor that also owns the table of calls in flight per
  worker (started by `NxJax.Application`, also on nodes that run no worker of their own).
  """
  def start_link(opts \\ []), do: Supervisor.start_link(__MODULE__, opts, name: __MODULE__)

  @impl true
  def init(_opts) do
    :ets.new(@in_flight, [:named_table, :public, :set, write_concurrency: true])
    children = [%{id: :pg, start: {:pg, :start_link, [@scope]}}]
    Supervisor.init(children, strategy: :one_for_one)
  end

  @doc false
  # Runs `fun` counting one call in flight on `pid` (for least-busy placement).
  def counted(pid, fun) do
    if :ets.whereis(@in_flight) == :undefined do
      fun.()
    else
      :ets.update_counter(@in_flight, pid, 1, {pid, 0})

      try do
        fun.()
      after
        :ets.update_counter(@in_flight, pid, -1, {pid, 0})
      end
    end
  end

  @doc false
  def in_flight(pid) do
    case :ets.whereis(@in_flight) != :undefined and :ets.lookup(@in_flight, pid) do
      [{^pid, count}] -> count
      _ -> 0
    end
  end

  @doc "Adds `pid` (a worker) to the group; a no-op when the scope is not running."
  def join(pid) do
    if Process.whereis(@scope), do: :pg.join(@scope, @group, pid), else: :ok
  end

  @doc "Every worker in the group, on this node and on connected ones."
  def members do
    if Process.whereis(@scope), do: :pg.get_members(@scope, @group), else: []
  end

  @doc "The workers of the group on other nodes."
  def remote_members, do: Enum.reject(members(), &(node(&1) == node()))
end
