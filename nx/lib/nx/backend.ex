defmodule Nx.Backend do
  @moduledoc """
  The behaviour of a backend whose tensors keep their data outside Elixir memory: the `data`
  of such an `%Nx.Tensor{}` is the backend's own struct. `Nx` reads and moves those tensors
  only through these callbacks (`Nx.to_binary/2`, `Nx.backend_copy/2`,
  `Nx.backend_transfer/2`, `Nx.backend_deallocate/1`, inspection), so the front end needs to
  know no backend by name. Tensors in Elixir memory are `Nx.BinaryBackend`'s.
  """

  @doc "The tensor's data, as a binary (the tensor stays where it is)."
  @callback to_binary(Nx.Tensor.t()) :: binary

  @doc """
  A copy of the tensor in `backend` (a module or `{module, options}`): this backend's
  own for a tensor in Elixir memory, or `Nx.BinaryBackend`, or this one again.
  """
  @callback copy(Nx.Tensor.t(), backend :: module | {module, keyword}) :: Nx.Tensor.t()

  @doc "As `c:copy/2`, then frees the source where it moved off this backend."
  @callback transfer(Nx.Tensor.t(), backend :: module | {module, keyword}) :: Nx.Tensor.t()

  @doc "Frees the tensor's data: `:ok`, or `:already_deallocated`."
  @callback deallocate(Nx.Tensor.t()) :: :ok | :already_deallocated

  @doc "The body of the tensor's inspection (what follows its type and shape)."
  @callback inspect(Nx.Tensor.t(), Inspect.Opts.t()) :: String.t()

  @doc false
  # whether `module` implements this behaviour (a target of Nx.backend_copy/2)
  def backend?(module) when is_atom(module) do
    Code.ensure_loaded?(module) and function_exported?(module, :copy, 2) and
      function_exported?(module, :to_binary, 1)
  end
end
