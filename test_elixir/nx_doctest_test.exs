defmodule Nx.DoctestTest do
  # Every example in the docs of `Nx`, run on the real worker. One module for all of them, so
  # the examples of a new function run without anyone having to list it.
  use ExUnit.Case, async: true

  import Nx, only: [is_tensor: 1, sigil_V: 2, sigil_M: 2]

  doctest Nx
end
