defmodule Nx.CleanRoom.MixProject do
  use Mix.Project

  # The clean-room Nx 0.7.2: Nx's public API (tensors, defn, grad, Nx.Random, Nx.LinAlg, ...)
  # written from Nx's documentation and behaviour, for machines where hex cannot be reached.
  # It traces and checks graphs but runs none itself: every graph goes to the runtime compiler
  # named by `config :nx, :default_compiler` (nx_jax's, NxJax, by default), which must be
  # loaded. Its own tests (test/) need no runtime: `mix test` here runs without Python.
  def project do
    [
      app: :nx,
      version: "0.7.2",
      elixir: "~> 1.14",
      start_permanent: Mix.env() == :prod,
      deps: []
    ]
  end

  def application do
    [
      extra_applications: [:logger],
      # (the :pg scope of Nx.Serving's distribution)
      mod: {Nx.Application, []},
      # Nx's settings, with Nx 0.7.2's defaults: `config :nx, default_backend: ...` and
      # `config :nx, default_defn_options: [...]` in a project's config/config.exs set them
      env: [
        default_backend: {Nx.BinaryBackend, []},
        default_defn_options: [],
        # the compiler that runs every graph (a module implementing Nx.Defn.Compiler's
        # callbacks); this project names no other and depends on none
        default_compiler: NxJax,
        # traced graphs kept by Nx.Defn.TraceCache
        trace_cache_size: 1024
      ]
    ]
  end
end
