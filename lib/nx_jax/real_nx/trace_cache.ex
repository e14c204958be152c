defmodule NxJax.TraceCache do
  @moduledoc """
  The traces of the compiler under real Nx 0.7.2 (`NxJax` in lib/nx_jax/real_nx/compiler.ex),
  by real Nx's key and the argument signature: at most `config :nx_jax, trace_cache_size:`
  entries (default 1024).

  Real Nx calls its compiler on every call of a jitted function with the function as the key,
  so a closure that captures a changing value is a new key at every call: the cache must not
  grow with them, and a function called over and over must stay in it.

  Layout: one ETS set, written only by this process (its owner), holds
  `{cache_key, {entry, marks, slot, counters}}`; `marks` is an `:atomics` array with one mark
  per slot of the cache. A hit is one `:ets.lookup_element/3` from the caller, one
  `:atomics.put/3` that marks its slot used and one counter: it writes nothing to the table. A
  miss traces in the caller and hands the entry to the owner, which alone inserts and evicts
  (so the table never holds more than the size). Each process also remembers the last entry it
  used, so that a loop's repeated call copies nothing from the table.

  Eviction is the clock (second chance) policy: a hand goes round the slots; a marked slot
  loses its mark and is passed over, an unmarked one is evicted and takes the new entry. An
  entry hit at least once per turn of the hand is never evicted; new entries start unmarked,
  so a trace used once goes before one in use.

      NxJax.TraceCache.stats()
      #=> %{size: 1024, entries: 12, traces: 12, hits: 3051, evictions: 0}
  """

  use GenServer

  @default_size 1024
  # counters: traces (misses that inserted), hits, evictions
  @traces 1
  @hits 2
  @evictions 3

  @doc """
  The cache's capacity, `config :nx_jax, trace_cache_size:` (a positive integer); raises
  `ArgumentError` for anything else.
  """
  def size! do
    case Application.get_env(:nx_jax, :trace_cache_size, @default_size) do
      size when is_integer(size) and size > 0 ->
        size

      other ->
        raise ArgumentError,
              "config :nx_jax, trace_cache_size: must be a positive integer (the number of " <>
                "traces the compiler keeps; default #{@default_size}), got: #{inspect(other)}"
    end
  end

  @doc false
  def start_link(_opts), do: GenServer.start_link(__MODULE__, size!(), name: __MODULE__)

  @doc """
  The entry kept for `cache_key`, or the one `trace` (a function of no arguments) makes, kept
  for the next calls.
  """
  def fetch(cache_key, trace) do
    case Process.get(__MODULE__) do
      {^cache_key, {entry, marks, slot, counters}} ->
        hit(marks, slot, counters)
        entry

      _other ->
        kept = lookup(cache_key, trace)
        Process.put(__MODULE__, {cache_key, kept})
        elem(kept, 0)
    end
  end

  defp hit(marks, slot, counters) do
    :atomics.put(marks, slot, 1)
    :counters.add(counters, @hits, 1)
  end

  # The table's answer is copied onto the caller's heap; the process remembers the last one
  # (a loop calls the same function over and over), so that a repeated call copies nothing.
  # It is one entry per process, and an entry stays valid when evicted: it is only a trace.
  defp lookup(cache_key, trace) do
    {_entry, marks, slot, counters} = kept = :ets.lookup_element(__MODULE__, cache_key, 2)
    hit(marks, slot, counters)
    kept
  catch
    # (not kept, or the cache is not running: lookup_element raises badarg for both)
    :error, :badarg -> GenServer.call(__MODULE__, {:put, cache_key, trace.()}, :infinity)
  end

  @doc """
  `%{size:, entries:, traces:, hits:, evictions:}`: the capacity, the entries kept, the
  traces kept since the cache started (or was `reset/0`), the calls that found theirs, and the
  entries evicted to make room.
  """
  def stats, do: GenServer.call(__MODULE__, :stats)

  @doc """
  Empties the cache and reads `config :nx_jax, trace_cache_size:` again (raising, in the
  caller, for a bad value); the counters start again from zero.
  """
  def reset, do: GenServer.call(__MODULE__, {:reset, size!()})

  ## The owner of the table

  @impl true
  def init(size) do
    :ets.new(__MODULE__, [:set, :protected, :named_table, read_concurrency: true])
    {:ok, fresh(size)}
  end

  defp fresh(size) do
    %{
      size: size,
      marks: :atomics.new(size, signed: false),
      counters: :counters.new(3, [:write_concurrency]),
      # slot => cache_key of the slots in use; the hand's next slot; the next unused slot
      keys: %{},
      hand: 1,
      unused: 1
    }
  end

  @impl true
  def handle_call({:put, cache_key, entry}, _from, state) do
    case :ets.lookup(__MODULE__, cache_key) do
      # (another caller traced the same function first: keep one)
      [{_, kept}] ->
        {:reply, kept, state}

      [] ->
        {slot, state} = free_slot(state)
        kept = {entry, state.marks, slot, state.counters}
        :ets.insert(__MODULE__, {cache_key, kept})
        :atomics.put(state.marks, slot, 0)
        :counters.add(state.counters, @traces, 1)
        {:reply, kept, %{state | keys: Map.put(state.keys, slot, cache_key)}}
    end
  end

  def handle_call(:stats, _from, state) do
    count = &:counters.get(state.counters, &1)

    stats = %{
      size: state.size,
      entries: :ets.info(__MODULE__, :size),
      traces: count.(@traces),
      hits: count.(@hits),
      evictions: count.(@evictions)
    }

    {:reply, stats, state}
  end

  def handle_call({:reset, size}, _from, _state) do
    :ets.delete_all_objects(__MODULE__)
    {:reply, :ok, fresh(size)}
  end

  # a slot never used while there is one, else the first unmarked slot from the hand on
  # (clearing the marks it passes), whose entry is evicted
  defp free_slot(%{unused: unused, size: size} = state) when unused <= size,
    do: {unused, %{state | unused: unused + 1}}

  defp free_slot(%{hand: hand, marks: marks} = state) do
    next = if hand == state.size, do: 1, else: hand + 1

    case :atomics.exchange(marks, hand, 0) do
      1 ->
        free_slot(%{state | hand: next})

      0 ->
        {evicted, keys} = Map.pop!(state.keys, hand)
        :ets.delete(__MODULE__, evicted)
        :counters.add(state.counters, @evictions, 1)
        {hand, %{state | hand: next, keys: keys}}
    end
  end
end
