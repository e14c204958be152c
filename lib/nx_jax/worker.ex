defmodule NxJax.Worker do
  @moduledoc """
  One Python worker process (`python -m py_backend`) owned by one GenServer through an Erlang
  port.

  The port uses `{:packet, 4}` frames carrying terms in the external term format, on file
  descriptors 3 and 4 (`:nouse_stdio`), so whatever Python or a native library prints on its
  stdout or stderr cannot corrupt a frame. Messages follow the ErlPort protocol described in
  `docs/PROTOCOL.md`: `{:"C", id, :nx_jax, function, args}` is answered by `{:r, id, result}` or
  `{:e, id, {:python, class, message, traceback}}`.

  Many callers may use one worker at once: requests are tagged with an id and replies are routed
  back to their caller, in whatever order they come. If the Python process exits, every pending
  caller gets an `NxJax.WorkerError` and the GenServer stops, so its supervisor starts a fresh
  worker.

  The Python executable is, in order: the `:python` start option, the `:python` key of the
  `:nx_jax` application environment, the `NX_JAX_PYTHON` environment variable, the project's
  virtualenv (`.venv/bin/python`), `python3` on the `PATH`.
  """
  use GenServer
  require Logger

  @project_root Path.expand("../..", __DIR__)
  @default_timeout 60_000

  @doc "Starts a worker. Options: `:name`, `:python`."
  def start_link(opts \\ []) do
    {gen_opts, opts} = Keyword.split(opts, [:name])
    GenServer.start_link(__MODULE__, opts, gen_opts)
  end

  @doc """
  Calls `function` on the worker with `args` and returns its result, or raises
  `NxJax.WorkerError`.

  Options: `:server` (default `NxJax.Worker`), `:timeout` in milliseconds (default 60 s).
  """
  def call(function, args, opts \\ []) when is_atom(function) and is_list(args) do
    server = Keyword.get(opts, :server, __MODULE__)
    timeout = Keyword.get(opts, :timeout, @default_timeout)

    reply =
      try do
        GenServer.call(server, {:call, function, args}, timeout)
      catch
        :exit, {:timeout, _} ->
          {:error, {"Timeout", "no reply from the worker within #{timeout} ms", ""}}

        :exit, {:noproc, _} ->
          {:error, {"WorkerExited", "no worker is running (#{inspect(server)})", ""}}

        :exit, {reason, _} ->
          {:error, {"WorkerExited", "the worker stopped: #{inspect(reason)}", ""}}
      end

    case reply do
      {:ok, result} ->
        result

      {:error, {class, message, traceback}} ->
        raise NxJax.WorkerError, class: class, message: message, traceback: traceback
    end
  end

  @doc """
  Runs an encoded graph (`:erlang.term_to_binary/1` of a version-1 graph) on `args`, a list of
  `{type, shape, binary}` wire tensors, and returns the list of result wire tensors.
  """
  def run(graph_bin, args, opts \\ []) when is_binary(graph_bin) and is_list(args) do
    call(:run, [graph_bin, args], opts)
  end

  @doc "The operating-system pid of the worker's Python process."
  def os_pid(server \\ __MODULE__), do: GenServer.call(server, :os_pid)

  @doc "The Python executable a worker started now would use."
  def python_executable(opts \\ []) do
    venv = Path.join(@project_root, ".venv/bin/python")

    Keyword.get(opts, :python) ||
      Application.get_env(:nx_jax, :python) ||
      System.get_env("NX_JAX_PYTHON") ||
      if(File.exists?(venv), do: venv) ||
      System.find_executable("python3") ||
      raise ArgumentError,
            "no Python found for the nx_jax worker: run `make deps` to create .venv, " <>
              "or set NX_JAX_PYTHON / config :nx_jax, python: \"/path/to/python\""
  end

  ## GenServer

  @impl true
  def init(opts) do
    Process.flag(:trap_exit, true)
    python = python_executable(opts)

    port =
      Port.open({:spawn_executable, python}, [
        {:packet, 4},
        :binary,
        :nouse_stdio,
        :exit_status,
        {:args, ["-m", "py_backend"]},
        {:cd, @project_root},
        {:env, [{~c"PYTHONUNBUFFERED", ~c"1"}]}
      ])

    {:ok, %{port: port, next_id: 0, pending: %{}, python: python}}
  end

  @impl true
  def handle_call(:os_pid, _from, state) do
    {:os_pid, os_pid} = Port.info(state.port, :os_pid)
    {:reply, os_pid, state}
  end

  def handle_call({:call, function, args}, from, state) do
    id = state.next_id
    frame = :erlang.term_to_binary({:C, id, :nx_jax, function, args})
    true = Port.command(state.port, frame)
    {:noreply, %{state | next_id: id + 1, pending: Map.put(state.pending, id, from)}}
  end

  @impl true
  def handle_info({port, {:data, frame}}, %{port: port} = state) do
    case :erlang.binary_to_term(frame) do
      {:r, id, result} ->
        {:noreply, reply(state, id, {:ok, result})}

      {:e, id, {:python, class, message, traceback}} ->
        {:noreply,
         reply(state, id, {:error, {to_text(class), to_text(message), to_text(traceback)}})}

      other ->
        Logger.error("nx_jax worker sent an unexpected message: #{inspect(other, limit: 20)}")
        {:noreply, state}
    end
  end

  def handle_info({port, {:exit_status, status}}, %{port: port} = state) do
    error = {"WorkerExited", "the Python worker exited with status #{status}", ""}
    Enum.each(state.pending, fn {_id, from} -> GenServer.reply(from, {:error, error}) end)
    {:stop, {:worker_exited, status}, %{state | pending: %{}}}
  end

  def handle_info({:EXIT, port, reason}, %{port: port} = state) do
    error = {"WorkerExited", "the port to the Python worker closed: #{inspect(reason)}", ""}
    Enum.each(state.pending, fn {_id, from} -> GenServer.reply(from, {:error, error}) end)
    {:stop, {:port_closed, reason}, %{state | pending: %{}}}
  end

  def handle_info(_other, state), do: {:noreply, state}

  @impl true
  def terminate(_reason, state) do
    if Port.info(state.port) != nil, do: Port.close(state.port)
    :ok
  end

  defp reply(state, id, reply) do
    case Map.pop(state.pending, id) do
      {nil, _} ->
        Logger.warning("nx_jax worker replied to unknown request #{inspect(id)}")
        state

      {from, pending} ->
        GenServer.reply(from, reply)
        %{state | pending: pending}
    end
  end

  defp to_text(text) when is_binary(text), do: text
  defp to_text(text) when is_atom(text), do: Atom.to_string(text)
  defp to_text(text) when is_list(text), do: List.to_string(text)
  defp to_text(other), do: inspect(other)
end
