defmodule NxJax.Pool do
  @moduledoc """
  A configurable number of `NxJax.Worker`s under one supervisor, and the placement of calls on
  them.

  The application starts the pool with `config :nx_jax, pool_size: n` workers (default 1). The
  first worker is registered as `NxJax.Worker` (the default `:server` of `NxJax.Worker`), the
  others as `NxJax.Worker.1`, `NxJax.Worker.2`, ...; a worker that dies is restarted under the
  same name.

  Placement (`with_worker/3`): a call whose arguments are resident on a worker runs on that
  worker; any other call goes to the worker with the fewest calls in flight from this node, so
  independent calls from concurrent processes spread over the pool. With `remote: true` (call
  option, or `config :nx_jax, remote: true`) the candidates are every worker of the `:pg` group
  (`NxJax.Distribution`), on this node and on connected ones.

  Retry: calls are pure, so a call interrupted by its worker's exit (`"WorkerExited"`, e.g. the
  Python process was killed, or the worker's node went down) is placed once more, on the
  restarted worker or another one (`retry: false` turns this off). A call pinned to one worker
  (resident arguments, or an explicit `:server` pid) is not retried: its error says why; nor
  is the call the worker was running when a signal killed it (`"WorkerDied"`: it may be the
  cause).

  `config :nx_jax, worker_env: [env0, env1, ...]` gives worker `i` the extra environment
  variables `env_i` (`[{"NAME", "value"}]`), e.g. one accelerator each (docs/DEPLOYMENT.md).

  With more than one worker, each runs XLA's CPU client on one thread: the pool's
  parallelism is its workers. Each such worker gets `NPROC=1`, the variable from which XLA sizes
  the CPU client's thread pool (JAX 0.10.2, the version measured, ignores the older flags), and
  `XLA_FLAGS=--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1` appended to any
  `XLA_FLAGS` of the node (the flags earlier versions read). `config :nx_jax, worker_threads: :all` keeps XLA's
  default; a `NPROC` or an `XLA_FLAGS` in a worker's `worker_env` replaces that one.

  A worker that dies is started again, at once after a stable run, later and later when it
  keeps dying soon after its start (`NxJax.Worker.Backoff`: 100 ms doubling up to 5 s), so a
  crash loop stops neither the pool nor the application and service returns by itself.
  While a worker waits to start again, calls placed on it fail at once with an error saying so.

  The settings a call reads, `config :nx_jax, remote:`, `reply_spin_us:` and `timeout:`,
  are read once, when the application starts (`reload_config/0`): an application-environment
  lookup on every call is a measurable part of a small call's overhead over JAX. After
  changing them at run time with `Application.put_env/3`, call `reload_config/0`; the
  `:remote`, `:reply_spin_us` and `:timeout` options of a call always apply at once.

      NxJax.Pool.size()
      #=> 2
  """
  use Supervisor
  alias NxJax.Worker.Backoff

  @doc "Starts the pool. Options: `:size` (default: `config :nx_jax, pool_size`, else 1)."
  def start_link(opts \\ []) do
    Supervisor.start_link(__MODULE__, opts, name: __MODULE__)
  end

  @impl true
  def init(opts) do
    size = Keyword.get_lazy(opts, :size, fn -> Application.get_env(:nx_jax, :pool_size, 1) end)

    # one worker per device: worker i computes on device i of the platform
    {size, per_device} =
      case size do
        :per_device ->
          python = NxJax.Worker.Config.python_executable()
          {NxJax.Worker.Placement.count(python, Application.get_env(:nx_jax, :platform)), true}

        size ->
          {size, false}
      end

    unless is_integer(size) and size >= 1 do
      raise ArgumentError,
            "the nx_jax pool size must be a positive integer or :per_device, got: #{inspect(size)}"
    end

    :persistent_term.put({__MODULE__, :size}, size)
    :persistent_term.put({__MODULE__, :in_flight}, :atomics.new(size, signed: true))

    names = List.to_tuple(Enum.map(0..(size - 1), &make_name/1))
    :persistent_term.put({__MODULE__, :names}, names)

    worker_env = Application.get_env(:nx_jax, :worker_env, [])
    # restarts are paced (NxJax.Worker.Backoff), so the supervisor's intensity is not what
    # bounds a crash loop: workers dying cannot stop the pool or the application
    backoff = Backoff.new(size)
    Backoff.register(names, backoff)

    children =
      for index <- 0..(size - 1) do
        env = thread_env(size, Enum.at(worker_env, index, []))
        opts = [name: name(index), group: true, env: env, backoff: {backoff, index}]
        opts = if per_device, do: per_device(opts, index), else: opts
        Supervisor.child_spec({NxJax.Worker, opts}, id: {NxJax.Worker, index})
      end

    max_restarts = Application.get_env(:nx_jax, :max_restarts, 1_000_000)
    Supervisor.init(children, strategy: :one_for_one, max_restarts: max_restarts, max_seconds: 5)
  end

  # Worker `index` of a :per_device pool: on CUDA it sees only its own GPU (so that no process
  # initialises, and preallocates memory on, the others' devices) and computes on device 0 of
  # what it sees; elsewhere it computes on device `index` (NxJax.Devices).
  @doc false
  def per_device(opts, index) do
    if Application.get_env(:nx_jax, :platform) in ["cuda", :cuda, "gpu", :gpu] do
      visible = {"CUDA_VISIBLE_DEVICES", Integer.to_string(index)}

      [
        {:device, 0}
        | Keyword.update!(opts, :env, &List.keystore(&1, "CUDA_VISIBLE_DEVICES", 0, visible))
      ]
    else
      [{:device, index} | opts]
    end
  end

  # With more than one worker, each one's XLA CPU client runs single-threaded, so workers on a
  # small machine do not fight over every core for each op; `config :nx_jax, worker_threads:
  # :all` keeps XLA's default, and a variable given in `worker_env` wins. XLA sizes the CPU
  # client's intra-op pool from NPROC (else from the CPUs the process may run on); the flags
  # were how earlier versions were told, and JAX 0.10.2 runs a large elementwise op on 1.5 of 2
  # cores with them alone (test_elixir/pool_threads_test.exs).
  @single_thread_flags "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"

  @doc false
  def thread_env(size, env) do
    if size > 1 and Application.get_env(:nx_jax, :worker_threads, :one) == :one do
      flags = String.trim("#{System.get_env("XLA_FLAGS", "")} #{@single_thread_flags}")

      [{"NPROC", "1"}, {"XLA_FLAGS", flags}]
      |> Enum.reject(fn {name, _} -> List.keymember?(env, name, 0) end)
      |> Enum.concat(env)
    else
      env
    end
  end

  @doc "The registered name of the worker at `index`."
  def name(0), do: NxJax.Worker

  # (each call placed on a pool asks for one: the names are made once, at the pool's start, as
  # making an atom from a string costs about a microsecond)
  def name(index) when is_integer(index) and index > 0 do
    case :persistent_term.get({__MODULE__, :names}, {}) do
      names when index < tuple_size(names) -> elem(names, index)
      _ -> make_name(index)
    end
  end

  defp make_name(0), do: NxJax.Worker
  defp make_name(index), do: Module.concat(NxJax.Worker, "#{index}")

  @doc """
  For the pool worker registered as `name`: `{quick, ms}` while it waits to start again after
  `quick` quick deaths in a row (`ms` until its start), else `nil`.
  """
  defdelegate restart_wait(name), to: Backoff

  @doc "The number of workers (1 when no pool was started)."
  def size, do: :persistent_term.get({__MODULE__, :size}, 1)

  @doc """
  Compiler options `opts` as one entry per worker of the pool, each pinned to its worker by
  its registered name (`:server`, so a restarted worker keeps its entry): the partitions
  `Nx.Serving` asks a compiler for (`NxJax.__partitions_options__/1`, under either Nx).
  Options that name a worker already are one entry, on that worker.
  """
  def partitions(opts) when is_list(opts) do
    if Keyword.has_key?(opts, :server) do
      [opts]
    else
      for index <- 0..(size() - 1)//1, do: Keyword.put(opts, :server, name(index))
    end
  end

  @doc """
  Reads the settings of the application environment that every call uses (`:remote`,
  `:reply_spin_us` of `NxJax.Worker.reply_spin_us/0` and `:timeout` of
  `NxJax.Worker.default_timeout/0`) into `:persistent_term`; raises `ArgumentError` for a
  timeout that is not a positive integer or `:infinity`. `config :nx_jax, debug_nans: bool`,
  when set, is added to Nx's global default options of `defn` (`config :nx,
  :default_defn_options`, through `Nx.Defn.global_default_options/1`); nothing else of Nx's
  settings is touched. The application does it when it starts; call it again after
  `Application.put_env/3` changed them.
  """
  def reload_config do
    :persistent_term.put({__MODULE__, :remote}, Application.get_env(:nx_jax, :remote, false))
    NxJax.Worker.Config.load()

    case Application.fetch_env(:nx_jax, :debug_nans) do
      {:ok, debug} when is_boolean(debug) ->
        defaults = Application.get_env(:nx, :default_defn_options, [])
        Nx.Defn.global_default_options(Keyword.put(defaults, :debug_nans, debug))

      {:ok, other} ->
        raise ArgumentError,
              "config :nx_jax, debug_nans: expects a boolean, got: #{inspect(other)}"

      :error ->
        :ok
    end

    :ok
  end

  # (the environment itself where the application did not start)
  defp remote? do
    case :persistent_term.get({__MODULE__, :remote}, :unset) do
      :unset -> Application.get_env(:nx_jax, :remote, false)
      remote -> remote
    end
  end

  @doc "The pids of the running workers, in index order."
  def workers do
    for index <- 0..(size() - 1), pid = Process.whereis(name(index)), do: pid
  end

  @doc """
  Calls `fun.(worker_pid)` on `server` when it is given (a pid or a name), otherwise on the
  worker with the fewest calls in flight.

  Options: `:retry` (default true: when `fun` raises an `NxJax.WorkerError` of class
  `"WorkerExited"`, call it once more on a live worker; not for a pid `server`), `:remote`
  (default `config :nx_jax, remote:`, else false: place over every worker of the `:pg` group,
  remote ones included).
  """
  def with_worker(server, fun, opts \\ []) when is_function(fun, 1) do
    retry = Keyword.get(opts, :retry, true)

    case server do
      nil ->
        if Keyword.get_lazy(opts, :remote, &remote?/0),
          do: with_member(fun, retry, []),
          else: with_least_busy(fun, retry)

      pid when is_pid(pid) ->
        pinned(pid, fun)

      name ->
        named(name, fun, retry)
    end
  end

  defp pinned(pid, fun) do
    case attempt(fun, pid) do
      {:ok, value} ->
        value

      {:exited, error, stack} ->
        message =
          error.message <>
            ". This call was pinned to worker #{inspect(pid)} (it holds the call's resident " <>
            "arguments, or :server named it), so it is not retried on a new worker: resident " <>
            "tensors die with their worker (keep a copy with Nx.backend_copy/1 if they must " <>
            "survive)"

        reraise %{error | message: message}, stack
    end
  end

  defp named(name, fun, retry) do
    pid = GenServer.whereis(name)

    case attempt(fun, pid || name) do
      {:ok, value} ->
        value

      {:exited, error, stack} when retry ->
        retried(name, pid, error, stack, &named(&1, fun, false))

      {:exited, error, stack} ->
        reraise error, stack
    end
  end

  defp with_least_busy(fun, retry) do
    case :persistent_term.get({__MODULE__, :in_flight}, nil) do
      nil ->
        named(NxJax.Worker, fun, retry)

      in_flight ->
        index = least_busy(in_flight, size())
        name = name(index)
        pid = GenServer.whereis(name)
        :atomics.add(in_flight, index + 1, 1)

        result =
          try do
            attempt(fun, pid || name)
          after
            :atomics.sub(in_flight, index + 1, 1)
          end

        case result do
          {:ok, value} ->
            value

          {:exited, error, stack} when retry ->
            retried(name, pid, error, stack, fn _ -> with_least_busy(fun, false) end)

          {:exited, error, stack} ->
            reraise error, stack
        end
    end
  end

  # Placement over the :pg group: the member with the fewest calls in flight from this node.
  defp with_member(fun, retry, excluded) do
    case await_members(excluded, 500) do
      [] ->
        with_least_busy(fun, retry)

      members ->
        start = rem(:erlang.unique_integer([:positive]), length(members))
        {tail, head} = Enum.split(members, start)
        pid = Enum.min_by(head ++ tail, &NxJax.Distribution.in_flight/1)

        case NxJax.Distribution.counted(pid, fn -> attempt(fun, pid) end) do
          {:ok, value} -> value
          {:exited, _, _} when retry -> with_member(fun, false, [pid | excluded])
          {:exited, error, stack} -> reraise error, stack
        end
    end
  end

  # Group members not excluded and not on a node that is gone; waits a little for one to
  # appear (a restarted worker joins the group when it starts) when all were excluded.
  defp await_members(excluded, tries) do
    connected = [node() | Node.list()]
    gone = for pid <- excluded, node(pid) not in connected, do: node(pid)

    members =
      NxJax.Distribution.members()
      |> Enum.reject(&(&1 in excluded or node(&1) in gone or node(&1) not in connected))

    cond do
      members != [] or excluded == [] or tries == 0 -> members
      true -> Process.sleep(20) && await_members(excluded, tries - 1)
    end
  end

  defp attempt(fun, server) do
    {:ok, fun.(server)}
  rescue
    error in NxJax.WorkerError ->
      if error.class == "WorkerExited",
        do: {:exited, error, __STACKTRACE__},
        else: reraise(error, __STACKTRACE__)
  end

  # A retry goes to the worker registered after `old` (or, if none came in 10 s, to the name:
  # its call then fails with a clear error); none while the worker waits more than a second to
  # start again after quick deaths: the error is raised at once (NxJax.Worker.Backoff.retry/3).
  defp retried(name, old, error, stack, again) do
    case Backoff.retry(name, old, fn -> again.(name) end) do
      {:retried, value} ->
        value

      {:waits, quick, ms} ->
        message =
          error.message <>
            "; not retried: the worker died #{quick} time(s) in a row soon after starting " <>
            "and starts again in #{ms} ms"

        reraise %{error | message: message}, stack

      :none_came ->
        again.(name)
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
  Counters summed over the pool's workers (`NxJax.Worker.stats/1`): `graph_sends`, `key_calls`,
  `graph_resends`, `compiles`, `cache_hits`, `runs`, `errors`, `graph_loads`,
  `unknown_graphs`, `resident`, `lent_calls` and the fast-path counters `fast_one_calls`,
  `fast_hot_calls`, `fast_layout_calls` and `fast_replies`, and `paused_spins` (see
  `NxJax.Worker.stats/1`).
  """
  def stats do
    workers()
    |> Enum.map(&NxJax.Worker.stats(server: &1))
    |> Enum.reduce(%{}, fn stats, acc ->
      Map.merge(acc, stats, fn _key, a, b -> a + b end)
    end)
  end
end
