defmodule Nx.Tensor do
  @moduledoc """
  The tensor struct.

  `data` is `%Nx.BinaryBackend{}` for a concrete tensor (row-major, native-endian bytes) or
  `%Nx.Defn.Expr{}` for a tensor that stands for a node of an expression being traced inside
  `defn`. `type` is an Nx type such as `{:f, 32}`; `shape` a tuple of dimensions; `names` one
  entry (always `nil` here) per dimension.

  Two concrete tensors with the same type, shape and data are `==`.
  """
  @enforce_keys [:type, :shape]
  defstruct [:data, :type, :shape, names: []]

  @type type :: {:u | :s | :f | :bf, pos_integer}
  @type t :: %__MODULE__{data: term, type: type, shape: tuple, names: [nil]}
end
