defmodule NxJax.Worker.Lease do
  @moduledoc """
  Who holds a worker's port now: the GenServer (`NxJax.Worker.Server`), its suspended keeper
  (the port at rest), or a caller that borrowed it for one repeated call
  (`NxJax.Worker.LentPort`). This module is the one place that says so: the lock shared with
  borrowers (an `:atomics`), and the GenServer's side of the protocol as a struct whose
  transitions are pure functions returning `{lease, actions}`. The GenServer performs the
  actions (port connects and writes, the lock's compare-and-swaps, monitors, timers) and
  feeds what an action observed back in (`tried/2`, `reclaimed/3`, `monitored/2`); a
  borrower's own compare-and-swap is, for the GenServer, an event it sees through them.

  ## The lock (the worker's atomics, `atomics/1`)

  | index | name               | meaning                                                      |
  |-------|--------------------|--------------------------------------------------------------|
  | 1     | `lock`             | 0: free; -1: the GenServer holds the port; else the borrower, as its `pid_word/1` |
  | 2     | `ids`              | the last request id given out (to the GenServer or a borrower) |
  | 3     | `gen_server_waits` | 1 while the GenServer waits for the port: no new borrow starts |
  | 4     | `lent_calls`       | how many calls borrowed the port                              |
  | 5     | `lent_id`          | the request id of the last borrower                          |
  | 6     | `fast_replies`     | borrowed calls whose reply `NxJax.Wire.fast_reply/2` read     |

  ## States (the struct's `:state`)

  ```text
                    GenServer has a request (request/2, :try_take: lock 0 -> -1)
         +--------------------------------------------------------------+
         |                                                              v
      :free  <-----------------------------------------------------  :held
   lock 0; the port's                no request in flight           lock -1; the port
   connected process is              (replied/3: lock -1 -> 0)      connected to the
   the keeper, suspended                                            GenServer
         |  ^                                                           ^
   borrow|  | give back (connect to the keeper,                         |
   (lock |  |  lock me -> 0, :nx_jax_port_back                          |
   0->me)|  |  if gen_server_waits)                                     |
         v  |                                                           |
    (borrowed: still :free   --- GenServer gets a request --->  :waiting -------+
     for the GenServer, which      (gen_server_waits 1; its    the borrower gives the port back
     does not know)                frames held back; the       (port_back/1), or dies holding it
                                   borrower monitored)         (borrower_down/2, reclaimed/3:
                                                               lock me -> -1, its request id
                                                               marked stale)
  ```

  ## Invariants (property-tested in `test_elixir/lease_test.exs` on random sequences of
  events, and on a real worker in `test_elixir/lent_port_test.exs`)

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
     the keeper (the GenServer in a worker without one, `off: [:keeper]`) and nothing is held
     back.
  6. Nothing the port sends is lost, but what it sent to a borrower that died: frames a
     borrower reads that are not its reply (a log line, a late reply) go to the GenServer; what
     the port sends while it rests with the keeper waits there until the GenServer drains it,
     within 20 ms while calls borrow the port and within a second when the worker is idle.
     Output lines are logged in the order the Python process wrote them, whichever processes
     read them: they come numbered, and the GenServer holds a line that comes while one
     numbered before it has not, draining the keeper and then waiting
     `NxJax.Worker.LogOrder.gap_ms/0` for the missing one (only a dead borrower's lines never
     come; one handed over later than that is logged when it comes, out of order).

  ## Actions

  `{:write, frames}` (in order), `{:connect, :server | :keeper}`, `:try_take` (set
  `gen_server_waits` to 1, then compare-and-swap the lock 0 -> -1; its result goes to
  `tried/2`), `{:reclaim, word}` (compare-and-swap the lock word -> -1; the result and
  `lent_id` go to `reclaimed/3`), `:release` (the lock to 0), `:clear_waits`
  (`gen_server_waits` to 0), `{:monitor, word}` (a monitor of `pid_of_word(word)`, given to
  `monitored/2`), `{:demonitor, ref}`, `{:drain_timer, due}` (a timer at monotonic millisecond
  `due` whose message gives `due` to `drain_tick/4`), `:hold_for_good` (the lock to -1: a
  worker that lends no port).
  """

  @lock 1
  @ids 2
  @gen_server_waits 3
  @lent_calls 4
  @lent_id 5
  @fast_replies 6
  @gen_server -1
  # the keeper is drained every this many milliseconds while calls borrow the port, and every
  # @drain_idle_ms otherwise (drain_tick/4)
  @drain_busy_ms 20
  @drain_idle_ms 1_000
  # (the ids of the last this many requests of borrowers that died are kept, reclaimed/3)
  @max_stale 64

  @type word :: pos_integer
  @type action ::
          {:write, [iodata]}
          | {:connect, :server | :keeper}
          | :try_take
          | {:reclaim, word}
          | :release
          | :clear_waits
          | {:monitor, word}
          | {:demonitor, reference}
          | {:drain_timer, integer}
          | :hold_for_good

  @type t :: %__MODULE__{
          lends: boolean,
          state: :held | :free | :waiting,
          borrower: word | nil,
          gone: boolean,
          monitor: reference | nil,
          held_back: [iodata],
          stale: MapSet.t(),
          drain_due: integer | nil,
          drained_at: non_neg_integer
        }

  # `borrower`: the word of the borrower the GenServer waits for (nil until the lock names
  # it); `gone`: it died (its monitor fired); `held_back`: frames to write, newest first
  defstruct lends: true,
            state: :held,
            borrower: nil,
            gone: false,
            monitor: nil,
            held_back: [],
            stale: MapSet.new(),
            drain_due: nil,
            drained_at: 0

  ## The GenServer's transitions (pure)

  @doc """
  The lease of a new worker at monotonic millisecond `now`: one that `lends` starts at rest
  with its keeper; one that does not holds its port for good.
  """
  @spec new(boolean, integer) :: {t, [action]}
  def new(true, now) do
    due = now + @drain_idle_ms
    {%__MODULE__{lends: true, state: :free, drain_due: due}, [{:drain_timer, due}]}
  end

  def new(false, _now), do: {%__MODULE__{lends: false, state: :held}, [:hold_for_good]}

  @doc """
  The GenServer has request `frame` to write: written now while it holds the port, held back
  while it waits for it, or held back while it tries to take it from its keeper.
  """
  @spec request(t, iodata) :: {t, [action]}
  def request(%__MODULE__{state: :held} = lease, frame), do: {lease, [{:write, [frame]}]}

  def request(%__MODULE__{state: :waiting} = lease, frame),
    do: {%{lease | held_back: [frame | lease.held_back]}, []}

  def request(%__MODULE__{state: :free} = lease, frame),
    do: {%{lease | state: :waiting, borrower: nil, held_back: [frame]}, [:try_take]}

  @doc """
  What `:try_take` saw: `:ok` (the GenServer took the lock: the port is its own, the frames
  held back are written), or the lock's value, a borrower's word.
  """
  @spec tried(t, :ok | integer) :: {t, [action]}
  def tried(%__MODULE__{state: :waiting} = lease, :ok), do: took(lease)

  def tried(%__MODULE__{state: :waiting, borrower: word, gone: true} = lease, word),
    do: {lease, [{:reclaim, word}]}

  def tried(%__MODULE__{state: :waiting, borrower: word} = lease, word), do: {lease, []}

  def tried(%__MODULE__{state: :waiting} = lease, other) when is_integer(other) and other > 0 do
    {lease, undo} = unwatch(lease)
    {%{lease | borrower: other, gone: false}, undo ++ [{:monitor, other}]}
  end

  @doc "The monitor `{:monitor, word}` made."
  @spec monitored(t, reference) :: t
  def monitored(%__MODULE__{state: :waiting, monitor: nil} = lease, ref),
    do: %{lease | monitor: ref}

  @doc "The borrower gave the port back (its `:nx_jax_port_back`): try to take it."
  @spec port_back(t) :: {t, [action]}
  def port_back(%__MODULE__{state: :waiting} = lease), do: {lease, [:try_take]}
  def port_back(lease), do: {lease, []}

  @doc """
  A monitor fired: when it is that of the borrower the GenServer waits for, the borrower is
  gone, and the port is taken back (from the lock, or from the borrower's word).
  """
  @spec borrower_down(t, reference) :: {t, [action]}
  def borrower_down(%__MODULE__{state: :waiting, monitor: ref} = lease, ref)
      when is_reference(ref),
      do: {%{lease | monitor: nil, gone: true}, [:try_take]}

  def borrower_down(lease, _ref), do: {lease, []}

  @doc """
  What `{:reclaim, word}` saw (`:ok`: the GenServer took the lock from the dead borrower,
  whose request id `lent_id` is now stale; else it had given the port back before it died).
  """
  @spec reclaimed(t, :ok | integer, integer) :: {t, [action]}
  def reclaimed(%__MODULE__{state: :waiting} = lease, :ok, lent_id) do
    stale = if MapSet.size(lease.stale) < @max_stale, do: lease.stale, else: MapSet.new()
    took(%{lease | stale: MapSet.put(stale, lent_id)})
  end

  def reclaimed(%__MODULE__{state: :waiting} = lease, _other, _lent_id),
    do: {%{lease | gone: false}, [:try_take]}

  @doc """
  A reply came and `pending` requests are still in flight, at monotonic millisecond `now`:
  with none, the GenServer lets the port rest with its keeper (the keeper's next drain then
  comes within #{@drain_busy_ms} ms: a line printed while answering may follow the reply).
  """
  @spec replied(t, non_neg_integer, integer) :: {t, [action]}
  def replied(%__MODULE__{lends: true, state: :held} = lease, 0, now) do
    lease = %{lease | state: :free}
    actions = [{:connect, :keeper}, :release]

    if lease.drain_due > now + @drain_busy_ms do
      due = now + @drain_busy_ms
      {%{lease | drain_due: due}, actions ++ [{:drain_timer, due}]}
    else
      {lease, actions}
    end
  end

  def replied(lease, _pending, _now), do: {lease, []}

  @doc """
  The drain timer due at `due` fired, `lent_calls` calls having borrowed the port so far:
  `:stale` for a timer since moved, else the next timer's action (within #{@drain_busy_ms} ms
  while calls borrow the port, else #{@drain_idle_ms} ms), and the GenServer drains the
  keeper.
  """
  @spec drain_tick(t, integer, non_neg_integer, integer) :: {t, [action]} | :stale
  def drain_tick(%__MODULE__{drain_due: due} = lease, due, lent_calls, now) do
    next = if lent_calls != lease.drained_at, do: @drain_busy_ms, else: @drain_idle_ms
    {%{lease | drain_due: now + next, drained_at: lent_calls}, [{:drain_timer, now + next}]}
  end

  def drain_tick(_lease, _due, _lent_calls, _now), do: :stale

  @doc """
  Whether the reply to request `id`, which no pending request has, is that of a borrower that
  died (then dropped, and the id forgotten).
  """
  @spec stale_reply(t, integer) :: {boolean, t}
  def stale_reply(lease, id) do
    if MapSet.member?(lease.stale, id),
      do: {true, %{lease | stale: MapSet.delete(lease.stale, id)}},
      else: {false, lease}
  end

  @doc "Whether the GenServer holds the port now."
  @spec held?(t) :: boolean
  def held?(%__MODULE__{state: state}), do: state == :held

  # The port is the GenServer's: the frames held back are written, in the order they came.
  defp took(lease) do
    {lease, undo} = unwatch(lease)
    frames = Enum.reverse(lease.held_back)

    {%{lease | state: :held, borrower: nil, gone: false, held_back: []},
     undo ++ [:clear_waits, {:connect, :server}, {:write, frames}]}
  end

  defp unwatch(%__MODULE__{monitor: nil} = lease), do: {lease, []}
  defp unwatch(lease), do: {%{lease | monitor: nil}, [{:demonitor, lease.monitor}]}

  ## The lock, shared with borrowers

  @doc "The atomics of a new worker's lock (see \"The lock\")."
  def atomics, do: :atomics.new(6, signed: true)

  @doc "The id of a new request (one counter for the GenServer and every borrower)."
  def next_id(lend), do: :atomics.add_get(lend, @ids, 1)

  @doc "How many calls borrowed the port."
  def lent_calls(lend), do: :atomics.get(lend, @lent_calls)

  @doc "How many borrowed calls had their reply read by `NxJax.Wire.fast_reply/2`."
  def fast_replies(lend), do: :atomics.get(lend, @fast_replies)

  @doc "Counts a borrowed reply read by `NxJax.Wire.fast_reply/2`."
  def count_fast_reply(lend), do: :atomics.add(lend, @fast_replies, 1)

  @doc """
  A borrower `me` (its `pid_word/1`) takes the free port, unless the GenServer waits for it:
  the id of its request, or nil.
  """
  def borrow(lend, me) do
    with 0 <- :atomics.get(lend, @gen_server_waits),
         :ok <- :atomics.compare_exchange(lend, @lock, 0, me) do
      id = :atomics.add_get(lend, @ids, 1)
      :atomics.put(lend, @lent_id, id)
      id
    else
      _ -> nil
    end
  end

  @doc "Counts a borrowed call whose request was written."
  def count_lent(lend), do: :atomics.add(lend, @lent_calls, 1)

  @doc """
  Borrower `me` frees the lock (the port connected back to its keeper): whether the GenServer
  waits for it (then it is told, `:nx_jax_port_back`).
  """
  def give_back(lend, me) do
    :atomics.compare_exchange(lend, @lock, me, 0)
    :atomics.get(lend, @gen_server_waits) != 0
  end

  @doc "Performs a lock action of the GenServer (see \"Actions\"); returns what it saw."
  def perform(lend, :try_take) do
    :atomics.put(lend, @gen_server_waits, 1)
    :atomics.compare_exchange(lend, @lock, 0, @gen_server)
  end

  def perform(lend, {:reclaim, word}),
    do: {:atomics.compare_exchange(lend, @lock, word, @gen_server), :atomics.get(lend, @lent_id)}

  def perform(lend, :release), do: :atomics.put(lend, @lock, 0)
  def perform(lend, :clear_waits), do: :atomics.put(lend, @gen_server_waits, 0)
  def perform(lend, :hold_for_good), do: :atomics.put(lend, @lock, @gen_server)

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

  @doc """
  The local pid of `word` (`pid_word/1`): this process's own encoding (NEW_PID_EXT) with the
  word's ID and serial. Taken when needed, not when the worker started: a node that starts
  distribution later changes its name, and a pid encoded under the old name is another
  node's (a monitor on it fails at once).
  """
  def pid_of_word(word) do
    bin = :erlang.term_to_binary(self())
    size = byte_size(bin)
    id_serial = <<div(word, 4_294_967_296)::32, rem(word, 4_294_967_296)::32>>

    :erlang.binary_to_term(
      binary_part(bin, 0, size - 12) <> id_serial <> binary_part(bin, size - 4, 4)
    )
  end
end
