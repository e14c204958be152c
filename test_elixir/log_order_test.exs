defmodule NxJax.LogOrderTest do
  # NxJax.Worker.LogOrder: numbered lines, arriving in any order, some never, are released in
  # their numbers' order; a gap given up releases what follows it; a line after its gap was
  # given up is released at once.
  use ExUnit.Case, async: true
  alias NxJax.Worker.LogOrder

  defp feed(order, seqs) do
    Enum.flat_map_reduce(seqs, order, fn seq, order ->
      {order, ready} = LogOrder.arrive(order, seq, "line #{seq}")
      {ready, order}
    end)
  end

  test "lines in order are released as they come" do
    {ready, order} = feed(LogOrder.new(), [1, 2, 3])
    assert ready == ["line 1", "line 2", "line 3"]
    refute LogOrder.gap?(order)
  end

  test "an early line waits for the ones before it, then all go out in order" do
    {ready, order} = feed(LogOrder.new(), [1, 4, 3])
    assert ready == ["line 1"]
    assert LogOrder.gap?(order)
    {ready, order} = feed(order, [2])
    assert ready == ["line 2", "line 3", "line 4"]
    refute LogOrder.gap?(order)
    assert {_, ["line 5"]} = LogOrder.arrive(order, 5, "line 5")
  end

  test "a gap given up releases the held lines in order; a line of that gap comes late, at once" do
    {[], order} = feed(LogOrder.new(), [3, 5])
    {order, ready} = LogOrder.give_up(order)
    assert ready == ["line 3", "line 5"]
    refute LogOrder.gap?(order)
    # the next expected follows the last released; 1, 2 and 4 come late
    {ready, order} = feed(order, [6, 2, 4, 7])
    assert ready == ["line 6", "line 2", "line 4", "line 7"]
    assert {^order, []} = LogOrder.give_up(order)
  end

  # a shuffled 1..n with about a sixth never arriving; the gap timer ends after an arrival with
  # probability `give_up` (0: only once all arrived)
  defp random_run(round, give_up) do
    :rand.seed(:exsss, {round, 7, 11})
    n = :rand.uniform(40)
    arrived = Enum.shuffle(Enum.reject(1..n, fn _ -> :rand.uniform(6) == 1 end))

    {released, order} =
      Enum.flat_map_reduce(arrived, LogOrder.new(), fn seq, order ->
        # (late: its gap was given up before it came)
        late = if seq < order.next, do: [{:late, seq}], else: []
        {order, ready} = LogOrder.arrive(order, seq, seq)

        if :rand.uniform() < give_up do
          {order, more} = LogOrder.give_up(order)
          {late ++ ready ++ more, order}
        else
          {late ++ ready, order}
        end
      end)

    {_, rest} = LogOrder.give_up(order)
    {arrived, released ++ rest}
  end

  test "random arrivals with losses, the gap given up only at the end: all, in order" do
    for round <- 1..500 do
      {arrived, released} = random_run(round, 0)
      assert released == Enum.sort(arrived)
    end
  end

  test "random arrivals with losses and give-ups: each line once, in order but for late ones" do
    for round <- 1..500 do
      {arrived, released} = random_run(round, 0.15)
      late = for {:late, seq} <- released, do: seq
      released = Enum.reject(released, &match?({:late, _}, &1))
      assert Enum.sort(released) == Enum.sort(arrived)
      in_order = released -- late
      assert in_order == Enum.sort(in_order)
    end
  end
end
