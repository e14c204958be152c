# Nx 0.7.2's own tests of Nx.Serving and Nx.Batch (test/nx/serving_test.exs and
# test/nx/batch_test.exs), unchanged, under real Nx 0.7.2 with NxJax as the default compiler of
# defn: real Nx's Nx.Serving batches the requests and every computation runs on nx_jax's pool.
# Not part of `make test`; `make serving-suite` runs it:
#
#     NX_JAX_NX=_build/real-nx-src mix run --no-start test_real_nx/serving_suite/run.exs [FILE ...]
#
# What it sets up, as Nx's test_helper.exs does with EXLA's place taken by nx_jax:
#   - this node's pool has 2 workers, so `partitions: true` gives 2 partitions
#     (NxJax.__partitions_options__/1: one per worker);
#   - the distributed tests (tag :distributed) get the two peer nodes Nx's helper starts,
#     secondary@127.0.0.1 and tertiary@127.0.0.1 (hidden), each with nx_jax's application and
#     a pool of its own (one worker, its own Python process) and NxJax as its default compiler;
#     test/support/distributed_servings.ex is loaded on them as compiled here;
#   - SERVING_SUITE_BACKEND=nx_jax makes NxJax.Backend the default backend on every node (the
#     default is Nx.BinaryBackend).
#
# The tests are read from ../shared/reference/nx-0.7.2.tar.gz (NX_TARBALL); FILE is a path under
# nx/test/nx/ (default: serving_test.exs batch_test.exs). Prints one line per file: passed of
# total; exits with status 1 when a test failed.

tarball = System.get_env("NX_TARBALL", "../shared/reference/nx-0.7.2.tar.gz")
files = if System.argv() == [], do: ~w(serving_test.exs batch_test.exs), else: System.argv()

backend =
  case System.get_env("SERVING_SUITE_BACKEND", "binary") do
    "binary" -> Nx.BinaryBackend
    "nx_jax" -> NxJax.Backend
    other -> raise ArgumentError, "SERVING_SUITE_BACKEND is binary or nx_jax, got: #{other}"
  end

dir = Path.join(System.tmp_dir!(), "nx_jax_serving_suite_#{System.os_time()}")
File.mkdir_p!(dir)
{_, 0} = System.cmd("tar", ["xzf", Path.expand(tarball), "-C", dir, "nx-0.7.2/nx/test"])
test_dir = Path.join(dir, "nx-0.7.2/nx/test")

# this node: 2 workers (started here: `mix run --no-start`)
Application.put_env(:nx_jax, :pool_size, 2)
{:ok, _} = Application.ensure_all_started(:nx_jax)
Nx.global_default_backend(backend)

# How NxJax becomes the compiler of the tests' defn code, which names none (SERVING_SUITE_DEFAULT):
#   - "options" (default): `Nx.Defn.global_default_options(compiler: NxJax)`, as a user's
#     `config :nx, default_defn_options: [compiler: NxJax]` does. Nx.Serving.new/3 merges the
#     default options into the serving's, so a module's init/3 receives `compiler: NxJax`
#     among them, where 15 tests assert the exact list Nx's own test environment gives
#     (`[batch_keys: [:default]]`, no default options): those fail on that assertion alone.
#   - "evaluator": the default options stay empty, as in Nx's test environment, and the module
#     real Nx falls back to when no compiler is named, Nx.Defn.Evaluator, is replaced in this
#     run (and on the peers) by one whose compiler callbacks are NxJax's: every defn still runs
#     on nx_jax, and the init/3 assertions see what they expect.
default_mode = System.get_env("SERVING_SUITE_DEFAULT", "options")

shim =
  case default_mode do
    "options" ->
      Nx.Defn.global_default_options(compiler: NxJax)
      []

    "evaluator" ->
      Nx.Defn.global_default_options([])
      Code.put_compiler_option(:ignore_module_conflict, true)

      Code.compile_string("""
      defmodule Nx.Defn.Evaluator do
        @moduledoc false
        @behaviour Nx.Defn.Compiler
        defdelegate __jit__(key, vars, fun, args_list, opts), to: NxJax
        defdelegate __compile__(key, vars, fun, opts), to: NxJax
        defdelegate __stream__(key, input, acc, vars, fun, args_list, opts), to: NxJax
        defdelegate __partitions_options__(opts), to: NxJax
        defdelegate __to_backend__(opts), to: NxJax
      end
      """)

    other ->
      raise ArgumentError, "SERVING_SUITE_DEFAULT is options or evaluator, got: #{other}"
  end

# (the support module the peers run, compiled once, its object code loaded on each peer)
support = Code.compile_file(Path.join(test_dir, "support/distributed_servings.ex"))

# A peer as Nx's test_helper.exs starts it, then nx_jax on it: this node's code paths, nx_jax's
# settings (one worker), NxJax the default compiler, the support module.
start_peer = fn name, args ->
  {:ok, _peer, node} =
    :peer.start(%{name: name, args: [~c"-setcookie", Atom.to_charlist(Node.get_cookie()) | args]})

  true = :erpc.call(node, :code, :set_path, [:code.get_path()])

  for {key, value} <- Application.get_all_env(:nx_jax), key != :pool_size do
    :ok = :erpc.call(node, Application, :put_env, [:nx_jax, key, value])
  end

  :ok = :erpc.call(node, Application, :put_env, [:nx_jax, :pool_size, 1])
  {:ok, _} = :erpc.call(node, Application, :ensure_all_started, [:nx_jax], 120_000)
  :erpc.call(node, Nx.Defn, :global_default_options, [Nx.Defn.default_options()])
  :erpc.call(node, Nx, :global_default_backend, [backend])

  for {module, binary} <- shim ++ support do
    {:module, ^module} = :erpc.call(node, :code, :load_binary, [module, ~c"nofile", binary])
  end

  node
end

# as Nx's test_helper.exs: the distributed tests run where a node and its peers can start
# (`epmd -daemon` returns before a new epmd listens: wait for it, at most 10 s)
epmd_up? = fn ->
  Enum.any?(1..100, fn _ ->
    match?({:ok, _}, :erl_epmd.names({127, 0, 0, 1})) or (Process.sleep(100) && false)
  end)
end

distributed? =
  {"", 0} == System.cmd("epmd", ["-daemon"]) and epmd_up?.() and
    match?({:ok, _}, Node.start(:"primary@127.0.0.1", :longnames))

peers =
  if distributed? do
    [
      start_peer.(:"secondary@127.0.0.1", []),
      start_peer.(:"tertiary@127.0.0.1", [~c"-hidden"])
    ]
  else
    IO.puts(
      "no distribution here (epmd or Node.start failed): the :distributed tests are excluded"
    )

    []
  end

exclude = if distributed?, do: [], else: [:distributed]
ExUnit.start(autorun: false, assert_receive_timeout: 1000, exclude: exclude)

results =
  for file <- files do
    Code.require_file(Path.join([test_dir, "nx", file]))
    # (a skipped test is not counted as passing: it is left out, as an excluded one)
    %{failures: failures, total: total, excluded: excluded, skipped: skipped} = ExUnit.run()
    {file, total - excluded - skipped - failures, total - excluded - skipped, excluded + skipped}
  end

# (that the tests' defn code ran on nx_jax: the calls this node's workers ran)
runs = NxJax.Pool.stats().runs
for node <- peers, do: :erpc.call(node, :init, :stop, [])
File.rm_rf!(dir)

IO.puts(
  "\nNx 0.7.2's serving tests under real Nx 0.7.2, NxJax the default compiler " <>
    "(SERVING_SUITE_DEFAULT=#{default_mode}), backend #{inspect(backend)}; " <>
    "#{runs} runs on this node's workers:"
)

for {file, passed, ran, excluded} <- results do
  IO.puts(
    "  #{file}: #{passed} of #{ran} pass" <>
      if(excluded > 0, do: " (#{excluded} excluded or skipped)", else: "")
  )
end

# (the exit status says whether every test that ran passed)
if Enum.any?(results, fn {_file, passed, ran, _excluded} -> passed < ran end),
  do: System.halt(1)
