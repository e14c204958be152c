defmodule Nx.Serving.Inline do
  @moduledoc false
  # Nx.Serving.run/2 after the preprocessing: the batch, in parts of the serving's batch size
  # at most (or a stream of batches), computed in the calling process; with streaming/2, in a
  # process of its own that sends each part (and the hooks named) as events, read by
  # Nx.Serving.Client's event stream.

  alias Nx.Serving.{Callbacks, Client, Output}

  def run(%Nx.Serving{streaming: nil} = serving, batch_or_stream) do
    %{module: module, arg: arg, defn_options: defn_options, batch_size: limit} = serving

    {parts, _state} =
      batch_or_stream
      |> parts(limit)
      |> Enum.map_reduce(nil, fn batch, state ->
        {:ok, state} = state || init(module, arg, batch, defn_options)
        {:execute, function, _} = Callbacks.handle_batch!(module, batch, 0, state)
        {output, metadata} = Callbacks.execute!(module, function)
        {{output, batch.size, metadata}, {:ok, state}}
      end)

    case parts do
      [] ->
        raise ArgumentError, "client_preprocessing returned an empty stream of Nx.Batch"

      [{_, _, metadata} | _] ->
        {Output.join(for {output, rows, _} <- parts, do: {output, 0, rows}), metadata}
    end
  end

  def run(%Nx.Serving{streaming: %{hooks: hooks}} = serving, batch_or_stream) do
    %{module: module, arg: arg, defn_options: defn_options, batch_size: limit} = serving
    rows = if hooks == [], do: :unknown, else: hooked_rows!(batch_or_stream, limit)
    owner = self()

    # the process that computes is monitored through an alias: the events it sends to the
    # alias after the stream stopped reading (a consumer that halts early) are dropped
    {runner, ref} =
      spawn_monitor_alias(fn ->
        receive do
          {:run, ^owner, ref, defn_options} ->
            total =
              batch_or_stream
              |> parts(limit)
              |> Enum.reduce({0, nil}, fn batch, {sent, state} ->
                {:ok, state} = state || init(module, arg, batch, defn_options)
                {:execute, function, _} = Callbacks.handle_batch!(module, batch, 0, state)
                {output, metadata} = Callbacks.execute!(module, function)
                send(ref, {ref, {:batch, sent, output, 0, batch.size, metadata}})
                {sent + batch.size, {:ok, state}}
              end)
              |> elem(0)

            send(ref, {ref, {:end, total}})
        end
      end)

    defn_options = Client.hook_options(defn_options, hooks, ref, 0, rows)
    send(runner, {:run, owner, ref, defn_options})
    Client.event_stream("run/2", ref, rows, nil)
  end

  defp spawn_monitor_alias(fun) do
    pid = spawn(fun)
    {pid, :erlang.monitor(:process, pid, alias: :demonitor)}
  end

  defp init(module, arg, batch, defn_options),
    do: Callbacks.init!(module, :inline, arg, [[batch_keys: [batch.key]] ++ defn_options])

  # hooks are streamed for a single batch, computed whole
  defp hooked_rows!(%Nx.Batch{size: size}, limit) when limit == nil or size <= limit, do: size

  defp hooked_rows!(%Nx.Batch{size: size}, limit) do
    raise ArgumentError,
          "batch size (#{size}) cannot exceed Nx.Serving server batch size of #{limit} " <>
            "when streaming hooks"
  end

  defp hooked_rows!(_stream, _limit) do
    raise ArgumentError,
          "streaming hooks do not support input streaming, input must be a Nx.Batch"
  end

  # the batches to compute: a batch in parts of `limit` rows at most, or the batches of a
  # stream, each checked
  defp parts(%Nx.Batch{size: size} = batch, limit) when limit == nil or size <= limit,
    do: [batch]

  defp parts(%Nx.Batch{} = batch, limit) do
    Stream.unfold(batch, fn
      nil -> nil
      %Nx.Batch{size: size} = batch when size <= limit -> {batch, nil}
      batch -> Nx.Batch.split(batch, limit)
    end)
  end

  defp parts(stream, limit) do
    Stream.map(stream, fn
      %Nx.Batch{size: size} = batch when limit == nil or size <= limit ->
        batch

      other ->
        raise "client_preprocessing must return a stream of Nx.Batch" <>
                if(limit, do: " of maximum size #{limit}", else: "") <>
                ", got: #{inspect(other)}"
    end)
  end
end
