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
    libraries) arrive as `{:log, stream, line}` frames (`py_backend/stdio.py`) and are logged
    with `Logger`: stdout at `:info`, stderr at `:warning`, with the worker's OS pid.

  ## Hooks

  A caller waits for its reply in its own receive loop (not `GenServer.call`): while the worker
  computes, `{:hook, id, index, tensors}` frames (`Nx.Defn.Kernel.hook/2`, PROTOCOL 2.2) are
  forwarded to the caller of request `id`, which runs the `:on_hook` function of its call
  (`on_hook.(index, tensors)`) in its own process. If that function raises, the caller raises
  the same error once the reply has arrived (the hooks after it are skipped).

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
  worker's port: the calling process connects the port to itself, writes its request, takes
  its reply straight from the port, and connects the port back. The reply skips one process
  hop (docs/BENCHMARKS.md section 1). While no one uses it, the port rests with a keeper
  process that the GenServer keeps suspended, so that a borrowed call wakes no other process
  (the port answers each connect to its previous owner); what the port sends meanwhile (a log
  line, an exit status) waits there until the GenServer collects it, within 20 ms while calls
  borrow the port and within a second when the worker is idle. A lock in the worker's atomics
  keeps the GenServer and borrowers from writing at the same time, and names the borrower;
  every request id comes from one counter, so a late reply can never be taken for another.

  - Requests the GenServer gets meanwhile are held back until the port comes back.
  - The GenServer monitors a borrower it waits for (the lock names it). One that dies holding
    the port (at any step of its call) is taken for gone: the GenServer takes the port back and
    drops the dead call's reply; the Python process, its compiled graphs and resident tensors
    are untouched. A live borrower is never dispossessed. (The borrower connects the port with
    the port message `{owner, {:connect, pid}}`, which does not link it to the port, as
    `:erlang.port_connect/2` would: a linked caller that is killed closes the port.)
  - A borrowed call enforces its own `:timeout`: past it, it gives the port back and has the
    GenServer replace the Python process, as for its own requests.
  - The `lent_calls` counter of `stats/1` counts borrowed calls (they are also `key_calls`).
    `lend_port: false` (start option, or `config :nx_jax, lend_port: false`) turns it off.

  ## Resident tensors

  With `keep: true`, results stay on the worker as integer handles. Each handle is owned by the
  process that asked for it; when that process exits, its handles are freed, so nothing leaks.

  The Python executable is, in order: the `:python` start option, the `:python` key of the
  `:nx_jax` application environment, the `NX_JAX_PYTHON` environment variable, the project's
  virtualenv (`.venv/bin/python`), `python3` on the `PATH`.
  """
  use GenServer
  require Logger

  @project_root Path.expand("../..", __DIR__)
  @default_timeout 60_000
  @deadline_grace 5_000
  # a request whose reply nobody waits for (a free after release/2 or a process's exit)
  @ignore {nil, :ignore, :infinity}
  @big_binary 65_536
  # measured in bench/run.exs section 1: waking a sleeping worker costs tens of microseconds on a
  # virtual machine; the next call of a loop arrives well within this
  @default_spin_us 100
  # the same for a caller awaiting its reply (await_reply/5): a small call is answered in well
  # under this, and a busy scheduler sees the reply on the port at once
  @default_reply_spin_us 100
  @reply_spin_us {__MODULE__, :reply_spin_us}
  # (a per-process count of late replies in a row; see spin_until/3)
  @late_replies {__MODULE__, :late_replies}
  # (the process's kept reply alias, and whether a hook function of a call runs; see reply_to/0)
  @reply_alias {__MODULE__, :reply_alias}
  @in_hook {__MODULE__, :in_hook}
  @respin_every 16
  # a polling caller checks that a local worker is alive every this many polls (a poll takes
  # about a microsecond; Process.alive?/1 on every one of them made the small call 1.8 us
  # slower, docs/BENCHMARKS.md section 1)
  @alive_every 64
  # each poll counts this many reductions: one time slice (OTP's CONTEXT_REDS), so that the
  # caller gives way to other processes after each poll, as `:erlang.yield/0` did, and so that
  # its scheduler, which checks the worker's pipe for input once enough reductions have run
  # since its last check, checks it every poll or two (poll_reductions/0)
  @poll_reductions 4000
  # "Lent port" (lent_call/3): the worker's atomics, and what @lock holds while the GenServer
  # has requests in flight
  @lock 1
  @ids 2
  @gen_server_waits 3
  @lent_calls 4
  @lent_id 5
  @gen_server -1
  # the port's keeper (start_keeper/1) is drained every this many milliseconds while calls borrow
  # the port, and every @drain_idle_ms otherwise (handle_info/2 of :nx_jax_drain)
  @drain_busy_ms 20
  @drain_idle_ms 1_000
  # (the ids of the last this many requests of borrowers that died are kept, reclaim/1)
  @max_stale 64

  @doc """
  Starts a worker. Options: `:name`, `:python`, `:env` (extra environment variables for the
  Python process, `[{"NAME", "value"}]`), `:group` (true: join the `:pg` group of workers,
  `NxJax.Distribution`, so clients on other nodes can use it), `:stdio_to` (a pid that also
  receives `{:nx_jax_stdio, stream, line}` for each forwarded output line), `:spin_us` (after
  answering, the worker polls for the next request this many microseconds before it sleeps;
  default `config :nx_jax, spin_us: #{@default_spin_us}`; 0 never spins; docs/DEPLOYMENT.md),
  `:lend_port` (default `config :nx_jax, lend_port: true`; see "Lent port").
  """
  def start_link(opts \\ []) do
    {gen_opts, opts} = Keyword.split(opts, [:name])
    GenServer.start_link(__MODULE__, opts, gen_opts)
  end

  @doc """
  Calls `function` on the worker with `args` and returns its result, or raises
  `NxJax.WorkerError`.

  Options: `:server` (default `NxJax.Worker`), `:timeout` in milliseconds (default 60 s; past
  it the worker is replaced), `:retry` (default true: a call to a registered name interrupted
  by the worker's exit is sent once more to its restarted worker), `:on_hook` (a function
  `(index, wire_tensors)` for the hook values of the call, see "Hooks"), `:reply_spin_us` (how
  long the caller polls for the reply before it sleeps, `reply_spin_us/0`).
  """
  def call(function, args, opts \\ []) when is_atom(function) and is_list(args) do
    opts = if function in [:fetch, :free], do: [{:retryable, false} | opts], else: opts
    request(opts, {:call, function, encode_body(args)})
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
  `{type, shape, binary}` or resident handles `{:ref, handle}` of this worker.

  The graph itself travels only the first time this worker sees `key` (and again, transparently,
  if the worker forgot it). With `keep` true the results stay on the worker and come back as
  `{:ref, handle}`, owned by the calling process; otherwise as wire tensors.

  Options as in `call/3`.
  """
  def run_cached(key, graph_bin, args, keep, opts \\ [])
      when is_binary(key) and is_binary(graph_bin) and is_list(args) and is_boolean(keep) do
    {refs, small} = arg_kinds(args, false, true)
    opts = if refs, do: [{:retryable, false} | opts], else: opts
    # (a call that may borrow the worker's port, see "Lent port": with resident arguments it
    # must not overtake a free that release/2 left to the GenServer)
    lendable = not keep and not refs
    # The argument list of `call`: wire tensors and {:ref, handle}s. Small tensors (the common
    # case of a repeated call) are encoded in one term_to_binary; large data is never copied.
    body = if small, do: small_body(args), else: encode_body(args)
    request(opts, {:graph_call, key, graph_bin, body, keep, self()}, lendable)
  end

  # whether `args` hold a resident handle, and whether all of them are small
  defp arg_kinds([{_type, _shape, data} | rest], refs, small) when is_binary(data),
    do: arg_kinds(rest, refs, small and byte_size(data) < @big_binary)

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
  Makes `tensors` (wire tensors) resident on the worker; returns one handle each, owned by the
  calling process.
  """
  def put(tensors, opts \\ []) when is_list(tensors) do
    request(opts, {:put, encode_body([tensors]), self()})
  end

  @doc "The data of resident `handles`, as wire tensors."
  def fetch(handles, opts \\ []) when is_list(handles), do: call(:fetch, [handles], opts)

  @doc "Frees resident `handles` (unknown ones are ignored); returns how many were freed."
  def free(handles, opts \\ []) when is_list(handles) do
    request([{:retryable, false} | opts], {:free, handles})
  end

  @doc """
  Frees resident `handles` without waiting for the worker: returns at once how many of them
  were live (owned by some process; each handle counts once, however many processes release
  it), and the worker's client sends the `free` request and drops its reply. A later request
  of the same process reaches the worker after the free, so a call on a released handle fails
  with `UnknownHandle`. Used by `Nx.backend_deallocate/1`.

  On a worker of this node the calling process takes the handles out of the worker's table of
  live handles (an ETS table) and sends the free without waiting for any reply; on another
  node, the worker's GenServer answers.
  """
  def release(handles, opts \\ []) when is_list(handles) do
    server = Keyword.get(opts, :server, __MODULE__)

    case GenServer.whereis(server) do
      pid when is_pid(pid) and node(pid) == node() ->
        count =
          try do
            take_live(local(pid).live, handles)
          rescue
            # the worker (and its table) is gone, and its tensors with it
            ArgumentError -> 0
          catch
            :exit, _ -> 0
          end

        send(pid, {:nx_jax_released, handles})
        count

      _ ->
        request([{:retryable, false} | opts], {:release, handles})
    end
  end

  # takes `handles` out of a worker's table of live handles; how many were there
  defp take_live(table, handles), do: Enum.count(handles, &(:ets.take(table, &1) != []))

  # What callers on this node share with a worker (its table of live handles, its port and its
  # keeper, the atomics and the table of graph keys of "Lent port", its OS pid), asked once per
  # calling process and worker; with this process's pid_word/1 (`me`, "Lent port").
  defp local(pid) do
    case Process.get({__MODULE__, :local, pid}) do
      nil ->
        local = Map.put(GenServer.call(pid, :local), :me, pid_word(self()))
        Process.put({__MODULE__, :local, pid}, local)
        local

      local ->
        local
    end
  end

  @doc """
  Counters of this worker: the Python side's (`compiles`, `cache_hits`, `runs`, `errors`,
  `graph_loads`, `unknown_graphs`, `resident`) and this client's (`graph_sends`: calls that
  carried the graph, `key_calls`: calls that carried only its key, `graph_resends`: graphs sent
  again after `UnknownGraph`).
  """
  def stats(opts \\ []) do
    server = Keyword.get(opts, :server, __MODULE__)
    Map.merge(call(:stats, [], opts), GenServer.call(server, :client_stats))
  end

  @doc "The operating-system pid of the worker's Python process."
  def os_pid(server \\ __MODULE__), do: GenServer.call(server, :os_pid)

  @doc "The number of requests sent and not yet answered (used by `NxJax.Pool` placement)."
  def pending(server \\ __MODULE__), do: GenServer.call(server, :pending)

  @doc "How long a worker started with `opts` polls for the next request (`:spin_us`)."
  def spin_us(opts \\ []) do
    Keyword.get_lazy(opts, :spin_us, fn ->
      Application.get_env(:nx_jax, :spin_us, @default_spin_us)
    end)
  end

  # The reductions each poll of a polling caller counts (@poll_reductions): bench/lib.exs polls
  # the raw echo of its baseline the same way.
  @doc false
  def poll_reductions, do: @poll_reductions

  @doc """
  How long a caller polls for its reply before it sleeps, in microseconds
  (`config :nx_jax, reply_spin_us: #{@default_reply_spin_us}`, the default, read when the
  application starts or by `NxJax.Pool.reload_config/0`; 0 never polls; per call, the
  `:reply_spin_us` option; docs/DEPLOYMENT.md). A process whose replies keep coming
  after its polling is over (long steps, a queue of calls ahead of its own) stops polling until
  a reply comes within it again, trying again every #{@respin_every}th call.
  """
  def reply_spin_us do
    # (read when the application starts, NxJax.Pool.reload_config/0; the environment itself
    # where it did not start)
    case :persistent_term.get(@reply_spin_us, :unset) do
      :unset -> :application.get_env(:nx_jax, :reply_spin_us, @default_reply_spin_us)
      us -> us
    end
  end

  @doc false
  def load_config do
    us = Application.get_env(:nx_jax, :reply_spin_us, @default_reply_spin_us)
    :persistent_term.put(@reply_spin_us, us)
  end

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

  defp request(opts, message, lendable \\ false) do
    server = Keyword.get(opts, :server, __MODULE__)
    timeout = Keyword.get(opts, :timeout, @default_timeout)
    spin_us = Keyword.get_lazy(opts, :reply_spin_us, &reply_spin_us/0)

    unless is_integer(spin_us) and spin_us >= 0 do
      raise ArgumentError,
            "reply_spin_us must be a non-negative integer (microseconds), got: #{inspect(spin_us)}"
    end

    # (a retry waits for a worker other than this one under the name)
    dest = GenServer.whereis(server)
    on_hook = Keyword.get(opts, :on_hook)
    reply = if lendable and on_hook == nil, do: lent_call(dest, message, {timeout, spin_us})

    case reply || call_server(dest, server, message, {timeout, spin_us}, on_hook) do
      {:ok, result} ->
        result

      {:hook_failed, kind, reason, stacktrace} ->
        :erlang.raise(kind, reason, stacktrace)

      {:error, {"WorkerExited", text, traceback}} = error ->
        if retry?(opts, server) do
          await_restart(server, dest, error)
          request([{:retry, false} | opts], message, lendable)
        else
          raise NxJax.WorkerError, class: "WorkerExited", message: text, traceback: traceback
        end

      {:error, {class, text, traceback}} ->
        raise NxJax.WorkerError, class: class, message: text, traceback: traceback
    end
  end

  # As GenServer.call, but the caller waits in a receive loop that also runs the hooks of the
  # request (`{:nx_jax_hook, tag, index, tensors}`, sent by the GenServer while the worker
  # computes) in this process. The reply address is an alias (reply_to/0), so a reply that comes
  # after we gave up is dropped; `tag`, a new reference, tells this call's messages apart. The
  # worker enforces the deadline itself (and replaces its Python process past it), whether or not
  # this caller is still alive to wait; the extra time here only covers a GenServer that cannot
  # answer at all.
  defp call_server(dest, server, message, {timeout, _spin_us} = limits, on_hook) do
    case dest do
      nil ->
        {:error, {"WorkerExited", "no worker is running (#{inspect(server)})", ""}}

      dest ->
        {to, own} = reply_to()
        tag = make_ref()
        send(dest, {:nx_jax_request, {to, tag}, timeout, message})
        reply = wait_reply(tag, dest, limits, @deadline_grace, on_hook, nil)
        if own, do: :erlang.unalias(to)
        reply
    end
  end

  # Waits for the reply of the request just sent (await_reply/5), until `timeout` plus `grace`
  # from now; `lent` is nil, or `{id, os_pid}` for a call that borrowed the port (its reply
  # then comes from the port, `tag`).
  defp wait_reply(tag, dest, {timeout, spin_us}, grace, on_hook, lent) do
    now = System.monotonic_time(:microsecond)
    limit = if timeout == :infinity, do: :infinity, else: div(now, 1000) + timeout + grace
    spin = spin_until(spin_us, now, limit)

    wait = %{
      dest: dest,
      monitor: nil,
      limit: limit,
      timeout: timeout,
      on_hook: on_hook,
      lent: lent
    }

    case await_reply(tag, if(spin, do: wait, else: watch(wait)), nil, spin, 1) do
      # (a reply taken while polling came within reply_spin_us: no clock needed)
      {:polled, reply} ->
        in_time()
        reply

      reply ->
        note_wait(spin_us, now)
        reply
    end
  end

  # Lent port (docs/ARCHITECTURE.md): a key-only graph call, of plain arguments, whose results
  # come back, without hooks, to a worker of this node whose GenServer has no request in flight
  # and does not wait for its port, borrows the port: it makes itself the port's connected
  # process, writes its request, takes the reply from the port itself and gives the port back.
  # The reply skips the hop through the GenServer (1-5 us of a 22 us call in paired blocks;
  # docs/BENCHMARKS.md section 1). The worker's atomics (`lend`) say who holds the port: @lock
  # is 0 (free: the port rests with its keeper), @gen_server (it has requests in flight) or the
  # borrower, as its pid_word/1, so that the GenServer can monitor it (watch_borrower/1);
  # @lent_id is the borrower's request id. The ids of all requests come from @ids, so none is
  # used twice. Returns nil where the call goes through the GenServer instead.
  defp lent_call(dest, {:graph_call, key, _graph, args, false, _owner}, limits)
       when is_pid(dest) and node(dest) == node() do
    with %{lend: lend, me: me} = local when me != nil <- local_or_nil(dest),
         0 <- :atomics.get(lend, @gen_server_waits),
         true <- known?(local.known, key),
         :ok <- :atomics.compare_exchange(lend, @lock, 0, me) do
      id = :atomics.add_get(lend, @ids, 1)
      :atomics.put(lend, @lent_id, id)

      reply =
        if take_port(local.keeper, local.port, graph_call_frame(id, key, nil, args, false)) do
          :atomics.add(lend, @lent_calls, 1)
          # (no grace: the caller enforces the deadline of its own request, after_lent/3)
          wait_reply(local.port, dest, limits, 0, nil, {id, local.os_pid})
        end

      give_back(dest, local, me)
      after_lent(dest, key, reply)
    else
      _ -> nil
    end
  end

  defp lent_call(_dest, _message, _limits), do: nil

  # This process as one positive integer: the ID and serial of its pid, from the external term
  # format (NEW_PID_EXT: ..., ID::32, Serial::32, Creation::32); the GenServer turns it back into
  # the pid with its node's own encoding (pid_of_word/1). Kept with the worker's local/1.
  # (nil for an encoding other than NEW_PID_EXT, or an ID past 31 bits: then no call of this
  # process borrows a port)
  @doc false
  def pid_word(pid) when node(pid) == node() do
    with <<131, 88, _::binary>> = bin <- :erlang.term_to_binary(pid),
         <<id::32, serial::32, _creation::32>> when id < 2_147_483_648 <-
           binary_part(bin, byte_size(bin) - 12, 12) do
      id * 4_294_967_296 + serial
    else
      _ -> nil
    end
  end

  defp local_or_nil(pid) do
    local(pid)
  catch
    :exit, _ -> nil
  end

  # (the table is gone with its worker)
  defp known?(known, key) do
    :ets.member(known, key)
  rescue
    ArgumentError -> false
  end

  # Connects the port to this process and writes `frame`; false if the port is closed. The
  # connect is the port message `{owner, {:connect, pid}}`, `owner` being the port's keeper
  # while the port is free (keeper/2), which the port answers `{port, :connected}`:
  # port_connect/2 would link this process to the port, and a caller killed while linked, even
  # in the instant before an unlink, closes the port (a test of 3000 kills closed it within 30).
  # Nothing takes the port from a live borrower.
  defp take_port(keeper, port, frame) do
    send(port, {keeper, {:connect, self()}})
    Port.command(port, frame)
  rescue
    ArgumentError -> false
  end

  # Connects the port back to its keeper, frees the port (telling the GenServer if it waits for
  # it) and hands the GenServer what came from the port after the reply, in order.
  defp give_back(dest, %{port: port, keeper: keeper, lend: lend}, me) do
    try do
      :erlang.port_connect(port, keeper)
    rescue
      # the port closed (with it, its keeper)
      ArgumentError -> :ok
    end

    # (freed before the receive of forward_port_messages/2, where a kill could stop this
    # process: a port connected to the GenServer but not freed stalls it, watch_borrower/1)
    :atomics.compare_exchange(lend, @lock, me, 0)
    if :atomics.get(lend, @gen_server_waits) != 0, do: send(dest, :nx_jax_port_back)
    forward_port_messages(port, dest)
  end

  defp forward_port_messages(port, dest) do
    receive do
      {^port, message} ->
        send(dest, {port, message})
        forward_port_messages(port, dest)
    after
      0 -> :ok
    end
  end

  # The worker forgot the graph: the GenServer is told, and the call goes through it (which
  # sends the graph again). Past its deadline, the caller has the GenServer replace the worker,
  # as for its own requests.
  defp after_lent(dest, key, {:error, {"UnknownGraph", _, _}}) do
    send(dest, {:nx_jax_forget, key})
    nil
  end

  defp after_lent(dest, _key, {:expired, error}) do
    send(dest, :nx_jax_lent_expired)
    error
  end

  defp after_lent(_dest, _key, reply), do: reply

  # The reply address of a call, and whether it is the call's own: the process's kept alias,
  # the same from call to call (making and removing an alias for each call cost 0.7-0.9 us, a
  # third of this client's time; docs/BENCHMARKS.md section 1). A call that gives up on its
  # reply (past its limit, or its worker went down) removes the kept alias (drop_reply_alias/0),
  # so a reply that comes later is dropped, and the next call makes a new one. A call made by a
  # hook function while another call waits (`@in_hook`) has an alias of its own, so that its
  # giving up cannot drop the waiting call's reply.
  defp reply_to do
    if Process.get(@in_hook), do: {:erlang.alias(), true}, else: {kept_alias(), false}
  end

  defp kept_alias do
    with nil <- Process.get(@reply_alias) do
      to = :erlang.alias()
      Process.put(@reply_alias, to)
      to
    end
  end

  defp drop_reply_alias do
    unless Process.get(@in_hook) do
      with to when to != nil <- Process.delete(@reply_alias), do: :erlang.unalias(to)
    end

    :ok
  end

  # `spin` is nil or the monotonic microsecond until which the caller polls its mailbox instead
  # of sleeping in `receive`: a busy scheduler notices the worker's reply on the port soon,
  # where a sleeping one is woken tens of microseconds late under OTP's default scheduler
  # polling (`+IOs true`; docs/BENCHMARKS.md section 1). How soon depends on the reductions
  # run on the scheduler, as it checks its pollset once enough have run since its last check:
  # so each poll counts a whole time slice (@poll_reductions), which also schedules the caller
  # out, as a yield would. Polls that yielded with `:erlang.yield/0` counted a few reductions
  # each, and the reply waited for many of them: the small call took 2.5-3 us longer (paired
  # blocks). The caller monitors the worker only once it stops polling: a call answered while
  # it polls sends the worker no monitor signals (and a local worker that dies meanwhile ends
  # the polling: its liveness is checked every @alive_every-th poll, as checking it costs more
  # than a poll, `polls` counting them). The polling receive is its own, with a literal
  # `after 0` and no `:DOWN` clause (no monitor yet): with one receive for both phases (a
  # timeout computed at run time, even 0, and a third clause), a borrowed call took 0.8 us
  # longer (paired blocks, docs/BENCHMARKS.md section 1).
  defp await_reply(tag, wait, failed, spin, polls) when spin != nil do
    receive do
      {^tag, reply} ->
        got_reply(tag, wait, failed, spin, polls, reply)

      {:nx_jax_hook, ^tag, index, tensors} ->
        got_hook(tag, wait, failed, spin, polls, index, tensors)
    after
      0 ->
        if System.monotonic_time(:microsecond) < spin and
             (rem(polls, @alive_every) != 0 or alive?(wait.dest)) do
          :erlang.bump_reductions(@poll_reductions)
          await_reply(tag, wait, failed, spin, polls + 1)
        else
          await_reply(tag, watch(wait), failed, nil, polls)
        end
    end
  end

  defp await_reply(tag, %{monitor: monitor} = wait, failed, nil, polls) do
    receive do
      {^tag, reply} ->
        got_reply(tag, wait, failed, nil, polls, reply)

      {:nx_jax_hook, ^tag, index, tensors} ->
        got_hook(tag, wait, failed, nil, polls, index, tensors)

      {:DOWN, ^monitor, _, _, reason} ->
        drop_reply_alias()
        failed || {:error, down_error(reason, wait.dest)}
    after
      remaining(wait.limit) ->
        unwatch(wait)
        drop_reply_alias()
        failed || timed_out(wait)
    end
  end

  defp got_reply(tag, wait, failed, spin, polls, reply) do
    case settle(wait, tag, reply) do
      :more ->
        await_reply(tag, wait, failed, spin, polls)

      reply ->
        unwatch(wait)
        reply = if failed, do: failed, else: reply
        if spin, do: {:polled, reply}, else: reply
    end
  end

  defp got_hook(tag, wait, failed, spin, polls, index, tensors),
    do: await_reply(tag, wait, failed || run_hook(wait.on_hook, index, tensors), spin, polls)

  # The reply of a call (from its GenServer), or what came from the port of a lent call
  # (`tag` is then the port): its own reply, the exit status of a worker that died, or a frame
  # for the GenServer (a log line; a late reply to a call that gave up), handed to it (:more).
  defp settle(%{lent: nil}, _tag, reply), do: reply

  defp settle(%{lent: {id, os_pid}, dest: dest}, port, message) do
    case message do
      {:data, frame} ->
        case lent_reply(frame, id) do
          {^id, reply} ->
            reply

          _other ->
            send(dest, {port, message})
            :more
        end

      {:exit_status, status} ->
        send(dest, {port, message})
        {:error, {"WorkerExited", exited_text(os_pid, status), ""}}

      _other ->
        :more
    end
  end

  defp timed_out(%{lent: nil, timeout: timeout}),
    do: {:error, {"Timeout", "no reply from the worker within #{timeout} ms", ""}}

  defp timed_out(%{lent: {_id, os_pid}, timeout: timeout}),
    do: {:expired, {:error, {"Timeout", busy_text(timeout, os_pid), ""}}}

  defp watch(wait), do: %{wait | monitor: Process.monitor(wait.dest)}

  defp unwatch(%{monitor: nil}), do: :ok
  defp unwatch(%{monitor: monitor}), do: Process.demonitor(monitor, [:flush])

  defp alive?(pid) when is_pid(pid) and node(pid) == node(), do: Process.alive?(pid)
  defp alive?(_remote), do: true

  # A caller whose replies keep coming after its spin is over (long steps, or a queue of other
  # calls ahead of its own) stops polling, where it would only burn a scheduler: it polls again
  # once a reply comes within the spin, and tries every @respin_every-th call. The count of
  # such late replies in a row is kept per process (@late_replies). A spin never outlasts the
  # caller's limit.
  defp spin_until(0, _now, _limit), do: nil

  defp spin_until(us, now, limit) do
    late = Process.get(@late_replies, 0)

    cond do
      late > 0 and rem(late, @respin_every) != 0 -> nil
      limit == :infinity -> now + us
      true -> min(now + us, limit * 1000)
    end
  end

  defp note_wait(0, _sent), do: :ok

  defp note_wait(us, sent) do
    if System.monotonic_time(:microsecond) - sent > us,
      do: Process.put(@late_replies, Process.get(@late_replies, 0) + 1),
      else: in_time()
  end

  # a reply within the polling time: the count of late replies starts over
  defp in_time do
    if Process.get(@late_replies) != nil, do: Process.delete(@late_replies)
    :ok
  end

  # A hook that raises fails the call once its reply arrives (the worker finishes the run);
  # the hooks after it are not called.
  defp run_hook(nil, _index, _tensors), do: nil

  defp run_hook(on_hook, index, tensors) do
    outer = Process.put(@in_hook, true)

    try do
      on_hook.(index, tensors)
      nil
    catch
      kind, reason -> {:hook_failed, kind, reason, __STACKTRACE__}
    after
      if outer == nil, do: Process.delete(@in_hook)
    end
  end

  defp remaining(:infinity), do: :infinity
  defp remaining(limit), do: max(limit - System.monotonic_time(:millisecond), 0)

  defp down_error(:noproc, dest),
    do: {"WorkerExited", "no worker is running (#{inspect(dest)})", ""}

  defp down_error(:noconnection, dest) do
    node = if is_pid(dest), do: node(dest), else: elem(dest, 1)
    {"WorkerExited", "the node of the worker (#{node}) went down", ""}
  end

  defp down_error(reason, _dest),
    do: {"WorkerExited", "the worker stopped: #{inspect(reason)}", ""}

  defp retry?(opts, server) do
    is_atom(server) and Keyword.get(opts, :retry, true) and Keyword.get(opts, :retryable, true)
  end

  # Waits until a worker other than `before` is registered under `server`.
  defp await_restart(server, before, {:error, {_, text, traceback}}, tries \\ 500) do
    case GenServer.whereis(server) do
      pid when is_pid(pid) and pid != before ->
        :ok

      _ when tries > 0 ->
        Process.sleep(20)
        await_restart(server, before, {:error, {nil, text, traceback}}, tries - 1)

      _ ->
        raise NxJax.WorkerError,
          class: "WorkerExited",
          message: text <> "; no new worker was registered as #{inspect(server)} to retry on",
          traceback: traceback
    end
  end

  ## External term format

  @doc """
  Encodes `term` as external-term-format iodata equal, byte for byte once flattened, to a
  valid encoding of `term` (`:erlang.binary_to_term/1` gives `term` back); binaries of 64 KiB
  or more are referenced by the iodata, not copied.

  ## Examples

      iex> term = {:a, [1, <<0::size(65536)-unit(8)>>], %{b: 2.5}}
      iex> :erlang.binary_to_term(IO.iodata_to_binary(NxJax.Worker.encode_iodata(term))) == term
      true
  """
  def encode_iodata(term), do: [131 | encode_body(term)]

  defp encode_body(term) do
    if big_binary?(term), do: encode_big(term), else: small_body(term)
  end

  # {:"C", id, :nx_jax, function, args}: the version byte, the tuple header and :"C"; the module
  <<131, c_atom::binary>> = :erlang.term_to_binary(:C)
  <<131, module_atom::binary>> = :erlang.term_to_binary(:nx_jax)
  @request_head <<131, 104, 5>> <> c_atom
  @module_atom module_atom
  # the atoms of call's [key, graph | nil, args, keep]
  <<131, nil_atom::binary>> = :erlang.term_to_binary(nil)
  <<131, true_atom::binary>> = :erlang.term_to_binary(true)
  <<131, false_atom::binary>> = :erlang.term_to_binary(false)
  @nil_atom nil_atom
  @true_atom true_atom
  @false_atom false_atom

  # the function's atom, that of call (each graph call's) encoded once
  <<131, call_atom::binary>> = :erlang.term_to_binary(:call)
  @call_atom call_atom
  # the head of a reply {:r, id, result} as the worker encodes it (lent_reply/2)
  @reply_head <<131, 104, 3, 115, 1, ?r>>
  defp function_atom(:call), do: @call_atom
  defp function_atom(function), do: small_body(function)

  defp request_header(id, function),
    do: [@request_head, encode_id(id), @module_atom, function_atom(function)]

  # request `id`: call(key, graph | nil, args, keep), `args` encoded (encode_args/1)
  defp graph_call_frame(id, key, graph, args, keep) do
    graph = if graph, do: encode_body(graph), else: @nil_atom
    keep = if keep, do: @true_atom, else: @false_atom

    [
      request_header(id, :call),
      <<108, 4::32, 109, byte_size(key)::32>>,
      key,
      graph,
      args,
      keep,
      106
    ]
  end

  # a frame from the worker: a reply as {id, {:ok, result} | {:error, {class, message,
  # traceback}}}, anything else (a log line, a hook's values) as it is
  defp decode_reply(frame) do
    case decode_frame(frame) do
      {:r, id, result} ->
        {id, {:ok, result}}

      {:e, id, {:python, class, message, traceback}} ->
        {id, {:error, {to_text(class), to_text(message), to_text(traceback)}}}

      other ->
        other
    end
  end

  # The reply of a borrowed call: as decode_reply/1, read straight from the frame when it is the
  # common one, `{:r, id, [tensor, ...]}` with this call's `id`, atoms as the worker encodes them
  # (SMALL_ATOM_EXT; a third of the time of binary_to_term/1; the binaries are sub-binaries of
  # the frame, as decode_frame/1's); anything else goes to decode_reply/1.
  @doc false
  def lent_reply(<<@reply_head, 98, id::32, 108, n::32, rest::binary>> = frame, id),
    do: lent_results(n, rest, [], id, frame)

  def lent_reply(<<@reply_head, 97, id, 108, n::32, rest::binary>> = frame, id),
    do: lent_results(n, rest, [], id, frame)

  def lent_reply(frame, _id), do: decode_reply(frame)

  defp lent_results(0, <<106>>, acc, id, _frame), do: {id, {:ok, :lists.reverse(acc)}}

  defp lent_results(
         n,
         <<104, 3, 104, 2, 115, 1, kind, 97, bits, 104, rank, rest::binary>>,
         acc,
         id,
         frame
       )
       when kind in [?f, ?s, ?u, ?c] do
    with {shape, <<109, size::32, data::binary-size(size), rest::binary>>} <-
           lent_dims(rank, rest, []) do
      lent_results(n - 1, rest, [{{kind_atom(kind), bits}, shape, data} | acc], id, frame)
    else
      _ -> decode_reply(frame)
    end
  end

  defp lent_results(_n, _rest, _acc, _id, frame), do: decode_reply(frame)

  defp lent_dims(0, rest, dims), do: {List.to_tuple(:lists.reverse(dims)), rest}
  defp lent_dims(k, <<97, d, rest::binary>>, dims), do: lent_dims(k - 1, rest, [d | dims])

  defp lent_dims(k, <<98, d::32, rest::binary>>, dims) when d < 2_147_483_648,
    do: lent_dims(k - 1, rest, [d | dims])

  defp lent_dims(_k, _rest, _dims), do: nil

  defp kind_atom(?f), do: :f
  defp kind_atom(?s), do: :s
  defp kind_atom(?u), do: :u
  defp kind_atom(?c), do: :c

  # the id as term_to_binary encodes it (SMALL_INTEGER_EXT, INTEGER_EXT, then bignums)
  defp encode_id(id) when id < 256, do: <<97, id>>
  defp encode_id(id) when id < 2_147_483_648, do: <<98, id::32>>
  defp encode_id(id), do: small_body(id)

  defp small_body(term) do
    <<131, body::binary>> = :erlang.term_to_binary(term)
    body
  end

  defp encode_big(bin) when is_binary(bin), do: [<<109, byte_size(bin)::32>>, bin]

  defp encode_big(tuple) when is_tuple(tuple) do
    size = tuple_size(tuple)
    header = if size < 256, do: <<104, size>>, else: <<105, size::32>>
    [header | tuple |> Tuple.to_list() |> Enum.map(&encode_body/1)]
  end

  defp encode_big(list) when is_list(list) do
    [<<108, length(list)::32>>, Enum.map(list, &encode_body/1), 106]
  end

  defp big_binary?(bin) when is_binary(bin), do: byte_size(bin) >= @big_binary
  defp big_binary?(tuple) when is_tuple(tuple), do: tuple |> Tuple.to_list() |> big_binary?()
  defp big_binary?([head | tail]), do: big_binary?(head) or big_binary?(tail)
  defp big_binary?(_other), do: false

  @doc """
  Decodes one frame (external term format). Frames under 64 KiB go to
  `:erlang.binary_to_term/1`; larger ones are decoded here so that their binaries are
  sub-binaries of `frame` (`binary_to_term/1` would copy each one).

  ## Examples

      iex> term = {:r, 1, [{{:f, 32}, {2}, <<0::size(70000)-unit(8)>>}], %{a: -3, b: "x"}}
      iex> NxJax.Worker.decode_frame(:erlang.term_to_binary(term)) == term
      true
  """
  def decode_frame(frame) when byte_size(frame) < @big_binary, do: :erlang.binary_to_term(frame)

  def decode_frame(<<131, rest::binary>> = frame) do
    case dec(rest) do
      {term, <<>>} -> term
      _ -> :erlang.binary_to_term(frame)
    end
  rescue
    _ in [FunctionClauseError, MatchError, CaseClauseError] -> :erlang.binary_to_term(frame)
  end

  defp dec(<<97, int, rest::binary>>), do: {int, rest}
  defp dec(<<98, int::signed-32, rest::binary>>), do: {int, rest}
  defp dec(<<70, float::float-64, rest::binary>>), do: {float, rest}
  defp dec(<<109, size::32, bin::binary-size(size), rest::binary>>), do: {bin, rest}
  defp dec(<<106, rest::binary>>), do: {[], rest}
  defp dec(<<104, arity, rest::binary>>), do: dec_tuple(arity, rest, [])
  defp dec(<<105, arity::32, rest::binary>>), do: dec_tuple(arity, rest, [])
  defp dec(<<119, len, name::binary-size(len), rest::binary>>), do: {atom(name, :utf8), rest}
  defp dec(<<118, len::16, name::binary-size(len), rest::binary>>), do: {atom(name, :utf8), rest}
  defp dec(<<115, len, name::binary-size(len), rest::binary>>), do: {atom(name, :latin1), rest}

  defp dec(<<100, len::16, name::binary-size(len), rest::binary>>),
    do: {atom(name, :latin1), rest}

  defp dec(<<107, len::16, chars::binary-size(len), rest::binary>>),
    do: {:binary.bin_to_list(chars), rest}

  defp dec(<<108, count::32, rest::binary>>) do
    {items, rest} = dec_many(count, rest, [])
    {tail, rest} = dec(rest)
    {items ++ tail, rest}
  end

  defp dec(<<116, count::32, rest::binary>>) do
    {items, rest} = dec_many(2 * count, rest, [])
    {items |> Enum.chunk_every(2) |> Map.new(fn [k, v] -> {k, v} end), rest}
  end

  defp dec(<<110, n, sign, digits::binary-size(n), rest::binary>>) do
    value = :binary.decode_unsigned(digits, :little)
    {if(sign == 0, do: value, else: -value), rest}
  end

  defp dec_tuple(arity, rest, _acc) do
    {items, rest} = dec_many(arity, rest, [])
    {List.to_tuple(items), rest}
  end

  defp dec_many(0, rest, acc), do: {Enum.reverse(acc), rest}

  defp dec_many(count, rest, acc) do
    {item, rest} = dec(rest)
    dec_many(count - 1, rest, [item | acc])
  end

  defp atom(name, :utf8), do: String.to_atom(name)
  defp atom(name, :latin1), do: name |> :unicode.characters_to_binary(:latin1) |> String.to_atom()

  # `config :nx_jax, numerics: :nx | :native` (else the node's NX_JAX_NUMERICS, else :nx) as
  # the worker's NX_JAX_NUMERICS (py_backend/numerics.py), unless its own `:env` sets it
  @numerics [:nx, :native]

  defp numerics_env(env) do
    if List.keymember?(env, "NX_JAX_NUMERICS", 0) do
      env
    else
      numerics = Application.get_env(:nx_jax, :numerics) || node_numerics()

      unless numerics in @numerics do
        raise ArgumentError,
              "config :nx_jax, numerics: must be one of #{inspect(@numerics)}, got: " <>
                inspect(numerics)
      end

      [{"NX_JAX_NUMERICS", Atom.to_string(numerics)} | env]
    end
  end

  defp node_numerics do
    case System.get_env("NX_JAX_NUMERICS") do
      nil -> :nx
      "nx" -> :nx
      "native" -> :native
      other -> other
    end
  end

  ## GenServer

  @impl true
  def init(opts) do
    Process.flag(:trap_exit, true)
    python = python_executable(opts)

    spin_us = spin_us(opts)

    env =
      for {k, v} <- numerics_env(Keyword.get(opts, :env, [])),
          do: {to_charlist(k), to_charlist(v)}

    port =
      Port.open({:spawn_executable, python}, [
        {:packet, 4},
        :binary,
        :nouse_stdio,
        :exit_status,
        {:args, ["-m", "py_backend", "--forward-stdio", "--spin-us", Integer.to_string(spin_us)]},
        {:cd, @project_root},
        {:env, [{~c"PYTHONUNBUFFERED", ~c"1"} | env]}
      ])

    {:os_pid, os_pid} = Port.info(port, :os_pid)
    if Keyword.get(opts, :group, false), do: NxJax.Distribution.join(self())

    lend_port =
      Keyword.get_lazy(opts, :lend_port, fn -> Application.get_env(:nx_jax, :lend_port, true) end)

    lend = :atomics.new(5, signed: true)
    # (a worker that lends no port holds it for good)
    unless lend_port, do: :atomics.put(lend, @lock, @gen_server)
    keeper = if lend_port, do: start_keeper(port)
    drain_timer = if lend_port, do: drain_timer(@drain_idle_ms)

    {:ok,
     %{
       port: port,
       pending: %{},
       python: python,
       # the graph keys sent to this Python process (read by lent calls)
       known: :ets.new(__MODULE__.Known, [:set, :protected, read_concurrency: true]),
       live: :ets.new(__MODULE__, [:set, :public, write_concurrency: true]),
       # "Lent port": who holds the port (lent_call/3), whether this GenServer holds it, and
       # while it waits for it, the requests it holds back (newest first) and the borrower
       lend: lend,
       # (nil on a worker that lends no port)
       keeper: keeper,
       # {timer, due}: the keeper's next drain (start_keeper/1), and the lent_calls count at
       # the last one
       drain_timer: drain_timer,
       drained_at: 0,
       holding: not lend_port,
       held_back: [],
       waiting: nil,
       # ids of borrowed requests whose borrower died (reclaim/1)
       stale: MapSet.new(),
       owners: %{},
       # {timer, deadline}: one timer, for the earliest deadline of the pending requests
       deadline_timer: nil,
       os_pid: os_pid,
       stdio_to: Keyword.get(opts, :stdio_to),
       counts: %{graph_sends: 0, key_calls: 0, graph_resends: 0}
     }}
  end

  @impl true
  def handle_call(:os_pid, _from, state), do: {:reply, state.os_pid, state}

  def handle_call(:pending, _from, state), do: {:reply, map_size(state.pending), state}

  def handle_call(:client_stats, _from, state) do
    lent = :atomics.get(state.lend, @lent_calls)
    counts = %{state.counts | key_calls: state.counts.key_calls + lent}
    {:reply, Map.put(counts, :lent_calls, lent), state}
  end

  def handle_call(:local, _from, state) do
    local = Map.take(state, [:live, :port, :lend, :known, :keeper, :os_pid])
    {:reply, local, state}
  end

  # A request from call_server/5 (GenServer.call's protocol, with a reply alias). `limit` is
  # `:infinity` or `{deadline, timeout}`, the deadline in monotonic milliseconds of this node.
  defp dispatch({:call, function, body}, from, limit, state) do
    send_request(state, function, body, {from, :plain, limit})
  end

  defp dispatch({:graph_call, key, graph_bin, args, keep, owner}, from, limit, state) do
    send_graph_call(state, {from, {:graph, key, graph_bin, args, keep, owner}, limit})
  end

  defp dispatch({:put, body, owner}, from, limit, state) do
    send_request(state, :put, body, {from, {:owned, owner}, limit})
  end

  defp dispatch({:free, handles}, from, limit, state) do
    {_live, state} = disown(state, handles)
    send_request(state, :free, encode_body([handles]), {from, :plain, limit})
  end

  # answered here at once (a caller on another node): the free's reply is dropped
  defp dispatch({:release, handles}, from, _limit, state) do
    {live, state} = free_released(state, handles)
    GenServer.reply(from, {:ok, live})
    state
  end

  # disowns released `handles` and sends their free, dropping its reply; returns how many of
  # them were still live
  defp free_released(state, handles) do
    {live, state} = disown(state, handles)
    {live, send_request(state, :free, encode_body([handles]), @ignore)}
  end

  # forgets `handles` (in every owner's set and in the table of live handles); returns how
  # many of them were still live
  defp disown(state, handles) do
    live = take_live(state.live, handles)

    owners =
      Map.new(state.owners, fn {pid, {monitor, owned}} ->
        {pid, {monitor, Enum.reduce(handles, owned, &MapSet.delete(&2, &1))}}
      end)

    {live, %{state | owners: owners}}
  end

  defp send_graph_call(state, {_from, {:graph, key, graph_bin, args, keep, _owner}, _} = entry) do
    {graph, state} =
      if :ets.member(state.known, key) do
        {nil, update_in(state.counts.key_calls, &(&1 + 1))}
      else
        :ets.insert(state.known, {key})
        {graph_bin, update_in(state.counts.graph_sends, &(&1 + 1))}
      end

    id = :atomics.add_get(state.lend, @ids, 1)
    enter(state, id, graph_call_frame(id, key, graph, args, keep), entry)
  end

  # `entry`: {reply address, what to do with the reply, limit}
  defp send_request(state, function, body, entry) do
    id = :atomics.add_get(state.lend, @ids, 1)
    enter(state, id, [request_header(id, function) | body], entry)
  end

  defp enter(state, id, frame, {_from, _kind, limit} = entry) do
    state = arm_deadline(state, limit)
    write(%{state | pending: Map.put(state.pending, id, entry)}, frame)
  end

  # Writes a request to the port, taking the port first if a call borrowed it ("Lent port");
  # while the borrower has it, requests are held back.
  defp write(%{holding: true} = state, frame) do
    true = Port.command(state.port, frame)
    state
  end

  defp write(%{waiting: nil} = state, frame) do
    :atomics.put(state.lend, @gen_server_waits, 1)

    case :atomics.compare_exchange(state.lend, @lock, 0, @gen_server) do
      :ok -> write(hold(state), frame)
      borrower -> watch_borrower(%{state | held_back: [frame], waiting: {borrower, nil}})
    end
  end

  defp write(state, frame), do: %{state | held_back: [frame | state.held_back]}

  # Takes the port (from its keeper, or from a borrower that died) for this GenServer's own
  # requests; port_connect/2 links nothing new: this process opened the port.
  defp hold(state) do
    :atomics.put(state.lend, @gen_server_waits, 0)
    :erlang.port_connect(state.port, self())
    %{state | holding: true}
  end

  # Frees the port once no request is in flight, so a call may borrow it: the port rests with
  # its keeper.
  defp free_port(%{holding: true, keeper: keeper, pending: pending} = state)
       when is_pid(keeper) and map_size(pending) == 0 do
    :erlang.port_connect(state.port, keeper)
    :atomics.put(state.lend, @lock, 0)
    # (a line the Python process prints while answering may come after its reply)
    drain_within(%{state | holding: false}, @drain_busy_ms)
  end

  defp free_port(state), do: state

  # The port's keeper: the port's connected process while it is free, kept suspended
  # (:erlang.suspend_process/1). A call that borrows the port connects it with the port message
  # `{keeper, {:connect, pid}}`, which the port answers to the keeper: a suspended process is
  # not scheduled for a message, so the answer wakes no process and no scheduler thread. (With
  # this GenServer as the port's owner at rest, each borrowed call woke it, on another scheduler
  # as often as not: 17 reductions of its own per call, and on 2 cores 4-10 us more per call on
  # average and 5-9 us more CPU; docs/BENCHMARKS.md section 1.) What the port sends while it
  # rests (a log line, the exit status of a Python process that died) waits in the keeper's
  # queue until drain/1 hands it over. Linked to this GenServer, and through port_connect/2 to
  # the port.
  defp start_keeper(port) do
    keeper = spawn_link(fn -> keeper(port, []) end)
    :erlang.port_connect(port, keeper)
    :erlang.suspend_process(keeper)
    keeper
  end

  defp drain_timer(ms) do
    now = System.monotonic_time(:millisecond)
    {:erlang.start_timer(now + ms, self(), :nx_jax_drain, abs: true), now + ms}
  end

  # (moves the keeper's next drain up to within `ms`)
  defp drain_within(%{drain_timer: {timer, due}} = state, ms) do
    if due > System.monotonic_time(:millisecond) + ms do
      :erlang.cancel_timer(timer)
      %{state | drain_timer: drain_timer(ms)}
    else
      state
    end
  end

  defp keeper(port, kept) do
    receive do
      {^port, :connected} ->
        keeper(port, kept)

      {:nx_jax_drain, from, ref} ->
        send(from, {ref, Enum.reverse(kept)})
        keeper(port, [])

      message ->
        keeper(port, [message | kept])
    end
  end

  # What came from the port while it rested with the keeper (the keeper runs only for this).
  defp drain(%{keeper: nil}), do: []

  defp drain(%{keeper: keeper}) do
    ref = make_ref()
    :erlang.resume_process(keeper)

    try do
      send(keeper, {:nx_jax_drain, self(), ref})

      receive do
        {^ref, kept} -> kept
      after
        5_000 -> []
      end
    after
      :erlang.suspend_process(keeper)
    end
  rescue
    # the keeper is gone (and with it the port: the GenServer stops on its exit)
    ArgumentError -> []
  end

  # Hands what the keeper holds to handle_info/2, in order (a reply-less frame of the port: a
  # log line, a stale reply; or the exit status of the Python process).
  defp drain_into(state) do
    Enum.reduce_while(drain(state), {:noreply, state}, fn message, {:noreply, state} ->
      case handle_info(message, state) do
        {:noreply, state} -> {:cont, {:noreply, state}}
        stop -> {:halt, stop}
      end
    end)
  end

  # (only when the keeper holds something: a log line must not pass one printed before it)
  defp drain_pending(%{keeper: keeper} = state) when is_pid(keeper) do
    case Process.info(keeper, :message_queue_len) do
      {:message_queue_len, n} when n > 0 -> drain_into(state)
      _ -> {:noreply, state}
    end
  end

  defp drain_pending(state), do: {:noreply, state}

  # Waits for the borrower (`word`, its pid_word/1) to give the port back (its
  # :nx_jax_port_back), monitoring it: one that dies holding the port (before or after
  # connecting it, or before freeing it) is taken for gone, and the port taken back.
  defp watch_borrower(%{waiting: {word, nil}} = state) do
    monitor = Process.monitor(pid_of_word(word))
    %{state | waiting: {word, monitor}}
  end

  # The local pid of `word` (pid_word/1): this process's own encoding (NEW_PID_EXT) with the
  # word's ID and serial. Taken now, not when the worker started: a node that starts
  # distribution later changes its name, and a pid encoded under the old name is another
  # node's (a monitor on it fails at once).
  defp pid_of_word(word) do
    bin = :erlang.term_to_binary(self())
    size = byte_size(bin)
    id_serial = <<div(word, 4_294_967_296)::32, rem(word, 4_294_967_296)::32>>

    :erlang.binary_to_term(
      binary_part(bin, 0, size - 12) <> id_serial <> binary_part(bin, size - 4, 4)
    )
  end

  # The port is free again, or its borrower is gone: take it and write what was held back.
  defp retake(%{waiting: {word, monitor}} = state, borrower_gone) do
    case :atomics.compare_exchange(state.lend, @lock, 0, @gen_server) do
      :ok ->
        if monitor, do: Process.demonitor(monitor, [:flush])
        took(state)

      ^word when borrower_gone ->
        reclaim(state)

      ^word ->
        state

      other ->
        if monitor, do: Process.demonitor(monitor, [:flush])
        watch_borrower(%{state | waiting: {other, nil}})
    end
  end

  # Takes the port from a borrower that died: the reply to its request, if it comes, is dropped
  # (stale; the ids of the last @max_stale such requests are kept, as a request may never have
  # been written). A caller that dies while its call holds the port is no fault of the worker's.
  defp reclaim(%{waiting: {word, _monitor}} = state) do
    case :atomics.compare_exchange(state.lend, @lock, word, @gen_server) do
      :ok ->
        Logger.debug("nx_jax: took the worker's port back from a caller that died holding it")
        stale = if MapSet.size(state.stale) < @max_stale, do: state.stale, else: MapSet.new()
        took(%{state | stale: MapSet.put(stale, :atomics.get(state.lend, @lent_id))})

      # it gave the port back before it died
      _ ->
        retake(%{state | waiting: {word, nil}}, false)
    end
  end

  defp took(state) do
    state = %{hold(state) | waiting: nil}
    Enum.each(Enum.reverse(state.held_back), &(true = Port.command(state.port, &1)))
    %{state | held_back: []}
  end

  # One timer serves every deadline: it is set for the earliest one and only moved when a
  # request comes with an earlier one (with equal timeouts, never), so a request costs no timer.
  defp arm_deadline(state, :infinity), do: state

  defp arm_deadline(%{deadline_timer: {_, at}} = state, {deadline, _}) when at <= deadline,
    do: state

  defp arm_deadline(state, {deadline, _}) do
    with {timer, _} <- state.deadline_timer, do: :erlang.cancel_timer(timer)
    timer = :erlang.start_timer(deadline, self(), :nx_jax_deadlines, abs: true)
    %{state | deadline_timer: {timer, deadline}}
  end

  @impl true
  def handle_info({port, {:data, frame}}, %{port: port} = state) do
    case decode_reply(frame) do
      {id, reply} ->
        {:noreply, state |> complete(id, reply) |> free_port()}

      {:log, stream, line} ->
        with {:noreply, state} <- drain_pending(state) do
          log_line(state, stream, line)
          {:noreply, state}
        end

      {:hook, id, index, tensors} ->
        # a hook fired while request `id` runs: its caller runs the Elixir function
        with %{^id => {{to, tag}, _, _}} <- state.pending,
             do: send(to, {:nx_jax_hook, tag, index, tensors})

        {:noreply, state}

      other ->
        Logger.error("nx_jax worker sent an unexpected message: #{inspect(other, limit: 20)}")
        {:noreply, state}
    end
  end

  def handle_info({port, {:exit_status, status}}, %{port: port} = state) do
    text = exited_text(state.os_pid, status)
    Logger.warning("nx_jax: #{text}; its supervisor starts a new one")
    fail_pending(state, {"WorkerExited", text, ""})
    {:stop, {:shutdown, {:worker_exited, status}}, %{state | pending: %{}}}
  end

  def handle_info({:EXIT, port, reason}, %{port: port} = state) do
    # (the exit status went to the keeper if the port rested with it)
    case drain_into(state) do
      {:noreply, state} -> port_closed(state, reason)
      stop -> stop
    end
  end

  # The keeper's drain (start_keeper/1): every @drain_busy_ms while calls borrow the port (the
  # keeper holds an answer to each), else every @drain_idle_ms, and @drain_busy_ms after the
  # GenServer's own requests (free_port/1).
  def handle_info({:timeout, timer, :nx_jax_drain}, %{drain_timer: {timer, _}} = state) do
    lent = :atomics.get(state.lend, @lent_calls)
    next = if lent != state.drained_at, do: @drain_busy_ms, else: @drain_idle_ms
    drain_pending(%{state | drain_timer: drain_timer(next), drained_at: lent})
  end

  def handle_info({:timeout, _moved, :nx_jax_drain}, state), do: {:noreply, state}

  def handle_info({:EXIT, keeper, reason}, %{keeper: keeper} = state),
    do: {:stop, {:shutdown, {:keeper_exited, reason}}, state}

  # The earliest deadline passed: answer every request past its deadline with a timeout and
  # replace the worker (kill its Python process; the exit_status that follows fails the other
  # pending calls and stops this GenServer, and the supervisor starts a new worker); otherwise
  # set the timer for the next deadline. A timer moved since is ignored.
  def handle_info({:timeout, timer, :nx_jax_deadlines}, %{deadline_timer: {timer, _}} = state) do
    now = System.monotonic_time(:millisecond)

    {expired, pending} =
      Enum.split_with(state.pending, fn {_id, {_, _, limit}} -> passed?(limit, now) end)

    state = %{state | pending: Map.new(pending), deadline_timer: nil}

    for {_id, {from, _, {_, timeout}}} <- expired, from != nil do
      GenServer.reply(from, {:error, {"Timeout", busy_text(timeout, state.os_pid), ""}})
    end

    if expired != [], do: replace_python(state)

    case for {_id, {_, _, {_, _} = limit}} <- pending, do: limit do
      [] -> {:noreply, state}
      limits -> {:noreply, arm_deadline(state, Enum.min(limits))}
    end
  end

  def handle_info({:timeout, _stale, :nx_jax_deadlines}, state), do: {:noreply, state}

  # a call that borrowed the port passed its deadline
  def handle_info(:nx_jax_lent_expired, state) do
    replace_python(state)
    {:noreply, state}
  end

  # a borrowed call found that the Python side forgot the graph `key`
  def handle_info({:nx_jax_forget, key}, state) do
    if :ets.member(state.known, key) do
      :ets.delete(state.known, key)
      {:noreply, update_in(state.counts.graph_resends, &(&1 + 1))}
    else
      {:noreply, state}
    end
  end

  def handle_info(:nx_jax_port_back, %{waiting: {_, _}} = state),
    do: {:noreply, retake(state, false)}

  def handle_info({:DOWN, monitor, :process, _, _}, %{waiting: {_, monitor}} = state),
    do: {:noreply, retake(state, true)}

  def handle_info({:DOWN, _monitor, :process, pid, _reason}, state) do
    case Map.pop(state.owners, pid) do
      {nil, _} ->
        {:noreply, state}

      {{_monitor, handles}, owners} ->
        state = %{state | owners: owners}
        Enum.each(handles, &:ets.delete(state.live, &1))

        if MapSet.size(handles) == 0 do
          {:noreply, state}
        else
          body = encode_body([MapSet.to_list(handles)])
          {:noreply, send_request(state, :free, body, @ignore)}
        end
    end
  end

  # release/2 on this node took `handles` out of the live table: free them, dropping the reply
  def handle_info({:nx_jax_released, handles}, state) do
    {_live, state} = free_released(state, handles)
    {:noreply, state}
  end

  def handle_info({:nx_jax_request, from, timeout, message}, state) do
    limit =
      if timeout == :infinity,
        do: :infinity,
        else: {System.monotonic_time(:millisecond) + timeout, timeout}

    {:noreply, dispatch(message, from, limit, state)}
  end

  def handle_info(_other, state), do: {:noreply, state}

  @impl true
  def terminate(_reason, state) do
    if Port.info(state.port) != nil, do: Port.close(state.port)
    # (a keeper outlives a GenServer that stops with reason :normal)
    if state.keeper, do: Process.exit(state.keeper, :kill)
    :ok
  end

  defp port_closed(state, reason) do
    text =
      "the Python worker (OS pid #{state.os_pid}) exited: its port closed " <>
        "(#{inspect(reason)}) while a request was being written, so its exit status is unknown"

    fail_pending(state, {"WorkerExited", text, ""})
    {:stop, {:shutdown, {:port_closed, reason}}, %{state | pending: %{}}}
  end

  defp exited_text(os_pid, status),
    do: "the Python worker (OS pid #{os_pid}) exited with status #{describe(status)}"

  defp busy_text(timeout, os_pid) do
    "no reply from the worker within #{timeout} ms; the worker (OS pid #{os_pid}) " <>
      "was busy past the deadline and is replaced (raise :timeout for longer calls)"
  end

  # kills the Python process: its exit status then fails the pending calls and stops this
  # GenServer, and the supervisor starts a new worker
  defp replace_python(state) do
    Logger.warning("nx_jax: a call passed its deadline; killing the worker #{state.os_pid}")
    System.cmd("kill", ["-KILL", Integer.to_string(state.os_pid)], stderr_to_stdout: true)
  end

  defp describe(status) when status > 128,
    do: "#{status} (killed by signal #{status - 128})"

  defp describe(status), do: Integer.to_string(status)

  defp log_line(state, stream, line) do
    stream = to_text(stream)
    line = to_text(line)
    text = "nx_jax worker #{state.os_pid} #{stream}: #{line}"
    if stream == "stderr", do: Logger.warning(text), else: Logger.info(text)
    if state.stdio_to, do: send(state.stdio_to, {:nx_jax_stdio, stream, line})
  end

  defp fail_pending(state, error) do
    Enum.each(state.pending, fn
      {_id, {nil, _, _}} -> :ok
      {_id, {from, _, _}} -> GenServer.reply(from, {:error, error})
    end)
  end

  defp passed?(:infinity, _now), do: false
  defp passed?({deadline, _timeout}, now), do: deadline <= now

  defp complete(state, id, reply) do
    case Map.pop(state.pending, id) do
      {nil, _} ->
        if MapSet.member?(state.stale, id) do
          %{state | stale: MapSet.delete(state.stale, id)}
        else
          Logger.warning("nx_jax worker replied to unknown request #{inspect(id)}")
          state
        end

      {entry, pending} ->
        finish(%{state | pending: pending}, entry, reply)
    end
  end

  defp finish(state, {nil, :ignore, _}, _reply), do: state

  # The worker does not know the key (it forgot the graph): send it again, transparently.
  defp finish(
         state,
         {from, {:graph, key, _, _, _, _} = call, limit},
         {:error, {"UnknownGraph", _, _}}
       ) do
    :ets.delete(state.known, key)
    state = update_in(state.counts.graph_resends, &(&1 + 1))
    send_graph_call(state, {from, call, limit})
  end

  defp finish(state, {from, {:graph, key, _, _, keep, owner}, _}, reply) do
    state =
      case reply do
        {:ok, results} when keep ->
          own(state, owner, for({:ref, handle} <- results, do: handle))

        {:ok, _} ->
          state

        {:error, _} ->
          :ets.delete(state.known, key)
          state
      end

    GenServer.reply(from, reply)
    state
  end

  defp finish(state, {from, {:owned, owner}, _}, reply) do
    state =
      case reply do
        {:ok, handles} -> own(state, owner, handles)
        _ -> state
      end

    GenServer.reply(from, reply)
    state
  end

  defp finish(state, {from, :plain, _}, reply) do
    GenServer.reply(from, reply)
    state
  end

  defp own(state, owner, handles) do
    {monitor, owned} =
      case state.owners do
        %{^owner => entry} -> entry
        %{} -> {Process.monitor(owner), MapSet.new()}
      end

    owned = Enum.reduce(handles, owned, &MapSet.put(&2, &1))
    :ets.insert(state.live, Enum.map(handles, &{&1}))
    %{state | owners: Map.put(state.owners, owner, {monitor, owned})}
  end

  defp to_text(text) when is_binary(text), do: text
  defp to_text(text) when is_atom(text), do: Atom.to_string(text)
  defp to_text(text) when is_list(text), do: List.to_string(text)
  defp to_text(other), do: inspect(other)
end
