defmodule NxJax.Resident do
  @moduledoc """
  Resident tensors, whichever Nx nx_jax is built against: the `%NxJax.Backend{}` data of a
  tensor whose values stay on a worker (its `handle` there, its `guard`, an `NxJax.Guard`, and
  for a small result a `copy` of its bytes). How a tensor becomes resident, is read, travels
  to a call, is freed, and what an unknown handle means, for the backend of either front end
  (`NxJax.Backend`, docs/ARCHITECTURE.md "Two projects") and its compiler.
  """

  @doc "The worker pid of a resident tensor, `nil` for anything else."
  def worker(%Nx.Tensor{data: %NxJax.Backend{worker: worker}}), do: worker
  def worker(_other), do: nil

  @doc false
  # The wire form of a concrete tensor for a call on `server`: a handle when it is resident
  # there, its data otherwise.
  def to_wire(%Nx.Tensor{data: %NxJax.Backend{worker: server, handle: handle}}, server),
    do: {:ref, handle}

  # (a binary backend tensor's state is its data, as Nx.to_binary/1 returns it)
  def to_wire(%Nx.Tensor{type: type, shape: shape, data: %Nx.BinaryBackend{state: data}}, _),
    do: {type, shape, data}

  def to_wire(%Nx.Tensor{type: type, shape: shape} = tensor, _server),
    do: {type, shape, Nx.to_binary(tensor)}

  @doc "The data of a resident tensor, fetched from its worker (it stays resident)."
  def read(%Nx.Tensor{data: %NxJax.Backend{copy: copy, guard: guard}} = tensor)
      when is_binary(copy) do
    # (read as its worker would answer: not once it was freed or donated; a guard made on
    # another node says nothing here, so its worker answers)
    case guard_status(guard) do
      :armed ->
        copy

      {:foreign, _node} ->
        fetch(tensor)

      _gone ->
        error = %NxJax.WorkerError{class: "UnknownHandle", message: "", traceback: ""}
        raise explain_unknown(error, [tensor])
    end
  end

  def read(tensor), do: fetch(tensor)

  defp fetch(%Nx.Tensor{data: %NxJax.Backend{worker: worker, handle: handle}} = tensor) do
    [{_type, _shape, binary}] =
      try do
        NxJax.Worker.fetch([handle], server: alive!(worker))
      rescue
        error in NxJax.WorkerError -> reraise explain_unknown(error, [tensor]), __STACKTRACE__
      end

    # (its guard must outlive the request that names its handle)
    NxJax.Guard.keep(tensor)
    binary
  end

  @doc false
  # An `UnknownHandle` error of a request on `tensors`, said in the terms of what happened to
  # the first of them that is no longer resident.
  def explain_unknown(%NxJax.WorkerError{class: "UnknownHandle"} = error, tensors) do
    gone =
      Enum.find_value(tensors, fn
        %Nx.Tensor{data: %NxJax.Backend{guard: guard}} ->
          with status when status != :armed <- guard_status(guard), do: status

        _other ->
          nil
      end)

    case gone do
      :donated ->
        %{
          error
          | message:
              "a resident tensor of this call was donated to an earlier call " <>
                "(its `donate:` option), which reused its memory for a result: use that call's " <>
                "results instead, or donate only what is not read again"
        }

      :deallocated ->
        %{
          error
          | message:
              "a resident tensor of this call was freed with " <>
                "Nx.backend_deallocate/1 (or moved off the worker with Nx.backend_transfer/2) and " <>
                "cannot be read any more"
        }

      {:foreign, node} ->
        %{
          error
          | message:
              "a resident tensor of this call was made on another node (#{inspect(node)}), " <>
                "which freed it once its own processes let go of it: a resident tensor lives " <>
                "as long as references to it on the node that made it; send " <>
                "Nx.backend_copy(tensor, Nx.BinaryBackend) across nodes instead"
        }

      nil ->
        error
    end
  end

  def explain_unknown(error, _tensors), do: error

  # A guard's status (NxJax.Guard.status/1), or {:foreign, node} for one made on another node
  # (a NIF resource is only valid on its own node; elsewhere it is an opaque reference)
  defp guard_status(guard) when node(guard) == node(), do: NxJax.Guard.status(guard)
  defp guard_status(guard), do: {:foreign, node(guard)}

  @doc "Makes a concrete tensor resident on the least busy worker."
  def put(%Nx.Tensor{type: type, shape: shape} = tensor) do
    NxJax.Pool.with_worker(nil, fn worker ->
      [{:ref, handle, guard}] =
        NxJax.Worker.put([{type, shape, Nx.to_binary(tensor)}], server: worker)

      %Nx.Tensor{tensor | data: %NxJax.Backend{worker: worker, handle: handle, guard: guard}}
    end)
  end

  @doc "`tensor` with `binary` as its data, on the binary backend."
  def binary_tensor(tensor, binary),
    do: %Nx.Tensor{tensor | data: %Nx.BinaryBackend{state: binary}}

  @doc """
  Frees a resident tensor: `:ok`, or `:already_deallocated` when it was freed before (here or
  in another process that has the same tensor) or its worker has exited. Nothing waits for
  the worker: the tensor's guard answers, and a later request of this process reaches the
  worker after the free.
  """
  def deallocate(%Nx.Tensor{data: %NxJax.Backend{worker: worker, handle: handle, guard: guard}})
      when node(guard) != node() do
    # (a guard of another node cannot be disarmed here: the worker is told, and the guard's
    # own free comes later, harmless)
    if alive?(worker), do: NxJax.Worker.release(worker, [handle]), else: :already_deallocated
  end

  def deallocate(%Nx.Tensor{data: %NxJax.Backend{worker: worker, handle: handle, guard: guard}}) do
    if NxJax.Guard.disarm(guard, :deallocated) and alive?(worker) do
      NxJax.Worker.release(worker, [handle])
    else
      :already_deallocated
    end
  end

  def deallocate(_tensor), do: :already_deallocated

  # (a worker on another node is taken to be alive: its GenServer answers if it is not)
  @doc false
  def alive?(worker) when node(worker) == node(), do: Process.alive?(worker)
  def alive?(_worker), do: true

  defp alive!(worker) do
    if alive?(worker) do
      worker
    else
      raise NxJax.WorkerError,
        class: "WorkerExited",
        message:
          "the worker holding this resident tensor (#{Kernel.inspect(worker)}) has exited, " <>
            "and its data with it; keep a copy with Nx.backend_copy/1 if it must survive"
    end
  end
end
