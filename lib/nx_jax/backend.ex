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
  defdelegate worker(tensor), to: NxJax.Resident

  @doc false
  defdelegate to_wire(tensor, server), to: NxJax.Resident

  @doc "The data of a resident tensor, fetched from its worker (it stays resident)."
  @impl true
  defdelegate to_binary(tensor), to: NxJax.Resident, as: :read

  @doc false
  defdelegate explain_unknown(error, tensors), to: NxJax.Resident

  @doc """
  Copies a concrete tensor to `backend` (`Nx.BinaryBackend` or `NxJax.Backend`, optionally as
  `{backend, opts}`); the source stays valid.
  """
  @impl true
  def copy(tensor, backend) do
    case {tensor.data, backend_module(backend)} do
      {%__MODULE__{}, Nx.BinaryBackend} ->
        NxJax.Resident.binary_tensor(tensor, to_binary(tensor))

      {%__MODULE__{}, __MODULE__} ->
        tensor |> NxJax.Resident.binary_tensor(to_binary(tensor)) |> NxJax.Resident.put()

      {%Nx.BinaryBackend{}, Nx.BinaryBackend} ->
        tensor

      {%Nx.BinaryBackend{}, __MODULE__} ->
        NxJax.Resident.put(tensor)
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
  in another process that has the same tensor) or its worker has exited.
  """
  @impl true
  defdelegate deallocate(tensor), to: NxJax.Resident

  @doc false
  # Called by Inspect for tensors whose data is this struct.
  @impl true
  def inspect(%Nx.Tensor{} = tensor, opts) do
    body =
      NxJax.Resident.binary_tensor(tensor, to_binary(tensor))
      |> Inspect.inspect(opts)
      |> Inspect.Algebra.format(:infinity)
      |> IO.iodata_to_binary()
      |> String.split("\n")
      |> Enum.slice(2..-2//1)
      |> Enum.map_join("\n", &String.replace_prefix(&1, "  ", ""))

    "NxJax.Backend<#{Kernel.inspect(tensor.data.worker)}, #{tensor.data.handle}>\n" <> body
  end

  defp backend_module({module, _opts}) when is_atom(module), do: backend_module(module)
  defp backend_module(module) when module in [Nx.BinaryBackend, __MODULE__], do: module

  defp backend_module(other) do
    raise ArgumentError,
          "unknown backend #{Kernel.inspect(other)}: nx_jax tensors live in Nx.BinaryBackend " <>
            "(Elixir memory) or NxJax.Backend (resident on a worker)"
  end
end
