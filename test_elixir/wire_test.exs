defmodule NxJax.WireTest do
  use ExUnit.Case, async: true
  doctest NxJax.Wire
end
