defmodule Mix.Tasks.NxJax.Graph do
  @moduledoc """
  Deprecated: `mix nx_jax.picture` under its old name (the same arguments and options); it
  says so on stderr, then draws the picture.
  """
  use Mix.Task

  @impl true
  def run(argv) do
    Mix.shell().error("mix nx_jax.graph is deprecated: use mix nx_jax.picture (same arguments)")
    Mix.Tasks.NxJax.Picture.run(argv)
  end
end
