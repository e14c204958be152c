defmodule NxJax.Worker.LentPort do
  @moduledoc """
  The lent port: a repeated graph call borrows its worker's port for its own round trip, so
  that its reply skips the hop through the worker's GenServer (`NxJax.Worker.Server`); both
  sides of the protocol live here. Whether it pays is measured in docs/BENCHMARKS.md
  section 1; `lend_port: false` (a start option, or `config :nx_jax, lend_port: false`) turns
  it off, and the GenServer then holds the port for good.

  A call may borrow when it is a `run_cached/5` with a key this Python process already knows,
  of wire-tensor arguments, whose results come back (no `keep`), without hooks, to a worker of
  this node.

  ## State

  The worker's atomics (`lend`, made by `owner_state/2`) hold the protocol's shared state:

  | index | name               | meaning                                                      |
  |-------|--------------------|--------------------------------------------------------------|
  | 1     | `lock`             | 0: free; -1: the GenServer holds the port; else the borrower, as its `pid_word/1` |
  | 2     | `ids`              | the last request id given out (to the GenServer or a borrower) |
  | 3     | `gen_server_waits` | 1 while the GenServer waits for the port: no new borrow starts |
  | 4     | `lent_calls`       | how many calls borrowed the port                              |
  | 5     | `lent_id`          | the request id of the last borrower                          |
  | 6     | `fast_replies`     | borrowed calls whose reply `NxJax.Wire.fast_reply/2` read     |

  The port is in one of four states:

  ```text
                    GenServer has a request (write/2: lock 0 -> -1)
         +--------------------------------------------------------------+
         |                                                              v
      FREE  <------------------------------------------------------  HELD
   lock 0; the port's                no request in flight           lock -1; the port
   connected process is              (free_port/1: lock -1 -> 0)    connected to the
   the keeper, suspended                                            GenServer
         |  ^                                                           ^
   borrow|  | give back (connect to the keeper,                         |
   (lock |  |  lock me -> 0, port_back if                               |
   0->me)|  |  gen_server_waits)                                        |
         v  |                                                           |
      BORROWED  --- GenServer gets a request --->  WAITING  ------------+
   lock = me; the port             (gen_server_waits 1; its    the borrower gives the port back
   connected to the borrower       frames held back; the       (retake/2), or dies holding it
                                   borrower monitored)         (reclaim/1: lock me -> -1, its
                                                               request id marked stale)
  ```

  ## Invariants (checked by `test_elixir/lent_port_test.exs`)

  1. Only the lock's holder writes to the port: the GenServer while it holds it, a borrower
     between its compare-and-swap 0 -> me and giving the port back.
  2. Every request id comes from the one `ids` counter, so no reply is ever taken for another
     request's.
  3. No borrow starts while the GenServer waits for the port, so its requests are never
     starved; the frames it held back meanwhile are written in the order they came.
  4. A live borrower is never dispossessed. One that dies holding the port (at any step of its
     call) is taken for gone: the GenServer takes the port back and drops the dead call's reply
     when it comes; the Python process, its compiled graphs and resident tensors are untouched.
  5. At rest (no request in flight, no borrower) the lock is 0, the port's connected process is
     the keeper and nothing is held back.
  6. Nothing the port sends is lost or reordered: frames a borrower reads that are not its reply
     (a log line, a late reply) go to the GenServer in order; what the port sends while it rests
     with the keeper waits there until the GenServer drains it, within 20 ms while calls borrow
     the port and within a second when the worker is idle.

  The borrower connects the port with the port message `{owner, {:connect, pid}}`, which does
  not link it to the port as `:erlang.port_connect/2` would: a linked caller killed, even in
  the instant before an unlink, closes the port (a test of 3,000 kills closed it within 30).
  The keeper is kept suspended so that the port's answer to each connect (sent to its previous
  owner) wakes no process: with the GenServer as the port's owner at rest, each borrowed call
  woke it, often on another scheduler (docs/BENCHMARKS.md section 1).
  """
  require Logger
  alias NxJax.Wire
  alias NxJax.Worker.Caller

  @lock 1
  @ids 2
  @gen_server_waits 3
  @lent_calls 4
  @lent_id 5
  @fast_replies 6
  @gen_server -1
  # the keeper is drained every this many milliseconds while calls borrow the port, and every
  # @drain_idle_ms otherwise (next_drain/1)
  @drain_busy_ms 20
  @drain_idle_ms 1_000
  # (the ids of the last this many requests of borrowers that died are kept, reclaim/1)
  @max_stale 64

  ## Borrower (the calling process)

  @doc """
  Makes the call `message` (a request of `NxJax.Worker.Caller`) by borrowing the port of
  worker `dest` (`local`: `NxJax.Worker.Caller.local/1` of it), if it may (see the
  moduledoc), and returns its reply; nil where the call goes through the GenServer instead.
  """
  def call(dest, local, {:graph_call, key, _graph, args, false, _owner, []}, limits)
      when is_pid(dest) and node(dest) == node() do
    with %{lend: lend, me: me} when me != nil <- local,
         0 <- :atomics.get(lend, @gen_server_waits),
         true <- known?(local.known, key),
         :ok <- :atomics.compare_exchange(lend, @lock, 0, me) do
      id = :atomics.add_get(lend, @ids, 1)
      :atomics.put(lend, @lent_id, id)

      reply =
        if take_port(local.keeper, local.port, Wire.graph_call_frame(id, key, nil, args, false)) do
          :atomics.add(lend, @lent_calls, 1)
          # (no grace: the caller enforces the deadline of its own request, after_lent/3)
          Caller.wait_reply(local.port, dest, limits, 0, nil, {id, local.os_pid, lend})
        end

      give_back(dest, local, me)
      after_lent(dest, key, reply)
    else
      _ -> nil
    end
  end

  def call(_dest, _local, _message, _limits), do: nil

  @doc """
  This process as one positive integer, for the lock: the ID and serial of its pid, from the
  external term format (NEW_PID_EXT: ..., ID::32, Serial::32, Creation::32); the GenServer
  turns it back into the pid with its node's own encoding (`pid_of_word/1`). nil for an
  encoding other than NEW_PID_EXT, or an ID past 31 bits: then no call of this process
  borrows a port.
  """
  def pid_word(pid) when node(pid) == node() do
    with <<131, 88, _::binary>> = bin <- :erlang.term_to_binary(pid),
         <<id::32, serial::32, _creation::32>> when id < 2_147_483_648 <-
           binary_part(bin, byte_size(bin) - 12, 12) do
      id * 4_294_967_296 + serial
    else
      _ -> nil
    end
  end

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
            :atomics.add(lend, @fast_replies, 1)
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

  ## Owner (the worker's GenServer)

  @doc """
  The fields of the GenServer's state this protocol keeps, for a worker of `port`; with
  `lend?` false the GenServer holds the port for good.
  """
  def owner_state(port, lend?) do
    lend = :atomics.new(6, signed: true)
    unless lend?, do: :atomics.put(lend, @lock, @gen_server)

    %{
      # who holds the port (see "State")
      lend: lend,
      # the port's keeper (nil on a worker that lends no port)
      keeper: if(lend?, do: start_keeper(port)),
      # {timer, due}: the keeper's next drain, and the lent_calls count at the last one
      drain_timer: if(lend?, do: drain_timer(@drain_idle_ms)),
      drained_at: 0,
      # whether the GenServer holds the port; while it waits for it, the frames it holds back
      # (newest first) and {borrower, monitor}
      holding: not lend?,
      held_back: [],
      waiting: nil,
      # ids of borrowed requests whose borrower died (reclaim/1)
      stale: MapSet.new()
    }
  end

  @doc "The id of a new request (one counter for the GenServer and every borrower)."
  def next_id(%{lend: lend}), do: :atomics.add_get(lend, @ids, 1)

  @doc "How many calls borrowed the port."
  def lent_calls(%{lend: lend}), do: :atomics.get(lend, @lent_calls)

  @doc "How many borrowed calls had their reply read by `NxJax.Wire.fast_reply/2`."
  def fast_replies(%{lend: lend}), do: :atomics.get(lend, @fast_replies)

  @doc """
  Writes a request frame to the port, taking the port first if it is free; while a borrower
  has it, the frame is held back (and the borrower monitored) until the port comes back.
  """
  def write(%{holding: true} = state, frame) do
    true = Port.command(state.port, frame)
    state
  end

  def write(%{waiting: nil} = state, frame) do
    :atomics.put(state.lend, @gen_server_waits, 1)

    case :atomics.compare_exchange(state.lend, @lock, 0, @gen_server) do
      :ok -> write(hold(state), frame)
      borrower -> watch_borrower(%{state | held_back: [frame], waiting: {borrower, nil}})
    end
  end

  def write(state, frame), do: %{state | held_back: [frame | state.held_back]}

  # Takes the port (from its keeper, or from a borrower that died) for the GenServer's own
  # requests; port_connect/2 links nothing new: the GenServer opened the port.
  defp hold(state) do
    :atomics.put(state.lend, @gen_server_waits, 0)
    :erlang.port_connect(state.port, self())
    %{state | holding: true}
  end

  @doc """
  Frees the port once no request is in flight (`state.pending` is empty), so a call may
  borrow it: the port rests with its keeper.
  """
  def free_port(%{holding: true, keeper: keeper, pending: pending} = state)
      when is_pid(keeper) and map_size(pending) == 0 do
    :erlang.port_connect(state.port, keeper)
    :atomics.put(state.lend, @lock, 0)
    # (a line the Python process prints while answering may come after its reply)
    drain_within(%{state | holding: false}, @drain_busy_ms)
  end

  def free_port(state), do: state

  @doc "The borrower gave the port back (`:nx_jax_port_back`): take it."
  def port_back(%{waiting: {_, _}} = state), do: retake(state, false)
  def port_back(state), do: state

  @doc "Whether `monitor` is that of the borrower the GenServer waits for."
  def borrower_monitor?(%{waiting: {_, monitor}}, monitor), do: monitor != nil
  def borrower_monitor?(_state, _monitor), do: false

  @doc "The borrower the GenServer waits for died: take the port back."
  def borrower_down(state), do: retake(state, true)

  # The port's keeper: the port's connected process while it is free, kept suspended
  # (:erlang.suspend_process/1). What the port sends while it rests (a log line, the exit
  # status of a Python process that died) waits in the keeper's queue until drain/1 hands it
  # over. Linked to the GenServer, and through port_connect/2 to the port.
  defp start_keeper(port) do
    keeper = spawn_link(fn -> keeper(port, []) end)
    :erlang.port_connect(port, keeper)
    :erlang.suspend_process(keeper)
    keeper
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

  @doc "Whether `pid` is this worker's keeper."
  def keeper?(%{keeper: keeper}, pid), do: keeper != nil and keeper == pid

  @doc "Stops the keeper (it outlives a GenServer that stops with reason `:normal`)."
  def stop(%{keeper: keeper}), do: if(keeper, do: Process.exit(keeper, :kill))

  @doc "Whether the keeper holds messages from the port (`drain/1` would return some)."
  def kept?(%{keeper: keeper}) when is_pid(keeper) do
    match?({:message_queue_len, n} when n > 0, Process.info(keeper, :message_queue_len))
  end

  def kept?(_state), do: false

  @doc "What came from the port while it rested with the keeper, in order."
  def drain(%{keeper: nil}), do: []

  def drain(%{keeper: keeper}) do
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

  @doc """
  Whether `timer` is that of the keeper's next drain; `next_drain/1` then sets the one after
  it: within #{@drain_busy_ms} ms while calls borrow the port (the keeper holds an answer to
  each connect), else within #{@drain_idle_ms} ms.
  """
  def drain_timer?(%{drain_timer: {timer, _}}, timer), do: true
  def drain_timer?(_state, _timer), do: false

  def next_drain(state) do
    lent = lent_calls(state)
    next = if lent != state.drained_at, do: @drain_busy_ms, else: @drain_idle_ms
    %{state | drain_timer: drain_timer(next), drained_at: lent}
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

  @doc """
  Whether the reply to request `id` is that of a borrower that died (dropped, and forgotten).
  """
  def stale_reply(state, id) do
    if MapSet.member?(state.stale, id),
      do: {true, %{state | stale: MapSet.delete(state.stale, id)}},
      else: {false, state}
  end

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
end
