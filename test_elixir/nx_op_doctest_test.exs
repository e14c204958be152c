defmodule Nx.OpDoctestTest do
  # The examples of the op functions run on the JAX worker, so they need the application
  # (NxJax.Application, from the defn/worker layers). Without it they are skipped.
  use ExUnit.Case, async: true

  unless Code.ensure_loaded?(NxJax.Application) do
    @moduletag skip: "op doctests need the worker (NxJax.Application is not in this tree)"
  end

  doctest Nx,
    only: [
      add: 2,
      subtract: 2,
      multiply: 2,
      divide: 2,
      pow: 2,
      max: 2,
      min: 2,
      equal: 2,
      not_equal: 2,
      less: 2,
      less_equal: 2,
      greater: 2,
      greater_equal: 2,
      exp: 1,
      expm1: 1,
      log: 1,
      log1p: 1,
      sqrt: 1,
      rsqrt: 1,
      sin: 1,
      cos: 1,
      tan: 1,
      tanh: 1,
      sigmoid: 1,
      negate: 1,
      abs: 1,
      select: 3,
      as_type: 2,
      sum: 2,
      product: 2,
      reduce_max: 2,
      reduce_min: 2,
      mean: 2,
      dot: 2,
      dot: 4,
      dot: 6,
      reshape: 3,
      transpose: 2,
      broadcast: 3,
      iota: 2,
      slice: 4,
      concatenate: 2,
      new_axis: 3,
      squeeze: 2
    ]
end
