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

  It is also where a call interrupted by its worker's exit is retried (`retry/3`), the one
  place for `NxJax.Worker.Caller` (a call to a registered name) and `NxJax.Pool` (a call it
  placed): no retry onto a worker that waits long to start again.
  """

  require Logger

  @pool {__MODULE__, :pool}
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

  @doc """
  Records the pool's worker names (a tuple, index order) and its pacing state (`new/1`), for
  `restart_wait/1`; `NxJax.Pool` does it when it starts.
  """
  def register(names, ref) when is_tuple(names), do: :persistent_term.put(@pool, {names, ref})

  @doc """
  For the pool worker registered as `name`: `{quick, ms}` while it waits to start again after
  `quick` quick deaths in a row (`ms` until its start), else `nil`.
  """
  def restart_wait(name) do
    with {names, ref} <- :persistent_term.get(@pool, nil),
         index when index != nil <- Enum.find_index(Tuple.to_list(names), &(&1 == name)),
         true <- index < div(:atomics.info(ref).size, 2) do
      waiting({ref, index})
    else
      _ -> nil
    end
  end

  @doc "`restart_wait/1` when the wait is over a second (a call is then not retried)."
  def long_restart_wait(name) do
    case restart_wait(name) do
      {_quick, ms} = wait when ms > 1_000 -> wait
      _ -> nil
    end
  end

  @doc """
  The one retry of a call to the worker registered as `name` that failed because the worker
  `old` exited: `{:waits, quick, ms}` when that worker waits more than a second to start again
  (no retry: its caller gets the error now); else, once a worker other than `old` is
  registered under `name` (up to 10 s), `{:retried, again.()}`; `:none_came` if none was.
  """
  def retry(name, old, again) when is_function(again, 0) do
    case long_restart_wait(name) do
      {quick, ms} -> {:waits, quick, ms}
      nil -> if await_restart(name, old, 500), do: {:retried, again.()}, else: :none_came
    end
  end

  # a worker other than `before` registered under the name `server` (every 20 ms, `tries` times)
  defp await_restart(server, before, tries) do
    case GenServer.whereis(server) do
      pid when is_pid(pid) and pid != before ->
        true

      _ when tries > 0 ->
        Process.sleep(20)
        await_restart(server, before, tries - 1)

      _ ->
        false
    end
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
