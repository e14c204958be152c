defmodule Mix.Tasks.Compile.NxJaxGuard do
  @moduledoc false
  # Builds the NIF library of NxJax.Guard (c_src/nx_jax_guard.c) into the application's priv/
  # directory with the C compiler (`CC`, else cc) and the erl_nif.h of the running Erlang/OTP.
  # It is a compiler of this project (listed in `compilers:`), so it also runs where nx_jax is
  # a dependency; it rebuilds only when the source is newer than the library.
  use Mix.Task.Compiler

  @source "c_src/nx_jax_guard.c"

  @impl true
  def run(_args) do
    source = Path.expand(@source, __DIR__)
    priv = Path.join(Mix.Project.app_path(), "priv")
    library = Path.join(priv, "nx_jax_guard.so")

    if Mix.Utils.stale?([source], [library]) do
      File.mkdir_p!(priv)
      include = Path.join([:code.root_dir(), "erts-#{:erlang.system_info(:version)}", "include"])

      unless File.exists?(Path.join(include, "erl_nif.h")) do
        Mix.raise(
          "nx_jax: erl_nif.h is not in #{include}: install the Erlang development headers " <>
            "(Debian: apt-get install erlang-dev) to build c_src/nx_jax_guard.c"
        )
      end

      cc = System.get_env("CC") || System.find_executable("cc") || System.find_executable("gcc")
      unless cc, do: Mix.raise("nx_jax: no C compiler (cc or gcc) to build #{@source}")

      args =
        ~w(-O2 -std=c11 -Wall -Wextra -fPIC -shared) ++
          ["-I", include, "-o", library, source]

      case System.cmd(cc, args, stderr_to_stdout: true) do
        {_, 0} ->
          Mix.shell().info("Compiled #{@source}")
          {:ok, []}

        {out, status} ->
          Mix.raise("nx_jax: #{cc} failed (status #{status}) on #{@source}:\n#{out}")
      end
    else
      {:noop, []}
    end
  end

  @impl true
  def clean do
    File.rm(Path.join([Mix.Project.app_path(), "priv", "nx_jax_guard.so"]))
    :ok
  end
end

defmodule NxJax.MixProject do
  use Mix.Project

  def project do
    [
      app: :nx_jax,
      version: "0.1.0",
      elixir: "~> 1.14",
      start_permanent: Mix.env() == :prod,
      # the NIF of NxJax.Guard first (Mix.Tasks.Compile.NxJaxGuard above)
      compilers: [:nx_jax_guard | Mix.compilers()],
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
