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
  back to their caller, in whatever order they come.

  ## Faults

  - If the Python process exits (a crash, `kill -9`), every pending caller gets an
    `NxJax.WorkerError` of class `"WorkerExited"` that gives the exit status, and the GenServer
    stops, so its supervisor starts a fresh worker (which rebuilds compiled graphs on demand).
  - Calls are pure, so a call to a *registered name* that fails with `"WorkerExited"` is sent
    once more to the worker restarted under that name (`retry: false` turns this off).
    `NxJax.Pool` does the same for the calls it places. Calls on resident tensors
    (`{:ref, handle}` arguments, `fetch/2`, `free/2`) are never retried: the tensors died with
    the worker.
  - `:timeout` (default 60 s) bounds each call: when it passes, the caller gets a `"Timeout"`
    error and the worker, stuck on that call or on one queued before it, is killed and
    replaced, so the next caller is not stuck behind it. The other calls it held get
    `"WorkerExited"` (and are retried).
  - Lines the Python side writes on its stdout or stderr (fds 1 and 2; Python code or native
    libraries) arrive as `{:log, stream, line, seq}` frames (`py_backend/stdio.py`) and are
    logged with `Logger` in the order they were written (`NxJax.Worker.LogOrder`): stdout at
    `:info`, stderr at `:warning`, with the worker's OS pid.

  ## Hooks

  A caller waits for its reply in its own receive loop (not `GenServer.call`): while the worker
  computes, `{:hook, id, index, tensors}` frames (`Nx.Defn.Kernel.hook/2`, PROTOCOL 2.2) are
  forwarded to the caller of request `id`, which runs the `:on_hook` function of its call
  (`on_hook.(index, tensors)`) in its own process, or, with the option `hooks_in: :process`,
  in a process of its own that the call's deadline bounds (one at a time, in order). A call
  given a finite `:timeout` of its own runs its hooks that way unless it says
  `hooks_in: :caller`, so that the deadline it asks for bounds them. If that
  function raises, the caller raises the same error once the reply has arrived (the hooks after
  it are skipped).

  ## Bytes move once

  Requests are encoded by the caller as iodata (`encode_iodata/1`): tensor binaries of 64 KiB or
  more are referenced, not copied into a frame. Replies of 64 KiB or more are decoded by
  `decode_frame/1`, which returns large binaries as sub-binaries of the received frame.

  ## Graphs by key

  `run_cached/5` sends a graph once: the worker remembers it under its key (`graph_key/1`)
  and later calls carry only the key and the arguments. If the Python side does not know a key
  (its cache dropped it), it answers `UnknownGraph` and this GenServer re-sends the graph; the
  caller sees nothing of it. Client-side counters (`graph_sends`, `key_calls`,
  `graph_resends`) are part of `stats/1`.

  ## Lent port

  A repeated graph call (`run_cached/5` with a known key, wire-tensor arguments, results coming
  back, no hooks) to a worker of this node whose GenServer has nothing in flight borrows the
  worker's port for its own round trip, so its reply skips one process hop. The protocol, its
  states and its invariants are `NxJax.Worker.Lease`'s. The `lent_calls` counter of
  `stats/1` counts borrowed calls (they are also `key_calls`). `lend_port: false` (start
  option, or `config :nx_jax, lend_port: false`) turns it off.

  ## Modules

  This module is the client API. `NxJax.Worker.Caller` is the calling process's side of a
  request (the reply wait, hooks), `NxJax.Worker.LentPort` the borrower's side of the lent
  port, `NxJax.Worker.Server` the GenServer that owns the port, `NxJax.Worker.Lease` who holds
  the port now, `NxJax.Worker.Deadline` a call's deadline, `NxJax.Worker.Config` the settings,
  `NxJax.Worker.Backoff` restart pacing and the one retry, and `NxJax.Wire` the frames'
  encoding; none calls one named before it (docs/ARCHITECTURE.md, "The runtime's layers").

  ## Resident tensors

  With `keep: true` (and `put/2`), results stay on the worker and come back as
  `{:ref, handle, guard}` (`{:ref, handle, guard, data}` for a result of at most 64 bytes,
  with a copy of its data: reading it then costs no request): `handle` names the tensor on
  the worker, `guard` (an `NxJax.Guard`)
  frees it there once no process holds it any more (garbage collected in every process that
  had it, or exited; `NxJax.Worker.Collector` frees them in batches). A handle is a count over
  40 random bits: never given out twice by a worker, and not guessable. `free/2` frees handles at once, guarded or not.

  The Python executable is, in order: the `:python` start option, the `:python` key of the
  `:nx_jax` application environment, the `NX_JAX_PYTHON` environment variable, the project's
  virtualenv (`.venv/bin/python` of `NxJax.Worker.Sources.project_root/0`), `python3` on the
  `PATH`. The worker runs in that project directory, its `py_backend` first on `PYTHONPATH`,
  and checks that its sources are the ones this code was compiled with
  (`NxJax.Worker.Sources`).
  """
  alias NxJax.Worker.{Caller, Config}

  @doc """
  Starts a worker. Options: `:name`, `:python`, `:env` (extra environment variables for the
  Python process, `[{"NAME", "value"}]`), `:group` (true: join the `:pg` group of workers,
  `NxJax.Distribution`, so clients on other nodes can use it), `:stdio_to` (a pid that also
  receives `{:nx_jax_stdio, stream, line}` for each forwarded output line), `:spin_us` (after
  answering, the worker polls for the next request this many microseconds before it sleeps;
  default `config :nx_jax, spin_us: 100`; 0 never spins; docs/DEPLOYMENT.md),
  `:lend_port` (default `config :nx_jax, lend_port: true`; see "Lent port"). (`:off`, for
  benchmarks only: latency mechanisms switched off, `NxJax.Worker.Config.mechanisms_off/1`.)
  """
  def start_link(opts \\ []) do
    {gen_opts, opts} = Keyword.split(opts, [:name])
    # a pool worker dying again and again soon after its start is started later and later;
    # its name is registered only once it starts, so calls meanwhile fail at once
    {backoff, opts} = Keyword.pop(opts, :backoff)
    NxJax.Worker.Backoff.before_start(backoff)
    GenServer.start_link(NxJax.Worker.Server, opts, gen_opts)
  end

  @doc false
  def child_spec(opts) do
    %{id: __MODULE__, start: {__MODULE__, :start_link, [opts]}}
  end

  @doc """
  Calls `function` on the worker with `args` and returns its result, or raises
  `NxJax.WorkerError`.

  Options: `:server` (default `NxJax.Worker`), `:timeout` in milliseconds (default
  `default_timeout/0`, 60 s unless configured; past it the worker is replaced), `:retry` (default true: a call to a registered name interrupted
  by the worker's exit is sent once more to its restarted worker), `:on_hook` (a function
  `(index, wire_tensors)` for the hook values of the call, see "Hooks"), `:hooks_in` (`:caller`,
  the default, or `:process`, the default when the call gives a finite `:timeout`; see
  "Hooks"), `:reply_spin_us` (how
  long the caller polls for the reply before it sleeps, `reply_spin_us/0`).
  """
  def call(function, args, opts \\ []) when is_atom(function) and is_list(args) do
    opts = if function in [:fetch, :free], do: [{:retryable, false} | opts], else: opts
    Caller.request(opts, {:call, function, NxJax.Wire.encode_body(args)})
  end

  @doc """
  Runs an encoded graph (`:erlang.term_to_binary/1` of a version-1 graph) on `args`, a list of
  `{type, shape, binary}` wire tensors, and returns the list of result wire tensors.
  """
  def run(graph_bin, args, opts \\ []) when is_binary(graph_bin) and is_list(args) do
    call(:run, [graph_bin, args], opts)
  end

  @doc """
  Runs the graph `graph_bin`, whose key is `key` (`graph_key/1`), on `args`: wire tensors
  `{type, shape, binary}` or resident handles `{:ref, handle}` of this worker (whose guards
  the caller keeps alive until this returns: `NxJax.Guard.keep/1`).

  The graph itself travels only the first time this worker sees `key` (and again, transparently,
  if the worker forgot it). With `keep` true the results stay on the worker and come back as
  `{:ref, handle, guard}` (see "Resident tensors"); otherwise as wire tensors.

  Options as in `call/3`.
  """
  def run_cached(key, graph_bin, args, keep, opts \\ [])
      when is_binary(key) and is_binary(graph_bin) and is_list(args) and is_boolean(keep) do
    {refs, small} = arg_kinds(args, false, true)
    opts = if refs, do: [{:retryable, false} | opts], else: opts
    # (a call that may borrow the worker's port, see "Lent port": with resident arguments it
    # must not overtake a free sent to the GenServer before it)
    lendable = not keep and not refs
    # The argument list of `call`: wire tensors and {:ref, handle}s. Small tensors (the common
    # case of a repeated call) are written by NxJax.Wire.args_body/1; large data is never
    # copied.
    body = if small, do: NxJax.Wire.args_body(args), else: NxJax.Wire.encode_body(args)
    donate = Keyword.get(opts, :donate, [])
    lendable = lendable and donate == []
    message = {:graph_call, key, graph_bin, body, keep, self(), donate}
    results = Caller.request(opts, message, lendable)
    if keep, do: guarded(results, Keyword.get(opts, :server, __MODULE__)), else: results
  end

  # whether `args` hold a resident handle, and whether all of them are small
  defp arg_kinds([{_type, _shape, data} | rest], refs, small) when is_binary(data),
    do: arg_kinds(rest, refs, small and byte_size(data) < NxJax.Wire.big_binary())

  defp arg_kinds([{:ref, _handle} | rest], _refs, small), do: arg_kinds(rest, true, small)
  defp arg_kinds([_other | rest], refs, _small), do: arg_kinds(rest, refs, false)
  defp arg_kinds([], refs, small), do: {refs, small}

  @doc """
  The key of an encoded graph: its MD5 digest followed by its byte size as a 64-bit
  big-endian integer (24 bytes; `:erlang.md5/1` needs no `:crypto`). The worker checks it
  against the graph whenever the graph travels.
  """
  def graph_key(graph_bin), do: <<:erlang.md5(graph_bin)::binary, byte_size(graph_bin)::64>>

  @doc """
  Makes `tensors` (wire tensors) resident on the worker; returns one `{:ref, handle, guard}`
  each (see "Resident tensors").
  """
  def put(tensors, opts \\ []) when is_list(tensors) do
    refs = Caller.request(opts, {:put, NxJax.Wire.encode_body([tensors]), self()})
    guarded(refs, Keyword.get(opts, :server, __MODULE__))
  end

  # Refs from a worker on another node come without guards (a guard sends to the collector of
  # the node it was made on): this node's are made here.
  defp guarded(refs, server) do
    case refs do
      [{:ref, _handle, guard} | _] when is_reference(guard) -> refs
      [{:ref, _handle, guard, _copy} | _] when is_reference(guard) -> refs
      [] -> []
      refs -> for ref <- refs, do: guard(ref, GenServer.whereis(server))
    end
  end

  @doc false
  defdelegate guard(ref, worker), to: NxJax.Worker.Collector, as: :guard_ref

  @doc "The data of resident `handles`, as wire tensors."
  def fetch(handles, opts \\ []) when is_list(handles), do: call(:fetch, [handles], opts)

  @doc "Frees resident `handles` (unknown ones are ignored); returns how many were freed."
  def free(handles, opts \\ []) when is_list(handles) do
    Caller.request([{:retryable, false} | opts], {:free, handles})
  end

  @doc """
  Frees resident `handles` of worker `pid` without waiting for it (the reply of the `free` is
  dropped). A later request of the calling process reaches the worker after the free, so a
  call on a released handle fails with `UnknownHandle`. Used by `Nx.backend_deallocate/1` once
  it has disarmed the tensor's guard.
  """
  def release(pid, handles) when is_pid(pid) and is_list(handles) do
    send(pid, {:nx_jax_released, handles})
    :ok
  end

  @doc """
  Counters of this worker: the Python side's (`compiles`, `cache_hits`, `runs`, `errors`,
  `graph_loads`, `unknown_graphs`, `resident`, and the requests each fast path of
  `py_backend/fastcall.py` served: `fast_one_calls`, `fast_hot_calls`, `fast_layout_calls`;
  `paused_spins`: how often the worker's spin after a reply lost its CPU to another process and
  paused, `py_backend.channel.FrameReader`)
  and this client's (`graph_sends`: calls that carried the graph, `key_calls`: calls that
  carried only its key, `graph_resends`: graphs sent again after `UnknownGraph`, `lent_calls`:
  calls that borrowed the port, `fast_replies`: borrowed calls whose reply was read by
  `NxJax.Wire.fast_reply/2`). A loop of one small call should see the fast counters grow with
  every call: if one stops, an encoder on one side no longer writes the bytes the other side's
  fast path expects (the answers stay right, only slower).
  """
  def stats(opts \\ []) do
    server = Keyword.get(opts, :server, __MODULE__)
    Map.merge(call(:stats, [], opts), GenServer.call(server, :client_stats))
  end

  @doc "The operating-system pid of the worker's Python process."
  def os_pid(server \\ __MODULE__), do: GenServer.call(server, :os_pid)

  @doc "The number of requests sent and not yet answered (used by `NxJax.Pool` placement)."
  def pending(server \\ __MODULE__), do: GenServer.call(server, :pending)

  @doc """
  The largest request frame, in bytes, a worker started with `opts` accepts: its `:env`'s
  `NX_JAX_MAX_FRAME` if it sets one, else `config :nx_jax, max_frame: bytes`, else a quarter
  of this machine's physical memory (at most 4294967295, the most a frame's 4-byte length
  can say). The worker is started with it as `NX_JAX_MAX_FRAME`, and a caller refuses a
  larger request before sending anything (`NxJax.WorkerError` of class `"FrameTooLarge"`).
  """
  defdelegate max_frame(opts \\ []), to: Config

  @doc "How long a worker started with `opts` polls for the next request (`:spin_us`)."
  defdelegate spin_us(opts \\ []), to: Config

  @doc false
  defdelegate poll_reductions, to: Caller

  @doc """
  How long a caller polls for its reply before it sleeps, in microseconds
  (`config :nx_jax, reply_spin_us: 100`, the default, read when the application starts or by
  `NxJax.Pool.reload_config/0`; 0 never polls; per call, the `:reply_spin_us` option;
  docs/DEPLOYMENT.md). A process whose replies came after its polling was over twice in a
  row (long steps, a queue of calls ahead of its own) stops polling until a reply comes within
  it again, trying again every 16th call.
  """
  defdelegate reply_spin_us, to: Config

  @doc """
  The timeout of a call that gives none, in milliseconds: `config :nx_jax, timeout: ms`
  (default 60000; read when the application starts or by `NxJax.Pool.reload_config/0`). It
  bounds every call made without a `:timeout` option, eager `Nx` operations among them; past
  it the caller gets a `"Timeout"` error and the worker is replaced.
  """
  defdelegate default_timeout, to: Config

  @doc "The Python executable a worker started now would use (see the moduledoc)."
  defdelegate python_executable(opts \\ []), to: Config
end
