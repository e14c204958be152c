defmodule NxJax.Backend do
  @moduledoc """
  A resident tensor on a worker: the `data` of an `%Nx.Tensor{}` whose values stay in the
  worker's memory (as a JAX array), named by an integer `handle`, and freed there when its
  Elixir terms are garbage collected (its `guard`, an `NxJax.Guard`).

  Resident tensors come from `Nx.backend_transfer(tensor, NxJax.Backend)`, or from any `defn`
  call or eager op when an argument is resident or when the calling process has set
  `Nx.default_backend(NxJax.Backend)`. Such calls send only handles, and their results stay on
  the worker, so a training loop ships its parameters once:

      params = Nx.backend_transfer({w1, w2}, NxJax.Backend)
      params = Enum.reduce(1..100, params, fn _, params -> MLP.step(params, x, y) end)
      {w1, w2} = Nx.backend_transfer(params)

  `Nx.to_binary/1`, `Nx.to_number/1`, inspection and the other readers fetch the data (and
  leave it resident). `Nx.backend_transfer/1,2` and `Nx.backend_copy/1,2` bring it back;
  `Nx.backend_deallocate/1` frees it at once.

  ## Lifetime

  A resident tensor lives as long as some process holds it, as EXLA's device buffers do: once
  every process that had the term (or a copy of it: sent in a message, stored in ETS) has
  garbage collected it or exited, its guard tells `NxJax.Worker.Collector`, which frees it on
  the worker with the others of the same collection. A process that allocates little collects
  seldom; the worker therefore counts its resident bytes, and each time they grow by
  `config :nx_jax, resident_gc_bytes:` (default 64 MiB) it has the processes that took its
  resident results lately garbage collected (docs/DEPLOYMENT.md, "Resident tensors").
  Deallocating by hand, twice, from two processes, after the worker was replaced, or while a
  collection frees the same tensor is harmless: whoever disarms the guard first frees it.

  A resident tensor is not `==` to a binary one with the same values: transfer it first.
  """
  @behaviour Nx.Backend

  @enforce_keys [:worker, :handle, :guard]
  defstruct [:worker, :handle, :guard, copy: nil]

  # `copy`: the data of a small result (at most 64 bytes, a loss), which came with it, so that
  # reading it costs no request
  @type t :: %__MODULE__{worker: pid, handle: pos_integer, guard: reference, copy: binary | nil}

  @doc "The worker pid of a resident tensor, `nil` for anything else."
  def worker(%Nx.Tensor{data: %__MODULE__{worker: worker}}), do: worker
  def worker(_other), do: nil

  @doc false
  # The wire form of a concrete tensor for a call on `server`: a handle when it is resident
  # there, its data otherwise.
  def to_wire(%Nx.Tensor{data: %__MODULE__{worker: server, handle: handle}}, server),
    do: {:ref, handle}

  # (a binary backend tensor's state is its data, as Nx.to_binary/1 returns it)
  def to_wire(%Nx.Tensor{type: type, shape: shape, data: %Nx.BinaryBackend{state: data}}, _),
    do: {type, shape, data}

  def to_wire(%Nx.Tensor{type: type, shape: shape} = tensor, _server),
    do: {type, shape, Nx.to_binary(tensor)}

  @doc "The data of a resident tensor, fetched from its worker (it stays resident)."
  @impl true
  def to_binary(%Nx.Tensor{data: %__MODULE__{copy: copy, guard: guard}} = tensor)
      when is_binary(copy) do
    # (read as its worker would answer: not once it was freed or donated)
    case NxJax.Guard.status(guard) do
      :armed ->
        copy

      _gone ->
        error = %NxJax.WorkerError{class: "UnknownHandle", message: "", traceback: ""}
        raise explain_unknown(error, [tensor])
    end
  end

  def to_binary(%Nx.Tensor{data: %__MODULE__{worker: worker, handle: handle}} = tensor) do
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
        %Nx.Tensor{data: %__MODULE__{guard: guard}} ->
          with status when status != :armed <- NxJax.Guard.status(guard), do: status

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

      nil ->
        error
    end
  end

  def explain_unknown(error, _tensors), do: error

  @doc """
  Copies a concrete tensor to `backend` (`Nx.BinaryBackend` or `NxJax.Backend`, optionally as
  `{backend, opts}`); the source stays valid.
  """
  @impl true
  def copy(tensor, backend) do
    case {tensor.data, backend_module(backend)} do
      {%__MODULE__{}, Nx.BinaryBackend} -> binary_tensor(tensor, to_binary(tensor))
      {%__MODULE__{}, __MODULE__} -> tensor |> binary_tensor(to_binary(tensor)) |> put()
      {%Nx.BinaryBackend{}, Nx.BinaryBackend} -> tensor
      {%Nx.BinaryBackend{}, __MODULE__} -> put(tensor)
    end
  end

  @doc "Moves a concrete tensor to `backend`, freeing the resident source when it moves off."
  @impl true
  def transfer(%Nx.Tensor{data: %__MODULE__{}} = tensor, backend) do
    if backend_module(backend) == __MODULE__ do
      tensor
    else
      copied = copy(tensor, backend)
      deallocate(tensor)
      copied
    end
  end

  def transfer(tensor, backend), do: copy(tensor, backend)

  @doc """
  Frees a resident tensor: `:ok`, or `:already_deallocated` when it was freed before (here or
  in another process that has the same tensor) or its worker has exited. Nothing waits for
  the worker: the tensor's guard answers, and a later request of this process reaches the
  worker after the free.
  """
  @impl true
  def deallocate(%Nx.Tensor{data: %__MODULE__{worker: worker, handle: handle, guard: guard}}) do
    if NxJax.Guard.disarm(guard, :deallocated) and alive?(worker) do
      NxJax.Worker.release(worker, [handle])
    else
      :already_deallocated
    end
  end

  def deallocate(_tensor), do: :already_deallocated

  @doc false
  # Called by Inspect for tensors whose data is this struct.
  @impl true
  def inspect(%Nx.Tensor{} = tensor, opts) do
    body =
      binary_tensor(tensor, to_binary(tensor))
      |> Inspect.inspect(opts)
      |> Inspect.Algebra.format(:infinity)
      |> IO.iodata_to_binary()
      |> String.split("\n")
      |> Enum.slice(2..-2//1)
      |> Enum.map_join("\n", &String.replace_prefix(&1, "  ", ""))

    "NxJax.Backend<#{Kernel.inspect(tensor.data.worker)}, #{tensor.data.handle}>\n" <> body
  end

  defp put(%Nx.Tensor{type: type, shape: shape} = tensor) do
    NxJax.Pool.with_worker(nil, fn worker ->
      [{:ref, handle, guard}] =
        NxJax.Worker.put([{type, shape, Nx.to_binary(tensor)}], server: worker)

      %Nx.Tensor{tensor | data: %__MODULE__{worker: worker, handle: handle, guard: guard}}
    end)
  end

  defp binary_tensor(tensor, binary),
    do: %Nx.Tensor{tensor | data: %Nx.BinaryBackend{state: binary}}

  defp backend_module({module, _opts}) when is_atom(module), do: backend_module(module)
  defp backend_module(module) when module in [Nx.BinaryBackend, __MODULE__], do: module

  defp backend_module(other) do
    raise ArgumentError,
          "unknown backend #{Kernel.inspect(other)}: nx_jax tensors live in Nx.BinaryBackend " <>
            "(Elixir memory) or NxJax.Backend (resident on a worker)"
  end

  # (a worker on another node is taken to be alive: its GenServer answers if it is not)
  defp alive?(worker) when node(worker) == node(), do: Process.alive?(worker)
  defp alive?(_worker), do: true

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
