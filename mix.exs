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

  # Which Nx nx_jax is built against. As a dependency of a user's project (this file is not in
  # the directory mix runs in), Nx from hex, beside the user's own. In this repository one
  # switch, read here only: NX_JAX_NX unset (or "clean") is the clean-room Nx 0.7.2 of nx/ (the
  # default of `make`); NX_JAX_NX=DIR is real Nx compiled offline: 0.7.2 by
  # ../shared/reference/build-real-nx.sh DIR (`make compile-real-nx`), another version, as
  # 0.9.2, by tools/build-real-nx.sh VERSION DIR.
  # (mix compiles a dependency in its own folder: a project of the user's, loaded before this
  # file, says nx_jax is one; read when this file is compiled, before this project is pushed)
  @as_dependency File.cwd!() != __DIR__ or Mix.Project.get() not in [nil, __MODULE__]

  # (a function, not an attribute, and the attribute read through a call: Elixir 1.18's type
  # checker would see a constant and warn that a clause below never matches)
  defp nx_source do
    cond do
      Keyword.fetch!([as_dependency: @as_dependency], :as_dependency) -> :hex
      System.get_env("NX_JAX_NX", "") in ["", "clean"] -> :clean
      true -> {:real, Path.expand(System.fetch_env!("NX_JAX_NX"))}
    end
  end

  # what does not compile against real Nx 0.7.2: the clean room's compiler, backend, toolbox
  # and graph pictures read its internals (docs/ARCHITECTURE.md, "Two projects"); real Nx has
  # its own of the first three in lib/nx_jax/real_nx (the toolbox's checks,
  # lib/nx_jax/autodiff/checks.ex, compile under both)
  @clean_room_only ~w(lib/nx_jax.ex lib/nx_jax/backend.ex lib/nx_jax/autodiff.ex
                      lib/nx_jax/autodiff/implicit.ex lib/nx_jax/autodiff/checkpoint.ex
                      lib/nx_jax/picture.ex lib/mix/tasks/nx_jax.picture.ex
                      lib/nx_jax/graph.ex lib/mix/tasks/nx_jax.graph.ex)

  # what compiles only against real Nx 0.7.2 (hex's, or NX_JAX_NX=DIR): the compiler of real
  # Nx's expressions, which defines the module NxJax there in place of lib/nx_jax.ex, and the
  # toolbox NxJax.Autodiff written with real Nx's own reverse mode
  @real_nx_only ~w(lib/nx_jax/real_nx)

  def project do
    [
      app: :nx_jax,
      version: "0.1.0",
      elixir: "~> 1.14",
      start_permanent: Mix.env() == :prod,
      # the NIF of NxJax.Guard first (Mix.Tasks.Compile.NxJaxGuard above)
      compilers: [:nx_jax_guard | Mix.compilers()],
      elixirc_paths: elixirc_paths(Mix.env(), nx_source()),
      test_paths: test_paths(nx_source()),
      # `make nx-suite` (MIX_ENV=nx_suite) loads Nx's test files, which define structs deriving
      # Nx.Container at run time: a consolidated protocol would not see them
      consolidate_protocols: Mix.env() != :nx_suite,
      deps: deps(nx_source())
    ] ++ build_path(nx_source())
  end

  defp deps(:hex), do: [{:nx, "~> 0.7.2"}]
  defp deps(:clean), do: [{:nx, path: "nx"}]

  defp deps({:real, dir}), do: [{:nx, path: real_nx_project(dir)}]

  # DIR holds one real Nx, DIR/nx-VERSION/nx (0.7.2 by default; tools/build-real-nx.sh
  # VERSION DIR builds another, as 0.9.2)
  defp real_nx_project(dir) do
    case Path.wildcard(Path.join(dir, "nx-*/nx/_build")) do
      [built] ->
        Path.dirname(built)

      _none_or_several ->
        Mix.raise(
          "NX_JAX_NX=#{dir}: no real Nx built there (or more than one); run " <>
            "../shared/reference/build-real-nx.sh #{dir} (or make compile-real-nx)"
        )
    end
  end

  # the Nx builds of nx_jax side by side, so that switching rebuilds none (real Nx 0.7.2 in
  # _build/real_nx, another version in _build/real_nx-VERSION)
  defp build_path({:real, dir}) do
    case dir |> real_nx_project() |> Path.dirname() |> Path.basename() do
      "nx-0.7.2" -> [build_path: "_build/real_nx"]
      "nx-" <> version -> [build_path: "_build/real_nx-#{version}"]
    end
  end

  defp build_path(_hex_or_clean), do: []

  # test_elixir/support: the structs our tests derive protocols for, compiled with the project
  defp elixirc_paths(:test, :clean), do: lib_paths(@real_nx_only) ++ ["test_elixir/support"]
  defp elixirc_paths(_env, :clean), do: lib_paths(@real_nx_only)
  defp elixirc_paths(_env, _hex_or_real), do: lib_paths(@clean_room_only)

  # the files of lib/ but those of `excluded` (files, or folders and what is under them)
  defp lib_paths(excluded) do
    excluded = Enum.flat_map(excluded, &[&1 | Path.wildcard(Path.join(&1, "**/*.ex"))])
    Path.wildcard("lib/**/*.ex") -- excluded
  end

  # under real Nx, the tests of test_real_nx/ (`make test-real-nx`); under the clean room,
  # test_elixir/
  defp test_paths({:real, _dir}), do: ["test_real_nx"]
  defp test_paths(_hex_or_clean), do: ["test_elixir"]

  def application do
    [extra_applications: [:logger], mod: {NxJax.Application, []}]
  end
end
