defmodule NxJax.Worker.Keeper do
  @moduledoc """
  A worker port's keeper: the port's connected process while it rests (`NxJax.Worker.Lease`,
  state `:free`), kept suspended (`:erlang.suspend_process/1`) so that the port's answer to
  each borrower's connect (sent to the port's previous owner) wakes no process: with the
  GenServer as the port's owner at rest, each borrowed call woke it, often on another
  scheduler (docs/BENCHMARKS.md section 1). What the port sends while it rests (a log line,
  the exit status of a Python process that died) waits in the keeper's queue until the
  GenServer drains it (`drain/1`). Linked to the GenServer that starts it, and through
  `:erlang.port_connect/2` to the port. A worker started with `off: [:keeper]` (to measure
  what the keeper saves, docs/BENCHMARKS.md "Latency mechanisms") has none: its port rests
  with the GenServer.
  """

  @doc "Starts the keeper of `port`, connects the port to it and suspends it."
  def start(port) do
    keeper = spawn_link(fn -> keep(port, []) end)
    :erlang.port_connect(port, keeper)
    :erlang.suspend_process(keeper)
    keeper
  end

  defp keep(port, kept) do
    receive do
      {^port, :connected} ->
        keep(port, kept)

      {:nx_jax_drain, from, ref} ->
        send(from, {ref, Enum.reverse(kept)})
        keep(port, [])

      message ->
        keep(port, [message | kept])
    end
  end

  @doc "Stops the keeper (it outlives a GenServer that stops with reason `:normal`)."
  def stop(nil), do: :ok
  def stop(keeper), do: Process.exit(keeper, :kill)

  @doc "Whether the keeper holds messages from the port (`drain/1` would return some)."
  def kept?(keeper) when is_pid(keeper) do
    match?({:message_queue_len, n} when n > 0, Process.info(keeper, :message_queue_len))
  end

  def kept?(nil), do: false

  @doc "What came from the port while it rested with the keeper, in order."
  def drain(nil), do: []

  def drain(keeper) do
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
end
