defmodule NxJax.Worker.Deadline do
  @moduledoc """
  A call's deadline, in one place. It is made once per call from the call's `:timeout`
  (`NxJax.Worker.Config.call/1`) and kept by the process that reads the call's reply from the
  port: the worker's GenServer (`NxJax.Worker.Server`, one timer for all its pending
  requests) for the requests it writes, the borrower (`NxJax.Worker.LentPort`) for its own.
  Either one ends a call past its deadline the same way: the caller gets `expired/2`'s error,
  and the GenServer replaces the Python process, stuck on that call or on one before it.

  The caller's own wait for a reply from the GenServer ends `grace/0` later: it only matters
  when the GenServer cannot answer at all (suspended, or a process that is not a worker), and
  then the caller gets `unanswered/1`'s error. (A deadline travels to the GenServer as its
  timeout, as monotonic clocks differ between nodes; the GenServer counts it from the
  request's arrival.)
  """

  # the extra wait past a call's deadline for a GenServer that cannot answer at all
  @grace 5_000

  @typedoc "`:infinity`, or the monotonic millisecond it passes at and the timeout it came from."
  @type t :: :infinity | {integer, pos_integer}

  @doc "The deadline of a call of `timeout` (milliseconds or `:infinity`) made at `now`."
  @spec new(timeout, integer) :: t
  def new(:infinity, _now), do: :infinity
  def new(timeout, now), do: {now + timeout, timeout}

  @doc "Whether `deadline` has passed at `now`."
  @spec passed?(t, integer) :: boolean
  def passed?(:infinity, _now), do: false
  def passed?({at, _timeout}, now), do: at <= now

  @doc "Milliseconds from `now` until monotonic millisecond `at` (`:infinity` for none)."
  def remaining(:infinity, _now), do: :infinity
  def remaining(at, now), do: max(at - now, 0)

  @doc "How long past a call's deadline its caller waits for a GenServer that cannot answer."
  def grace, do: @grace

  @doc """
  The error of a call past its deadline of `timeout` ms, on a worker whose Python process
  `os_pid` is replaced for it (the GenServer's requests and a borrower's alike).
  """
  def expired(timeout, os_pid),
    do: {"Timeout", NxJax.WorkerError.busy_text(timeout, os_pid), ""}

  @doc "The error of a call whose GenServer did not answer by its deadline plus `grace/0`."
  def unanswered(timeout),
    do: {"Timeout", "no reply from the worker within #{timeout} ms", ""}
end
