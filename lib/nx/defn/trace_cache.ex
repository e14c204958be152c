defmodule Nx.Defn.TraceCache do
  @moduledoc """
  The bounded cache of encoded traces behind `Nx.Defn.Compiler`: at most
  `config :nx_jax, trace_cache_size: n` entries (default #{1024}).

  Entries live in `:persistent_term`, so a hit copies nothing and costs one lookup plus one
  `:counters` write (the entry's "used" mark). A miss that finds the cache full evicts one
  entry first, the least recently used as approximated by the clock (second chance) policy:
  entries wait in insertion order; the oldest is evicted unless it was used since it was last
  looked at, in which case its mark is cleared and it goes to the back of the queue. An
  eviction erases a persistent term, which costs the VM a scan of every process's heap, so
  the bound is meant to be met only by programs that keep making new graphs.

  `stats/0` counts entries and evictions (`NxJax.Pool.stats/0` reports them).
  """

  @default_size 1024
  @queue __MODULE__.Queue
  @owner __MODULE__.Owner

  @doc "The cache's capacity: `config :nx_jax, trace_cache_size:` (a positive integer)."
  def size do
    case Application.get_env(:nx_jax, :trace_cache_size, @default_size) do
      n when is_integer(n) and n > 0 ->
        n

      other ->
        raise ArgumentError,
              "config :nx_jax, trace_cache_size: must be a positive integer, got: " <>
                inspect(other)
    end
  end

  @doc """
  The value cached under `key` (marking it used), or `nil`.
  """
  def get(key) do
    case :persistent_term.get(key, nil) do
      {value, used} ->
        :counters.put(used, 1, 1)
        value

      nil ->
        nil
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
          if :counters.get(used, 1) == 1 do
            :counters.put(used, 1, 0)
            :ets.insert(queue, {{System.monotonic_time(), :erlang.unique_integer()}, key})
          else
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
