defmodule NxJax.NxProjectTest do
  # The clean-room Nx seen from a user's project (made here in a temporary folder, depending
  # on nx/ by path, run by `mix` in a process of its own): `config :nx, ...` in its
  # config/config.exs sets Nx.default_backend/0 and Nx.Defn.default_options/0, with no
  # warning from Mix, and `import_deps: [:nx]` in its .formatter.exs keeps Nx's forms
  # without parentheses (`defn f(x), do: x`, `while {x}, i < 3, do: ...`), as with Nx 0.7.2.
  # The forms themselves, and what the formatter does without them: nx_formatter_test.exs.
  use ExUnit.Case, async: true

  @nx Path.expand("../nx", __DIR__)

  @source """
  defmodule Scratch do
    import Nx.Defn

    defn f(x), do: tp(x)
    defnp g(x), do: x * 2
    deftransform t(x), do: x
    deftransformp tp(x), do: x
    deftransform t2(x, y \\\\ 1)
    deftransform t2(x, y), do: {x, y}

    defn h(x) do
      while {x, i = 0}, i < 3 do
        {g(x) + i, i + 1}
      end
    end

    defn k(x) do
      while {x, i = 0}, i < 3, do: {x + i, i + 1}
    end
  end
  """

  # a project of its own per test, in the system's temporary folder, removed afterwards
  setup do
    dir = Path.join(System.tmp_dir!(), "nx_jax_project_#{System.unique_integer([:positive])}")
    on_exit(fn -> File.rm_rf!(dir) end)
    File.mkdir_p!(Path.join(dir, "config"))
    File.mkdir_p!(Path.join(dir, "lib"))

    File.write!(Path.join(dir, "mix.exs"), """
    defmodule Scratch.MixProject do
      use Mix.Project

      def project do
        [app: :scratch, version: "0.1.0", deps: [{:nx, path: #{inspect(@nx)}}]]
      end
    end
    """)

    File.write!(Path.join(dir, ".formatter.exs"), """
    [import_deps: [:nx], inputs: ["{mix,.formatter}.exs", "{config,lib}/**/*.{ex,exs}"]]
    """)

    File.write!(Path.join(dir, "config/config.exs"), """
    import Config

    config :nx, default_backend: {Nx.BinaryBackend, [from: :config]}
    config :nx, default_defn_options: [compiler: Nx.Defn.Debug, from: :config]
    """)

    File.write!(Path.join(dir, "lib/scratch.ex"), @source)

    # (the clean room as this test run compiled it, so that the project does not compile it
    # again: a copy newer than the project's config, which Mix then finds up to date; were it
    # out of date, the project would compile nx itself, only slower)
    built = Path.join(Mix.Project.build_path(), "lib/nx")
    copy = Path.join(dir, "_build/dev/lib/nx")
    File.mkdir_p!(Path.dirname(copy))
    File.cp_r!(built, copy)
    for file <- Path.wildcard(Path.join(copy, "**"), match_dot: true), do: File.touch!(file)

    {:ok, dir: dir}
  end

  # `mix args` in the project (MIX_ENV=dev, nothing of this test run's Mix settings): its
  # exit status and its output, stderr included
  defp mix(dir, args) do
    env = [{"MIX_ENV", "dev"}, {"MIX_BUILD_PATH", nil}, {"MIX_EXS", nil}, {"MIX_TARGET", nil}]
    {output, status} = System.cmd("mix", args, cd: dir, env: env, stderr_to_stdout: true)
    {status, output}
  end

  test "config :nx sets the defaults, with no warning", %{dir: dir} do
    script = """
    IO.puts("backend=" <> inspect(Nx.default_backend()))
    IO.puts("options=" <> inspect(Nx.Defn.default_options()))
    IO.puts("env=" <> inspect(Application.fetch_env!(:nx, :default_backend)))
    """

    {status, output} = mix(dir, ["run", "-e", script])
    assert status == 0, output
    assert output =~ "backend={Nx.BinaryBackend, [from: :config]}\n"
    assert output =~ "options=[compiler: Nx.Defn.Debug, from: :config]\n"
    assert output =~ "env={Nx.BinaryBackend, [from: :config]}\n"
    refute output =~ ~r/warning/i
  end

  test "a configured backend that is not one is named at the first read", %{dir: dir} do
    File.write!(Path.join(dir, "config/runtime.exs"), """
    import Config
    config :nx, default_backend: Nx.NoSuchBackend
    """)

    {status, output} = mix(dir, ["run", "-e", "Nx.default_backend()"])
    assert status != 0
    assert output =~ "(ArgumentError) unknown backend Nx.NoSuchBackend"
  end

  test "mix format with import_deps: [:nx] keeps Nx's forms without parentheses",
       %{dir: dir} do
    assert mix(dir, ["format", "--check-formatted"]) == {0, ""}

    # without them, the formatter puts parentheses around the calls written without
    File.write!(Path.join(dir, ".formatter.exs"), """
    [inputs: ["{mix,.formatter}.exs", "{config,lib}/**/*.{ex,exs}"]]
    """)

    {status, output} = mix(dir, ["format", "--check-formatted"])
    assert status != 0 and output =~ "lib/scratch.ex"
    assert {0, _} = mix(dir, ["format"])
    formatted = File.read!(Path.join(dir, "lib/scratch.ex"))
    assert formatted =~ "defn(f(x), do: tp(x))"
    assert formatted =~ "deftransformp(tp(x), do: x)"
    assert formatted =~ "while({x, i = 0}, i < 3, do: {x + i, i + 1})"
  end
end
