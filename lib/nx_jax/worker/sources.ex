defmodule NxJax.Worker.Sources.Digest do
  @moduledoc false
  # MD5 over the files under `dir`, in the order of their paths relative to it, each as
  # `path NUL content NUL` (py_backend/handshake.py); a module of its own so that
  # NxJax.Worker.Sources can use it while it compiles
  def of(dir, files) do
    files
    |> Enum.map(&{Path.relative_to(&1, dir), &1})
    |> Enum.sort()
    |> Enum.map(fn {name, file} -> [name, 0, File.read!(file), 0] end)
    |> :erlang.md5()
    |> Base.encode16(case: :lower)
  end

  def files(root), do: root |> Path.join("py_backend/**/*.py") |> Path.wildcard()

  def of_project(root), do: of(Path.join(root, "py_backend"), files(root))
end

defmodule NxJax.Worker.Sources do
  @moduledoc """
  The worker's Python code: the project directory it runs from and the digest of the
  `py_backend/**/*.py` files this Elixir code was compiled with (docs/PROTOCOL.md 2.3,
  "Handshake"). A worker started from other sources refuses work with a `"WorkerMismatch"`
  error naming both.

  The directory is found at run time from where this module's compiled file is
  (`<project>/_build/<env>/lib/nx_jax/ebin`), so a copied or moved project runs its own
  `py_backend`, not the one of the directory it was first compiled in; it falls back to that
  directory when the compiled file is elsewhere. `mix compile` recompiles this module when the
  sources in the project directory no longer have the compiled digest (`__mix_recompile__?/0`).
  """

  alias NxJax.Worker.Sources.Digest

  @root Path.expand("../../..", __DIR__)
  for file <- Digest.files(@root), do: @external_resource(file)
  @digest Digest.of_project(@root)
  @protocol 1

  @doc "The digest of the worker sources this code was compiled with."
  @spec digest() :: String.t()
  def digest, do: @digest

  @doc "The protocol version this code speaks (docs/PROTOCOL.md)."
  @spec protocol() :: pos_integer
  def protocol, do: @protocol

  @doc """
  The project directory the worker runs in: the one holding this module's compiled file,
  when it has a `py_backend`, else the directory this code was compiled in.
  """
  @spec project_root() :: String.t()
  def project_root do
    with path when is_list(path) <- :code.which(__MODULE__),
         root = Path.expand("../../../../..", Path.dirname(to_string(path))),
         true <- File.exists?(Path.join(root, "py_backend/__main__.py")) do
      root
    else
      _ -> @root
    end
  end

  @doc "The environment a worker is started with: where its sources are, what it must match."
  @spec env() :: [{String.t(), String.t()}]
  def env do
    root = project_root()
    path = Enum.join([root | List.wrap(System.get_env("PYTHONPATH"))], ":")

    [
      {"PYTHONPATH", path},
      {"NX_JAX_EXPECT_PROTOCOL", Integer.to_string(@protocol)},
      {"NX_JAX_EXPECT_SOURCES", @digest}
    ]
  end

  @doc false
  # recompile when the project's sources (where the code runs now) are not the compiled ones
  def __mix_recompile__?, do: Digest.of_project(project_root()) != @digest
end
