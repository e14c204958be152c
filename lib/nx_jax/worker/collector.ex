defmodule NxJax.Worker.Collector do
  @moduledoc """
  Frees resident tensors whose Elixir terms were garbage collected, in batches.

  Every resident tensor holds an `NxJax.Guard` whose message, `{:nx_jax_collected, worker,
  handle}`, comes here when the last process holding the tensor has collected it (or exited).
  The collector gathers those of one burst (a garbage collection of one process frees many at
  once) and sends each worker one `{:nx_jax_released, handles}`, which its GenServer turns into
  one `free` request: a burst costs the worker one request, not one per tensor.

  One collector runs on each node (`NxJax.Application` starts it before any worker), registered
  under this module's name; a guard made on a node sends to that node's collector, which
  reaches workers on other nodes as well. A message for a worker that has exited is dropped
  with the worker's tensors.
  """
  use GenServer

  @doc false
  def start_link(opts \\ []), do: GenServer.start_link(__MODULE__, opts, name: __MODULE__)

  @doc """
  A guard for resident `handle` on `worker`: when it is garbage collected, the handle is freed.
  Raises when no collector runs on this node (the `:nx_jax` application is not started).
  """
  def guard(worker, handle) do
    collector =
      Process.whereis(__MODULE__) ||
        raise RuntimeError,
              "nx_jax's collector is not running: start the :nx_jax application " <>
                "(Application.ensure_all_started(:nx_jax)) before making tensors resident"

    NxJax.Guard.new(collector, {:nx_jax_collected, worker, handle})
  end

  @doc """
  A ref of `worker` as the worker answered it (`{:ref, handle}`, or `{:ref, handle, data}`
  for a small result that came with a copy of its bytes), with a guard added:
  `{:ref, handle, guard}` or `{:ref, handle, guard, data}`.
  """
  def guard_ref({:ref, handle}, worker), do: {:ref, handle, guard(worker, handle)}

  def guard_ref({:ref, handle, data}, worker) when is_binary(data),
    do: {:ref, handle, guard(worker, handle), data}

  @impl true
  def init(_opts) do
    # {worker => [handle]} gathered since the last flush; whether a flush is queued
    {:ok, %{dead: %{}, flush: false}}
  end

  @impl true
  def handle_info({:nx_jax_collected, worker, handle}, state) do
    dead = Map.update(state.dead, worker, [handle], &[handle | &1])
    # (the flush message goes behind whatever is in the mailbox now: the rest of the burst)
    unless state.flush, do: send(self(), :nx_jax_flush)
    {:noreply, %{state | dead: dead, flush: true}}
  end

  def handle_info(:nx_jax_flush, state) do
    Enum.each(state.dead, fn {worker, handles} -> send(worker, {:nx_jax_released, handles}) end)
    {:noreply, %{state | dead: %{}, flush: false}}
  end

  def handle_info(_other, state), do: {:noreply, state}
end
