defmodule NxJax.NxConfigTest do
  # Nx 0.7.2's settings in the clean-room Nx: the application :nx holds Nx's defaults
  # (`default_backend: {Nx.BinaryBackend, []}`, `default_defn_options: []`), which
  # `config :nx, ...` overrides; Nx.default_backend/0 and Nx.Defn.default_options/0 read them
  # unless the process set its own; global_default_backend/1 and global_default_options/1
  # change them for every process, and jitted functions and defn calls honour what they say.
  # (That `config :nx, ...` in a project's config/config.exs reaches them, with no warning
  # from Mix: nx_project_test.exs, in a project of its own.)
  # async: false: the global defaults are the node's.
  use ExUnit.Case, async: false

  defmodule Reporting do
    # A compiler that tells the test process the options of each jit it is given, then runs
    # the function on NxJax without them.
    @behaviour Nx.Defn.Compiler

    @impl true
    def __jit__(key, vars, fun, args_list, opts) do
      {pid, opts} = Keyword.pop(opts, :report_to)
      send(pid, {:jit_options, opts})
      NxJax.__jit__(key, vars, fun, args_list, Keyword.delete(opts, :tag))
    end

    @impl true
    def __compile__(key, vars, fun, opts), do: NxJax.__compile__(key, vars, fun, opts)

    @impl true
    def __stream__(key, input, acc, vars, fun, args_list, opts),
      do: NxJax.__stream__(key, input, acc, vars, fun, args_list, opts)

    @impl true
    def __partitions_options__(opts), do: [opts]

    @impl true
    def __to_backend__(_opts), do: {Nx.BinaryBackend, []}
  end

  defmodule Fns do
    import Nx.Defn

    defn affine(x), do: x * 2 + 1
  end

  # the global defaults as they were, put back after each test
  setup do
    backend = Application.fetch_env!(:nx, :default_backend)
    options = Application.fetch_env!(:nx, :default_defn_options)

    on_exit(fn ->
      Nx.global_default_backend(backend)
      Nx.Defn.global_default_options(options)
    end)

    :ok
  end

  defp resident?(%Nx.Tensor{data: %NxJax.Backend{}}), do: true
  defp resident?(%Nx.Tensor{}), do: false

  test "the application :nx holds Nx 0.7.2's defaults" do
    {:ok, [{:application, :nx, spec}]} = :file.consult(Application.app_dir(:nx, "ebin/nx.app"))
    env = Keyword.fetch!(spec, :env)

    assert env[:default_backend] == {Nx.BinaryBackend, []}
    assert env[:default_defn_options] == []
    # this repository's config sets neither for the clean room's tests
    assert Nx.default_backend() == {Nx.BinaryBackend, []}
    assert Nx.Defn.default_options() == []
  end

  test "global_default_backend/1 sets the default of every process, in the environment, " <>
         "and jitted results follow it" do
    x = Nx.tensor([1.0, 2.0])
    refute resident?(Nx.Defn.jit(&Fns.affine/1).(x))

    assert Nx.global_default_backend(NxJax.Backend) == {Nx.BinaryBackend, []}
    assert Application.fetch_env!(:nx, :default_backend) == {NxJax.Backend, []}
    assert Nx.default_backend() == {NxJax.Backend, []}
    assert Task.await(Task.async(fn -> Nx.default_backend() end)) == {NxJax.Backend, []}

    result = Nx.Defn.jit(&Fns.affine/1).(x)
    assert resident?(result)
    assert Nx.backend_transfer(result) == Nx.tensor([3.0, 5.0])
    assert resident?(Fns.affine(x))
    assert Nx.Defn.to_backend([]) == {NxJax.Backend, []}

    # a process's own default comes first, and default_backend/1 returns the one it replaces
    assert Nx.default_backend(Nx.BinaryBackend) == {NxJax.Backend, []}
    assert Nx.default_backend() == {Nx.BinaryBackend, []}
    refute resident?(Fns.affine(x))
    assert Nx.default_backend({NxJax.Backend, []}) == {Nx.BinaryBackend, []}
    assert resident?(Fns.affine(x))

    assert Nx.global_default_backend({Nx.BinaryBackend, []}) == {NxJax.Backend, []}
    assert Task.await(Task.async(fn -> Nx.default_backend() end)) == {Nx.BinaryBackend, []}
  end

  test "global_default_options/1 sets the options of every defn call and jit" do
    x = Nx.tensor([1.0, 2.0])
    assert Nx.Defn.global_default_options(compiler: Reporting, report_to: self()) == []

    assert Application.fetch_env!(:nx, :default_defn_options) ==
             [compiler: Reporting, report_to: self()]

    assert Fns.affine(x) == Nx.tensor([3.0, 5.0])
    assert_received {:jit_options, []}

    # the options of a jit are merged over the defaults
    assert Nx.Defn.jit(&Fns.affine/1, tag: :given).(x) == Nx.tensor([3.0, 5.0])
    assert_received {:jit_options, [tag: :given]}

    # a process that sets its own options leaves the global ones alone
    assert Task.await(
             Task.async(fn ->
               Nx.Defn.default_options([])
               Fns.affine(x)
             end)
           ) == Nx.tensor([3.0, 5.0])

    refute_received {:jit_options, _}

    # so does Nx.Defn.Debug, which returns the traced expression, as in Nx
    Nx.Defn.global_default_options(compiler: Nx.Defn.Debug)
    assert %Nx.Tensor{data: %Nx.Defn.Expr{}} = Fns.affine(x)
  end

  test "a bad default backend is refused where it is set, with Nx's message or a named module" do
    assert_raise ArgumentError,
                 ~s(backend must be an atom or a tuple {backend, options}, got: "cuda"),
                 fn -> Nx.global_default_backend("cuda") end

    assert_raise ArgumentError, ~r/^unknown backend EXLA.Backend: no such module is loaded/, fn ->
      Nx.default_backend(EXLA.Backend)
    end

    assert_raise ArgumentError, ~r/^unknown backend EXLA.Backend/, fn ->
      Nx.global_default_backend({EXLA.Backend, client: :cuda})
    end

    # nothing changed
    assert Application.fetch_env!(:nx, :default_backend) == {Nx.BinaryBackend, []}
    assert Nx.default_backend() == {Nx.BinaryBackend, []}
  end
end
