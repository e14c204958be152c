defmodule Nx.Serving.Client do
  @moduledoc false
  # The client's side of a serving: the pre- and postprocessing, a request to a serving
  # process of this node and the reading of its answer (Nx.Serving.Server's moduledoc draws
  # the messages), and the stream of events of a streaming serving.
  #
  # A request is answered through an alias of a monitor of the serving process: the serving
  # and its tasks send to the alias, and the serving tells of a failure with a monitor
  # message of its own making, {:DOWN, alias, :process, serving, reason}. Once the client has
  # its answer (or gives up) it removes the monitor, which deactivates the alias: nothing
  # sent later reaches its mailbox.

  alias Nx.Serving.{Output, Telemetry}

  ## Pre- and postprocessing

  def preprocess(nil, input) do
    batch_or_stream =
      batch_or_stream(input) ||
        raise ArgumentError,
              "the default client_preprocessing expects a Nx.Batch or a stream of Nx.Batch " <>
                "as input. Give a batch or use a custom preprocessing"

    {batch_or_stream, :client_info}
  end

  def preprocess(preprocessing, input) do
    metadata = %{input: input}

    Telemetry.span([:nx, :serving, :preprocessing], metadata, fn ->
      case preprocessing.(input) do
        {batch_or_stream, info} = result ->
          batch_or_stream =
            batch_or_stream(batch_or_stream) || bad_preprocessing!(preprocessing, result)

          {{batch_or_stream, info}, Map.put(metadata, :info, info)}

        result ->
          bad_preprocessing!(preprocessing, result)
      end
    end)
  end

  defp bad_preprocessing!(preprocessing, result) do
    raise "client_preprocessing function #{inspect(preprocessing)} must return a two element " <>
            "tuple where the first element is a Nx.Batch or a stream of batches and the " <>
            "second is any value. Got: #{inspect(result)}"
  end

  defp batch_or_stream(%Nx.Batch{size: 0}),
    do: raise(ArgumentError, "cannot run with empty Nx.Batch")

  defp batch_or_stream(%Nx.Batch{} = batch), do: batch
  defp batch_or_stream(other), do: if(Enumerable.impl_for(other), do: other)

  def postprocess(nil, {output, _metadata}, _info), do: output
  def postprocess(nil, stream, _info), do: stream

  def postprocess(postprocessing, result, info) do
    Telemetry.span([:nx, :serving, :postprocessing], %{info: info}, fn ->
      {postprocessing.(result, info), %{info: info}}
    end)
  end

  ## A request to a serving process of this node

  # {:ok, answer} or {:down, reason}: the serving went down, or the computation of one of
  # the request's batches failed (reason {exception, stacktrace} or the task's exit reason)
  def request(pid, name, input) do
    config =
      :persistent_term.get({Nx.Serving, name}, nil) ||
        raise ArgumentError,
              "could not find Nx.Serving with name #{inspect(name)}. " <>
                "Make sure your Nx.Serving is running and/or started as part of your " <>
                "supervision tree"

    {batch_or_stream, info} = preprocess(config.preprocessing, input)
    %{limit: limit, mode: mode} = config

    # (checked before anything is sent or monitored)
    case batch_or_stream do
      %Nx.Batch{} = batch ->
        if mode == :hooks and batch.size > limit do
          raise ArgumentError,
                "batch size (#{batch.size}) cannot exceed Nx.Serving server batch size " <>
                  "of #{limit} when streaming hooks"
        end

        check_key!(batch, config.batch_keys)

      _stream when mode == :hooks ->
        raise ArgumentError,
              "streaming hooks do not support input streaming, input must be a Nx.Batch"

      _stream ->
        :ok
    end

    ref = :erlang.monitor(:process, pid, alias: :demonitor)

    {rows, feeder} =
      case batch_or_stream do
        %Nx.Batch{} = batch ->
          send_request(pid, {ref, nil, 0}, batch)
          {batch.size, nil}

        stream ->
          {:unknown, start_feeder(pid, ref, stream, config)}
      end

    case mode do
      :execute ->
        case collect(ref, rows, feeder) do
          {:ok, result} -> {:ok, postprocess(config.postprocessing, result, info)}
          {:down, reason} -> {:down, reason}
        end

      _batches_or_hooks ->
        stream = event_stream("batched_run/2", ref, rows, feeder)
        {:ok, postprocess(config.postprocessing, stream, info)}
    end
  end

  def check_key!(%Nx.Batch{key: key}, batch_keys) do
    unless key in batch_keys do
      raise ArgumentError,
            "unknown batch key: #{inspect(key)} (expected one of #{inspect(batch_keys)})"
    end
  end

  defp send_request(pid, reply_to, batch),
    do: Process.send(pid, {Nx.Serving, :request, reply_to, batch}, [:noconnect])

  # A stream of batches is sent by a process of its own, one batch at a time: the next once
  # the tasks acknowledged every row of the previous one. It tells the client how many rows it
  # sent in all ({:end, rows}) and exits; the client monitors it (an invalid element or a
  # failure of the stream is the request's failure) and it monitors the serving and the
  # client (it stops when either does).
  defp start_feeder(pid, ref, stream, config) do
    client = self()

    spawn_monitor(fn ->
      serving = Process.monitor(pid)
      client_monitor = Process.monitor(client)

      sent =
        Enum.reduce(stream, 0, fn
          %Nx.Batch{size: size} = batch, sent when size <= config.limit ->
            check_key!(batch, config.batch_keys)
            send_request(pid, {ref, self(), sent}, batch)
            await_acks(ref, size, serving, client_monitor)
            sent + size

          other, _sent ->
            raise "client_preprocessing must return a stream of Nx.Batch " <>
                    "of maximum size #{config.limit}, got: #{inspect(other)}"
        end)

      send(ref, {ref, {:end, sent}})
    end)
  end

  defp await_acks(_ref, 0, _serving, _client), do: :ok

  defp await_acks(ref, rows, serving, client) do
    receive do
      {^ref, :computed, done} -> await_acks(ref, rows - done, serving, client)
      {:DOWN, ^serving, _, _, reason} -> exit(reason)
      {:DOWN, ^client, _, _, _reason} -> exit(:normal)
    end
  end

  # the answer of a serving that does not stream: the request's parts, put in the order of
  # its rows
  defp collect(ref, rows, feeder), do: collect(ref, rows, feeder, 0, [])

  defp collect(ref, rows, feeder, got, parts) when got == rows do
    done(ref, feeder)

    case Enum.sort_by(parts, &elem(&1, 0)) do
      [] ->
        raise ArgumentError, "client_preprocessing returned an empty stream of Nx.Batch"

      [{_, _, _, _, metadata} | _] = sorted ->
        {:ok, {Output.join(for {_, o, s, r, _} <- sorted, do: {o, s, r}), metadata}}
    end
  end

  defp collect(ref, rows, feeder, got, parts) do
    case next_event(ref, feeder) do
      {:batch, offset, output, start, size, metadata} ->
        collect(ref, rows, feeder, got + size, [{offset, output, start, size, metadata} | parts])

      {:end, total} ->
        collect(ref, total, feeder, got, parts)

      {:hook, _name, _output, _start, _size} ->
        collect(ref, rows, feeder, got, parts)

      {:down, reason} ->
        done(ref, feeder)
        {:down, reason}
    end
  end

  # the next message of the request (or of its feeder)
  defp next_event(ref, feeder) do
    feeder_ref = if feeder, do: elem(feeder, 1)

    receive do
      {^ref, event} ->
        event

      {:DOWN, ^ref, _, _, reason} ->
        {:down, reason}

      {:DOWN, ^feeder_ref, _, _, :normal} ->
        next_event(ref, nil)

      {:DOWN, ^feeder_ref, _, _, reason} ->
        {:down, reason}
    end
  end

  # (the events already in the mailbox are dropped too: an inline runner's {:end, rows} after
  # the rows of a request whose size was known)
  defp done(ref, feeder) do
    Process.demonitor(ref, [:flush])
    drop_events(ref)

    with {pid, feeder_ref} <- feeder do
      Process.demonitor(feeder_ref, [:flush])
      Process.exit(pid, :kill)
    end

    :ok
  end

  defp drop_events(ref) do
    receive do
      {^ref, _event} -> drop_events(ref)
    after
      0 -> :ok
    end
  end

  ## Streaming

  # the defn options of a computation whose hooks named in `hooks` send events to `ref`
  # (the request's rows `start..start + rows - 1` of each value)
  def hook_options(defn_options, [], _ref, _start, _rows), do: defn_options

  def hook_options(defn_options, hooks, ref, start, rows) do
    Keyword.update(defn_options, :hooks, hook_map(hooks, ref, start, rows, %{}), fn given ->
      hook_map(hooks, ref, start, rows, given)
    end)
  end

  defp hook_map(hooks, ref, start, rows, map) do
    Enum.reduce(hooks, map, fn name, map ->
      Map.put(map, name, fn value -> send(ref, {ref, {:hook, name, value, start, rows}}) end)
    end)
  end

  # The events of a streaming answer, read lazily in the process that made the request:
  # {hook, value} and {:batch, output, metadata}, until `rows` rows came ({:end, rows} tells
  # them when unknown). A failure exits the reader with {reason, {Nx.Serving, :streaming, []}}.
  def event_stream(fun_name, ref, rows, feeder) do
    owner = self()

    Stream.resource(
      fn ->
        if self() != owner do
          raise "the stream returned from Nx.Serving.#{fun_name} must be consumed in the same process"
        end

        {rows, 0, feeder}
      end,
      fn
        {rows, got, _feeder} = acc when rows == got ->
          {:halt, acc}

        {rows, got, feeder} ->
          case next_event(ref, feeder) do
            {:hook, name, value, start, size} ->
              {[{name, Output.rows(value, start, size)}], {rows, got, feeder}}

            {:batch, _offset, output, start, size, metadata} ->
              {[{:batch, Output.rows(output, start, size), metadata}], {rows, got + size, feeder}}

            {:end, total} ->
              {[], {total, got, feeder}}

            {:down, reason} ->
              done(ref, feeder)
              exit({reason, {Nx.Serving, :streaming, []}})
          end
      end,
      fn {_rows, _got, feeder} -> done(ref, feeder) end
    )
  end
end
