defmodule Nx.Defn.Evaluator do
  @moduledoc """
  The name of Nx 0.7.2's default `defn` compiler (it evaluates expressions on the binary
  backend). Code and libraries written for Nx pass it as `compiler: Nx.Defn.Evaluator`;
  on nx_jax such a call runs on the JAX worker like any other, and the log says so once.
  """
end
