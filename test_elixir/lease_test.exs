defmodule NxJax.LeaseTest do
  # The invariants of NxJax.Worker.Lease, checked on random sequences of events driven through
  # its pure transitions, without a port: a model plays the port (its connected process, the
  # frames written to it), the Python process (answers requests in order, prints lines), the
  # keeper, the GenServer's mailbox and up to three borrowers, each of which may die at any step
  # of its call. The lock is a real :atomics, read and swapped by the module's own functions
  # (Lease.borrow/2, Lease.give_back/2, Lease.perform/2), as the borrowers and the GenServer do.
  use ExUnit.Case, async: true
  alias NxJax.Worker.{Lease, LogOrder}

  @sequences 3_000
  @steps 60
  # a borrower's steps while it holds the lock
  @holding [:locked, :written, :replied, :connected_back]

  test "the lease's invariants hold after every step of random sequences of events" do
    base = :erlang.phash2(make_ref())

    for n <- 1..@sequences do
      seed = {base, n, 17}

      try do
        run_sequence(seed)
      rescue
        error in [ExUnit.AssertionError] ->
          reraise %{error | message: "#{error.message}\n(seed #{inspect(seed)})"}, __STACKTRACE__
      end
    end
  end

  # known interleavings, spelled out (the random ones cover them too, by chance)
  test "a borrower that dies holding the port loses it; its late reply is dropped as stale" do
    m = new_model()
    m = m |> borrower_step(1) |> borrower_step(1) |> kill(1)
    m = server_request(m)
    assert m.lease.state == :waiting
    # its :DOWN: the GenServer reclaims the lock and writes what it held back
    m = deliver_all(m)
    assert m.lease.state == :held
    assert [{:borrower, _, id1}, {:server, _, id2}] = m.written
    assert id2 > id1
    assert MapSet.member?(m.lease.stale, id1)
    # Python answers the dead call, then the GenServer's
    m = m |> python_answer() |> python_answer() |> deliver_all()
    assert m.lease.stale == MapSet.new()
    assert m.pending == %{}
    check_rest(m)
  end

  test "a live borrower keeps the port; the GenServer's frames wait and go out in order" do
    m = new_model() |> borrower_step(1) |> borrower_step(1)
    m = m |> server_request() |> server_request() |> deliver_all()
    assert m.lease.state == :waiting and length(m.lease.held_back) == 2
    assert Lease.borrow(m.lend, 77) == nil
    m = m |> python_answer() |> borrower_step(1) |> borrower_step(1) |> borrower_step(1)
    m = deliver_all(m)
    assert m.lease.state == :held
    assert [{:borrower, 1, _}, {:server, _, a}, {:server, _, b}] = m.written
    assert a < b
    m = m |> python_answer() |> python_answer() |> deliver_all()
    check_rest(m)
  end

  ## the model

  defp new_model do
    lend = Lease.atomics()
    {lease, actions} = Lease.new(true, 0)

    m = %{
      lend: lend,
      lease: lease,
      now: 0,
      # the port's connected process: :server, :keeper or {:borrower, word}
      connected: :keeper,
      # frames written to the port, oldest first: {:server | :borrower, who, id}
      written: [],
      # request ids Python has read and not yet answered, oldest first
      python: [],
      keeper: [],
      mailbox: [],
      # the GenServer's requests in flight, id => true
      pending: %{},
      monitors: %{},
      timers: [],
      # b => %{word, step, alive, id, inbox}
      borrowers: %{},
      next_word: 1_000,
      lines: 0,
      logged: [],
      lost: MapSet.new(),
      # the GenServer's order of the lines (NxJax.Worker.LogOrder) and its gap timer
      log_order: LogOrder.new(),
      log_gap: false
    }

    m = Enum.reduce(1..3, m, fn b, m -> new_borrower(m, b) end)
    perform_all(m, actions)
  end

  defp new_borrower(m, b) do
    word = m.next_word + 1
    borrower = %{word: word, step: :idle, alive: true, id: nil, inbox: []}
    %{m | next_word: word, borrowers: Map.put(m.borrowers, b, borrower)}
  end

  defp run_sequence(seed) do
    :rand.seed(:exsss, seed)
    m = Enum.reduce(1..@steps, new_model(), fn _, m -> m |> random_event() |> check() end)
    check_rest(m)
  end

  defp random_event(m) do
    case :rand.uniform(11) do
      1 -> server_request(m)
      n when n in 2..4 -> borrower_step(m, :rand.uniform(3))
      5 -> if :rand.uniform(4) == 1, do: kill(m, :rand.uniform(3)), else: m
      6 -> python_answer(m)
      7 -> python_line(m)
      8 -> deliver(m)
      9 -> fire_timer(m)
      10 -> %{m | now: m.now + :rand.uniform(30)}
      11 -> fire_log_gap(m)
    end
  end

  # the GenServer gets a request: a new id, in flight, handed to the lease
  defp server_request(m) do
    id = Lease.next_id(m.lend)
    m = %{m | pending: Map.put(m.pending, id, true)}
    transition(m, Lease.request(m.lease, {:request, id}))
  end

  # one step of borrower b's call (LentPort.call/4, give_back/3)
  defp borrower_step(m, b) do
    case m.borrowers[b] do
      %{alive: false} ->
        new_borrower(m, b)

      %{step: :idle, word: word} = bw ->
        case Lease.borrow(m.lend, word) do
          nil ->
            m

          id ->
            # invariant 3: no borrow starts while the GenServer waits for the port
            assert m.lease.state != :waiting, "a borrow started while the GenServer waits"
            put_borrower(m, b, %{bw | step: :locked, id: id})
        end

      %{step: :locked, id: id, word: word} = bw ->
        m = connect(m, {:borrower, word})
        m = write(m, {:borrower, b, id})
        put_borrower(m, b, %{bw | step: :written})

      %{step: :written} ->
        # waiting for its reply (python_answer/1 routes it)
        m

      %{step: :replied} = bw ->
        put_borrower(connect(m, :keeper), b, %{bw | step: :connected_back})

      %{step: :connected_back, word: word, inbox: inbox} = bw ->
        waits = Lease.give_back(m.lend, word)
        m = if waits, do: to_mailbox(m, :port_back), else: m
        # what came after its reply goes to the GenServer, in order, once it gave the port back
        m = Enum.reduce(Enum.reverse(inbox), m, &forward/2)
        put_borrower(m, b, %{bw | step: :idle, id: nil, inbox: []})
    end
  end

  defp put_borrower(m, b, bw), do: %{m | borrowers: Map.put(m.borrowers, b, bw)}

  defp kill(m, b) do
    case m.borrowers[b] do
      %{alive: true} = bw ->
        # (what was in its mailbox dies with it)
        m = Enum.reduce(bw.inbox, m, &lose(&2, &1))
        m = put_borrower(m, b, %{bw | alive: false, inbox: []})
        downs = for {ref, word} <- m.monitors, word == bw.word, do: {:down, ref}
        Enum.reduce(downs, m, &to_mailbox(&2, &1))

      _ ->
        m
    end
  end

  defp python_answer(%{python: [id | rest]} = m), do: emit(%{m | python: rest}, {:reply, id})
  defp python_answer(m), do: m

  defp python_line(m) do
    n = m.lines + 1
    emit(%{m | lines: n}, {:log, n})
  end

  # the port's connected process changes
  defp connect(m, to), do: %{m | connected: to}

  # a frame from the port goes to its connected process
  defp emit(m, frame) do
    case m.connected do
      :server ->
        to_mailbox(m, {:frame, frame})

      :keeper ->
        %{m | keeper: m.keeper ++ [frame]}

      {:borrower, word} ->
        {b, bw} = by_word(m, word)

        case {bw, frame} do
          {nil, _} ->
            lose(m, frame)

          {%{step: :written, id: id} = bw, {:reply, id}} ->
            put_borrower(m, b, %{bw | step: :replied})

          # a frame not its own reply: forwarded while it waits (LentPort.settle/4), kept in
          # its mailbox after (forwarded once it gave the port back)
          {%{step: :written}, _} ->
            forward(frame, m)

          {bw, _} ->
            put_borrower(m, b, %{bw | inbox: [frame | bw.inbox]})
        end
    end
  end

  # the live borrower of `word`, or {nil, nil} (it died, and may have been replaced)
  defp by_word(m, word) do
    Enum.find(m.borrowers, {nil, nil}, fn {_, bw} -> bw.word == word and bw.alive end)
  end

  # a frame a borrower hands the GenServer
  defp forward(frame, m), do: to_mailbox(m, {:frame, frame})

  defp lose(m, {:log, n}), do: %{m | lost: MapSet.put(m.lost, n)}
  defp lose(m, {:reply, _id}), do: m

  defp to_mailbox(m, message), do: %{m | mailbox: m.mailbox ++ [message]}

  defp deliver(%{mailbox: [message | rest]} = m), do: handle(%{m | mailbox: rest}, message)
  defp deliver(m), do: m

  defp deliver_all(%{mailbox: []} = m), do: m
  defp deliver_all(m), do: m |> deliver() |> deliver_all()

  # the GenServer (NxJax.Worker.Server.handle_info/2)
  defp handle(m, :port_back), do: transition(m, Lease.port_back(m.lease))

  defp handle(m, {:down, ref}) do
    m = %{m | monitors: Map.delete(m.monitors, ref)}
    transition(m, Lease.borrower_down(m.lease, ref))
  end

  defp handle(m, {:frame, {:reply, id}}) do
    if Map.has_key?(m.pending, id) do
      m = %{m | pending: Map.delete(m.pending, id)}
      transition(m, Lease.replied(m.lease, map_size(m.pending), m.now))
    else
      # invariant 2: a reply no request of the GenServer waits for is a dead borrower's
      {stale, lease} = Lease.stale_reply(m.lease, id)
      assert stale, "a reply to request #{id} was taken for no one's"
      %{m | lease: lease}
    end
  end

  defp handle(m, {:timer, due}) do
    case Lease.drain_tick(m.lease, due, Lease.lent_calls(m.lend), m.now) do
      :stale -> m
      next -> m |> transition(next) |> drain_keeper()
    end
  end

  # a line is logged once those numbered before it are; while one is missing, the keeper is
  # drained and the gap timer armed (NxJax.Worker.Server's fill_log_gap/1)
  defp handle(m, {:frame, {:log, n}}) do
    {order, ready} = LogOrder.arrive(m.log_order, n, n)
    m = %{m | log_order: order, logged: m.logged ++ ready}

    if LogOrder.gap?(order) do
      m = drain_keeper(m)
      %{m | log_gap: LogOrder.gap?(m.log_order)}
    else
      %{m | log_gap: false}
    end
  end

  defp drain_keeper(%{keeper: kept} = m),
    do: Enum.reduce(kept, %{m | keeper: []}, &handle(&2, {:frame, &1}))

  # The gap timer (LogOrder.gap_ms/0, 50 ms) ends: the keeper is drained and the held lines
  # logged. The model lets it end only when no line is on its way to the GenServer from a live
  # process (in its mailbox, in a borrower's): it stands for a time longer than a hand-over.
  defp fire_log_gap(%{log_gap: true} = m) do
    if in_transit(m) == [] do
      m = drain_keeper(m)
      {order, ready} = LogOrder.give_up(m.log_order)
      %{m | log_order: order, logged: m.logged ++ ready, log_gap: false}
    else
      m
    end
  end

  defp fire_log_gap(m), do: m

  defp in_transit(m) do
    mailbox = for {:frame, {:log, n}} <- m.mailbox, do: n
    inboxes = for {_, %{alive: true, inbox: inbox}} <- m.borrowers, {:log, n} <- inbox, do: n
    mailbox ++ inboxes
  end

  # a drain timer fires (the current one, or one since moved): its message joins the mailbox
  defp fire_timer(%{timers: []} = m), do: m

  defp fire_timer(m) do
    due = Enum.random(m.timers)
    m = %{m | timers: List.delete(m.timers, due), now: max(m.now, due)}
    to_mailbox(m, {:timer, due})
  end

  # the GenServer's interpreter of the lease's actions (NxJax.Worker.Server.perform/2)
  defp transition(m, {lease, actions}), do: perform_all(%{m | lease: lease}, actions)

  defp perform_all(m, actions), do: Enum.reduce(actions, m, &perform/2)

  defp perform({:write, frames}, m), do: Enum.reduce(frames, m, &write(&2, &1))

  defp perform({:connect, :server}, m) do
    assert_no_live_holder(m, "connected the port to itself")
    connect(m, :server)
  end

  defp perform({:connect, :keeper}, m), do: connect(m, :keeper)

  defp perform(:try_take, m),
    do: transition(m, Lease.tried(m.lease, Lease.perform(m.lend, :try_take)))

  defp perform({:reclaim, _word} = action, m) do
    {seen, lent_id} = Lease.perform(m.lend, action)
    transition(m, Lease.reclaimed(m.lease, seen, lent_id))
  end

  defp perform({:monitor, word}, m) do
    ref = make_ref()
    # (a monitor of a process that is gone fires at once, :noproc)
    m =
      case by_word(m, word) do
        {nil, nil} -> to_mailbox(m, {:down, ref})
        _live -> %{m | monitors: Map.put(m.monitors, ref, word)}
      end

    %{m | lease: Lease.monitored(m.lease, ref)}
  end

  defp perform({:demonitor, ref}, m) do
    %{m | monitors: Map.delete(m.monitors, ref), mailbox: List.delete(m.mailbox, {:down, ref})}
  end

  defp perform({:drain_timer, due}, m), do: %{m | timers: [due | m.timers]}

  defp perform(lock_action, m) do
    Lease.perform(m.lend, lock_action)
    m
  end

  # invariant 1: only the lock's holder writes, through the port connected to it
  defp write(m, {:request, id}) do
    assert :atomics.get(m.lend, 1) == -1, "the GenServer wrote without the lock"
    assert m.connected == :server, "the GenServer wrote to a port connected elsewhere"
    assert_no_live_holder(m, "wrote")
    %{m | written: m.written ++ [{:server, :gen_server, id}], python: m.python ++ [id]}
  end

  defp write(m, {:borrower, b, id} = frame) do
    assert :atomics.get(m.lend, 1) == m.borrowers[b].word, "a borrower wrote without the lock"
    assert m.connected == {:borrower, m.borrowers[b].word}
    %{m | written: m.written ++ [frame], python: m.python ++ [id]}
  end

  # invariant 4: a live borrower is never dispossessed
  defp assert_no_live_holder(m, what) do
    for {b, %{alive: true, step: step}} <- m.borrowers, step in @holding do
      flunk("the GenServer #{what} while live borrower #{b} held the port (#{step})")
    end
  end

  # after every step
  defp check(m) do
    ids = for {_, _, id} <- m.written, do: id
    # invariant 2: one counter, so no id twice
    assert ids == Enum.uniq(ids), "a request id was written twice"
    # invariant 3: the GenServer's requests go out in the order they came (ids are taken in
    # that order), and no borrow starts while it waits (the flag is up)
    server_ids = for {:server, _, id} <- m.written, do: id
    assert server_ids == Enum.sort(server_ids), "held-back frames were written out of order"

    if m.lease.state == :waiting do
      assert :atomics.get(m.lend, 3) == 1
      assert (m.lease.borrower != nil and m.lease.monitor != nil) or m.lease.gone
    end

    assert m.lease.state in [:held, :free, :waiting]
    # invariant 6: the lines logged so far, each once, in the order printed, whichever
    # processes read them from the port
    assert m.logged == Enum.sort(m.logged), "lines were logged out of order: #{inspect(m.logged)}"
    assert m.logged == Enum.uniq(m.logged), "a line was logged twice: #{inspect(m.logged)}"

    m
  end

  # Let every live borrower finish, Python answer everything, the GenServer read its mail and
  # make one request of its own (so that a lock left by a dead borrower is reclaimed), then
  # drain: invariant 5 (at rest: lock 0, no wait, the keeper connected, nothing held back) and 6
  # (every line logged that did not go to a dead borrower, in order).
  defp check_rest(m) do
    m = m |> settle(200) |> server_request() |> settle(200)
    m = Enum.reduce(m.timers, m, fn _, m -> fire_timer(m) end)
    m = m |> deliver_all() |> drain_keeper() |> fire_log_gap() |> check()
    assert m.pending == %{} and m.python == []
    assert :atomics.get(m.lend, 1) == 0, "at rest, the lock is #{:atomics.get(m.lend, 1)}"
    assert :atomics.get(m.lend, 3) == 0
    assert m.connected == :keeper
    assert m.lease.state == :free and m.lease.held_back == [] and m.lease.monitor == nil
    assert m.keeper == []
    printed = for n <- 1..m.lines//1, not MapSet.member?(m.lost, n), do: n
    assert m.logged == printed
  end

  defp settle(_m, 0), do: flunk("the model did not come to rest")

  defp settle(m, tries) do
    busy = for {b, %{alive: true, step: step}} <- m.borrowers, step != :idle, do: b

    cond do
      m.mailbox != [] -> settle(deliver(m), tries - 1)
      m.python != [] -> settle(python_answer(m), tries - 1)
      busy != [] -> settle(borrower_step(m, hd(busy)), tries - 1)
      true -> m
    end
  end
end
