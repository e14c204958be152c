defmodule NxJax.Pool do
  @moduledoc """
  A configurable number of `NxJax.Worker`s under one supervisor, and the placement of calls on
  them.

  The application starts the pool with `config :nx_jax, pool_size: n` workers (default 1). The
  first worker is registered as `NxJax.Worker` (the default `:server` of `NxJax.Worker`), the
  others as `NxJax.Worker.1`, `NxJax.Worker.2`, ...; a worker that dies is restarted under the
  same name.

  Placement (`with_worker/2`): a call whose arguments are resident on a worker runs on that
  worker; any other call goes to the worker with the fewest calls in flight from this node, so
  independent calls from concurrent processes spread over the pool.

      NxJax.Pool.size()
      #=> 2
  """
  use Supervisor

  @doc "Starts the pool. Options: `:size` (default: `config :nx_jax, pool_size`, else 1)."
  def start_link(opts \\ []) do
    Supervisor.start_link(__MODULE__, opts, name: __MODULE__)
  end

  @impl true
  def init(opts) do
    size = Keyword.get_lazy(opts, :size, fn -> Application.get_env(:nx_jax, :pool_size, 1) end)

    unless is_integer(size) and size >= 1 do
      raise ArgumentError,
            "the nx_jax pool size must be a positive integer, got: #{inspect(size)}"
    end

    :persistent_term.put({__MODULE__, :size}, size)
    :persistent_term.put({__MODULE__, :in_flight}, :atomics.new(size, signed: true))

    children =
      for index <- 0..(size - 1) do
        Supervisor.child_spec({NxJax.Worker, name: name(index)}, id: {NxJax.Worker, index})
      end

    Supervisor.init(children, strategy: :one_for_one, max_restarts: 10)
  end

  @doc "The registered name of the worker at `index`."
  def name(0), do: NxJax.Worker

  def name(index) when is_integer(index) and index > 0,
    do: Module.concat(NxJax.Worker, "#{index}")

  @doc "The number of workers (1 when no pool was started)."
  def size, do: :persistent_term.get({__MODULE__, :size}, 1)

  @doc "The pids of the running workers, in index order."
  def workers do
    for index <- 0..(size() - 1), pid = Process.whereis(name(index)), do: pid
  end

  @doc """
  Calls `fun.(worker_pid)` on `server` when it is given (a pid or a name), otherwise on the
  worker with the fewest calls in flight.
  """
  def with_worker(server, fun) when is_function(fun, 1) do
    case server do
      nil -> with_least_busy(fun)
      pid when is_pid(pid) -> fun.(pid)
      name -> fun.(GenServer.whereis(name) || name)
    end
  end

  defp with_least_busy(fun) do
    case :persistent_term.get({__MODULE__, :in_flight}, nil) do
      nil ->
        fun.(GenServer.whereis(NxJax.Worker) || NxJax.Worker)

      in_flight ->
        index = least_busy(in_flight, size())
        :atomics.add(in_flight, index + 1, 1)

        try do
          name = name(index)
          fun.(GenServer.whereis(name) || name)
        after
          :atomics.sub(in_flight, index + 1, 1)
        end
    end
  end

  defp least_busy(_in_flight, 1), do: 0

  defp least_busy(in_flight, size) do
    # start at a rotating index so ties do not always go to worker 0
    start = rem(:erlang.unique_integer([:positive]), size)

    Enum.min_by(0..(size - 1), fn offset ->
      index = rem(start + offset, size)
      {:atomics.get(in_flight, index + 1), offset}
    end)
    |> then(&rem(start + &1, size))
  end

  @doc """
  Counters summed over the pool's workers (`NxJax.Worker.stats/1`) plus this node's
  `Nx.Defn.Compiler.counters/0`: `traces`, `trace_cache_hits`, `graph_sends`, `key_calls`,
  `graph_resends`, `compiles`, `cache_hits`, `runs`, `errors`, `graph_loads`,
  `unknown_graphs`, `resident`.
  """
  def stats do
    workers()
    |> Enum.map(&NxJax.Worker.stats(server: &1))
    |> Enum.reduce(Nx.Defn.Compiler.counters(), fn stats, acc ->
      Map.merge(acc, stats, fn _key, a, b -> a + b end)
    end)
  end
end
