defmodule NxJax.Worker.LogOrder do
  @moduledoc """
  Puts a worker's output lines back in the order the Python process wrote them before they
  are logged. Each line comes numbered (`{:log, stream, line, seq}`, docs/PROTOCOL.md section
  2.1: 1, 2, 3, ... in the order written to the channel), but the port's frames are read by
  whichever process holds the port at the time (`NxJax.Worker.Lease`): the GenServer, its
  keeper while the port rests, a borrower during its call. So a line can reach the GenServer
  after a later one: the keeper holds it until it is drained, or a borrower hands it over.

  This is the GenServer's bookkeeping for that, as a pure struct: a line is logged when every
  line numbered before it has been; one that comes early is held until the gap before it
  fills. A gap can also be for good: the lines a borrower read before it died die with it
  (invariant 6 of `NxJax.Worker.Lease`). So the GenServer gives a gap a short time
  (`gap_ms/0`), draining the keeper first, and then logs what it holds (`give_up/1`); a line
  that comes after its gap was given up is logged at once, out of order (`arrive/3` returns it
  in `ready`), never dropped.
  """

  defstruct next: 1, held: %{}

  @type t :: %__MODULE__{next: pos_integer, held: %{pos_integer => term}}

  # how long a gap in the numbers may wait before the lines after it are logged
  @gap_ms 50

  @doc "No line seen yet: the first one expected is number 1."
  def new, do: %__MODULE__{}

  @doc "Milliseconds a gap may wait for its lines (then `give_up/1`)."
  def gap_ms, do: @gap_ms

  @doc """
  Line number `seq` (with `entry`, what to log) came. Returns the order and the entries
  ready to log now, in order: `entry` and the held ones that follow it when it was the next
  expected, none when it came early (it is held), and `entry` alone when its number was
  passed (a gap given up: it is logged late rather than never).
  """
  def arrive(%__MODULE__{next: next} = order, seq, entry) when seq == next,
    do: release(%{order | next: next + 1}, [entry])

  def arrive(%__MODULE__{next: next} = order, seq, entry) when seq > next,
    do: {%{order | held: Map.put(order.held, seq, entry)}, []}

  def arrive(%__MODULE__{} = order, _seq, entry), do: {order, [entry]}

  @doc "Whether lines are held, waiting for one numbered before them."
  def gap?(%__MODULE__{held: held}), do: map_size(held) > 0

  @doc """
  The missing lines are taken for lost: returns the held entries in order, and the order
  expecting the number after the last of them.
  """
  def give_up(%__MODULE__{held: held} = order) when map_size(held) == 0, do: {order, []}

  def give_up(%__MODULE__{held: held} = order) do
    seqs = held |> Map.keys() |> Enum.sort()
    entries = Enum.map(seqs, &Map.fetch!(held, &1))
    {%{order | held: %{}, next: List.last(seqs) + 1}, entries}
  end

  # the held entries numbered next, next + 1, ... that follow without a gap
  defp release(%__MODULE__{next: next, held: held} = order, ready) do
    case Map.pop(held, next) do
      {nil, _} -> {order, Enum.reverse(ready)}
      {entry, held} -> release(%{order | next: next + 1, held: held}, [entry | ready])
    end
  end
end
