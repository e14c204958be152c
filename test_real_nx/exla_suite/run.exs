# EXLA 0.7.2's defn test files, unchanged, with NxJax as the compiler: a shim points EXLA's
# names at ours (EXLA.jit/jit_apply/compile/stream -> Nx.Defn with compiler: NxJax, EXLA.Case's
# assertions, EXLA.Backend -> NxJax.Backend). Numerics :native (MIX_ENV=dev), as EXLA
# computes. Not part of `make test`. From the project root, under real Nx 0.7.2 or under the
# clean room (the same shim: NxJax implements Nx's compiler callbacks under both):
#
#     NX_JAX_NX=_build/real-nx-src mix run test_real_nx/exla_suite/run.exs [FILE ...]
#     mix run test_real_nx/exla_suite/run.exs [FILE ...]
#
# The tests are read from ../shared/reference/nx-0.7.2.tar.gz (EXLA_TARBALL), unpacked into a
# temporary folder; FILE is a path under exla/test/ (default: defn/expr_test.exs and
# defn/vectorize_test.exs).

defmodule EXLA do
  @moduledoc false
  def jit(fun, opts \\ []), do: Nx.Defn.jit(fun, Keyword.put(opts, :compiler, NxJax))

  def jit_apply(fun, args, opts \\ []),
    do: Nx.Defn.jit_apply(fun, args, Keyword.put(opts, :compiler, NxJax))

  def compile(fun, args, opts \\ []),
    do: Nx.Defn.compile(fun, args, Keyword.put(opts, :compiler, NxJax))

  # (a jit that names `compiler: EXLA` itself)
  defdelegate __jit__(key, vars, fun, args_list, opts), to: NxJax
  defdelegate __compile__(key, vars, fun, opts), to: NxJax
  defdelegate __stream__(key, input, acc, vars, fun, args_list, opts), to: NxJax
  defdelegate __partitions_options__(opts), to: NxJax
  defdelegate __to_backend__(opts), to: NxJax

  def stream(fun, args, opts \\ []),
    do: Nx.Defn.stream(fun, args, Keyword.put(opts, :compiler, NxJax))
end

defmodule EXLA.Backend do
  @moduledoc false
  # NxJax.Backend under EXLA's name (tensors it makes are NxJax.Backend tensors)

  # (a struct of its own, so that tests matching %EXLA.Backend{} compile, and fail)
  defstruct [:state]

  for {name, arity} <- NxJax.Backend.__info__(:functions), name != :__struct__ do
    args = Macro.generate_arguments(arity, __MODULE__)

    def unquote(name)(unquote_splicing(args)),
      do: NxJax.Backend.unquote(name)(unquote_splicing(args))
  end
end

defmodule EXLA.Case do
  @moduledoc false
  use ExUnit.CaseTemplate

  using do
    quote do
      import EXLA.Case
    end
  end

  def compiler_mode, do: :mlir

  defmacro assert_equal(left, right) do
    quote do
      assert unquote(left) |> EXLA.Case.to_binary_backend() ==
               unquote(right) |> EXLA.Case.to_binary_backend()
    end
  end

  def to_binary_backend(tensor), do: Nx.backend_copy(tensor, Nx.BinaryBackend)

  def assert_all_close(left, right, opts \\ []) do
    atol = opts[:atol] || 1.0e-4
    rtol = opts[:rtol] || 1.0e-4

    equals =
      left |> Nx.all_close(right, atol: atol, rtol: rtol) |> Nx.backend_transfer(Nx.BinaryBackend)

    if equals != Nx.tensor(1, type: {:u, 8}, backend: Nx.BinaryBackend) do
      flunk("expected\n\n#{inspect(left)}\n\nto be within tolerance of\n\n#{inspect(right)}")
    end
  end
end

tarball = System.get_env("EXLA_TARBALL", "../shared/reference/nx-0.7.2.tar.gz")

files =
  if System.argv() == [], do: ~w(defn/expr_test.exs defn/vectorize_test.exs), else: System.argv()

dir = Path.join(System.tmp_dir!(), "nx_jax_exla_suite_#{System.os_time()}")
File.mkdir_p!(dir)
{_, 0} = System.cmd("tar", ["xzf", Path.expand(tarball), "-C", dir, "nx-0.7.2/exla/test"])

# the test support's structs derive Nx's protocols at run time: the protocols are loaded again
# unconsolidated so that they see them
:code.del_path(String.to_charlist(Mix.Project.consolidation_path()))

for protocol <- [Nx.Container, Nx.LazyContainer] do
  :code.purge(protocol)
  :code.delete(protocol)
  {:module, _} = Code.ensure_loaded(protocol)
end

Code.require_file(Path.join(dir, "nx-0.7.2/exla/test/support/container.ex"))
Nx.Defn.global_default_options(compiler: NxJax)
# as EXLA's test_helper.exs on the host platform in MLIR mode
ExUnit.start(autorun: false, exclude: [:platform, :integration, :multi_device, skip: :mlir])

for file <- files, do: Code.require_file(Path.join([dir, "nx-0.7.2/exla/test/exla", file]))
%{failures: failures, total: total} = ExUnit.run()
File.rm_rf!(dir)

# (the clean room names its default compiler in its application environment; real Nx has none)
front_end =
  if Application.get_env(:nx, :default_compiler), do: "the clean room", else: "real Nx 0.7.2"

IO.puts(
  "EXLA suite under #{front_end}: #{total - failures} of #{total} pass " <>
    "(#{Enum.join(files, ", ")})"
)
