defmodule Nx.BinaryBackend do
  @moduledoc """
  The data of a concrete tensor: its bytes, row-major and native-endian, in `state`.
  """
  @enforce_keys [:state]
  defstruct [:state]

  @type t :: %__MODULE__{state: binary}
end
