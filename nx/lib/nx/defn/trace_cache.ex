defmodule Nx.Defn.TraceCache do
  @moduledoc """
  The bounded cache of encoded traces behind `Nx.Defn.Compiler`: at most
  `config :nx, trace_cache_size: n` entries (default #{1024}).

  Entries live in `:persistent_term`, so a hit copies nothing and costs one lookup plus one
  `:counters` read (the entry's "used" mark, set if it was clear). A caller that keeps the
  mark (`fetch/1`) checks with `still?/1` that the entry was not evicted since (a process's
  plan of a repeated call does, `Nx.Defn.Compiler`). A miss that finds the cache full evicts
  one entry first, the least recently used as approximated by the clock (second chance) policy:
  entries wait in insertion order; the oldest is evicted unless it was used since it was last
  looked at, in which case its mark is cleared and it goes to the back of the queue. An
  eviction erases a persistent term, which costs the VM a scan of every process's heap, so
  the bound is meant to be met only by programs that keep making new graphs.

  `stats/0` counts entries and evictions (`NxJax.Pool.stats/0` reports them).
  """

  import Bitwise

  @default_size 1024
  @queue __MODULE__.Queue
  # an evicted entry's "used" mark is set to minus this (still?/1)
  @evicted_by 1 <<< 40
  @owner __MODULE__.Owner

  @doc "The cache's capacity: `config :nx, trace_cache_size:` (a positive integer)."
  def size do
    case Application.get_env(:nx, :trace_cache_size, @default_size) do
      n when is_integer(n) and n > 0 ->
        n

      other ->
        raise ArgumentError,
              "config :nx, trace_cache_size: must be a positive integer, got: " <>
                inspect(other)
    end
  end

  @doc """
  The value cached under `key` (marking it used), or `nil`.
  """
  def get(key) do
    case fetch(key) do
      {value, _mark} -> value
      nil -> nil
    end
  end

  @doc """
  As `get/1`, with the entry's mark: `{value, mark}` or `nil`. `still?/1` of the mark tells
  later whether the entry is still cached, without looking the key up again.
  """
  def fetch(key) do
    case :persistent_term.get(key, nil) do
      {value, used} ->
        still?(used)
        {value, used}

      nil ->
        nil
    end
  end

  @doc """
  Whether the entry whose mark `fetch/1` gave is still cached, marking it used if so. (A check
  that races the entry's eviction may answer `true` that once; the value is the same.)
  """
  def still?(used) do
    case :counters.get(used, 1) do
      0 ->
        # (added, not put: an eviction's mark that came in between stays negative)
        :counters.add(used, 1, 1)
        true

      n ->
        n > 0
    end
  end

  @doc "Caches `value` under `key` (a new key), evicting one entry first if the cache is full."
  def put(key, value) do
    queue = queue()
    # (each entry is looked at at most twice: once to clear its mark, once to evict it)
    evict_until(queue, size() - 1, 2 * :ets.info(queue, :size) + 2)
    :persistent_term.put(key, {value, :counters.new(1, [])})
    :ets.insert(queue, {{System.monotonic_time(), :erlang.unique_integer()}, key})
    value
  end

  @doc "`%{trace_cache_entries:, trace_cache_evictions:}`."
  def stats do
    queue = queue()

    %{
      trace_cache_entries: :ets.info(queue, :size),
      trace_cache_evictions: :counters.get(evictions(), 1)
    }
  end

  # the clock hand: the oldest entry goes unless used since, then it is given another round
  defp evict_until(queue, keep, tries) do
    with true <- tries > 0 and :ets.info(queue, :size) > keep,
         slot when slot != :"$end_of_table" <- :ets.first(queue),
         [{^slot, key}] <- :ets.take(queue, slot) do
      case :persistent_term.get(key, nil) do
        {_value, used} ->
          if :counters.get(used, 1) > 0 do
            :counters.put(used, 1, 0)
            :ets.insert(queue, {{System.monotonic_time(), :erlang.unique_integer()}, key})
          else
            :counters.put(used, 1, -@evicted_by)
            :persistent_term.erase(key)
            :counters.add(evictions(), 1, 1)
          end

        nil ->
          :ok
      end

      evict_until(queue, keep, tries - 1)
    else
      # (another process took the slot first, or nothing is left to evict)
      [] -> evict_until(queue, keep, tries - 1)
      _ -> :ok
    end
  end

  # The queue of keys in insertion order: an ETS table owned by a process of its own that
  # lives as long as the VM (a caller's death must not take the table with it).
  defp queue do
    case :ets.whereis(@queue) do
      :undefined -> start_owner()
      _table -> @queue
    end
  end

  defp start_owner do
    parent = self()

    pid =
      spawn(fn ->
        try do
          :ets.new(@queue, [:ordered_set, :public, :named_table, write_concurrency: true])
          Process.register(self(), @owner)
        rescue
          # another process created it first
          ArgumentError -> :ok
        end

        send(parent, {@owner, self()})
        if Process.whereis(@owner) == self(), do: Process.sleep(:infinity)
      end)

    receive do
      {@owner, ^pid} -> @queue
    end
  end

  defp evictions do
    case :persistent_term.get({__MODULE__, :evictions}, nil) do
      nil ->
        ref = :counters.new(1, [:write_concurrency])
        :persistent_term.put({__MODULE__, :evictions}, ref)
        ref

      ref ->
        ref
    end
  end
end
