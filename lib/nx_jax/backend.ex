defmodule NxJax.Backend do
  @moduledoc """
  A tensor resident on a worker: the `data` of an `%Nx.Tensor{}` whose values stay in the
  worker's memory (as a JAX array), named by an integer `handle`.

  Resident tensors come from `Nx.backend_transfer(tensor, NxJax.Backend)`, or from any `defn`
  call or eager op when an argument is resident or when the calling process has set
  `Nx.default_backend(NxJax.Backend)`. Such calls send only handles, and their results stay on
  the worker, so a training loop ships its parameters once:

      params = Nx.backend_transfer({w1, w2}, NxJax.Backend)
      params = Enum.reduce(1..100, params, fn _, params -> MLP.step(params, x, y) end)
      {w1, w2} = Nx.backend_transfer(params)

  `Nx.to_binary/1`, `Nx.to_number/1`, inspection and the other readers fetch the data (and
  leave it resident). `Nx.backend_transfer/1,2` and `Nx.backend_copy/1,2` bring it back;
  `Nx.backend_deallocate/1` frees it. A handle belongs to the process that created it: when
  that process exits, its handles are freed on the worker. A resident tensor is not `==` to a
  binary one with the same values: transfer it first.
  """
  @behaviour Nx.Backend

  @enforce_keys [:worker, :handle]
  defstruct [:worker, :handle]

  @type t :: %__MODULE__{worker: pid, handle: pos_integer}

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
  def to_binary(%Nx.Tensor{data: %__MODULE__{worker: worker, handle: handle}}) do
    [{_type, _shape, binary}] = NxJax.Worker.fetch([handle], server: alive!(worker))
    binary
  end

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

  @doc "Frees a resident tensor: `:ok`, or `:already_deallocated` when it was not resident."
  @impl true
  def deallocate(%Nx.Tensor{data: %__MODULE__{worker: worker, handle: handle}}) do
    # nothing waits for the worker: the client's table of live handles answers
    if Process.alive?(worker) and NxJax.Worker.release([handle], server: worker) == 1,
      do: :ok,
      else: :already_deallocated
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
      [handle] = NxJax.Worker.put([{type, shape, Nx.to_binary(tensor)}], server: worker)
      %Nx.Tensor{tensor | data: %__MODULE__{worker: worker, handle: handle}}
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

  defp alive!(worker) do
    if Process.alive?(worker) do
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
