defmodule NxJax.Worker.Backoff do
  @moduledoc """
  Restart pacing of the pool's workers: a worker that dies soon after it started is started
  again later and later, so a crash loop (a poison call, a broken environment) never becomes a
  tight loop and never exhausts the supervisor's restart intensity; the application stays up
  and service returns by itself when the cause goes away.

  A start is *quick* when it comes less than 3 s after the previous start of the same
  pool slot. The first start after a stable run starts at once; each further quick start in a
  row waits twice as long as the one before, from 100 ms up to 5 s. The state is two
  `:atomics` slots per pool index (count of quick starts in a row, time of the last start),
  made by `NxJax.Pool`, so that it outlives the worker processes.
  """

  require Logger

  @stable_ms 3_000
  @base_ms 100
  @max_ms 5_000

  @doc "The pacing state of a pool of `size` workers (worker `i`'s `:backoff` is `{ref, i}`)."
  def new(size), do: :atomics.new(2 * size, signed: true)

  @doc """
  Called when the worker at `{ref, index}` starts: waits as the pacing says, then returns the
  number of quick starts in a row (0 after a stable run). `nil` (a worker outside the pool)
  waits for nothing.
  """
  def before_start(nil), do: 0

  def before_start({ref, index}) do
    now = System.monotonic_time(:millisecond)
    last = :atomics.get(ref, 2 * index + 2)
    quick = if last != 0 and now - last < @stable_ms, do: :atomics.get(ref, 2 * index + 1) + 1
    quick = quick || 0
    delay = delay(quick)
    :atomics.put(ref, 2 * index + 1, quick)
    :atomics.put(ref, 2 * index + 2, now + delay)

    if delay > 0 do
      Logger.warning(
        "nx_jax: worker #{index} died #{quick} time(s) in a row within #{@stable_ms} ms of " <>
          "its start; starting it again in #{delay} ms"
      )

      Process.sleep(delay)
    end

    quick
  end

  @doc "The wait before the `quick`-th quick start in a row, in milliseconds."
  def delay(0), do: 0
  def delay(quick), do: min(@max_ms, @base_ms * Integer.pow(2, min(quick - 1, 16)))

  @doc """
  For the worker at `{ref, index}`: `{quick, ms}` when it is waiting to start again (`quick`
  quick starts in a row, `ms` until its start), else `nil`.
  """
  def waiting({ref, index}) do
    start = :atomics.get(ref, 2 * index + 2)
    left = start - System.monotonic_time(:millisecond)
    if left > 0, do: {:atomics.get(ref, 2 * index + 1), left}
  end
end
