defmodule NxJax.MixProject do
  use Mix.Project

  def project do
    [
      app: :nx_jax,
      version: "0.1.0",
      elixir: "~> 1.14",
      start_permanent: Mix.env() == :prod,
      elixirc_paths: ["lib"],
      test_paths: ["test_elixir"],
      # tests (ours, and Nx's files that nx_suite/ runs with MIX_ENV=test) define structs
      # deriving Nx.Container at run time, which a consolidated protocol would not see
      consolidate_protocols: Mix.env() != :test,
      deps: []
    ]
  end

  def application do
    [
      extra_applications: [:logger],
      mod: {NxJax.Application, []}
    ]
  end
end
