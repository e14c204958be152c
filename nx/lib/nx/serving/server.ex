defmodule Nx.Serving.Server do
  @moduledoc false
  # The serving process (a GenServer, registered under the serving's name, supervised with
  # a Task.Supervisor by Nx.Serving.start_link/1): gathers requests into batches and
  # computes each batch in a task on a free partition.
  #
  # Messages (`reply_to` = {alias, feeder, offset}: the client's alias, the pid of the process
  # feeding a stream of batches or nil, and where the batch's rows start in the request):
  #
  #     client -> server  {Nx.Serving, :request, reply_to, batch}
  #     server            {Nx.Serving, :timeout, key, token}   (to itself)
  #     task -> alias     {alias, {:batch, offset, output, start, rows, metadata}}
  #     task -> alias     {alias, {:hook, name, value, start, rows}}    (hooks mode)
  #     task -> feeder    {alias, :computed, rows}
  #     server -> alias   {:DOWN, alias, :process, server, reason}       (a failure)
  #
  # States of a batch key's open batch, the one that takes the requests of that key:
  #
  #     empty --request--> filling (timer set) --full--> closed
  #                          |
  #                          +--timeout, a partition free--> closed
  #                          +--timeout, none free--> expired (in `ready`, still taking rows)
  #                                                       |--full--> closed
  #                                                       +--a partition frees--> running
  #
  # A closed batch waits in its key's `closed` queue; `ready` holds one key per batch that
  # waits for a partition (closed or expired), in the order they became ready, and a free
  # partition takes the first. Invariants: an open batch has fewer than `limit` rows (a full
  # one is closed at once); its timer is set exactly when it has rows and did not expire.

  use GenServer
  require Logger

  alias Nx.Serving.Callbacks

  defmodule Key do
    @moduledoc false
    # a batch key's open batch (entries latest first) and closed batches
    defstruct entries: [], count: 0, timer: nil, closed: :queue.new()
  end

  @impl true
  def init(config) do
    Process.flag(:trap_exit, true)
    %{name: name, serving: serving, batch_keys: batch_keys} = config

    partitions = partition_options(serving, config.partitions)
    {mode, partitions, hooks_table} = streaming_options(serving, partitions)
    partitions = Enum.map(partitions, &Keyword.put(&1, :batch_keys, batch_keys))

    {:ok, module_state} = Callbacks.init!(serving.module, :process, serving.arg, partitions)

    :persistent_term.put({Nx.Serving, name}, %{
      limit: config.batch_size,
      preprocessing: serving.client_preprocessing,
      postprocessing: serving.client_postprocessing,
      distributed_postprocessing: serving.distributed_postprocessing,
      mode: mode,
      batch_keys: batch_keys
    })

    # (the group of the name first: the scopes of other nodes learn of the joins in this
    # order, so a client that saw this serving join Nx.Serving finds it by its name)
    members = List.duplicate(self(), max(1, config.weight * length(partitions)))
    :ok = :pg.join(Nx.Serving.PG, {Nx.Serving, name}, members)
    :ok = :pg.join(Nx.Serving.PG, Nx.Serving, members)

    {:ok,
     %{
       name: name,
       module: serving.module,
       module_state: module_state,
       limit: config.batch_size,
       timeout: config.batch_timeout,
       hooks_table: hooks_table,
       task_supervisor: config.task_supervisor,
       keys: Map.new(batch_keys, &{&1, %Key{}}),
       ready: :queue.new(),
       free: :queue.from_list(Enum.to_list(0..(length(partitions) - 1))),
       running: %{}
     }}
  end

  # the defn options of each partition: the compiler's partitions when asked for (Nx's
  # default compiler, Nx.Defn.Evaluator, where none is named)
  defp partition_options(%Nx.Serving{defn_options: defn_options}, true) do
    compiler = Keyword.get(defn_options, :compiler, Nx.Defn.Evaluator)

    case compiler.__partitions_options__(defn_options) do
      [_ | _] = partitions ->
        partitions

      other ->
        raise "#{inspect(compiler)}.__partitions_options__/1 must return a non-empty list " <>
                "of defn options, got: #{inspect(other)}"
    end
  end

  defp partition_options(%Nx.Serving{defn_options: defn_options}, false), do: [defn_options]

  # with hooks streamed, each partition's hooks send their values to the clients of the
  # batch that partition computes (its routes, kept in a public table by the task)
  defp streaming_options(%Nx.Serving{streaming: nil}, partitions),
    do: {:execute, partitions, nil}

  defp streaming_options(%Nx.Serving{streaming: %{hooks: []}}, partitions),
    do: {:batches, partitions, nil}

  defp streaming_options(%Nx.Serving{streaming: %{hooks: hooks}}, partitions) do
    table = :ets.new(__MODULE__, [:public, :set, read_concurrency: true])

    partitions =
      Enum.with_index(partitions, fn defn_options, partition ->
        hooks =
          Enum.reduce(hooks, Keyword.get(defn_options, :hooks, %{}), fn name, hooks ->
            Map.put(hooks, name, &send_hook(table, partition, name, &1))
          end)

        Keyword.put(defn_options, :hooks, hooks)
      end)

    {:hooks, partitions, table}
  end

  defp send_hook(table, partition, name, value) do
    for {{ref, _feeder, _offset}, start, rows} <- :ets.lookup_element(table, partition, 2) do
      send(ref, {ref, {:hook, name, value, start, rows}})
    end
  end

  ## Requests

  @impl true
  def handle_info({Nx.Serving, :request, reply_to, %Nx.Batch{key: key} = batch}, state) do
    case state.keys do
      %{^key => _} ->
        {:noreply, add_request(state, key, reply_to, batch)}

      %{} ->
        # (a client checks the key first; one that did not is told here)
        error = ArgumentError.exception("unknown batch key: #{inspect(key)}")
        reply_down([{reply_to, 0, batch.size}], {error, []})
        {:noreply, state}
    end
  end

  def handle_info({Nx.Serving, :timeout, key, token}, state) do
    case state.keys[key] do
      %Key{timer: {^token, _timer}} = slot ->
        if :queue.is_empty(state.free) do
          # no partition to compute it: it waits in `ready`, still taking rows
          slot = %{slot | timer: :expired}

          {:noreply,
           %{state | keys: %{state.keys | key => slot}, ready: :queue.in(key, state.ready)}}
        else
          {:noreply, close(state, key)}
        end

      _stale ->
        {:noreply, state}
    end
  end

  def handle_info({ref, :done}, %{running: running} = state) when is_map_key(running, ref) do
    Process.demonitor(ref, [:flush])
    {:noreply, finished(state, ref), {:continue, :dispatch}}
  end

  def handle_info({:DOWN, ref, :process, _pid, reason}, %{running: running} = state)
      when is_map_key(running, ref) do
    {_partition, routes} = running[ref]
    reply_down(routes, reason)
    {:noreply, finished(state, ref), {:continue, :dispatch}}
  end

  def handle_info(message, state) do
    Logger.warning("Unknown message in Nx.Serving: #{inspect(message)}")
    {:noreply, state}
  end

  @impl true
  def handle_continue(:dispatch, state), do: {:noreply, dispatch(state)}

  defp finished(state, ref) do
    {{partition, _routes}, running} = Map.pop(state.running, ref)
    %{state | running: running, free: :queue.in(partition, state.free)}
  end

  # A request of exactly `limit` rows is a batch of its own (the open one is closed first);
  # with hooks a request is never split (it goes to a new batch where it does not fit);
  # otherwise it fills the open batch, and the next ones, as far as it goes.
  defp add_request(%{limit: limit} = state, key, reply_to, %{size: limit} = batch) do
    state |> close(key) |> append(key, reply_to, batch, false) |> close(key)
  end

  defp add_request(%{hooks_table: table} = state, key, reply_to, batch) when table != nil do
    if batch.size + state.keys[key].count > state.limit,
      do: state |> close(key) |> append(key, reply_to, batch, true),
      else: fill(state, key, reply_to, batch)
  end

  defp add_request(state, key, reply_to, batch), do: fill(state, key, reply_to, batch)

  defp fill(state, key, {ref, feeder, offset} = reply_to, batch) do
    room = state.limit - state.keys[key].count

    cond do
      batch.size < room ->
        append(state, key, reply_to, batch, true)

      batch.size == room ->
        state |> append(key, reply_to, batch, false) |> close(key)

      true ->
        {head, rest} = Nx.Batch.split(batch, room)

        state
        |> append(key, reply_to, head, false)
        |> close(key)
        |> fill(key, {ref, feeder, offset + room}, rest)
    end
  end

  defp append(state, key, reply_to, batch, start_timer?) do
    slot = state.keys[key]

    timer =
      if start_timer? and slot.timer == nil do
        token = make_ref()
        {token, Process.send_after(self(), {Nx.Serving, :timeout, key, token}, state.timeout)}
      else
        slot.timer
      end

    slot = %{
      slot
      | entries: [{reply_to, batch} | slot.entries],
        count: slot.count + batch.size,
        timer: timer
    }

    %{state | keys: %{state.keys | key => slot}}
  end

  # the open batch of `key` is closed (if it has rows) and waits for a partition
  defp close(state, key) do
    case state.keys[key] do
      %Key{count: 0} ->
        state

      %Key{timer: timer} = slot ->
        {batch_routes, slot} = take_open(slot)
        slot = %{slot | closed: :queue.in(batch_routes, slot.closed)}
        # (an expired batch is in `ready` already)
        ready = if timer == :expired, do: state.ready, else: :queue.in(key, state.ready)
        dispatch(%{state | keys: %{state.keys | key => slot}, ready: ready})
    end
  end

  # the open batch as one Nx.Batch and its routes ({reply_to, start, rows} per request),
  # the slot left empty
  defp take_open(%Key{entries: entries, timer: timer} = slot) do
    with {_token, timer_ref} <- timer, do: Process.cancel_timer(timer_ref)
    oldest_first = Enum.reverse(entries)

    {routes, _end} =
      Enum.map_reduce(oldest_first, 0, fn {reply_to, batch}, start ->
        {{reply_to, start, batch.size}, start + batch.size}
      end)

    batch = Nx.Batch.merge(Enum.map(oldest_first, &elem(&1, 1)))
    {{batch, routes}, %{slot | entries: [], count: 0, timer: nil}}
  end

  ## Computing

  # while a partition is free and a batch ready: compute it
  defp dispatch(state) do
    with {{:value, partition}, free} <- :queue.out(state.free),
         {{:value, key}, ready} <- :queue.out(state.ready) do
      slot = state.keys[key]

      {{batch, routes}, slot} =
        case :queue.out(slot.closed) do
          {{:value, batch_routes}, closed} -> {batch_routes, %{slot | closed: closed}}
          # none closed: the key's expired open batch
          {:empty, _} -> take_open(slot)
        end

      state = %{state | free: free, ready: ready, keys: %{state.keys | key => slot}}
      dispatch(start_task(state, partition, batch, routes))
    else
      _ -> state
    end
  end

  defp start_task(state, partition, batch, routes) do
    %{module: module, module_state: module_state, hooks_table: table} = state

    try do
      Callbacks.handle_batch!(module, batch, partition, module_state)
    rescue
      error ->
        # the batch's clients get the error; the serving goes on
        reply_down(routes, {error, __STACKTRACE__})
        %{state | free: :queue.in(partition, state.free)}
    else
      {:execute, function, module_state} ->
        compute = fn ->
          before = fn -> if table, do: :ets.insert(table, {partition, routes}) end
          Callbacks.execute!(module, function, before, &reply(routes, &1))
          :done
        end

        task = Task.Supervisor.async_nolink(state.task_supervisor, compute)
        running = Map.put(state.running, task.ref, {partition, routes})
        %{state | module_state: module_state, running: running}
    end
  end

  # (in the task) each client's rows of the output, and the feeders' acknowledgements
  defp reply(routes, {output, metadata}) do
    for {{ref, feeder, offset}, start, rows} <- routes do
      send(ref, {ref, {:batch, offset, output, start, rows, metadata}})
      if feeder, do: send(feeder, {ref, :computed, rows})
    end
  end

  defp reply_down(routes, reason) do
    for {{ref, _feeder, _offset}, _start, _rows} <- routes do
      send(ref, {:DOWN, ref, :process, self(), reason})
    end
  end

  ## Stopping

  # The clients of batches not started are told the serving is gone (:noproc); the batches
  # being computed are waited for.
  @impl true
  def terminate(_reason, state) do
    :persistent_term.erase({Nx.Serving, state.name})

    for {_key, slot} <- state.keys do
      for {_batch, routes} <- :queue.to_list(slot.closed), do: reply_down(routes, :noproc)
      for {reply_to, batch} <- slot.entries, do: reply_down([{reply_to, 0, batch.size}], :noproc)
    end

    for {ref, {_partition, routes}} <- state.running do
      receive do
        {^ref, :done} -> Process.demonitor(ref, [:flush])
        {:DOWN, ^ref, :process, _pid, reason} -> reply_down(routes, reason)
      end
    end

    :ok
  end
end
