defmodule NxJax.Worker.LentPort do
  @moduledoc """
  The lent port: a repeated graph call borrows its worker's port for its own round trip, so
  that its reply skips the hop through the worker's GenServer (`NxJax.Worker.Server`). Whether it pays is measured in docs/BENCHMARKS.md
  section 1; `lend_port: false` (a start option, or `config :nx_jax, lend_port: false`) turns
  it off, and the GenServer then holds the port for good.

  A call may borrow when it is a `run_cached/5` with a key this Python process already knows,
  of wire-tensor arguments, whose results come back (no `keep`), without hooks, to a worker of
  this node.

  Who holds the port, the lock shared with the GenServer, the protocol's states and its
  invariants are `NxJax.Worker.Lease`'s; the keeper, the port's connected process at rest,
  is `NxJax.Worker.Keeper`. This module is the borrower's side: take the lock
  (`NxJax.Worker.Lease.borrow/2`), connect the port, write, wait, connect it back, free the
  lock, hand the GenServer what was not this call's.

  The borrower connects the port with the port message `{owner, {:connect, pid}}`, which does
  not link it to the port as `:erlang.port_connect/2` would: a linked caller killed, even in
  the instant before an unlink, closes the port (a test of 3,000 kills closed it within 30).
  """
  alias NxJax.Wire
  alias NxJax.Worker.Lease

  ## Borrower (the calling process)

  @doc """
  Makes the call `message` (a request of `NxJax.Worker.Caller`) by borrowing the port of
  worker `dest` (`local`: its shared state, `NxJax.Worker.Caller.local/1`), if it may (see
  the moduledoc), and returns its reply; nil where the call goes through the GenServer
  instead. `wait.(port, lent)` is the caller's waiting loop: it waits for the reply on the
  port, handing each message from it to `settle/4` with `lent` (`{id, os_pid, lend}`), until
  the call's deadline, past which it returns `{:expired, error}`.
  """
  def call(dest, local, {:graph_call, key, _graph, args, false, _owner, []}, wait)
      when is_pid(dest) and node(dest) == node() do
    with %{lend: lend, me: me} when me != nil <- local,
         true <- known?(local.known, key),
         id when id != nil <- Lease.borrow(lend, me) do
      reply =
        if take_port(local.keeper, local.port, Wire.graph_call_frame(id, key, nil, args, false)) do
          Lease.count_lent(lend)
          # (the borrower enforces the deadline of its own request, after_lent/3)
          wait.(local.port, {id, local.os_pid, lend})
        end

      give_back(dest, local, me)
      after_lent(dest, key, reply)
    else
      _ -> nil
    end
  end

  def call(_dest, _local, _message, _wait), do: nil

  # (the table is gone with its worker)
  defp known?(known, key) do
    :ets.member(known, key)
  rescue
    ArgumentError -> false
  end

  # Connects the port to this process and writes `frame`; false if the port is closed. The
  # connect is the port message `{owner, {:connect, pid}}`, `owner` being the port's keeper
  # while the port is free, which the port answers `{port, :connected}` to the keeper.
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
    if Lease.give_back(lend, me), do: send(dest, :nx_jax_port_back)
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

  @doc """
  What a borrower does with `message`, which came from the port while it waits for request
  `id` (a worker whose Python process is `os_pid`, atomics `lend`): its own reply, the error
  of a Python process that died, or `:more` when the message is for the GenServer (a log line,
  a late reply to a call that gave up), which is handed to it.
  """
  def settle({id, os_pid, lend}, dest, port, message) do
    case message do
      {:data, frame} ->
        case Wire.fast_reply(frame, id) do
          {^id, reply} ->
            Lease.count_fast_reply(lend)
            reply

          nil ->
            own_reply(Wire.decode_reply(frame), id, dest, port, message)
        end

      {:exit_status, status} ->
        send(dest, {port, message})
        text = NxJax.WorkerError.exited_text(os_pid, status)
        # (the borrowed call is the one the worker was running)
        {:error, NxJax.WorkerError.exit_error(text, status, true)}

      _other ->
        :more
    end
  end

  # (a frame of the port that is not this call's reply goes to the GenServer)
  defp own_reply({id, reply}, id, _dest, _port, _message), do: reply

  defp own_reply(_other, _id, dest, port, message) do
    send(dest, {port, message})
    :more
  end
end
