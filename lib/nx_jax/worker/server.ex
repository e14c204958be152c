defmodule NxJax.Worker.Server do
  @moduledoc """
  The GenServer that owns one worker's port (`python -m py_backend`): it opens the port, routes
  each reply to its caller, enforces deadlines, resends graphs the Python side forgot, owns
  resident handles for their processes, logs what the Python side prints, and stops (for its
  supervisor to start a fresh worker) when the Python process exits. Started by
  `NxJax.Worker.start_link/1` with its `NxJax.Worker.Config`. Who holds its port (itself, its
  `NxJax.Worker.Keeper`, or a caller that borrowed it, `NxJax.Worker.LentPort`) is its
  `NxJax.Worker.Lease`'s to say: the lease's transitions are pure, and this module performs
  the actions they return (`perform/2`).

  Resident results are handed to a caller of this node wrapped in an `NxJax.Guard` (made here,
  before the reply is sent, so that a caller that dies before reading its reply frees them
  too); `{:nx_jax_released, handles}` (from `NxJax.Worker.Collector` or a deallocation) sends
  one `free`. When the worker says its resident bytes grew past its mark (`{:pressure,
  bytes}`, docs/PROTOCOL.md 2.5), the local processes that received resident results lately
  (`holders`, the latest 64) are garbage collected, so that the tensors they dropped are freed
  even if they allocate too little to collect on their own.

  Requests come as `{:nx_jax_request, {alias, tag}, timeout, message}` from
  `NxJax.Worker.Caller`; each is written with a fresh id (`Lease.next_id/1`) and kept in
  `pending` as `{reply address, what to do with the reply, limit}` until its reply comes.
  """
  use GenServer
  require Logger
  require NxJax.Timeline
  alias NxJax.Wire
  alias NxJax.Worker.{Config, Deadline, Keeper, Lease, LogOrder}

  # a request whose reply nobody waits for (a free of collected or deallocated tensors)
  @ignore {nil, :ignore, :infinity}
  # how many processes `holders` remembers (the most recent ones)
  @holders 64

  @impl true
  def init(opts) do
    Process.flag(:trap_exit, true)
    config = Config.new(opts)

    port =
      Port.open({:spawn_executable, config.python}, [
        {:packet, 4},
        :binary,
        :nouse_stdio,
        :exit_status,
        {:args,
         ["-m", "py_backend", "--forward-stdio", "--spin-us", Integer.to_string(config.spin_us)]},
        {:cd, NxJax.Worker.Sources.project_root()},
        {:env, [{~c"PYTHONUNBUFFERED", ~c"1"} | config.env]}
      ])

    {:os_pid, os_pid} = Port.info(port, :os_pid)
    if config.group, do: NxJax.Distribution.join(self())

    state = %{
      port: port,
      config: config,
      pending: %{},
      # the graph keys sent to this Python process (read by lent calls)
      known: :ets.new(NxJax.Worker.Known, [:set, :protected, read_concurrency: true]),
      # local processes that received resident results lately: pid => when (a count)
      holders: %{},
      holder_seq: 0,
      # {timer, deadline}: one timer, for the earliest deadline of the pending requests
      deadline_timer: nil,
      os_pid: os_pid,
      # the largest request frame the worker reads (callers check theirs before sending)
      max_frame: config.max_frame,
      # whether this GenServer killed its Python process (a deadline passed)
      replaced: false,
      counts: %{graph_sends: 0, key_calls: 0, graph_resends: 0}
    }

    lend = Lease.atomics()
    # (without a keeper, `off: [:keeper]`, the port rests with this GenServer)
    keeper = if config.lend_port and :keeper not in config.off, do: Keeper.start(port)
    # (the keeper's drain timer: the lease knows when it is due, this the timer to cancel)
    state = Map.merge(state, %{lend: lend, keeper: keeper, lease: nil, drain_timer: nil})
    # the worker's output lines put back in order (NxJax.Worker.LogOrder), and the timer that
    # ends the wait for a missing one
    state = Map.merge(state, %{log_order: LogOrder.new(), log_gap_timer: nil})
    {:ok, lease(state, Lease.new(config.lend_port, now()))}
  end

  ## The lease's actions (NxJax.Worker.Lease, "Actions"), performed in order

  defp lease(state, {lease, actions}),
    do: Enum.reduce(actions, %{state | lease: lease}, &perform/2)

  defp perform({:write, frames}, state) do
    NxJax.Timeline.mark(:server_write)
    Enum.each(frames, &(true = Port.command(state.port, &1)))
    NxJax.Timeline.mark(:server_written)
    state
  end

  # port_connect/2 links nothing new: the GenServer opened the port, and linked the keeper
  defp perform({:connect, :server}, state) do
    :erlang.port_connect(state.port, self())
    state
  end

  defp perform({:connect, :keeper}, state) do
    :erlang.port_connect(state.port, state.keeper || self())
    state
  end

  defp perform(:try_take, state),
    do: lease(state, Lease.tried(state.lease, Lease.perform(state.lend, :try_take)))

  defp perform({:reclaim, _word} = action, state) do
    {seen, lent_id} = Lease.perform(state.lend, action)

    if seen == :ok,
      do: Logger.debug("nx_jax: took the worker's port back from a caller that died holding it")

    lease(state, Lease.reclaimed(state.lease, seen, lent_id))
  end

  defp perform({:monitor, word}, state),
    do: %{state | lease: Lease.monitored(state.lease, Process.monitor(Lease.pid_of_word(word)))}

  defp perform({:demonitor, ref}, state) do
    Process.demonitor(ref, [:flush])
    state
  end

  # (a timer moved earlier is cancelled; one whose message is already sent is stale to the lease)
  defp perform({:drain_timer, due}, state) do
    if state.drain_timer, do: :erlang.cancel_timer(state.drain_timer)
    %{state | drain_timer: :erlang.start_timer(due, self(), {:nx_jax_drain, due}, abs: true)}
  end

  defp perform(lock_action, state) do
    Lease.perform(state.lend, lock_action)
    state
  end

  defp now, do: System.monotonic_time(:millisecond)

  @doc false
  defdelegate default_numerics, to: Config

  @impl true
  def handle_call(:os_pid, _from, state), do: {:reply, state.os_pid, state}

  def handle_call(:pending, _from, state), do: {:reply, map_size(state.pending), state}

  def handle_call(:client_stats, _from, state) do
    lent = Lease.lent_calls(state.lend)
    counts = %{state.counts | key_calls: state.counts.key_calls + lent}
    counts = Map.merge(counts, %{lent_calls: lent, fast_replies: Lease.fast_replies(state.lend)})
    {:reply, counts, state}
  end

  def handle_call(:local, _from, state) do
    local = Map.take(state, [:port, :lend, :known, :os_pid, :max_frame])
    local = Map.merge(local, %{keeper: state.keeper || self(), off: state.config.off})
    {:reply, local, state}
  end

  # A request from NxJax.Worker.Caller. `limit` is its NxJax.Worker.Deadline.
  defp dispatch({:call, function, body}, from, limit, state) do
    send_request(state, function, body, {from, :plain, limit})
  end

  defp dispatch({:graph_call, key, graph_bin, args, keep, owner, donate}, from, limit, state) do
    send_graph_call(state, {from, {:graph, key, graph_bin, args, keep, owner, donate}, limit})
  end

  defp dispatch({:put, body, owner}, from, limit, state) do
    send_request(state, :put, body, {from, {:owned, owner}, limit})
  end

  defp dispatch({:free, handles}, from, limit, state) do
    send_request(state, :free, Wire.encode_body([handles]), {from, :plain, limit})
  end

  defp send_graph_call(
         state,
         {_from, {:graph, key, graph_bin, args, keep, _owner, donate}, _} = entry
       ) do
    {graph, state} =
      if :ets.member(state.known, key) do
        {nil, update_in(state.counts.key_calls, &(&1 + 1))}
      else
        :ets.insert(state.known, {key})
        {graph_bin, update_in(state.counts.graph_sends, &(&1 + 1))}
      end

    id = Lease.next_id(state.lend)
    enter(state, id, Wire.graph_call_frame(id, key, graph, args, keep, donate), entry)
  end

  # `entry`: {reply address, what to do with the reply, limit}
  defp send_request(state, function, body, entry) do
    id = Lease.next_id(state.lend)
    enter(state, id, [Wire.request_header(id, function) | body], entry)
  end

  defp enter(state, id, frame, {_from, _kind, limit} = entry) do
    state = arm_deadline(state, limit)

    lease(
      %{state | pending: Map.put(state.pending, id, entry)},
      Lease.request(state.lease, frame)
    )
  end

  # Hands what the keeper holds to handle_info/2, in order (a reply-less frame of the port: a
  # log line, a stale reply; or the exit status of the Python process).
  defp drain_into(state) do
    Enum.reduce_while(Keeper.drain(state.keeper), {:noreply, state}, fn message,
                                                                        {:noreply, state} ->
      case handle_info(message, state) do
        {:noreply, state} -> {:cont, {:noreply, state}}
        stop -> {:halt, stop}
      end
    end)
  end

  # (only when the keeper holds something)
  defp drain_pending(state) do
    if Keeper.kept?(state.keeper), do: drain_into(state), else: {:noreply, state}
  end

  # Output lines wait for one numbered before them (NxJax.Worker.LogOrder): the keeper may hold
  # it (drained now), or a borrower may be handing it over (a timer gives it LogOrder.gap_ms/0;
  # its message, below, has flush_log/1 log what is held). No gap: no timer.
  defp fill_log_gap(state) do
    if LogOrder.gap?(state.log_order) do
      with {:noreply, state} <- drain_pending(state), do: {:noreply, log_gap_timer(state)}
    else
      {:noreply, cancel_log_gap_timer(state)}
    end
  end

  defp log_gap_timer(state) do
    cond do
      not LogOrder.gap?(state.log_order) ->
        cancel_log_gap_timer(state)

      state.log_gap_timer == nil ->
        timer = :erlang.start_timer(LogOrder.gap_ms(), self(), :nx_jax_log_gap)
        %{state | log_gap_timer: timer}

      true ->
        state
    end
  end

  defp cancel_log_gap_timer(%{log_gap_timer: nil} = state), do: state

  defp cancel_log_gap_timer(state) do
    :erlang.cancel_timer(state.log_gap_timer)
    %{state | log_gap_timer: nil}
  end

  # the lines held are logged: what is missing before them is taken for lost (a dead borrower
  # read it), or comes later and is logged then
  defp flush_log(state) do
    {order, ready} = LogOrder.give_up(state.log_order)
    state = %{state | log_order: order}
    Enum.each(ready, &log_line(state, &1))
    cancel_log_gap_timer(state)
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
    NxJax.Timeline.mark(:server_data)

    case Wire.decode_reply(frame) do
      {:bad_frame, message} ->
        Logger.error("nx_jax: #{message}")
        {:noreply, state}

      {id, reply} when is_integer(id) ->
        state = complete(state, id, reply)
        {:noreply, lease(state, Lease.replied(state.lease, map_size(state.pending), now()))}

      {:log, stream, line, seq} ->
        {order, ready} = LogOrder.arrive(state.log_order, seq, {stream, line})
        state = %{state | log_order: order}
        Enum.each(ready, &log_line(state, &1))
        fill_log_gap(state)

      {:pressure, _bytes} ->
        {:noreply, collect_holders(state)}

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
    # (the Python process's last lines first: they may say why it exited)
    state = flush_log(state)
    text = NxJax.WorkerError.exited_text(state.os_pid, status)
    Logger.warning("nx_jax: #{text}; its supervisor starts a new one")
    # The request the worker was running when a signal killed it may be what killed it (a
    # poison call): it fails with "WorkerDied", which nothing retries; the requests queued
    # behind it were never started and fail with "WorkerExited" (retried once).
    served = if not state.replaced, do: served_id(state)

    fail_pending(state, fn id -> NxJax.WorkerError.exit_error(text, status, id == served) end)

    {:stop, {:shutdown, {:worker_exited, status}}, %{state | pending: %{}}}
  end

  def handle_info({:EXIT, port, reason}, %{port: port} = state) do
    # (the exit status went to the keeper if the port rested with it)
    case drain_into(state) do
      {:noreply, state} -> port_closed(state, reason)
      stop -> stop
    end
  end

  # A gap in the output lines' numbers waited LogOrder.gap_ms/0: the keeper is drained once
  # more, then the lines held are logged.
  def handle_info({:timeout, timer, :nx_jax_log_gap}, %{log_gap_timer: timer} = state) do
    case drain_pending(%{state | log_gap_timer: nil}) do
      {:noreply, state} -> {:noreply, flush_log(state)}
      stop -> stop
    end
  end

  def handle_info({:timeout, _timer, :nx_jax_log_gap}, state), do: {:noreply, state}

  # The keeper's drain (Lease.drain_tick/4).
  def handle_info({:timeout, _timer, {:nx_jax_drain, due}}, state) do
    case Lease.drain_tick(state.lease, due, Lease.lent_calls(state.lend), now()) do
      :stale -> {:noreply, state}
      next -> drain_pending(lease(state, next))
    end
  end

  # The earliest deadline passed: answer every request past its deadline with a timeout and
  # replace the worker (kill its Python process; the exit_status that follows fails the other
  # pending calls and stops this GenServer, and the supervisor starts a new worker); otherwise
  # set the timer for the next deadline. A timer moved since is ignored.
  def handle_info({:timeout, timer, :nx_jax_deadlines}, %{deadline_timer: {timer, _}} = state) do
    now = System.monotonic_time(:millisecond)

    {expired, pending} =
      Enum.split_with(state.pending, fn {_id, {_, _, limit}} -> Deadline.passed?(limit, now) end)

    state = %{state | pending: Map.new(pending), deadline_timer: nil}

    for {_id, {from, _, {_, timeout}}} <- expired, from != nil do
      GenServer.reply(from, {:error, Deadline.expired(timeout, state.os_pid)})
    end

    state = if expired != [], do: replace_python(state), else: state

    case for {_id, {_, _, {_, _} = limit}} <- pending, do: limit do
      [] -> {:noreply, state}
      limits -> {:noreply, arm_deadline(state, Enum.min(limits))}
    end
  end

  def handle_info({:timeout, _stale, :nx_jax_deadlines}, state), do: {:noreply, state}

  # a call that borrowed the port passed its deadline
  def handle_info(:nx_jax_lent_expired, state), do: {:noreply, replace_python(state)}

  # a borrowed call found that the Python side forgot the graph `key`
  def handle_info({:nx_jax_forget, key}, state) do
    if :ets.member(state.known, key) do
      :ets.delete(state.known, key)
      {:noreply, update_in(state.counts.graph_resends, &(&1 + 1))}
    else
      {:noreply, state}
    end
  end

  def handle_info(:nx_jax_port_back, state),
    do: {:noreply, lease(state, Lease.port_back(state.lease))}

  def handle_info({:DOWN, monitor, :process, _pid, _reason}, state) do
    {:noreply, lease(state, Lease.borrower_down(state.lease, monitor))}
  end

  # resident tensors collected (NxJax.Worker.Collector) or deallocated: free them, dropping the
  # reply (a later request of the sender reaches the worker after the free)
  def handle_info({:nx_jax_released, handles}, state) when is_list(handles) do
    {:noreply, send_request(state, :free, Wire.encode_body([handles]), @ignore)}
  end

  def handle_info({:nx_jax_request, from, timeout, message}, state) do
    NxJax.Timeline.mark(:server_request)
    {:noreply, dispatch(message, from, Deadline.new(timeout, now()), state)}
  end

  def handle_info({:EXIT, pid, reason}, state) do
    if state.keeper != nil and state.keeper == pid,
      do: {:stop, {:shutdown, {:keeper_exited, reason}}, state},
      else: {:noreply, state}
  end

  def handle_info(_other, state), do: {:noreply, state}

  @impl true
  def terminate(_reason, state) do
    flush_log(state)
    if Port.info(state.port) != nil, do: Port.close(state.port)
    Keeper.stop(state.keeper)
    :ok
  end

  # The worker's resident bytes grew past its mark: garbage collect the processes that took
  # resident results lately (the dead tensors they hold are then freed through their guards),
  # without waiting for them. Those that exited are forgotten.
  defp collect_holders(state) do
    holders =
      Map.filter(state.holders, fn {pid, _seq} ->
        Process.alive?(pid) and :erlang.garbage_collect(pid, async: :nx_jax_pressure) == :async
      end)

    %{state | holders: holders}
  end

  defp port_closed(state, reason) do
    text =
      "the Python worker (OS pid #{state.os_pid}) exited: its port closed " <>
        "(#{inspect(reason)}) while a request was being written, so its exit status is unknown"

    fail_pending(state, fn _id -> {"WorkerExited", text, ""} end)
    {:stop, {:shutdown, {:port_closed, reason}}, %{state | pending: %{}}}
  end

  # A call passed its deadline (NxJax.Worker.Deadline): kills the Python process; its exit
  # status then fails the pending calls and stops this GenServer, and the supervisor starts a
  # new worker. (Killed by us: the exit that follows is no call's own doing, `replaced`.)
  defp replace_python(state) do
    Logger.warning("nx_jax: a call passed its deadline; killing the worker #{state.os_pid}")
    System.cmd("kill", ["-KILL", Integer.to_string(state.os_pid)], stderr_to_stdout: true)
    %{state | replaced: true}
  end

  defp log_line(state, {stream, line}) do
    stream = Wire.to_text(stream)
    line = Wire.to_text(line)
    text = "nx_jax worker #{state.os_pid} #{stream}: #{line}"
    if stream == "stderr", do: Logger.warning(text), else: Logger.info(text)
    if state.config.stdio_to, do: send(state.config.stdio_to, {:nx_jax_stdio, stream, line})
  end

  # the request the worker was running: the oldest one written to the port (requests are run in
  # the order they arrive), when this GenServer holds the port; none while a borrower has it
  # (the borrowed call is the one running, LentPort.settle/4)
  defp served_id(%{pending: pending} = state) when map_size(pending) > 0,
    do: if(Lease.held?(state.lease), do: pending |> Map.keys() |> Enum.min())

  defp served_id(_state), do: nil

  # every pending request gets `error_of.(id)`
  defp fail_pending(state, error_of) do
    Enum.each(state.pending, fn
      {_id, {nil, _, _}} -> :ok
      {id, {from, _, _}} -> GenServer.reply(from, {:error, error_of.(id)})
    end)
  end

  defp complete(state, id, reply) do
    case Map.pop(state.pending, id) do
      {nil, _} ->
        case Lease.stale_reply(state.lease, id) do
          {true, lease} ->
            %{state | lease: lease}

          {false, _lease} ->
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
         {from, {:graph, key, _, _, _, _, _} = call, limit},
         {:error, {"UnknownGraph", _, _}}
       ) do
    :ets.delete(state.known, key)
    state = update_in(state.counts.graph_resends, &(&1 + 1))
    send_graph_call(state, {from, call, limit})
  end

  defp finish(state, {from, {:graph, key, _, _, keep, owner, _donate}, _}, reply) do
    {state, reply} =
      case reply do
        {:ok, refs} when keep ->
          {hold(state, owner), {:ok, guarded(refs, owner)}}

        {:ok, _} ->
          {state, reply}

        {:error, _} ->
          :ets.delete(state.known, key)
          {state, reply}
      end

    GenServer.reply(from, reply)
    NxJax.Timeline.mark(:server_replied)
    state
  end

  # (put answers bare handles; its caller gets refs, as from a call that keeps its results)
  defp finish(state, {from, {:owned, owner}, _}, reply) do
    {state, reply} =
      case reply do
        {:ok, handles} ->
          refs = for handle <- handles, do: {:ref, handle}
          {hold(state, owner), {:ok, guarded(refs, owner)}}

        {:error, _} ->
          {state, reply}
      end

    GenServer.reply(from, reply)
    state
  end

  defp finish(state, {from, :plain, _}, reply) do
    GenServer.reply(from, reply)
    state
  end

  # A caller of this node gets each `{:ref, handle}` as `{:ref, handle, guard}`, the guard made
  # here, before the reply leaves: a caller that exits before reading it drops the guards with
  # the message, and the tensors are freed. A caller on another node makes its guards itself
  # (a guard sends to its own node's collector; NxJax.Worker.guarded/2).
  defp guarded(refs, owner) when node(owner) == node(),
    do: for(ref <- refs, do: NxJax.Worker.Collector.guard_ref(ref, self()))

  defp guarded(refs, _owner), do: refs

  # remembers `owner` among the (at most @holders) latest local takers of resident results
  defp hold(state, owner) when node(owner) != node(), do: state

  defp hold(%{holders: holders, holder_seq: seq} = state, owner) do
    holders = Map.put(holders, owner, seq)

    holders =
      if map_size(holders) > @holders do
        {oldest, _} = Enum.min_by(holders, fn {_pid, seq} -> seq end)
        Map.delete(holders, oldest)
      else
        holders
      end

    %{state | holders: holders, holder_seq: seq + 1}
  end
end
