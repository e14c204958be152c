defmodule NxJax.Worker.Caller do
  @moduledoc """
  The calling process's side of a worker request (`NxJax.Worker`'s client API uses it): it
  sends the request to the worker's GenServer (or borrows the port, `NxJax.Worker.LentPort`),
  waits for the reply in its own receive loop, runs the call's hooks meanwhile, and retries a
  call to a registered name once on the restarted worker when the worker died.

  ## Waiting for a reply

  The reply address is the process's kept alias (`reply_to/0`): the same from call to call,
  as making and removing an alias for each call was a third of this client's time
  (docs/BENCHMARKS.md section 1). A call that gives up on its reply (past its limit, or its
  worker went down) removes the alias, so a reply that comes later is dropped, and the next
  call makes a new one. A call made by a hook function while another call waits has an alias
  of its own, so that its giving up cannot drop the waiting call's reply.

  For `reply_spin_us` after sending, the caller polls its mailbox instead of sleeping: a busy
  scheduler notices the reply on the port soon, where a sleeping one is woken late under OTP's
  default scheduler polling. Each poll counts a whole time slice of reductions
  (`poll_reductions/0`), because a scheduler checks its pollset once enough
  reductions have run since its last check, and so that the caller gives way to other
  processes as a yield would. The caller monitors the worker only once it stops polling (a
  call answered while it polls costs no monitor), and checks that a local worker is alive
  every 64th poll. A process whose replies came after its polling was over twice in a row
  stops polling, trying again every 16th call.

  The kept alias, the poll's time slice and the count of late replies can each be switched
  off by the worker's `off:` option (`NxJax.Worker.Config.mechanisms_off/1`), to measure what
  each saves (docs/BENCHMARKS.md "Latency mechanisms").
  """
  require NxJax.Timeline
  alias NxJax.Worker.{Backoff, Deadline, LentPort}

  # (a per-process count of late replies in a row; see spin_until/3)
  @late_replies {__MODULE__, :late_replies}
  # (the process's kept reply alias, and whether a hook function of a call runs; see reply_to/0)
  @reply_alias {__MODULE__, :reply_alias}
  @in_hook {__MODULE__, :in_hook}
  @respin_every 16
  @late_to_stop 2
  @alive_every 64
  # one time slice (OTP's CONTEXT_REDS)
  @poll_reductions 4000

  @doc """
  Sends `message` to the worker named by `opts[:server]` (default `NxJax.Worker`) and returns
  the result, or raises `NxJax.WorkerError`. `lendable`: the call may borrow the port.
  """
  def request(opts, message, lendable \\ false) do
    server = Keyword.get(opts, :server, NxJax.Worker)
    {timeout, spin_us} = NxJax.Worker.Config.call(opts)

    # (a retry waits for a worker other than this one under the name)
    dest = GenServer.whereis(server)
    local = local_or_nil(dest)
    check_size!(local, message)
    # (the latency mechanisms the worker's `:off` option switches off, NxJax.Worker.Config)
    limits = {timeout, spin_us, if(local, do: local.off, else: [])}

    on_hook =
      with on_hook when on_hook != nil <- Keyword.get(opts, :on_hook),
           do: hook_runner(on_hook, hooks_in(opts))

    reply =
      if lendable and on_hook == nil and local != nil,
        do:
          LentPort.call(
            dest,
            local,
            message,
            &wait_reply(&1, dest, limits, 0, nil, &2)
          )

    case reply || call_server(dest, server, message, limits, on_hook) do
      {:ok, result} ->
        result

      {:hook_failed, kind, reason, stacktrace} ->
        :erlang.raise(kind, reason, stacktrace)

      {:error, {"WorkerExited", text, traceback}} ->
        retried =
          if retry?(opts, server),
            do:
              Backoff.retry(server, dest, fn ->
                request([{:retry, false} | opts], message, lendable)
              end)

        case retried do
          {:retried, result} ->
            result

          :none_came ->
            raise NxJax.WorkerError,
              class: "WorkerExited",
              message: text <> "; no new worker was registered as #{inspect(server)} to retry on",
              traceback: traceback

          # (not retried, or the worker waits long to start again: why/1 said so)
          _ ->
            raise NxJax.WorkerError, class: "WorkerExited", message: text, traceback: traceback
        end

      {:error, {class, text, traceback}} ->
        raise NxJax.WorkerError, class: class, message: text, traceback: traceback
    end
  end

  @doc "The reductions each poll of a polling caller counts (bench/lib.exs polls the same way)."
  def poll_reductions, do: @poll_reductions

  @doc """
  What callers on this node share with worker `pid` (its table of live handles, its port and
  its keeper, the atomics and the table of graph keys of the lent port, its OS pid), asked once
  per calling process and worker; with this process's `NxJax.Worker.Lease.pid_word/1`
  (`me`).
  """
  def local(pid) do
    case Process.get({__MODULE__, :local, pid}) do
      nil ->
        local = Map.put(GenServer.call(pid, :local), :me, NxJax.Worker.Lease.pid_word(self()))
        Process.put({__MODULE__, :local, pid}, local)
        local

      local ->
        local
    end
  end

  # As GenServer.call, but the caller waits in a receive loop that also runs the hooks of the
  # request (`{:nx_jax_hook, tag, index, tensors}`, sent by the GenServer while the worker
  # computes) in this process. `tag`, a new reference, tells this call's messages apart.
  defp call_server(dest, server, message, {timeout, _spin_us, off} = limits, on_hook) do
    case dest do
      nil ->
        {:error, {"WorkerExited", "no worker is running (#{inspect(server)})#{why(server)}", ""}}

      dest ->
        {to, own} = reply_to(off)
        tag = make_ref()
        NxJax.Timeline.mark(:caller_sent)
        send(dest, {:nx_jax_request, {to, tag}, timeout, message})
        # (the GenServer keeps the deadline: the caller waits past it only for one that cannot
        # answer at all, Deadline)
        reply = wait_reply(tag, dest, limits, Deadline.grace(), on_hook, nil)
        NxJax.Timeline.mark(:caller_replied)
        if own, do: :erlang.unalias(to)
        reply
    end
  end

  @doc """
  Waits for the reply of the request just sent, until `timeout` plus `grace` from now, without
  the mechanisms named in `off`; `lent` is nil, or `{id, os_pid, lend}` for a call that
  borrowed the port (its reply then comes from the port, `tag`).
  """
  def wait_reply(tag, dest, {timeout, spin_us, off}, grace, on_hook, lent) do
    now = System.monotonic_time(:microsecond)
    deadline = Deadline.new(timeout, div(now, 1000))
    limit = with {at, _} <- deadline, do: at + grace
    late? = :late_replies not in off
    spin = spin_until(spin_us, now, limit, late?)

    wait = %{
      dest: dest,
      monitor: nil,
      limit: limit,
      # (the call's own deadline: hooks that run in a process of their own end by it)
      deadline: with({at, _} <- deadline, do: at),
      timeout: timeout,
      on_hook: on_hook,
      lent: lent,
      poll_reductions: :poll_reductions not in off
    }

    case await_reply(tag, if(spin, do: wait, else: watch(wait)), nil, spin, 1) do
      # (a reply taken while polling came within reply_spin_us: no clock needed)
      {:polled, reply} ->
        in_time()
        reply

      reply ->
        if late?, do: note_wait(spin_us, now)
        reply
    end
  end

  defp reply_to(off) do
    if Process.get(@in_hook) || :kept_alias in off,
      do: {:erlang.alias(), true},
      else: {kept_alias(), false}
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

  # `spin` is nil or the monotonic microsecond until which the caller polls (see the
  # moduledoc). The polling receive is its own, with a literal `after 0` and no `:DOWN` clause
  # (no monitor yet): with one receive for both phases (a timeout computed at run time, even 0,
  # and a third clause), a borrowed call took longer (docs/BENCHMARKS.md section 1).
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
          if wait.poll_reductions, do: :erlang.bump_reductions(@poll_reductions)
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
    do:
      await_reply(tag, wait, failed || run_hook(wait.on_hook, wait, index, tensors), spin, polls)

  # The reply of a call (from its GenServer), or what came from the port of a lent call
  # (`tag` is then the port; LentPort.settle/4).
  defp settle(%{lent: nil}, _tag, reply), do: reply

  defp settle(%{lent: lent, dest: dest}, port, message),
    do: LentPort.settle(lent, dest, port, message)

  defp timed_out(%{lent: nil, timeout: timeout}), do: {:error, Deadline.unanswered(timeout)}

  # (a borrowed call keeps its own deadline: its worker is then replaced, LentPort)
  defp timed_out(%{lent: {_id, os_pid, _lend}, timeout: timeout}),
    do: {:expired, {:error, Deadline.expired(timeout, os_pid)}}

  defp watch(wait), do: %{wait | monitor: Process.monitor(wait.dest)}

  defp unwatch(%{monitor: nil}), do: :ok
  defp unwatch(%{monitor: monitor}), do: Process.demonitor(monitor, [:flush])

  defp alive?(pid) when is_pid(pid) and node(pid) == node(), do: Process.alive?(pid)
  defp alive?(_remote), do: true

  # A caller whose replies keep coming after its spin is over (long steps, or a queue of other
  # calls ahead of its own) stops polling, where it would only burn a scheduler: it polls again
  # once a reply comes within the spin, and tries every @respin_every-th call. The count of
  # such late replies in a row is kept per process (@late_replies). One late reply alone does
  # not stop the polling (@late_to_stop): beside a CPU-bound process a preempted call comes
  # late now and then, and each such reply made the next 15 calls sleep, which took longer
  # than polling there (measured 2026-12-05: `git show 19d163f:docs/BENCHMARKS.md`, "Where the small call's time goes beside a CPU hog, layer by layer"). A spin never outlasts the caller's limit.
  defp spin_until(0, _now, _limit, _late?), do: nil

  defp spin_until(us, now, limit, late?) do
    late = if late?, do: Process.get(@late_replies, 0), else: 0

    cond do
      late >= @late_to_stop and rem(late, @respin_every) != 0 -> nil
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

  # Where the hooks of a call run when `:hooks_in` is not given: in the caller, as in Nx's
  # evaluator, unless the call sets a finite `:timeout` of its own (an option Nx does not
  # have): then in processes of their own, so that the deadline it asks for bounds them too.
  defp hooks_in(opts) do
    Keyword.get_lazy(opts, :hooks_in, fn ->
      if Keyword.get(opts, :timeout, :infinity) == :infinity, do: :caller, else: :process
    end)
  end

  # `on_hook` and where it runs (the `:hooks_in` option): `{:caller, fun}` or `{:process, fun}`
  defp hook_runner(nil, _where), do: nil
  defp hook_runner(on_hook, where) when where in [:caller, :process], do: {where, on_hook}

  defp hook_runner(_on_hook, where) do
    raise ArgumentError,
          "hooks_in must be :caller (hooks run in the calling process, as in Nx's evaluator) or " <>
            ":process (each hook runs in a process of its own, bounded by the call's :timeout), " <>
            "got: #{inspect(where)}"
  end

  # A hook that raises fails the call once its reply arrives (the worker finishes the run);
  # the hooks after it are not called. In the caller nothing can stop a hook that does not
  # return; in a process of its own, one still running at the call's deadline is killed and
  # fails the call with a "Timeout" error.
  defp run_hook(nil, _wait, _index, _tensors), do: nil

  defp run_hook({:caller, on_hook}, _wait, index, tensors) do
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

  defp run_hook({:process, on_hook}, wait, index, tensors) do
    caller = self()
    callers = Process.get(:"$callers", [])

    {pid, monitor} =
      spawn_monitor(fn ->
        Process.put(:"$callers", [caller | callers])

        outcome =
          try do
            on_hook.(index, tensors)
            nil
          catch
            kind, reason -> {:hook_failed, kind, reason, __STACKTRACE__}
          end

        send(caller, {__MODULE__, self(), outcome})
      end)

    receive do
      {__MODULE__, ^pid, outcome} ->
        Process.demonitor(monitor, [:flush])
        outcome

      {:DOWN, ^monitor, :process, ^pid, reason} ->
        {:hook_failed, :exit, reason, []}
    after
      remaining(wait.deadline) ->
        Process.exit(pid, :kill)
        Process.demonitor(monitor, [:flush])

        receive do
          {__MODULE__, ^pid, _} -> :ok
        after
          0 -> :ok
        end

        error =
          NxJax.WorkerError.exception(
            class: "Timeout",
            message:
              "hook #{index} of this call was still running at the call's deadline " <>
                "(timeout: #{wait.timeout} ms) and was stopped",
            traceback: ""
          )

        {:hook_failed, :error, error, []}
    end
  end

  defp remaining(at), do: Deadline.remaining(at, System.monotonic_time(:millisecond))

  defp down_error(:noproc, dest),
    do: {"WorkerExited", "no worker is running (#{inspect(dest)})", ""}

  defp down_error(:noconnection, dest) do
    node = if is_pid(dest), do: node(dest), else: elem(dest, 1)
    {"WorkerExited", "the node of the worker (#{node}) went down", ""}
  end

  defp down_error(reason, _dest),
    do: {"WorkerExited", "the worker stopped: #{inspect(reason)}", ""}

  # local/1 of a worker pid, nil for a worker that is not running (or no pid)
  defp local_or_nil(pid) when is_pid(pid) do
    local(pid)
  catch
    :exit, _ -> nil
  end

  defp local_or_nil(_dest), do: nil

  # A request over the worker's frame limit (NxJax.Worker.max_frame/1) is refused here, before
  # anything is sent: the worker would refuse it too, after reading it all.
  defp check_size!(%{max_frame: limit}, message) when is_integer(limit) do
    size = request_size(message)

    if size > limit do
      raise NxJax.WorkerError,
        class: "FrameTooLarge",
        message:
          "this request is #{size} bytes, more than the worker's frame limit of #{limit} " <>
            "bytes; nothing was sent. Send the data in smaller pieces, or raise the limit " <>
            "with `config :nx_jax, max_frame: bytes` (at most 4294967295; the worker reads " <>
            "it as NX_JAX_MAX_FRAME)",
        traceback: ""
    end

    :ok
  end

  defp check_size!(_local, _message), do: :ok

  # the body and the graph, plus the request's header (its atoms, id and key: under 128 bytes)
  defp request_size({:call, _function, body}), do: :erlang.iolist_size(body) + 128
  defp request_size({:put, body, _owner}), do: :erlang.iolist_size(body) + 128

  defp request_size({:graph_call, _key, graph_bin, body, _keep, _owner, _donate}),
    do: byte_size(graph_bin) + :erlang.iolist_size(body) + 128

  defp request_size(_message), do: 0

  # a pool worker waiting to start again after quick deaths
  defp why(server) when is_atom(server) do
    case Backoff.restart_wait(server) do
      {quick, ms} ->
        ": it died #{quick} time(s) in a row soon after starting and starts again in " <>
          "#{ms} ms; the calls it was serving may be the cause (see the log)"

      nil ->
        ""
    end
  end

  defp why(_server), do: ""

  defp retry?(opts, server) do
    is_atom(server) and Keyword.get(opts, :retry, true) and Keyword.get(opts, :retryable, true)
  end
end
