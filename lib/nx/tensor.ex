defmodule Nx.Tensor do
  @moduledoc """
  The tensor struct.

  `data` is `%Nx.BinaryBackend{}` for a concrete tensor (row-major, native-endian bytes) or
  `%Nx.Defn.Expr{}` for a tensor that stands for a node of an expression being traced inside
  `defn`. `type` is an Nx type such as `{:f, 32}`; `shape` a tuple of dimensions; `names` one
  entry per dimension (`nil`, or the name a vectorized axis had when `Nx.devectorize/2` kept
  it); `vectorized_axes` the vectorized axes as a keyword list `name => size`, outermost
  first (see `Nx.vectorize/2`): `shape` excludes them, the data holds them as leading axes.

  Two concrete tensors with the same type, shape and data are `==`.
  """
  @enforce_keys [:type, :shape]
  defstruct [:data, :type, :shape, names: [], vectorized_axes: []]

  @type type :: {:u | :s | :f | :bf, pos_integer}
  @type t :: %__MODULE__{
          data: term,
          type: type,
          shape: tuple,
          names: [atom | nil],
          vectorized_axes: [{atom, pos_integer}]
        }
end
