defmodule NxJax.MixProject do
  use Mix.Project

  def project do
    [
      app: :nx_jax,
      version: "0.1.0",
      elixir: "~> 1.14",
      start_permanent: Mix.env() == :prod,
      elixirc_paths: elixirc_paths(Mix.env()),
      test_paths: ["test_elixir"],
      # `make nx-suite` (MIX_ENV=nx_suite) loads Nx's test files, which define structs deriving
      # Nx.Container at run time: a consolidated protocol would not see them
      consolidate_protocols: Mix.env() != :nx_suite,
      deps: []
    ]
  end

  # test_elixir/support: the structs our tests derive protocols for, compiled with the project
  defp elixirc_paths(:test), do: ["lib", "test_elixir/support"]
  defp elixirc_paths(_env), do: ["lib"]

  def application do
    [
      extra_applications: [:logger],
      mod: {NxJax.Application, []},
      # the compiler that runs every graph of the front end (Nx.Defn.Compiler)
      env: [default_compiler: NxJax]
    ]
  end
end
